// Options of the Valkey (Redis-protocol) connection. The store component is
// the only one that includes hiredis (in its .cc files); see valkey_client.h.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "vramd/status.h"

namespace vramd::store {

struct ValkeyOptions {
  std::string url = "redis://127.0.0.1:6379";  // redis://[user:password@]host:port[/db]
  std::string password;                        // overrides the URL's password when set
  std::string username;                        // ACL user (optional)
  std::string key_prefix = "vramd";
  int pool_size = 8;
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds command_timeout{1000};
  // After a failed connect, further connects are not attempted before this
  // backoff has passed (doubling up to max); calls fail fast with kUnavailable.
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{2000};
};


}  // namespace vramd::store
