// Fuzzes the body of PUT /v1/nodes/{node}/usage (http::DecodeUsage).
// Properties: an accepted body names at least one GPU, each index a whole
// number from 0 to 9999 given once, each amount from 0 to 2^63-1 bytes;
// every error message can be sent as a JSON error reply.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "vramd/http/routes.h"
#include "vramd/http/server.h"

using namespace vramd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  Result<std::map<int, int64_t>> usage = http::DecodeUsage(body);
  if (usage.ok()) {
    FUZZ_CHECK(!usage->empty());
    for (const auto& [gpu, bytes] : *usage) {
      FUZZ_CHECK(gpu >= 0 && gpu <= 9999);
      FUZZ_CHECK(bytes >= 0);
    }
  } else {
    FUZZ_CHECK(!usage.status().message().empty());
    http::Reply r = http::ErrorReply(400, usage.status().message());  // must not throw
    FUZZ_CHECK(!r.body.empty());
  }
  return 0;
}
