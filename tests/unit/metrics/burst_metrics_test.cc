// vramd_gpu_peak_bytes and vramd_gpu_burst_unsafe (the peak rule, fit.h).
#include <gtest/gtest.h>

#include <string>

#include "vramd/metrics/ledger_metrics.h"
#include "vramd/metrics/registry.h"

namespace vramd::metrics {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

ledger::Entry Hold(const std::string& uid, int gpu, int64_t per_gpu, int64_t peak, bool victim) {
  ledger::Entry e{uid, "ns", uid, {gpu}, per_gpu};
  e.peak_per_gpu = peak;
  e.victim = victim;
  return e;
}

TEST(BurstMetrics, PeakDemandAndUnsafeGpusPerGpu) {
  ledger::Snapshot s;
  ledger::Node& n = s.nodes["n1"];
  n.name = "n1";
  n.gpus = {ledger::Gpu{0, "GPU-a", 24 * kGi}, ledger::Gpu{1, "", 24 * kGi}, ledger::Gpu{2, "", 24 * kGi}};
  n.entries = {Hold("inference", 0, 8 * kGi, 20 * kGi, false), Hold("agents", 0, 12 * kGi, 0, true),
               Hold("alone", 1, 8 * kGi, 32 * kGi, false)};
  std::string out;
  TextWriter w(&out);
  WriteLedgerMetrics(s, 1000, 60000, w);
  EXPECT_NE(out.find("# TYPE vramd_gpu_peak_bytes gauge"), std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE vramd_gpu_burst_unsafe gauge"), std::string::npos);
  EXPECT_NE(out.find("vramd_gpu_peak_bytes{node=\"n1\",gpu=\"0\"} 34359738368\n"), std::string::npos) << out;
  EXPECT_NE(out.find("vramd_gpu_peak_bytes{node=\"n1\",gpu=\"1\"} 34359738368\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_gpu_peak_bytes{node=\"n1\",gpu=\"2\"} 0\n"), std::string::npos);
  // GPU 0: overshoot 8Gi covered by 12Gi, within 36Gi; GPU 1: 8Gi uncovered.
  EXPECT_NE(out.find("vramd_gpu_burst_unsafe{node=\"n1\",gpu=\"0\"} 0\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_gpu_burst_unsafe{node=\"n1\",gpu=\"1\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_gpu_burst_unsafe{node=\"n1\",gpu=\"2\"} 0\n"), std::string::npos);
  // A lower ceiling flags GPU 0 too (P 32Gi above 1.25 x 24Gi = 30Gi).
  std::string lower;
  TextWriter lw(&lower);
  WriteLedgerMetrics(s, 1000, 60000, lw, 1.25);
  EXPECT_NE(lower.find("vramd_gpu_burst_unsafe{node=\"n1\",gpu=\"0\"} 1\n"), std::string::npos) << lower;
}

}  // namespace
}  // namespace vramd::metrics
