// The integration tier's shared Valkey-compatible server
// (VRAMD_TEST_VALKEY_URL; scripts/test.sh starts one on a free loopback
// port): each test takes keys under a prefix of its own and removes them.
#pragma once

#include <chrono>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "vramd/store/valkey_client.h"

namespace vramd::itest {

// What a test says when the variable is not set.
inline constexpr const char* kNoSharedServer =
    "VRAMD_TEST_VALKEY_URL is not set. Start a throwaway server, e.g.\n"
    "  redis-server --port 16399 --save '' --appendonly no --daemonize yes\n"
    "and run with VRAMD_TEST_VALKEY_URL=redis://127.0.0.1:16399";

inline std::string RandomHex(int n) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(kHex[rng() % 16]);
  return s;
}

// Options for the shared server under a new prefix "vramdtest-<12 hex>", with
// short timeouts; nullopt when VRAMD_TEST_VALKEY_URL is not set.
inline std::optional<store::ValkeyOptions> SharedServerOptions(int pool_size) {
  const char* url = std::getenv("VRAMD_TEST_VALKEY_URL");
  if (url == nullptr || *url == '\0') return std::nullopt;
  store::ValkeyOptions opts;
  opts.url = url;
  opts.key_prefix = "vramdtest-" + RandomHex(12);
  opts.pool_size = pool_size;
  opts.connect_timeout = std::chrono::milliseconds(1000);
  opts.command_timeout = std::chrono::milliseconds(5000);
  return opts;
}

// Deletes every key under `prefix` (SCAN + DEL; best effort).
inline void DeleteKeys(store::ValkeyClient& client, const std::string& prefix) {
  std::string cursor = "0";
  do {
    auto r = client.Command({"SCAN", cursor, "MATCH", prefix + ":*", "COUNT", "1000"});
    if (!r.ok() || r->elements.size() != 2) break;
    cursor = r->elements[0].str;
    std::vector<std::string> del{"DEL"};
    for (const auto& k : r->elements[1].elements) del.push_back(k.str);
    if (del.size() > 1) (void)client.Command(del);
  } while (cursor != "0");
}

}  // namespace vramd::itest
