// A small thread-safe Valkey (Redis protocol) client: a connection pool with
// timeouts and reconnect backoff, commands, pipelines and Lua scripts.
// Used by the ledger store, the GPU locks and leader election.
#pragma once

#include <cstdint>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/status.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_store.h"
#include "vramd/store/valkey_url.h"

namespace vramd::store {

struct Reply {
  enum class Type { kNil, kInteger, kString, kStatus, kArray, kError };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;              // kString, kStatus, kError
  std::vector<Reply> elements;  // kArray

  bool is_nil() const { return type == Type::kNil; }
  bool is_error() const { return type == Type::kError; }
};

// A Lua script, sent with EVALSHA (falling back to EVAL on NOSCRIPT).
class Script {
 public:
  explicit Script(std::string source);
  const std::string& source() const { return source_; }
  const std::string& sha1() const { return sha1_; }

 private:
  std::string source_;
  std::string sha1_;
};

// Thread-safe: every method may be called from any thread concurrently. Each
// call borrows one pooled connection for its duration (at most
// ValkeyOptions::pool_size open at once; a caller waits for a free one at most
// connect_timeout + command_timeout). Every socket operation is bounded by
// connect_timeout / command_timeout, so no call hangs. After a failed connect
// no new connect is attempted before the backoff has passed; calls in that
// window fail at once with kUnavailable ("valkey H:P unreachable: REASON
// (retrying in Nms)"). A connection that saw a transport error is closed, not
// reused. A bad URL makes every call fail with kInvalidArgument.
// With a redis+sentinel:// URL the server is the primary the sentinels name:
// every new connection is checked with ROLE (a replica is never used), and a
// transport error, a failed connect or a READONLY reply (the primary was
// demoted) drops the pool and makes the next connect ask the sentinels again,
// under the same backoff. A READONLY reply is still returned to its caller.
// The client must outlive the calls made on it (hold the shared_ptr).
class ValkeyClient {
 public:
  virtual ~ValkeyClient() = default;

  // One command. A server error reply (e.g. WRONGTYPE) is returned as a Reply
  // of type kError; transport failures are kUnavailable.
  virtual Result<Reply> Command(const std::vector<std::string>& argv) = 0;

  // Several commands in one round trip (all written, then all replies read) on
  // one connection; one Reply per command, in order. Not a transaction: wrap
  // the commands in MULTI/EXEC for atomicity.
  virtual Result<std::vector<Reply>> Pipeline(const std::vector<std::vector<std::string>>& cmds) = 0;

  // Pipeline for large reads: `each(i, reply)` is called for each command's
  // reply, in order, as it arrives; the reply may be moved from and is freed
  // after the callback, so memory stays bounded by one reply. On a transport
  // error the callback has seen a prefix of the replies. `each` must not call
  // back into this client (it runs on a borrowed connection).
  virtual Status PipelineEach(const std::vector<std::vector<std::string>>& cmds,
                              const std::function<void(size_t, Reply&)>& each) {
    auto replies = Pipeline(cmds);
    if (!replies.ok()) return replies.status();
    for (size_t i = 0; i < replies->size(); ++i) each(i, (*replies)[i]);
    return Status::Ok();
  }

  // Runs a script (EVALSHA, then EVAL when the server answers NOSCRIPT); keys
  // and args as EVAL takes them. A script error is a Reply of type kError.
  virtual Result<Reply> Eval(const Script& script, const std::vector<std::string>& keys,
                             const std::vector<std::string>& args) = 0;

  // Eval for writes that must survive a failover: when
  // ValkeyOptions::min_replicas_ack is N > 0 and the script did not answer
  // an error, WAIT N wait_timeout follows on the same connection, and
  // `replication` says whether N replicas acknowledged everything this
  // connection wrote (kUnavailable, saying how many did, when not: the
  // write may then be on the primary only). The script's reply is returned
  // either way, so the caller can tell whether it wrote and undo it.
  // Transport failures before the script's reply are kUnavailable as for Eval.
  struct ReplicatedReply {
    Reply reply;
    Status replication;
  };
  // Follows a pub/sub channel on a dedicated connection (resolved, checked
  // and authenticated like the pool's, outside the pool) until `stop`:
  // `on_live(true)` once subscribed, `on_message(payload)` for each message,
  // `on_live(false)` when the connection is lost — closed, or no answer to a
  // PING within command_timeout (one is sent after a second without
  // traffic) — and then it connects again under the backoff. Blocks; returns
  // within ~100 ms of `stop`. The callbacks run on the calling thread.
  // Messages may be delivered up to a few milliseconds late: they are read
  // in batches.
  virtual Status Subscribe(const std::string& channel, const std::atomic<bool>& stop,
                           const std::function<void(bool live)>& on_live,
                           const std::function<void(const std::string& payload)>& on_message) {
    return Internal("valkey: this client cannot subscribe");
  }

  virtual Result<ReplicatedReply> EvalReplicated(const Script& script,
                                                 const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args) {
    auto r = Eval(script, keys, args);
    if (!r.ok()) return r.status();
    return ReplicatedReply{std::move(r).value(), Status::Ok()};
  }

  // Prefix for every key ("vramd").
  virtual const std::string& prefix() const = 0;

  // Transport failures returned to callers since start (for a metric).
  virtual uint64_t TransportErrors() const { return 0; }
};

// Never fails: connections are opened lazily, on the first call. Options are
// copied; opts.password / opts.username override the URL's.
std::shared_ptr<ValkeyClient> NewValkeyClient(const ValkeyOptions& opts);

// The ledger store over a shared client (keys under client->prefix(); layout
// in DESIGN.md §6 and valkey_ledger_store.cc). Thread-safe. Snapshot() keeps
// the last snapshot and its epoch; concurrent callers that find the epoch
// moved wait for one reload instead of each reloading, and every caller gets
// a snapshot at least as new as the epoch it read. A reload reads only the
// nodes the change log names after the cached epoch when it can
// (SnapshotReloads() counts full and incremental ones).
std::unique_ptr<LedgerStore> NewValkeyLedgerStore(std::shared_ptr<ValkeyClient> client);

}  // namespace vramd::store
