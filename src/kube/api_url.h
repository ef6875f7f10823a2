// Where the Kubernetes API server is, and how request paths and query strings
// are spelled for it. Private to src/kube.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vramd/status.h"

namespace vramd::kube {

struct ApiEndpoint {
  bool tls = true;         // https; false only for http:// (tests against a local fake)
  std::string host;        // name or IP literal, IPv6 without brackets
  int port = 443;
  std::string base_path;   // "" or "/prefix" (no trailing slash), prepended to every path

  // "https://host:port" (IPv6 hosts in brackets), for messages.
  std::string Origin() const;
};

// Parses "https://host[:port][/prefix]" or "http://…" (default ports 443 / 80).
// kInvalidArgument for another scheme, user info, a query or fragment, an
// empty host or a bad port.
Result<ApiEndpoint> ParseApiUrl(std::string_view url);

// Percent-encodes everything but RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~).
std::string PercentEncode(std::string_view s);

// "?k1=v1&k2=v2" with keys and values percent-encoded; "" when `params` is empty.
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params);

}  // namespace vramd::kube
