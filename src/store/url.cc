// Valkey URLs: redis://[user:password@]host[:port][/db] (and, through
// store/sentinel.h, the redis+sentinel:// form), parsing and redaction.
#include <algorithm>
#include <charconv>

#include "store/sentinel.h"
#include "vramd/store/valkey_url.h"

namespace vramd::store {
namespace {

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

Status ValidateValkeyUrl(std::string_view url) {
  if (IsSentinelUrl(url)) {
    auto s = ParseSentinelUrl(url);
    return s.ok() ? Status::Ok() : s.status();
  }
  auto ep = ParseValkeyUrl(url);
  return ep.ok() ? Status::Ok() : ep.status();
}

}  // namespace vramd::store
