#include "vramd/metrics/registry.h"

#include <gtest/gtest.h>

#include <limits>

#include "vramd/metrics/ledger_metrics.h"

namespace vramd::metrics {
namespace {

TEST(Registry, RendersCountersGaugesAndCumulativeHistograms) {
  Registry r;
  r.AddCounter("vramd_x_total", "x.", {"verb"}).With({"filter"}).Inc(3);
  r.AddGauge("vramd_g", "g.").With({}).Set(1.5);
  auto& h = r.AddHistogram("vramd_h_seconds", "h.", {0.1, 1}, {"verb"});
  h.With({"bind"}).Observe(0.05);
  h.With({"bind"}).Observe(0.5);
  h.With({"bind"}).Observe(5);
  std::string out = r.Render();
  EXPECT_NE(out.find("# TYPE vramd_x_total counter\nvramd_x_total{verb=\"filter\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("vramd_g 1.5\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_h_seconds_bucket{verb=\"bind\",le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("vramd_h_seconds_bucket{verb=\"bind\",le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_h_seconds_bucket{verb=\"bind\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_h_seconds_count{verb=\"bind\"} 3\n"), std::string::npos);
}

TEST(Registry, AHistogramAddedAgainWithTheSameShapeIsTheSameFamily) {
  Registry r;
  auto& a = r.AddHistogram("vramd_h_seconds", "h.", {0.1, 1}, {"verb"});
  auto& b = r.AddHistogram("vramd_h_seconds", "h again.", {0.1, 1}, {"verb"});
  EXPECT_EQ(&a, &b);
  a.With({"bind"}).Observe(0.05);
  b.With({"bind"}).Observe(0.5);
  std::string out = r.Render();
  EXPECT_NE(out.find("vramd_h_seconds_count{verb=\"bind\"} 2\n"), std::string::npos) << out;
  size_t first = out.find("# TYPE vramd_h_seconds histogram");
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_EQ(out.find("# TYPE vramd_h_seconds histogram", first + 1), std::string::npos) << "one family: " << out;
  EXPECT_NE(&r.AddHistogram("vramd_h_seconds", "h.", {0.5}, {"verb"}), &a) << "other bounds: another family";
  EXPECT_NE(&r.AddHistogram("vramd_h_seconds", "h.", {0.1, 1}, {"node"}), &a) << "other labels: another family";
}

TEST(Registry, EscapesLabelsAndFormatsSpecialValues) {
  EXPECT_EQ(EscapeLabel("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(103079215104.0), "103079215104");
  EXPECT_EQ(FormatValue(0.25), "0.25");
}

TEST(LedgerMetrics, ExportsVectorsSixMetricsAndIdlePodSeries) {
  ledger::Snapshot s;
  ledger::Node& n = s.nodes["n1"];
  n.name = "n1";
  n.gpus = {ledger::Gpu{0, "GPU-a", 8}, ledger::Gpu{1, "", 0}};
  n.entries = {ledger::Entry{"u", "ns", "idle-pod", {0}, 8}};
  std::string out;
  TextWriter w(&out);
  WriteLedgerMetrics(s, 1000, 60000, w);
  EXPECT_NE(out.find("vramd_gpu_capacity_bytes{node=\"n1\",gpu=\"0\",gpu_uuid=\"GPU-a\"} 8\n"), std::string::npos) << out;
  EXPECT_NE(out.find("vramd_gpu_headroom_bytes{node=\"n1\",gpu=\"0\",gpu_uuid=\"GPU-a\"} 0\n"), std::string::npos);
  // GPU 1: capacity 0, nothing allocated: 0/0 = 0.
  EXPECT_NE(out.find("vramd_gpu_over_subscription_ratio{node=\"n1\",gpu=\"1\",gpu_uuid=\"\"} 0\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_node_allocated_bytes{node=\"n1\"} 8\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_pod_allocated_bytes{node=\"n1\",namespace=\"ns\",pod=\"idle-pod\",gpu=\"0\"} 8\n"),
            std::string::npos);
  for (const char* m : {"over_subscription_ratio", "utilization_ratio", "saturation_ratio", "headroom_bytes",
                        "potential_bytes", "risk_ratio"}) {
    EXPECT_NE(out.find(std::string("# TYPE vramd_gpu_") + m + " gauge"), std::string::npos) << m;
    EXPECT_NE(out.find(std::string("# TYPE vramd_node_") + m + " gauge"), std::string::npos) << m;
  }
}

TEST(LedgerMetrics, InfiniteRatiosRenderAsPlusInf) {
  ledger::Snapshot s;
  ledger::Node& n = s.nodes["n"];
  n.name = "n";
  n.gpus = {ledger::Gpu{0, "", 0}};
  n.entries = {ledger::Entry{"u", "ns", "p", {0}, 4}};
  std::string out;
  TextWriter w(&out);
  WriteLedgerMetrics(s, 1000, 60000, w);
  EXPECT_NE(out.find("vramd_gpu_over_subscription_ratio{node=\"n\",gpu=\"0\",gpu_uuid=\"\"} +Inf\n"), std::string::npos)
      << out;
}

TEST(LedgerMetrics, AgentReportsGivePodUsedOutsideAndUntrackedSeries) {
  ledger::Snapshot s;
  ledger::Node& n = s.nodes["n1"];
  n.name = "n1";
  ledger::Gpu g0{0, "GPU-a", 80, 9, 50000};
  g0.total = 85;
  g0.outside_pods = 1;
  g0.untracked = 3;
  g0.pods = {{"u-a", 5}, {"u-zombie", 3}};
  ledger::Gpu g1{1, "", 80, 4, 50000};
  g1.total = 85;
  ledger::Gpu g2{2, "", 80, 4, 50000};  // an old-format report: no total, no outside figure
  n.gpus = {g0, g1, g2};
  ledger::Entry a{"u-a", "ml", "train", {0, 1}, 10};
  a.used = 5;
  a.used_ts_ms = 50000;
  ledger::Entry stale{"u-s", "ml", "stale", {1}, 10};
  stale.used_ts_ms = 1;  // older than the 20 s max age: no series
  n.entries = {a, stale};
  std::string out;
  TextWriter w(&out);
  WriteLedgerMetrics(s, 60000, 20000, w);
  EXPECT_NE(out.find("vramd_pod_used_bytes{node=\"n1\",namespace=\"ml\",pod=\"train\",gpu=\"0\"} 5\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("vramd_pod_used_bytes{node=\"n1\",namespace=\"ml\",pod=\"train\",gpu=\"1\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(out.find("vramd_pod_used_bytes{node=\"n1\",namespace=\"ml\",pod=\"stale\""), std::string::npos)
      << "the stale pod has its allocation series only";
  EXPECT_NE(out.find("vramd_gpu_outside_pods_bytes{node=\"n1\",gpu=\"0\",gpu_uuid=\"GPU-a\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_gpu_untracked_bytes{node=\"n1\",gpu=\"0\",gpu_uuid=\"GPU-a\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("vramd_gpu_untracked_bytes{node=\"n1\",gpu=\"1\",gpu_uuid=\"\"} 0\n"), std::string::npos);
  EXPECT_EQ(out.find("vramd_gpu_untracked_bytes{node=\"n1\",gpu=\"2\""), std::string::npos);
  EXPECT_NE(out.find("# TYPE vramd_pod_used_bytes gauge"), std::string::npos);
}

// Issue 31: an operator sees why per-pod usage is empty on a GPU.
TEST(LedgerMetrics, AGpuWithoutPerProcessFiguresIsFlaggedWithTheAgentsRefusedLists) {
  ledger::Snapshot s;
  ledger::Node& n = s.nodes["n1"];
  n.name = "n1";
  ledger::Gpu g0{0, "GPU-a", 80, 9, 50000};
  g0.total = 85;
  g0.processes_unavailable = "cannot read /proc/PID/fdinfo of 2 process(es)";
  g0.invalid_process_lists = 3;
  ledger::Gpu g1{1, "GPU-b", 80, 4, 50000};
  g1.total = 85;
  n.gpus = {g0, g1};
  std::string out;
  TextWriter w(&out);
  WriteLedgerMetrics(s, 60000, 20000, w);
  EXPECT_NE(out.find("vramd_gpu_processes_unavailable{node=\"n1\",gpu=\"0\",gpu_uuid=\"GPU-a\"} 1\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("vramd_gpu_processes_unavailable{node=\"n1\",gpu=\"1\",gpu_uuid=\"GPU-b\"} 0\n"),
            std::string::npos);
  EXPECT_NE(out.find("vramd_gpu_invalid_process_lists{node=\"n1\",gpu=\"0\",gpu_uuid=\"GPU-a\"} 3\n"),
            std::string::npos);
}

// Issue 34: the backend per GPU and each pod's state, from fresh reports.
TEST(LedgerMetrics, EnforcementBackendPerGpuAndStatePerPod) {
  ledger::Snapshot s;
  ledger::Node& n = s.nodes["n1"];
  n.name = "n1";
  ledger::Gpu g0{0, "GPU-a", 80, 9, 50000};
  g0.total = 85;
  g0.enforcement = {"none", "no dmem controller", {{"u-a", ledger::EnforceState::kAccounted, "no dmem controller"}}};
  ledger::Gpu g1{1, "GPU-b", 80, 4, 50000};
  g1.total = 85;
  g1.enforcement = {"dmem", "", {{"u-a", ledger::EnforceState::kEnforced, ""}, {"u-b", ledger::EnforceState::kFailed, "EACCES"}}};
  ledger::Gpu g2{2, "GPU-c", 80, 4, 50000};  // enforcement off: nothing reported
  g2.total = 85;
  n.gpus = {g0, g1, g2};
  n.entries = {ledger::Entry{"u-a", "ml", "train", {0, 1}, 10}, ledger::Entry{"u-b", "ml", "infer", {1}, 10},
               ledger::Entry{"u-c", "ml", "new", {2}, 10}};
  std::string out;
  TextWriter w(&out);
  WriteLedgerMetrics(s, 60000, 20000, w);
  EXPECT_NE(out.find("vramd_gpu_enforcement_backend{node=\"n1\",gpu=\"0\",gpu_uuid=\"GPU-a\",backend=\"none\"} 1\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("vramd_gpu_enforcement_backend{node=\"n1\",gpu=\"1\",gpu_uuid=\"GPU-b\",backend=\"dmem\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(out.find("vramd_gpu_enforcement_backend{node=\"n1\",gpu=\"2\""), std::string::npos);
  // The worst over the pod's GPUs.
  EXPECT_NE(out.find("vramd_pod_vram_enforcement{node=\"n1\",namespace=\"ml\",pod=\"train\",state=\"accounted\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("vramd_pod_vram_enforcement{node=\"n1\",namespace=\"ml\",pod=\"infer\",state=\"failed\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(out.find("pod=\"new\",state="), std::string::npos);
}

TEST(LedgerMetrics, OverBudgetBytesAreUseAboveThePeakOrTheRequest) {
  ledger::Snapshot s;
  ledger::Node& n = s.nodes["n1"];
  n.name = "n1";
  n.gpus = {ledger::Gpu{0, "", 100, 60, 50000}};
  ledger::Entry runaway{"u-r", "media", "immich-ml", {0}, 10};  // request 10, no peak, uses 25
  runaway.used = 25;
  runaway.used_ts_ms = 50000;
  ledger::Entry burst{"u-b", "ml", "inference", {0}, 8};  // request 8, peak 32, uses 30: within its peak
  burst.peak_per_gpu = 32;
  burst.used = 30;
  burst.used_ts_ms = 50000;
  ledger::Entry stale{"u-s", "ml", "stale", {0}, 1};
  stale.used = 50;
  stale.used_ts_ms = 1;
  n.entries = {runaway, burst, stale};
  std::string out;
  TextWriter w(&out);
  WriteLedgerMetrics(s, 60000, 20000, w);
  EXPECT_NE(out.find("vramd_pod_over_budget_bytes{node=\"n1\",namespace=\"media\",pod=\"immich-ml\"} 15\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("vramd_pod_over_budget_bytes{node=\"n1\",namespace=\"ml\",pod=\"inference\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(out.find("vramd_pod_over_budget_bytes{node=\"n1\",namespace=\"ml\",pod=\"stale\""), std::string::npos)
      << "a stale figure is no measurement";
}

}  // namespace
}  // namespace vramd::metrics
