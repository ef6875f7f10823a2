// The Valkey client: a bounded pool of blocking hiredis connections.
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
#include <openssl/sha.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <charconv>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <cerrno>
#include <thread>
#include <optional>
#include <utility>

#include "store/sentinel.h"
#include "vramd/store/valkey_client.h"

namespace vramd::store {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The deleter also carries the connection's route generation (see above):
// hiredis 0.14's context has no user data field.
struct ContextFree {
  uint64_t gen = 0;
  void operator()(redisContext* c) const {
    if (c != nullptr) redisFree(c);
  }
};
using ContextPtr = std::unique_ptr<redisContext, ContextFree>;

uint64_t GenOf(const ContextPtr& c) { return c.get_deleter().gen; }

bool IsReadonly(const Reply& r) { return r.is_error() && r.str.starts_with("READONLY"); }

// Replies are built straight into Reply trees by hiredis's reader, so there
// is no redisReply tree to copy from: a child is constructed in place in its
// parent's `elements`, which CreateArray sized beforehand. hiredis frees only
// roots (freeObject), and only roots are allocated with new.
Reply* ReplySlot(const redisReadTask* task) {
  if (task->parent != nullptr) {
    auto* parent = static_cast<Reply*>(task->parent->obj);
    return &parent->elements[static_cast<size_t>(task->idx)];
  }
  return new (std::nothrow) Reply();
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  Reply* r = ReplySlot(task);
  if (r == nullptr) return nullptr;
  r->type = task->type == REDIS_REPLY_ERROR    ? Reply::Type::kError
            : task->type == REDIS_REPLY_STATUS ? Reply::Type::kStatus
                                               : Reply::Type::kString;
  try {
    r->str.assign(str, len);
  } catch (...) {  // bad_alloc must not unwind through hiredis
    if (task->parent == nullptr) delete r;
    return nullptr;
  }
  return r;
}

void* CreateArray(const redisReadTask* task, int n) {
  Reply* r = ReplySlot(task);
  if (r == nullptr) return nullptr;
  r->type = Reply::Type::kArray;
  try {
    r->elements.resize(static_cast<size_t>(std::max(n, 0)));
  } catch (...) {
    if (task->parent == nullptr) delete r;
    return nullptr;
  }
  return r;
}

void* CreateInteger(const redisReadTask* task, long long v) {  // NOLINT: hiredis's type
  Reply* r = ReplySlot(task);
  if (r == nullptr) return nullptr;
  r->type = Reply::Type::kInteger;
  r->integer = v;
  return r;
}

void* CreateNil(const redisReadTask* task) {
  Reply* r = ReplySlot(task);
  if (r != nullptr) r->type = Reply::Type::kNil;
  return r;
}

void FreeReply(void* r) { delete static_cast<Reply*>(r); }

redisReplyObjectFunctions kReplyFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                             FreeReply};

using ReplyPtr = std::unique_ptr<Reply>;

// Runs one command on a connection; null on a transport error (see c->err).
ReplyPtr Run(redisContext* c, const std::vector<std::string>& argv);

timeval ToTimeval(milliseconds d) {
  const int64_t ms = std::max<int64_t>(d.count(), 1);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int v = 0;
      auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
      if (ec == std::errc() && p == s.data() + i + 3) {
        out.push_back(static_cast<char>(v));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// argv in the shape hiredis wants, pointing into the caller's strings.
class ArgvView {
 public:
  explicit ArgvView(const std::vector<std::string>& argv) {
    ptrs_.reserve(argv.size());
    lens_.reserve(argv.size());
    for (const auto& a : argv) {
      ptrs_.push_back(a.data());
      lens_.push_back(a.size());
    }
  }
  int argc() const { return static_cast<int>(ptrs_.size()); }
  const char** argv() { return ptrs_.data(); }
  const size_t* lens() const { return lens_.data(); }

 private:
  std::vector<const char*> ptrs_;
  std::vector<size_t> lens_;
};

// Appends one command in RESP (what redisFormatCommandArgv produces).
void AppendResp(std::string* out, const std::vector<std::string>& argv) {
  char num[24];
  auto append_len = [&](char tag, size_t n) {
    out->push_back(tag);
    auto [end, ec] = std::to_chars(num, num + sizeof(num), n);
    out->append(num, end);
    out->append("\r\n", 2);
  };
  append_len('*', argv.size());
  for (const auto& a : argv) {
    append_len('$', a.size());
    out->append(a);
    out->append("\r\n", 2);
  }
}

ReplyPtr Run(redisContext* c, const std::vector<std::string>& argv) {
  ArgvView v(argv);
  return ReplyPtr(static_cast<Reply*>(redisCommandArgv(c, v.argc(), v.argv(), v.lens())));
}

class PooledValkeyClient final : public ValkeyClient {
 public:
  // `endpoint`: the server, or with `sentinel` the credentials and database
  // of whatever primary the sentinels name (its host and port are unused).
  PooledValkeyClient(ValkeyOptions opts, Result<ValkeyEndpoint> endpoint,
                     std::unique_ptr<SentinelResolver> sentinel = nullptr)
      : opts_(std::move(opts)),
        pool_size_(std::max(opts_.pool_size, 1)),
        sentinel_(std::move(sentinel)) {
    if (endpoint.ok()) {
      endpoint_ = std::move(endpoint).value();
      if (!opts_.password.empty()) endpoint_.password = opts_.password;
      if (!opts_.username.empty()) endpoint_.username = opts_.username;
      display_ = sentinel_ ? sentinel_->master_name() : endpoint_.Display();
    } else {
      config_error_ = endpoint.status();
      spdlog::error("valkey: {}", config_error_.message());
    }
  }

  ~PooledValkeyClient() override {
    std::lock_guard lk(mu_);
    idle_.clear();
  }

  uint64_t TransportErrors() const override { return errors_.load(std::memory_order_relaxed); }

  Result<Reply> Command(const std::vector<std::string>& argv) override {
    if (argv.empty()) return InvalidArgument("valkey: empty command");
    auto lease = Borrow();
    if (!lease.ok()) return lease.status();
    ContextPtr c = std::move(lease).value();
    ReplyPtr r = Run(c.get(), argv);
    if (!r) return Broken(std::move(c), argv[0]);
    Done(std::move(c), *r);
    return std::move(*r);
  }

  Result<std::vector<Reply>> Pipeline(const std::vector<std::vector<std::string>>& cmds) override {
    std::vector<Reply> out;
    out.reserve(cmds.size());
    Status s = PipelineEach(cmds, [&out](size_t, Reply& r) { out.push_back(std::move(r)); });
    if (!s.ok()) return s;
    return out;
  }

  Status PipelineEach(const std::vector<std::vector<std::string>>& cmds,
                      const std::function<void(size_t, Reply&)>& each) override {
    if (cmds.empty()) return Status::Ok();
    // The whole batch is encoded once (RESP multi-bulk) and handed to
    // hiredis as one preformatted write.
    size_t size = 0;
    for (const auto& cmd : cmds) {
      if (cmd.empty()) return InvalidArgument("valkey: empty command in pipeline");
      size += 16;
      for (const auto& a : cmd) size += a.size() + 16;
    }
    std::string resp;
    resp.reserve(size);
    for (const auto& cmd : cmds) AppendResp(&resp, cmd);

    auto lease = Borrow();
    if (!lease.ok()) return lease.status();
    ContextPtr c = std::move(lease).value();
    if (redisAppendFormattedCommand(c.get(), resp.data(), resp.size()) != REDIS_OK) {
      return Broken(std::move(c), "pipeline");
    }
    bool readonly = false;
    for (size_t i = 0; i < cmds.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(c.get(), &raw) != REDIS_OK || raw == nullptr) {
        FreeReply(raw);
        return Broken(std::move(c), "pipeline");
      }
      ReplyPtr r(static_cast<Reply*>(raw));
      readonly = readonly || IsReadonly(*r);
      try {
        each(i, *r);
      } catch (...) {
        // The connection still has unread replies: it cannot be reused.
        (void)Broken(std::move(c), "pipeline callback");
        throw;
      }
    }
    if (readonly && sentinel_) {
      Demoted(std::move(c));
    } else {
      GiveBack(std::move(c));
    }
    return Status::Ok();
  }

  Result<Reply> Eval(const Script& script, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args) override {
    auto lease = Borrow();
    if (!lease.ok()) return lease.status();
    ContextPtr c = std::move(lease).value();
    auto r = RunScript(&c, script, keys, args);
    if (!r.ok()) return r.status();
    Done(std::move(c), *r);
    return r;
  }

  Status Subscribe(const std::string& channel, const std::atomic<bool>& stop,
                   const std::function<void(bool)>& on_live,
                   const std::function<void(const std::string&)>& on_message) override {
    if (!config_error_.ok()) return config_error_;
    milliseconds backoff = std::max(opts_.backoff_initial, milliseconds(1));
    bool warned = false;
    while (!stop.load()) {
      std::string err;
      ContextPtr c = Connect(&err);
      if (c) {
        bool subscribed = false;
        err = Listen(c.get(), channel, stop, on_live, on_message, &subscribed);
        if (subscribed) {
          on_live(false);
          backoff = std::max(opts_.backoff_initial, milliseconds(1));
          if (warned) spdlog::info("valkey {}: subscription to {} was up again", Display(), channel);
          warned = false;
        }
        if (stop.load()) break;
      }
      if (!warned) {
        spdlog::warn("valkey {}: subscription to {}: {} (retrying in {}ms)", Display(), channel, err, backoff.count());
        warned = true;
      }
      const auto until = Clock::now() + backoff;
      while (!stop.load() && Clock::now() < until) std::this_thread::sleep_for(milliseconds(20));
      backoff = std::min<milliseconds>(backoff * 2, std::max(opts_.backoff_max, milliseconds(1)));
    }
    return Status::Ok();
  }

  Result<ReplicatedReply> EvalReplicated(const Script& script, const std::vector<std::string>& keys,
                                         const std::vector<std::string>& args) override {
    auto lease = Borrow();
    if (!lease.ok()) return lease.status();
    ContextPtr c = std::move(lease).value();
    auto r = RunScript(&c, script, keys, args);
    if (!r.ok()) return r.status();
    ReplicatedReply out{std::move(r).value(), Status::Ok()};
    if (opts_.min_replicas_ack <= 0 || out.reply.is_error()) {
      Done(std::move(c), out.reply);
      return out;
    }
    // WAIT blocks up to wait_timeout on the server: the socket may wait
    // that much longer than for other replies.
    const auto wait = std::max(opts_.wait_timeout, milliseconds(1));
    const std::string need = std::to_string(opts_.min_replicas_ack);
    redisSetTimeout(c.get(), ToTimeval(opts_.command_timeout + wait));
    ReplyPtr w = Run(c.get(), {"WAIT", need, std::to_string(wait.count())});
    if (!w) {
      out.replication = Broken(std::move(c), "WAIT");
      return out;
    }
    if (redisSetTimeout(c.get(), ToTimeval(opts_.command_timeout)) != REDIS_OK) {
      out.replication = Broken(std::move(c), "WAIT");
      return out;
    }
    if (w->type == Reply::Type::kInteger && w->integer >= opts_.min_replicas_ack) {
      if (short_of_replicas_.exchange(false)) {
        spdlog::info("valkey {}: writes reach {} replica(s) again", Display(), w->integer);
      }
    } else {
      std::string msg = "valkey " + Display() + ": ";
      msg += w->is_error() ? "WAIT failed: " + w->str
                           : "the write reached " + std::to_string(w->integer) + " of the " + need +
                                 " replica(s) valkey.min_replicas_ack asks for within " +
                                 std::to_string(wait.count()) + "ms";
      if (!short_of_replicas_.exchange(true)) {
        spdlog::warn("{}", msg);
      } else {
        spdlog::debug("{}", msg);
      }
      out.replication = Unavailable(std::move(msg));
    }
    GiveBack(std::move(c));
    return out;
  }

  const std::string& prefix() const override { return opts_.key_prefix; }

 private:
  std::atomic<uint64_t> errors_{0};
  std::atomic<bool> short_of_replicas_{false};  // the last WAIT fell short

  // EVALSHA, then EVAL when the server answers NOSCRIPT. On a transport
  // error the connection is gone (*c is empty) and the status says why.
  Result<Reply> RunScript(ContextPtr* c, const Script& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args) {
    std::vector<std::string> argv;
    argv.reserve(3 + keys.size() + args.size());
    argv.emplace_back("EVALSHA");
    argv.push_back(script.sha1());
    argv.push_back(std::to_string(keys.size()));
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());

    ReplyPtr r = Run(c->get(), argv);
    if (!r) return Broken(std::move(*c), "EVALSHA");
    if (r->is_error() && r->str.starts_with("NOSCRIPT")) {
      // The server does not have the script cached (first use, restart,
      // SCRIPT FLUSH): send the source, which also caches it.
      argv[0] = "EVAL";
      argv[1] = script.source();
      r = Run(c->get(), argv);
      if (!r) return Broken(std::move(*c), "EVAL");
    }
    return std::move(*r);
  }

  // Returns a connection after a reply: to the pool, or, when the reply says
  // the server is a replica now (through Sentinel), away with the pool.
  void Done(ContextPtr c, const Reply& r) {
    if (sentinel_ && IsReadonly(r)) {
      Demoted(std::move(c));
    } else {
      GiveBack(std::move(c));
    }
  }

  // Takes an idle connection (checked with PING when it sat unused for a
  // while: the server or a middlebox may have dropped it), opens a new one
  // when the pool is not full and the reconnect backoff allows it, or waits
  // for one to come back.
  Result<ContextPtr> Borrow() {
    if (!config_error_.ok()) return config_error_;
    std::unique_lock lk(mu_);
    const auto deadline = Clock::now() + opts_.connect_timeout + opts_.command_timeout;
    for (;;) {
      if (!idle_.empty()) {
        Idle idle = std::move(idle_.back());
        idle_.pop_back();
        if (sentinel_ && GenOf(idle.c) != CurrentGen()) {
          idle.c.reset();  // made for a primary that has been forgotten since
          --open_;
          continue;
        }
        if (Clock::now() - idle.since < kIdleCheckAfter) return std::move(idle.c);
        lk.unlock();
        // Through Sentinel, ROLE rather than PING: a primary demoted while
        // the connection sat idle still answers, but as a replica.
        ReplyPtr pong = Run(idle.c.get(), {sentinel_ ? "ROLE" : "PING"});
        if (pong && !pong->is_error() &&
            (!sentinel_ || (pong->type == Reply::Type::kArray && !pong->elements.empty() &&
                            pong->elements[0].str == "master"))) {
          return std::move(idle.c);
        }
        spdlog::debug("valkey {}: dropped a stale pooled connection", Display());
        const uint64_t gen = GenOf(idle.c);
        idle.c.reset();
        if (sentinel_ && pong && !pong->is_error()) Forget(gen);  // demoted: ask the sentinels
        lk.lock();
        --open_;
        continue;
      }
      if (open_ < pool_size_) {
        const auto start = Clock::now();
        if (start < retry_at_) {
          return CountError(Unreachable(last_error_, retry_at_ - start));
        }
        ++open_;
        lk.unlock();
        std::string err;
        ContextPtr c = Connect(&err);
        lk.lock();
        if (c) {
          backoff_ = milliseconds(0);
          if (failing_) {
            failing_ = false;
            spdlog::info("valkey {} reachable again", Display());
          }
          return c;
        }
        --open_;
        // Several threads may fail at once: only the first failure after the
        // last recorded one grows the backoff.
        if (retry_at_ <= start) {
          backoff_ = backoff_.count() == 0
                         ? opts_.backoff_initial
                         : std::min<milliseconds>(backoff_ * 2, opts_.backoff_max);
          backoff_ = std::max(backoff_, milliseconds(1));
          retry_at_ = Clock::now() + backoff_;
          last_error_ = err;
          if (!failing_) {
            spdlog::warn("{}", Unreachable(err, backoff_));
          } else {
            spdlog::debug("{}", Unreachable(err, backoff_));
          }
          failing_ = true;
        }
        cv_.notify_all();
        return CountError(Unreachable(err, backoff_));
      }
      if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && idle_.empty() &&
          open_ >= pool_size_) {
        return CountError("valkey " + Display() + ": all " + std::to_string(pool_size_) +
                           " connections stayed busy for " +
                           std::to_string((opts_.connect_timeout + opts_.command_timeout).count()) +
                           "ms");
      }
    }
  }

  void GiveBack(ContextPtr c) {
    {
      std::lock_guard lk(mu_);
      if (c->err != 0 || (sentinel_ && GenOf(c) != CurrentGen())) {
        c.reset();
        --open_;
      } else {
        idle_.push_back({std::move(c), Clock::now()});
      }
    }
    cv_.notify_one();
  }

  // Frees a connection and the idle ones; through Sentinel, forgets the
  // primary too, so the next connect asks the sentinels.
  void DropAll(ContextPtr c) {
    const uint64_t gen = GenOf(c);
    std::vector<Idle> dropped;
    {
      std::lock_guard lk(mu_);
      c.reset();
      --open_;
      open_ -= static_cast<int>(idle_.size());
      dropped.swap(idle_);
    }
    cv_.notify_all();
    if (sentinel_) Forget(gen);
  }

  // Frees a connection that saw a transport error (and the idle ones with
  // it) and describes the failure.
  Status Broken(ContextPtr c, std::string_view what) {
    std::string reason = c->err != 0 ? std::string(c->errstr) : "unknown transport error";
    if (c->err == REDIS_ERR_IO &&
        (reason.find("temporarily unavailable") != std::string::npos ||
         reason.find("timed out") != std::string::npos)) {
      reason = "no reply within " + std::to_string(opts_.command_timeout.count()) + "ms";
    }
    std::string msg = "valkey " + Display() + ": " + std::string(what) + " failed: " + reason;
    DropAll(std::move(c));
    spdlog::warn("{}", msg);
    return CountError(std::move(msg));
  }

  // The server answered READONLY: it is a replica now (failover). Nothing
  // was written; the pool is dropped and the sentinels are asked again.
  void Demoted(ContextPtr c) {
    spdlog::warn("valkey {}: the server answered READONLY (it is a replica now); asking the "
                 "sentinels for the primary",
                 Display());
    DropAll(std::move(c));
  }

  // Every transport failure a caller sees is counted (vramd_valkey_errors_total).
  Status CountError(std::string msg) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return Unavailable(std::move(msg));
  }

  std::string Unreachable(const std::string& err, Clock::duration retry_in) const {
    const auto ms = std::chrono::ceil<milliseconds>(retry_in).count();
    return "valkey " + Display() + " unreachable: " + err + " (retrying in " + std::to_string(ms) +
           "ms)";
  }

  // "host:port", or through Sentinel "master (host:port)" with the primary
  // last named ("master" alone when none is known).
  std::string Display() const {
    if (!sentinel_) return display_;
    std::lock_guard lk(route_mu_);
    return primary_known_ ? display_ + " (" + primary_.Display() + ")" : display_;
  }

  uint64_t CurrentGen() const {
    std::lock_guard lk(route_mu_);
    return gen_;
  }

  // Connections of generation `gen` failed: unless that was already
  // handled, the primary's address is forgotten and the generation moves on.
  void Forget(uint64_t gen) {
    std::lock_guard lk(route_mu_);
    if (gen != gen_) return;
    ++gen_;
    if (primary_known_) sentinel_->Distrust();
    primary_known_ = false;
  }

  // Through Sentinel: the primary's address and generation, asking the
  // sentinels when none is known (one thread asks; the others wait for it).
  // A thread that waited while another asked in vain takes that answer
  // rather than asking every sentinel again.
  bool Primary(ValkeyEndpoint* ep, uint64_t* gen, std::string* err) {
    const uint64_t asked_before = resolves_.load();
    std::lock_guard resolving(resolve_mu_);
    {
      std::lock_guard lk(route_mu_);
      if (primary_known_) {
        ep->host = primary_.host;
        ep->port = primary_.port;
        *gen = gen_;
        return true;
      }
    }
    if (resolves_.load() != asked_before && !resolve_error_.empty()) {
      *err = resolve_error_;
      return false;
    }
    resolves_.fetch_add(1);
    Result<ValkeyEndpoint> r = sentinel_->Resolve();
    if (!r.ok()) {
      resolve_error_ = r.status().message();
      *err = resolve_error_;
      return false;
    }
    resolve_error_.clear();
    std::lock_guard lk(route_mu_);
    primary_ = *r;
    primary_known_ = true;
    if (r->host != last_named_.host || r->port != last_named_.port) {
      spdlog::info("valkey: the sentinels name {} as the primary of '{}'{}", r->Display(), display_,
                   last_named_.host.empty() ? "" : " (was " + last_named_.Display() + ")");
      last_named_ = *r;
    }
    ep->host = r->host;
    ep->port = r->port;
    *gen = gen_;
    return true;
  }

  // SUBSCRIBE on `c`, then messages until `stop` or a failure (returned as
  // text). Reads only what poll() says is there, so the loop wakes every
  // 100 ms to look at `stop` and to keep the connection proven alive.
  std::string Listen(redisContext* c, const std::string& channel, const std::atomic<bool>& stop,
                     const std::function<void(bool)>& on_live,
                     const std::function<void(const std::string&)>& on_message, bool* subscribed) {
    ReplyPtr ok = Run(c, {"SUBSCRIBE", channel});
    if (!ok) return std::string("SUBSCRIBE: ") + (c->err != 0 ? c->errstr : "no reply");
    if (ok->type != Reply::Type::kArray || ok->elements.empty() || ok->elements[0].str != "subscribe") {
      return "SUBSCRIBE failed: " + (ok->is_error() ? ok->str : std::string("unexpected reply"));
    }
    *subscribed = true;
    on_live(true);
    auto last_traffic = Clock::now();
    bool ping_pending = false;
    Clock::time_point ping_sent{};
    while (!stop.load()) {
      pollfd p{c->fd, POLLIN, 0};
      const int n = poll(&p, 1, 100);
      if (n < 0 && errno != EINTR) return std::string("poll: ") + std::strerror(errno);
      const auto now = Clock::now();
      if (n > 0) {
        if (redisBufferRead(c) != REDIS_OK) return c->err != 0 ? c->errstr : "read failed";
        for (;;) {
          void* raw = nullptr;
          if (redisGetReplyFromReader(c, &raw) != REDIS_OK) return c->err != 0 ? c->errstr : "protocol error";
          if (raw == nullptr) break;
          ReplyPtr m(static_cast<Reply*>(raw));
          last_traffic = now;
          if (m->is_error()) return "server error: " + m->str;
          if (m->type != Reply::Type::kArray || m->elements.empty()) continue;
          const std::string& kind = m->elements[0].str;
          if (kind == "message" && m->elements.size() >= 3) {
            on_message(m->elements[2].str);
          } else if (kind == "pong") {
            ping_pending = false;
          }
        }
      }
      if (ping_pending && now - ping_sent > opts_.command_timeout) {
        return "no answer to PING within " + std::to_string(opts_.command_timeout.count()) + "ms";
      }
      if (!ping_pending && now - last_traffic >= std::chrono::seconds(1)) {
        static const std::vector<std::string> kPing{"PING"};
        ArgvView v(kPing);
        if (redisAppendCommandArgv(c, v.argc(), v.argv(), v.lens()) != REDIS_OK) return c->errstr;
        int done = 0;
        while (!done) {
          if (redisBufferWrite(c, &done) != REDIS_OK) return c->err != 0 ? c->errstr : "write failed";
        }
        ping_pending = true;
        ping_sent = now;
      }
    }
    return "stopped";
  }

  // Opens, authenticates and selects the database; through Sentinel, also
  // checks with ROLE that the server is the primary. Never logs the password.
  ContextPtr Connect(std::string* err) {
    ValkeyEndpoint ep = endpoint_;
    uint64_t gen = 0;
    if (sentinel_ && !Primary(&ep, &gen, err)) return nullptr;
    ContextPtr c = Open(ep, err);
    if (sentinel_) {
      if (!c) {
        *err = "primary " + ep.Display() + " named by the sentinels: " + *err;
        Forget(gen);
        return nullptr;
      }
      ReplyPtr role = Run(c.get(), {"ROLE"});
      if (!role || role->type != Reply::Type::kArray || role->elements.empty() ||
          role->elements[0].str != "master") {
        *err = "server " + ep.Display() + " named by the sentinels is not the primary (ROLE: " +
               (!role                ? std::string(c->err != 0 ? c->errstr : "no reply")
                : role->is_error()   ? role->str
                : role->elements.empty() ? std::string("?")
                                         : role->elements[0].str) +
               "); asking the sentinels again";
        Forget(gen);
        return nullptr;
      }
      c.get_deleter().gen = gen;
    }
    return c;
  }

  ContextPtr Open(const ValkeyEndpoint& ep, std::string* err) {
    ContextPtr c(redisConnectWithTimeout(ep.host.c_str(), ep.port, ToTimeval(opts_.connect_timeout)));
    if (!c) {
      *err = "cannot allocate a connection";
      return nullptr;
    }
    if (c->err != 0) {
      *err = c->errstr;
      if (c->err == REDIS_ERR_IO && std::strstr(c->errstr, "temporarily unavailable") != nullptr) {
        *err = "connect timed out after " + std::to_string(opts_.connect_timeout.count()) + "ms";
      }
      return nullptr;
    }
    if (redisSetTimeout(c.get(), ToTimeval(opts_.command_timeout)) != REDIS_OK) {
      *err = std::string("cannot set timeouts: ") + c->errstr;
      return nullptr;
    }
    redisEnableKeepAlive(c.get());
    c->reader->fn = &kReplyFunctions;
    auto run = [&](const std::vector<std::string>& argv, const char* what) {
      ReplyPtr r = Run(c.get(), argv);
      if (!r) {
        *err = std::string(what) + ": " + (c->err != 0 ? c->errstr : "no reply");
        return false;
      }
      if (r->is_error()) {
        *err = std::string(what) + " failed: " + r->str;
        return false;
      }
      return true;
    };
    if (!ep.password.empty()) {
      std::vector<std::string> auth{"AUTH"};
      if (!ep.username.empty()) auth.push_back(ep.username);
      auth.push_back(ep.password);
      if (!run(auth, "AUTH")) return nullptr;
    }
    if (ep.db != 0) {
      if (!run({"SELECT", std::to_string(ep.db)}, "SELECT")) return nullptr;
    }
    return c;
  }

  const ValkeyOptions opts_;
  const int pool_size_;
  ValkeyEndpoint endpoint_;
  std::string display_;  // host:port, or the master's name through Sentinel
  Status config_error_;
  const std::unique_ptr<SentinelResolver> sentinel_;  // null: a fixed server

  std::mutex mu_;
  std::condition_variable cv_;
  struct Idle {
    ContextPtr c;
    Clock::time_point since;  // returned to the pool at
  };
  static constexpr Clock::duration kIdleCheckAfter = std::chrono::seconds(15);

  std::vector<Idle> idle_;             // guarded by mu_; most recently used last
  int open_ = 0;                       // idle + borrowed; guarded by mu_
  Clock::time_point retry_at_{};       // no connect before this; guarded by mu_
  milliseconds backoff_{0};            // last backoff applied; guarded by mu_
  std::string last_error_;             // guarded by mu_
  bool failing_ = false;               // last connect failed; guarded by mu_

  // Through Sentinel. Lock order: resolve_mu_, then mu_ or route_mu_;
  // route_mu_ is innermost (taken under mu_, never the other way).
  std::mutex resolve_mu_;              // held while asking the sentinels
  std::atomic<uint64_t> resolves_{0};  // times the sentinels were asked
  std::string resolve_error_;          // guarded by resolve_mu_; the last failure, if the last ask failed
  mutable std::mutex route_mu_;
  ValkeyEndpoint primary_;             // guarded by route_mu_; valid if primary_known_
  bool primary_known_ = false;         // guarded by route_mu_
  uint64_t gen_ = 1;                   // guarded by route_mu_
  ValkeyEndpoint last_named_;          // guarded by route_mu_; for the log
};

}  // namespace

std::string RedactValkeyUrl(std::string_view url) {
  const size_t start = url.find("://") == std::string_view::npos ? 0 : url.find("://") + 3;
  const size_t end = std::min(url.find('/', start), url.size());
  const size_t at = url.substr(0, end).rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(url);
  const size_t colon = url.substr(0, at).find(':', start);
  const size_t secret = colon == std::string_view::npos ? start : colon + 1;
  return std::string(url.substr(0, secret)) + "***" + std::string(url.substr(at));
}

std::string ValkeyEndpoint::Display() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ValkeyEndpoint> ParseValkeyUrl(std::string_view url) {
  const std::string quoted = "valkey url '" + RedactValkeyUrl(url) + "'";
  ValkeyEndpoint ep;
  std::string_view rest = url;
  if (auto p = rest.find("://"); p != std::string_view::npos) {
    const std::string_view scheme = rest.substr(0, p);
    if (scheme == "rediss" || scheme == "valkeys") {
      return InvalidArgument(quoted + ": TLS is not supported");
    }
    if (scheme != "redis" && scheme != "valkey") {
      return InvalidArgument(quoted + ": scheme must be redis://");
    }
    rest.remove_prefix(p + 3);
  }
  std::string_view path;
  if (auto p = rest.find('/'); p != std::string_view::npos) {
    path = rest.substr(p + 1);
    rest = rest.substr(0, p);
  }
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    if (auto colon = userinfo.find(':'); colon != std::string_view::npos) {
      ep.username = PercentDecode(userinfo.substr(0, colon));
      ep.password = PercentDecode(userinfo.substr(colon + 1));
    } else {
      // redis://secret@host: a lone userinfo is the password (as redis-cli reads it).
      ep.password = PercentDecode(userinfo);
    }
  }
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return InvalidArgument(quoted + ": unterminated '['");
    ep.host = std::string(rest.substr(1, close - 1));
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument(quoted + ": expected ':' after ']'");
      port_text = after.substr(1);
    }
  } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    ep.host = std::string(rest.substr(0, colon));
    port_text = rest.substr(colon + 1);
  } else {
    ep.host = std::string(rest);
  }
  if (ep.host.empty()) return InvalidArgument(quoted + ": no host");
  if (!port_text.empty()) {
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), ep.port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || ep.port <= 0 ||
        ep.port > 65535) {
      return InvalidArgument(quoted + ": bad port '" + std::string(port_text) + "'");
    }
  }
  if (auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  if (!path.empty()) {
    auto [p, ec] = std::from_chars(path.data(), path.data() + path.size(), ep.db);
    if (ec != std::errc() || p != path.data() + path.size() || ep.db < 0) {
      return InvalidArgument(quoted + ": bad database number '" + std::string(path) + "'");
    }
  }
  return ep;
}

Script::Script(std::string source) : source_(std::move(source)) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(source_.data()), source_.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  sha1_.reserve(2 * SHA_DIGEST_LENGTH);
  for (unsigned char b : digest) {
    sha1_.push_back(kHex[b >> 4]);
    sha1_.push_back(kHex[b & 0xf]);
  }
}

Status ValidateValkeyUrl(std::string_view url) {
  if (IsSentinelUrl(url)) {
    auto s = ParseSentinelUrl(url);
    return s.ok() ? Status::Ok() : s.status();
  }
  auto ep = ParseValkeyUrl(url);
  return ep.ok() ? Status::Ok() : ep.status();
}

std::shared_ptr<ValkeyClient> NewValkeyClient(const ValkeyOptions& opts) {
  if (!IsSentinelUrl(opts.url)) {
    return std::make_shared<PooledValkeyClient>(opts, ParseValkeyUrl(opts.url));
  }
  Result<SentinelUrl> url = ParseSentinelUrl(opts.url);
  if (!url.ok()) return std::make_shared<PooledValkeyClient>(opts, url.status());
  ValkeyEndpoint primary;  // credentials and database; the address comes from the sentinels
  primary.username = url->username;
  primary.password = url->password;
  primary.db = url->db;
  SentinelOptions so;
  so.sentinels = url->sentinels;
  so.master_name = url->master_name;
  so.username = opts.sentinel_username;
  so.password = opts.sentinel_password;
  so.timeout = opts.connect_timeout;
  return std::make_shared<PooledValkeyClient>(opts, std::move(primary),
                                              std::make_unique<SentinelResolver>(std::move(so)));
}

}  // namespace vramd::store
