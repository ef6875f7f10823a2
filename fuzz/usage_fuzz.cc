// Fuzzes the body of PUT /v1/nodes/{node}/usage (http::DecodeUsageReport).
// Properties: an accepted body names at least one GPU, indices ascending and
// distinct from 0 to 9999, each figure from 0 to 1 PiB, pod UIDs canonical;
// it passes ledger::CheckUsageReport; every error message can be sent as a
// JSON error reply.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/ledger/capacity.h"

using namespace vramd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  Result<ledger::UsageReport> report = http::DecodeUsageReport(body);
  if (report.ok()) {
    FUZZ_CHECK(!report->gpus.empty());
    FUZZ_CHECK(ledger::CheckUsageReport(*report).ok());
    for (size_t i = 0; i < report->gpus.size(); ++i) {
      const ledger::GpuUsage& g = report->gpus[i];
      FUZZ_CHECK(g.index >= 0 && g.index <= 9999);
      FUZZ_CHECK(i == 0 || report->gpus[i - 1].index < g.index);
      FUZZ_CHECK(g.used >= 0 && g.used <= ledger::kMaxBytesPerGpu);
      for (const ledger::PodUsage& p : g.pods) FUZZ_CHECK(ledger::IsCanonicalPodUid(p.uid));
    }
  } else {
    FUZZ_CHECK(!report.status().message().empty());
    http::Reply r = http::ErrorReply(400, report.status().message());  // must not throw
    FUZZ_CHECK(!r.body.empty());
  }
  return 0;
}
