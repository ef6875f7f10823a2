// The pooled client's pub/sub: a subscription on a dedicated connection,
// resolved, checked and authenticated like the pool's, outside the pool
// (store/pooled_client.h).
#include <poll.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "store/pooled_client.h"
#include "store/reply.h"

namespace vramd::store {

Status PooledValkeyClient::Subscribe(const std::string& channel, const std::atomic<bool>& stop,
                                     const std::function<void(bool)>& on_live,
                                     const std::function<void(const std::string&)>& on_message) {
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

std::string PooledValkeyClient::Listen(redisContext* c, const std::string& channel, const std::atomic<bool>& stop,
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
      // Messages are read in batches: the ones that arrive in the next
      // kBatch are read with the next poll, on one wake-up of this thread
      // (at 350 binds/s, two notifications each, a wake-up per message was
      // 2 % of vramd's CPU in context switches; issue 36).
      std::this_thread::sleep_for(kSubscriberBatch);
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

}  // namespace vramd::store
