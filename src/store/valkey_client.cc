// The Valkey client: a bounded pool of blocking hiredis connections.
//
// Every socket operation is bounded: connect by connect_timeout, each read and
// write by command_timeout (SO_RCVTIMEO/SO_SNDTIMEO set by redisSetTimeout).
// A connection that saw a transport error is freed, never reused, and the idle
// ones are dropped with it (they most likely point at the same dead server).
#include <openssl/sha.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <algorithm>
#include <charconv>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <utility>

#include "vramd/store/valkey_client.h"

namespace vramd::store {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct ContextFree {
  void operator()(redisContext* c) const {
    if (c != nullptr) redisFree(c);
  }
};
using ContextPtr = std::unique_ptr<redisContext, ContextFree>;

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
  PooledValkeyClient(ValkeyOptions opts, Result<ValkeyEndpoint> endpoint)
      : opts_(std::move(opts)), pool_size_(std::max(opts_.pool_size, 1)) {
    if (endpoint.ok()) {
      endpoint_ = std::move(endpoint).value();
      if (!opts_.password.empty()) endpoint_.password = opts_.password;
      if (!opts_.username.empty()) endpoint_.username = opts_.username;
      display_ = endpoint_.Display();
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
    GiveBack(std::move(c));
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
    for (size_t i = 0; i < cmds.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(c.get(), &raw) != REDIS_OK || raw == nullptr) {
        FreeReply(raw);
        return Broken(std::move(c), "pipeline");
      }
      ReplyPtr r(static_cast<Reply*>(raw));
      try {
        each(i, *r);
      } catch (...) {
        // The connection still has unread replies: it cannot be reused.
        (void)Broken(std::move(c), "pipeline callback");
        throw;
      }
    }
    GiveBack(std::move(c));
    return Status::Ok();
  }

  Result<Reply> Eval(const Script& script, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args) override {
    std::vector<std::string> argv;
    argv.reserve(3 + keys.size() + args.size());
    argv.emplace_back("EVALSHA");
    argv.push_back(script.sha1());
    argv.push_back(std::to_string(keys.size()));
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());

    auto lease = Borrow();
    if (!lease.ok()) return lease.status();
    ContextPtr c = std::move(lease).value();
    ReplyPtr r = Run(c.get(), argv);
    if (!r) return Broken(std::move(c), "EVALSHA");
    if (r->is_error() && r->str.starts_with("NOSCRIPT")) {
      // The server does not have the script cached (first use, restart,
      // SCRIPT FLUSH): send the source, which also caches it.
      argv[0] = "EVAL";
      argv[1] = script.source();
      r = Run(c.get(), argv);
      if (!r) return Broken(std::move(c), "EVAL");
    }
    GiveBack(std::move(c));
    return std::move(*r);
  }

  const std::string& prefix() const override { return opts_.key_prefix; }

 private:
  std::atomic<uint64_t> errors_{0};

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
        if (Clock::now() - idle.since < kIdleCheckAfter) return std::move(idle.c);
        lk.unlock();
        ReplyPtr pong = Run(idle.c.get(), {"PING"});
        if (pong && !pong->is_error()) return std::move(idle.c);
        spdlog::debug("valkey {}: dropped a stale pooled connection", display_);
        idle.c.reset();
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
            spdlog::info("valkey {} reachable again", display_);
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
        return CountError("valkey " + display_ + ": all " + std::to_string(pool_size_) +
                           " connections stayed busy for " +
                           std::to_string((opts_.connect_timeout + opts_.command_timeout).count()) +
                           "ms");
      }
    }
  }

  void GiveBack(ContextPtr c) {
    {
      std::lock_guard lk(mu_);
      if (c->err != 0) {
        c.reset();
        --open_;
      } else {
        idle_.push_back({std::move(c), Clock::now()});
      }
    }
    cv_.notify_one();
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
    std::vector<Idle> dropped;
    {
      std::lock_guard lk(mu_);
      c.reset();
      --open_;
      open_ -= static_cast<int>(idle_.size());
      dropped.swap(idle_);
    }
    cv_.notify_all();
    std::string msg = "valkey " + display_ + ": " + std::string(what) + " failed: " + reason;
    spdlog::warn("{}", msg);
    return CountError(std::move(msg));
  }

  // Every transport failure a caller sees is counted (vramd_valkey_errors_total).
  Status CountError(std::string msg) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return Unavailable(std::move(msg));
  }

  std::string Unreachable(const std::string& err, Clock::duration retry_in) const {
    const auto ms = std::chrono::ceil<milliseconds>(retry_in).count();
    return "valkey " + display_ + " unreachable: " + err + " (retrying in " + std::to_string(ms) +
           "ms)";
  }

  // Opens, authenticates and selects the database. Never logs the password.
  ContextPtr Connect(std::string* err) {
    ContextPtr c(redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port,
                                         ToTimeval(opts_.connect_timeout)));
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
    if (!endpoint_.password.empty()) {
      std::vector<std::string> auth{"AUTH"};
      if (!endpoint_.username.empty()) auth.push_back(endpoint_.username);
      auth.push_back(endpoint_.password);
      if (!run(auth, "AUTH")) return nullptr;
    }
    if (endpoint_.db != 0) {
      if (!run({"SELECT", std::to_string(endpoint_.db)}, "SELECT")) return nullptr;
    }
    return c;
  }

  const ValkeyOptions opts_;
  const int pool_size_;
  ValkeyEndpoint endpoint_;
  std::string display_;
  Status config_error_;

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

std::shared_ptr<ValkeyClient> NewValkeyClient(const ValkeyOptions& opts) {
  return std::make_shared<PooledValkeyClient>(opts, ParseValkeyUrl(opts.url));
}

}  // namespace vramd::store
