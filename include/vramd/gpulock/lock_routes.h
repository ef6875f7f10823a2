// The GPU-lock endpoints of the /v1 API (docs/locks.md):
//   POST /v1/locks/{node}/{gpu}/acquire    {"owner", "ttl_seconds"?, "wait_seconds"?}
//   POST /v1/locks/{node}/{gpu}/heartbeat  {"owner", "ttl_seconds"?}
//   POST /v1/locks/{node}/{gpu}/release    {"owner"}
//   GET  /v1/locks
// The POSTs need the bearer token when one is configured (401 before
// anything is read or written). Bad input is 400, not the owner 409, a full
// queue 429, Valkey unreachable 503.
#pragma once

#include <cstdint>
#include <string>

#include "vramd/gpulock/locks.h"
#include "vramd/http/server.h"
#include "vramd/status.h"

namespace vramd::gpulock {

enum class LockOp { kAcquire, kHeartbeat, kRelease };

// A decoded POST body. ttl_ms is 0 when the body has no ttl_seconds.
struct LockCall {
  std::string owner;
  int64_t ttl_ms = 0;
  int64_t wait_ms = 0;
};

// Decodes and validates the body of `op`: a JSON object with a valid owner,
// ttl_seconds a number from 0.1 to 86400, wait_seconds (acquire only) a
// number from 0 to 3600 (the service waits at most kMaxWaitMs); any other key
// is an error (a misspelt ttl must not silently become the default).
Result<LockCall> DecodeLockCall(LockOp op, const std::string& body);

void RegisterLockRoutes(http::Server& server, LockService* locks, const std::string& api_token);

}  // namespace vramd::gpulock
