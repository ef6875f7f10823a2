#include "kube/api_url.h"

#include <cctype>

namespace vramd::kube {
namespace {

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

}  // namespace

std::string ApiEndpoint::Origin() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string(tls ? "https://" : "http://") + h + ":" + std::to_string(port);
}

Result<ApiEndpoint> ParseApiUrl(std::string_view url) {
  ApiEndpoint ep;
  std::string_view rest;
  if (StartsWithNoCase(url, "https://")) {
    ep.tls = true;
    ep.port = 443;
    rest = url.substr(8);
  } else if (StartsWithNoCase(url, "http://")) {
    ep.tls = false;
    ep.port = 80;
    rest = url.substr(7);
  } else {
    return InvalidArgument("kube api url \"" + std::string(url) + "\": must start with https://");
  }
  const std::string bad = "kube api url \"" + std::string(url) + "\": ";
  if (rest.find_first_of("?#") != std::string_view::npos) return InvalidArgument(bad + "no query or fragment allowed");
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) return InvalidArgument(bad + "no user info allowed");

  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument(bad + "unterminated [IPv6] host");
    ep.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument(bad + "junk after [IPv6] host");
      port_text = after.substr(1);
      if (port_text.empty()) return InvalidArgument(bad + "empty port");
    }
  } else {
    size_t colon = authority.find(':');
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return InvalidArgument(bad + "empty port");
    }
  }
  if (ep.host.empty()) return InvalidArgument(bad + "empty host");
  if (!port_text.empty()) {
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) return InvalidArgument(bad + "bad port");
      port = port * 10 + (c - '0');
    }
    if (port < 1 || port > 65535) return InvalidArgument(bad + "bad port");
    ep.port = port;
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  ep.base_path = std::string(path);
  return ep;
}

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (alnum || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [k, v] : params) {
    out += out.empty() ? '?' : '&';
    out += PercentEncode(k);
    out += '=';
    out += PercentEncode(v);
  }
  return out;
}

}  // namespace vramd::kube
