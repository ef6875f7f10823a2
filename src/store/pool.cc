// The pooled client's connection pool: borrowing and returning
// connections, the reconnect backoff, and opening one (store/pooled_client.h).
#include <spdlog/spdlog.h>

#include <cstring>
#include <utility>

#include "store/pooled_client.h"
#include "store/reply.h"

namespace vramd::store {

PooledValkeyClient::PooledValkeyClient(ValkeyOptions opts, Result<ValkeyEndpoint> endpoint,
                                       std::unique_ptr<SentinelResolver> sentinel)
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

PooledValkeyClient::~PooledValkeyClient() {
  MutexLock lk(&mu_);
  idle_.clear();
}

Result<ContextPtr> PooledValkeyClient::Borrow() {
  if (!config_error_.ok()) return config_error_;
  const auto deadline = Clock::now() + opts_.connect_timeout + opts_.command_timeout;
  for (;;) {
    // Under mu_: hand out a recently used idle connection, or take an older
    // one to check, or reserve a slot (++open_) to open one in, or wait. The
    // check and the connect run without mu_.
    Idle idle;  // the one to check; empty when a slot was reserved
    Clock::time_point start;
    {
      MutexLock lk(&mu_);
      for (;;) {
        if (!idle_.empty()) {
          idle = std::move(idle_.back());
          idle_.pop_back();
          if (sentinel_ && GenOf(idle.c) != CurrentGen()) {
            idle.c.reset();  // made for a primary that has been forgotten since
            --open_;
            continue;
          }
          if (Clock::now() - idle.since < kIdleCheckAfter) return std::move(idle.c);
          break;
        }
        if (open_ < pool_size_) {
          start = Clock::now();
          if (start < retry_at_) {
            return CountError(Unreachable(last_error_, retry_at_ - start));
          }
          ++open_;
          break;
        }
        if (!cv_.WaitUntil(&lk, deadline) && idle_.empty() && open_ >= pool_size_) {
          return CountError("valkey " + Display() + ": all " + std::to_string(pool_size_) +
                             " connections stayed busy for " +
                             std::to_string((opts_.connect_timeout + opts_.command_timeout).count()) +
                             "ms");
        }
      }
    }
    if (idle.c) {
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
      MutexLock lk(&mu_);
      --open_;
      continue;
    }
    std::string err;
    ContextPtr c = Connect(&err);
    MutexLock lk(&mu_);
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
    cv_.NotifyAll();
    return CountError(Unreachable(err, backoff_));
  }
}

void PooledValkeyClient::GiveBack(ContextPtr c) {
  {
    MutexLock lk(&mu_);
    if (c->err != 0 || (sentinel_ && GenOf(c) != CurrentGen())) {
      c.reset();
      --open_;
    } else {
      idle_.push_back({std::move(c), Clock::now()});
    }
  }
  cv_.NotifyOne();
}

void PooledValkeyClient::DropAll(ContextPtr c) {
  const uint64_t gen = GenOf(c);
  std::vector<Idle> dropped;
  {
    MutexLock lk(&mu_);
    c.reset();
    --open_;
    open_ -= static_cast<int>(idle_.size());
    dropped.swap(idle_);
  }
  cv_.NotifyAll();
  if (sentinel_) Forget(gen);
}

Status PooledValkeyClient::Broken(ContextPtr c, std::string_view what) {
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

void PooledValkeyClient::Demoted(ContextPtr c) {
  spdlog::warn("valkey {}: the server answered READONLY (it is a replica now); asking the "
               "sentinels for the primary",
               Display());
  DropAll(std::move(c));
}

Status PooledValkeyClient::CountError(std::string msg) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  return Unavailable(std::move(msg));
}

std::string PooledValkeyClient::Unreachable(const std::string& err, Clock::duration retry_in) const {
  const auto ms = std::chrono::ceil<milliseconds>(retry_in).count();
  return "valkey " + Display() + " unreachable: " + err + " (retrying in " + std::to_string(ms) +
         "ms)";
}

std::string PooledValkeyClient::Display() const {
  if (!sentinel_) return display_;
  MutexLock lk(&route_mu_);
  return primary_known_ ? display_ + " (" + primary_.Display() + ")" : display_;
}

ContextPtr PooledValkeyClient::Open(const ValkeyEndpoint& ep, std::string* err) {
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

}  // namespace vramd::store
