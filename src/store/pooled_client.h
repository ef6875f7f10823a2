// The pooled Valkey client (internal to the store component; the public
// contract is ValkeyClient in vramd/store/valkey_client.h). One class, its
// members defined by job:
//   valkey_client.cc   commands, pipelines, scripts, WAIT (EvalReplicated)
//   pool.cc            the bounded pool: borrow/return, reconnect backoff,
//                      opening and authenticating connections
//   sentinel_route.cc  through Sentinel: which server is the primary
//   subscriber.cc      pub/sub on a dedicated connection
//
// Every socket operation is bounded: connect by connect_timeout, each read and
// write by command_timeout (SO_RCVTIMEO/SO_SNDTIMEO set by redisSetTimeout).
// A connection that saw a transport error is freed, never reused, and the idle
// ones are dropped with it (they most likely point at the same dead server).
//
// Through Sentinel (store/sentinel.h) the server's address is not fixed: the
// client keeps the primary the sentinels last named, with a generation number
// that every connection carries. Whatever suggests the primary moved (a
// transport error, a failed connect, ROLE saying "slave", a READONLY reply)
// forgets the address and bumps the generation: connections of an older
// generation are closed instead of reused, and the next connect asks the
// sentinels again. Connects keep the fixed-server backoff.
#pragma once

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/sentinel.h"
#include "vramd/mutex.h"
#include "vramd/store/valkey_client.h"

namespace vramd::store {

// The deleter also carries the connection's route generation (see above):
// hiredis 0.14's context has no user data field.
struct ContextFree {
  uint64_t gen = 0;
  void operator()(redisContext* c) const {
    if (c != nullptr) redisFree(c);
  }
};
using ContextPtr = std::unique_ptr<redisContext, ContextFree>;

inline uint64_t GenOf(const ContextPtr& c) { return c.get_deleter().gen; }

inline timeval ToTimeval(std::chrono::milliseconds d) {
  const int64_t ms = std::max<int64_t>(d.count(), 1);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

class PooledValkeyClient final : public ValkeyClient {
 public:
  // `endpoint`: the server, or with `sentinel` the credentials and database
  // of whatever primary the sentinels name (its host and port are unused).
  PooledValkeyClient(ValkeyOptions opts, Result<ValkeyEndpoint> endpoint,
                     std::unique_ptr<SentinelResolver> sentinel = nullptr);
  ~PooledValkeyClient() override;

  uint64_t TransportErrors() const override { return errors_.load(std::memory_order_relaxed); }
  Result<Reply> Command(const std::vector<std::string>& argv) override;
  Result<std::vector<Reply>> Pipeline(const std::vector<std::vector<std::string>>& cmds) override;
  Status PipelineEach(const std::vector<std::vector<std::string>>& cmds,
                      const std::function<void(size_t, Reply&)>& each) override;
  Result<Reply> Eval(const Script& script, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args) override;
  Status Subscribe(const std::string& channel, const std::atomic<bool>& stop,
                   const std::function<void(bool)>& on_live,
                   const std::function<void(const std::string&)>& on_message) override;
  Result<ReplicatedReply> EvalReplicated(const Script& script, const std::vector<std::string>& keys,
                                         const std::vector<std::string>& args) override;
  const std::string& prefix() const override { return opts_.key_prefix; }

 private:
  using Clock = std::chrono::steady_clock;
  using milliseconds = std::chrono::milliseconds;

  std::atomic<uint64_t> errors_{0};
  std::atomic<bool> short_of_replicas_{false};  // the last WAIT fell short

  // EVALSHA, then EVAL when the server answers NOSCRIPT. On a transport
  // error the connection is gone (*c is empty) and the status says why.
  Result<Reply> RunScript(ContextPtr* c, const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args);
  // Returns a connection after a reply: to the pool, or, when the reply says
  // the server is a replica now (through Sentinel), away with the pool.
  void Done(ContextPtr c, const Reply& r);

  // pool.cc
  // Takes an idle connection (checked with PING when it sat unused for a
  // while: the server or a middlebox may have dropped it), opens a new one
  // when the pool is not full and the reconnect backoff allows it, or waits
  // for one to come back.
  Result<ContextPtr> Borrow();
  void GiveBack(ContextPtr c);
  // Frees a connection and the idle ones; through Sentinel, forgets the
  // primary too, so the next connect asks the sentinels.
  void DropAll(ContextPtr c);
  // Frees a connection that saw a transport error (and the idle ones with
  // it) and describes the failure.
  Status Broken(ContextPtr c, std::string_view what);
  // The server answered READONLY: it is a replica now (failover). Nothing
  // was written; the pool is dropped and the sentinels are asked again.
  void Demoted(ContextPtr c);
  // Every transport failure a caller sees is counted (vramd_valkey_errors_total).
  Status CountError(std::string msg);
  std::string Unreachable(const std::string& err, Clock::duration retry_in) const;
  // "host:port", or through Sentinel "master (host:port)" with the primary
  // last named ("master" alone when none is known).
  std::string Display() const;
  // Opens a connection, sets its timeouts and reader, authenticates and
  // selects the database. Never logs the password.
  ContextPtr Open(const ValkeyEndpoint& ep, std::string* err);

  // sentinel_route.cc
  uint64_t CurrentGen() const;
  // Connections of generation `gen` failed: unless that was already
  // handled, the primary's address is forgotten and the generation moves on.
  void Forget(uint64_t gen);
  // Through Sentinel: the primary's address and generation, asking the
  // sentinels when none is known (one thread asks; the others wait for it).
  // A thread that waited while another asked in vain takes that answer
  // rather than asking every sentinel again.
  bool Primary(ValkeyEndpoint* ep, uint64_t* gen, std::string* err);
  // Opens, authenticates and selects the database; through Sentinel, also
  // checks with ROLE that the server is the primary. Never logs the password.
  ContextPtr Connect(std::string* err);

  // subscriber.cc
  // SUBSCRIBE on `c`, then messages until `stop` or a failure (returned as
  // text). Reads only what poll() says is there, so the loop wakes every
  // 100 ms to look at `stop` and to keep the connection proven alive.
  // How long Listen waits after reading its messages before it polls again.
  static constexpr std::chrono::milliseconds kSubscriberBatch{2};
  std::string Listen(redisContext* c, const std::string& channel, const std::atomic<bool>& stop,
                     const std::function<void(bool)>& on_live,
                     const std::function<void(const std::string&)>& on_message, bool* subscribed);

  const ValkeyOptions opts_;
  const int pool_size_;
  ValkeyEndpoint endpoint_;
  std::string display_;  // host:port, or the master's name through Sentinel
  Status config_error_;
  const std::unique_ptr<SentinelResolver> sentinel_;  // null: a fixed server

  Mutex mu_;
  CondVar cv_;
  struct Idle {
    ContextPtr c;
    Clock::time_point since;  // returned to the pool at
  };
  static constexpr Clock::duration kIdleCheckAfter = std::chrono::seconds(15);

  std::vector<Idle> idle_ GUARDED_BY(mu_);            // most recently used last
  int open_ GUARDED_BY(mu_) = 0;                      // idle + borrowed
  Clock::time_point retry_at_ GUARDED_BY(mu_){};      // no connect before this
  milliseconds backoff_ GUARDED_BY(mu_){0};           // last backoff applied
  std::string last_error_ GUARDED_BY(mu_);
  bool failing_ GUARDED_BY(mu_) = false;              // last connect failed

  // Through Sentinel. Lock order: resolve_mu_, then mu_ or route_mu_;
  // route_mu_ is innermost (taken under mu_, never the other way).
  Mutex resolve_mu_;                                  // held while asking the sentinels
  std::atomic<uint64_t> resolves_{0};                 // times the sentinels were asked
  std::string resolve_error_ GUARDED_BY(resolve_mu_);  // the last failure, if the last ask failed
  mutable Mutex route_mu_;
  ValkeyEndpoint primary_ GUARDED_BY(route_mu_);      // valid if primary_known_
  bool primary_known_ GUARDED_BY(route_mu_) = false;
  uint64_t gen_ GUARDED_BY(route_mu_) = 1;
  ValkeyEndpoint last_named_ GUARDED_BY(route_mu_);   // for the log
};

}  // namespace vramd::store
