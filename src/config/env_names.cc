#include "vramd/config/env_names.h"

#include <algorithm>
#include <array>
#include <vector>

#include "vramd/config/config.h"

namespace vramd::config {
namespace {

constexpr std::string_view kPrefix = "VRAMD_";

// Read by Load itself (the file) and by main (secrets are not config keys):
// known names, so they are offered as the closest name to a misspelling.
constexpr std::array<std::string_view, 3> kReadElsewhere = {"VRAMD_CONFIG", "VRAMD_VALKEY_PASSWORD",
                                                            "VRAMD_VALKEY_SENTINEL_PASSWORD"};
// The project's scripts, tests and vramctl share the prefix (and VRAMD_TEST_*).
constexpr std::array<std::string_view, 10> kTooling = {
    "VRAMD_CACHE", "VRAMD_KEEP_TESTBED", "VRAMD_BIN_DIR", "VRAMD_SERVER", "VRAMD_TOKEN_FILE", "VRAMD_CACERT",
    "VRAMD_CERT", "VRAMD_KEY", "VRAMD_TLS_SERVER_NAME", "VRAMD_INSECURE_SKIP_TLS_VERIFY"};

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsProtocol(std::string_view upper) { return upper == "TCP" || upper == "UDP" || upper == "SCTP"; }

// "tcp://10.96.0.10:8080" (or udp://, sctp://; IPv6 hosts in brackets).
bool IsLinkValue(std::string_view v) {
  for (std::string_view p : {"tcp://", "udp://", "sctp://"}) {
    if (v.size() > p.size() && v.substr(0, p.size()) == p) return true;
  }
  return false;
}

std::vector<std::string_view> SplitUnderscore(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t u = s.find('_', start);
    parts.push_back(s.substr(start, u == std::string_view::npos ? std::string_view::npos : u - start));
    if (u == std::string_view::npos) return parts;
    start = u + 1;
  }
}

}  // namespace

bool IsServiceLinkVariable(std::string_view name, std::string_view value) {
  // A Service's name is a DNS label: upper-cased, the variable holds [A-Z0-9_] only.
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      })) {
    return false;
  }
  std::vector<std::string_view> t = SplitUnderscore(name);
  const size_t n = t.size();
  // SVC_SERVICE_HOST, SVC_SERVICE_PORT, SVC_SERVICE_PORT_<PORTNAME> (a port name may hold '_').
  for (size_t i = 1; i + 1 < n; ++i) {
    if (t[i] != "SERVICE") continue;
    if (t[i + 1] == "HOST" && i + 2 == n && !value.empty()) return true;
    if (t[i + 1] == "PORT" && IsDigits(value)) return true;
  }
  // SVC_PORT=tcp://host:port
  if (n >= 2 && t[n - 1] == "PORT" && IsLinkValue(value)) return true;
  // SVC_PORT_<N>_<PROTO>[_PROTO|_PORT|_ADDR]
  for (size_t i = 1; i + 2 < n; ++i) {
    if (t[i] != "PORT" || !IsDigits(t[i + 1]) || !IsProtocol(t[i + 2])) continue;
    if (i + 3 == n && IsLinkValue(value)) return true;
    if (i + 4 != n) continue;
    if (t[n - 1] == "PROTO" && (value == "tcp" || value == "udp" || value == "sctp")) return true;
    if (t[n - 1] == "PORT" && value == t[i + 1]) return true;
    if (t[n - 1] == "ADDR" && !value.empty()) return true;
  }
  return false;
}

int EditDistance(std::string_view a, std::string_view b) {
  const size_t m = a.size(), n = b.size();
  // d[i][j]: distance between a[0, i) and b[0, j); three rows suffice for transpositions.
  std::vector<int> prev2(n + 1), prev(n + 1), cur(n + 1);
  for (size_t j = 0; j <= n; ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= m; ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= n; ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[n];
}

EnvClass ClosestKnownVariable(std::string_view name) {
  EnvClass best;
  best.kind = EnvKind::kUnknown;
  best.distance = -1;
  auto consider = [&](std::string_view known) {
    int d = EditDistance(name, known);
    if (best.distance < 0 || d < best.distance) {
      best.closest = std::string(known);
      best.distance = d;
    }
  };
  for (const KeyInfo& k : Keys()) consider(k.env);
  for (std::string_view known : kReadElsewhere) consider(known);
  return best;
}

EnvClass ClassifyEnv(std::string_view name, std::string_view value) {
  EnvClass c;
  if (name.substr(0, kPrefix.size()) != kPrefix) return c;  // kIgnored
  for (const KeyInfo& k : Keys()) {
    if (k.env == name) {
      c.kind = EnvKind::kKey;
      return c;
    }
  }
  if (name.substr(0, 11) == "VRAMD_TEST_" ||
      std::find(kReadElsewhere.begin(), kReadElsewhere.end(), name) != kReadElsewhere.end() ||
      std::find(kTooling.begin(), kTooling.end(), name) != kTooling.end()) {
    return c;  // kIgnored
  }
  if (IsServiceLinkVariable(name, value)) {
    c.kind = EnvKind::kServiceLink;
    return c;
  }
  c = ClosestKnownVariable(name);
  c.kind = c.distance <= kNearKeyDistance ? EnvKind::kNearKey : EnvKind::kUnknown;
  return c;
}

}  // namespace vramd::config
