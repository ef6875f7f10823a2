// Fuzzes the GPU-lock API inputs: the POST bodies (http::DecodeLockCall,
// the first byte picks acquire, heartbeat or release) and the path segments
// (ValidateNode, ParseGpu). Properties: an accepted body has a valid owner,
// a TTL of 0 (absent) or within the limits, a wait within 0..3600 s and only
// allowed keys; every error message can be sent as a JSON error reply.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "vramd/http/routes.h"
#include "vramd/gpulock/locks.h"
#include "vramd/http/server.h"

using namespace vramd;

namespace {

void CheckReply(const Status& s) {
  FUZZ_CHECK(!s.message().empty());
  http::Reply r = http::ErrorReply(400, s.message());  // must not throw (any bytes in the message)
  FUZZ_CHECK(!r.body.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const http::LockOp op = static_cast<http::LockOp>(data[0] % 3);
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);

  Result<http::LockCall> call = http::DecodeLockCall(op, body);
  if (call.ok()) {
    FUZZ_CHECK(gpulock::ValidateOwner(call->owner).ok());
    FUZZ_CHECK(call->ttl_ms == 0 || (call->ttl_ms >= gpulock::kMinTtlMs && call->ttl_ms <= gpulock::kMaxTtlMs));
    FUZZ_CHECK(call->wait_ms >= 0 && call->wait_ms <= 3'600'000);
    if (op != http::LockOp::kAcquire) FUZZ_CHECK(call->wait_ms == 0);
    if (op == http::LockOp::kRelease) FUZZ_CHECK(call->ttl_ms == 0);
  } else {
    CheckReply(call.status());
  }

  // The same bytes as path segments.
  std::string_view seg(body);
  if (Status s = gpulock::ValidateNode(seg); !s.ok()) CheckReply(s);
  Result<int> gpu = gpulock::ParseGpu(seg);
  if (gpu.ok()) {
    FUZZ_CHECK(*gpu >= 0 && *gpu <= gpulock::kMaxGpuIndex);
  } else {
    CheckReply(gpu.status());
  }
  return 0;
}
