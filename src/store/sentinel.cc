// Sentinel URL parsing and the primary lookup.
//
// A lookup opens a short-lived connection to one sentinel at a time (they
// are only asked after an error, so there is nothing to pool), bounded by
// SentinelOptions::timeout for the connect and for each reply.
#include "store/sentinel.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <utility>

namespace vramd::store {
namespace {

struct ContextFree {
  void operator()(redisContext* c) const {
    if (c != nullptr) redisFree(c);
  }
};
struct ReplyFree {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using SentinelContext = std::unique_ptr<redisContext, ContextFree>;
using SentinelReply = std::unique_ptr<redisReply, ReplyFree>;

timeval ToTimeval(std::chrono::milliseconds d) {
  const int64_t ms = std::max<int64_t>(d.count(), 1);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

SentinelReply Run(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  return SentinelReply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data())));
}

std::string TransportError(const redisContext* c, std::chrono::milliseconds timeout) {
  if (c->err == REDIS_ERR_IO && (std::string_view(c->errstr).find("temporarily unavailable") !=
                                     std::string_view::npos ||
                                 std::string_view(c->errstr).find("timed out") != std::string_view::npos)) {
    return "no answer within " + std::to_string(timeout.count()) + "ms";
  }
  return c->errstr;
}

// "host[:port]" or "[v6]:port".
Status ParseHostPort(std::string_view text, ValkeyEndpoint* ep) {
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return InvalidArgument("unterminated '['");
    ep->host = std::string(text.substr(1, close - 1));
    std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument("expected ':' after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) return InvalidArgument("empty port after '" + std::string(text) + "'");
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    ep->host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    if (port_text.empty()) return InvalidArgument("empty port in '" + std::string(text) + "'");
  } else {
    ep->host = std::string(text);
  }
  if (ep->host.empty()) return InvalidArgument("a sentinel without a host");
  ep->port = kDefaultSentinelPort;
  if (!port_text.empty()) {
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), ep->port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || ep->port <= 0 ||
        ep->port > 65535) {
      return InvalidArgument("bad port '" + std::string(port_text) + "'");
    }
  }
  return Status::Ok();
}

}  // namespace

bool IsSentinelUrl(std::string_view url) {
  return url.starts_with("redis+sentinel://") || url.starts_with("valkey+sentinel://");
}

Result<SentinelUrl> ParseSentinelUrl(std::string_view url) {
  const std::string quoted = "valkey url '" + RedactValkeyUrl(url) + "'";
  const std::string form = " (expected redis+sentinel://[user:password@]host:port[,host:port...]/master[/db])";
  if (!IsSentinelUrl(url)) return InvalidArgument(quoted + ": not a sentinel URL" + form);
  std::string_view rest = url.substr(url.find("://") + 3);
  if (const size_t q = rest.find('?'); q != std::string_view::npos) rest = rest.substr(0, q);
  SentinelUrl out;
  std::string_view path;
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    // The same userinfo rules as redis:// (percent-decoding, a lone
    // userinfo is the password), by the same parser.
    auto creds = ParseValkeyUrl("redis://" + std::string(rest.substr(0, at)) + "@sentinel-host");
    if (!creds.ok()) return InvalidArgument(quoted + ": bad credentials");
    out.username = std::move(creds->username);
    out.password = std::move(creds->password);
    rest.remove_prefix(at + 1);
  }
  while (true) {
    const size_t comma = rest.find(',');
    ValkeyEndpoint ep;
    if (Status s = ParseHostPort(rest.substr(0, comma), &ep); !s.ok()) {
      return InvalidArgument(quoted + ": " + s.message() + form);
    }
    out.sentinels.push_back(std::move(ep));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  const size_t slash = path.find('/');
  out.master_name = std::string(path.substr(0, slash));
  if (out.master_name.empty()) return InvalidArgument(quoted + ": no master name" + form);
  if (slash != std::string_view::npos) {
    std::string_view db = path.substr(slash + 1);
    auto [p, ec] = std::from_chars(db.data(), db.data() + db.size(), out.db);
    if (db.empty() || ec != std::errc() || p != db.data() + db.size() || out.db < 0) {
      return InvalidArgument(quoted + ": bad database number '" + std::string(db) + "'" + form);
    }
  }
  return out;
}

SentinelResolver::SentinelResolver(SentinelOptions opts) : opts_(std::move(opts)), order_(opts_.sentinels) {}

Result<ValkeyEndpoint> SentinelResolver::Resolve() {
  std::vector<ValkeyEndpoint> order;
  {
    MutexLock lk(&mu_);
    order = order_;
  }
  if (order.empty()) return InvalidArgument("no sentinel to ask for master '" + opts_.master_name + "'");
  std::string failures;
  for (size_t i = 0; i < order.size(); ++i) {
    Result<ValkeyEndpoint> r = Ask(order[i]);
    if (r.ok()) {
      MutexLock lk(&mu_);
      // Move the one that answered to the front (order_ may have been
      // reordered meanwhile: find it by address).
      auto it = std::find_if(order_.begin(), order_.end(), [&](const ValkeyEndpoint& e) {
        return e.host == order[i].host && e.port == order[i].port;
      });
      if (it != order_.end()) std::rotate(order_.begin(), it, it + 1);
      answered_ = 0;
      return r;
    }
    if (!failures.empty()) failures += "; ";
    failures += r.status().message();
  }
  return Unavailable("no sentinel named the primary of '" + opts_.master_name + "': " + failures);
}

void SentinelResolver::Distrust() {
  MutexLock lk(&mu_);
  if (answered_ >= order_.size() || order_.size() < 2) return;
  std::rotate(order_.begin() + static_cast<std::ptrdiff_t>(answered_),
              order_.begin() + static_cast<std::ptrdiff_t>(answered_) + 1, order_.end());
  answered_ = SIZE_MAX;
}

Result<ValkeyEndpoint> SentinelResolver::Ask(const ValkeyEndpoint& sentinel) const {
  const std::string who = "sentinel " + sentinel.Display();
  SentinelContext c(redisConnectWithTimeout(sentinel.host.c_str(), sentinel.port, ToTimeval(opts_.timeout)));
  if (!c) return Unavailable(who + ": cannot allocate a connection");
  if (c->err != 0) return Unavailable(who + ": " + TransportError(c.get(), opts_.timeout));
  if (redisSetTimeout(c.get(), ToTimeval(opts_.timeout)) != REDIS_OK) {
    return Unavailable(who + ": cannot set timeouts: " + c->errstr);
  }
  if (!opts_.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!opts_.username.empty()) auth.push_back(opts_.username);
    auth.push_back(opts_.password);
    SentinelReply r = Run(c.get(), auth);
    if (!r) return Unavailable(who + ": AUTH: " + TransportError(c.get(), opts_.timeout));
    if (r->type == REDIS_REPLY_ERROR) {
      return Unavailable(who + ": AUTH failed: " + std::string(r->str, r->len));
    }
  }
  SentinelReply r = Run(c.get(), {"SENTINEL", "get-master-addr-by-name", opts_.master_name});
  if (!r) return Unavailable(who + ": " + TransportError(c.get(), opts_.timeout));
  if (r->type == REDIS_REPLY_ERROR) return Unavailable(who + ": " + std::string(r->str, r->len));
  if (r->type == REDIS_REPLY_NIL) {
    return Unavailable(who + " does not monitor a master named '" + opts_.master_name + "'");
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
      r->element[1]->type != REDIS_REPLY_STRING) {
    return Unavailable(who + ": unexpected answer to SENTINEL get-master-addr-by-name");
  }
  ValkeyEndpoint ep;
  ep.host.assign(r->element[0]->str, r->element[0]->len);
  const std::string_view port(r->element[1]->str, r->element[1]->len);
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), ep.port);
  if (ep.host.empty() || ec != std::errc() || p != port.data() + port.size() || ep.port <= 0 ||
      ep.port > 65535) {
    return Unavailable(who + ": malformed primary address '" + ep.host + ":" + std::string(port) + "'");
  }
  return ep;
}

}  // namespace vramd::store
