// Options of the Valkey (Redis-protocol) connection. The store component is
// the only one that includes hiredis (in its .cc files); see valkey_client.h.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "vramd/status.h"

namespace vramd::store {

struct ValkeyOptions {
  // redis://[user:password@]host:port[/db], or through Sentinel
  // redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]
  // (docs/valkey-ha.md): the client asks the sentinels for the primary,
  // verifies it with ROLE and asks again after an error or a READONLY reply.
  std::string url = "redis://127.0.0.1:6379";
  std::string password;                        // overrides the URL's password when set
  std::string username;                        // ACL user (optional)
  // The sentinels' own credentials (requirepass on the sentinels); empty: the
  // sentinels are asked without AUTH. The data nodes' are the two above.
  std::string sentinel_password;
  std::string sentinel_username;
  std::string key_prefix = "vramd";
  int pool_size = 8;
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds command_timeout{1000};
  // After a failed connect, further connects are not attempted before this
  // backoff has passed (doubling up to max); calls fail fast with kUnavailable.
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{2000};
  // Durability of ledger writes (ValkeyClient::EvalReplicated): with N > 0,
  // a reservation counts as written only once N replicas acknowledged it
  // (WAIT N wait_timeout on the same connection); fewer is kUnavailable.
  int min_replicas_ack = 0;
  std::chrono::milliseconds wait_timeout{500};
};


}  // namespace vramd::store
