// /v1/nodes per GPU: peak_bytes (P), victim_bytes (V) and burst_safe.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "http/json_views.h"

namespace vramd::http {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

TEST(NodeViewBurst, EachGpuShowsPeakDemandVictimCoverAndWhetherItIsSafe) {
  ledger::Node n;
  n.name = "node-4";
  n.gpus = {ledger::Gpu{0, "", 40 * kGi}, ledger::Gpu{1, "", 40 * kGi}};
  ledger::Entry agents{"a", "ns", "agents", {0}, 16 * kGi};
  agents.victim = true;
  ledger::Entry inference{"i", "ns", "inference", {0}, 8 * kGi};
  inference.peak_per_gpu = 32 * kGi;
  ledger::Entry other{"o", "ns", "other", {1}, 12 * kGi};
  other.peak_per_gpu = 44 * kGi;
  n.entries = {agents, inference, other};
  const nlohmann::json v = NodeView(n, 1000, 60000);
  ASSERT_EQ(v["gpus"].size(), 2u);
  EXPECT_EQ(v["gpus"][0]["peak_bytes"], 48 * kGi);
  EXPECT_EQ(v["gpus"][0]["victim_bytes"], 16 * kGi);
  EXPECT_EQ(v["gpus"][0]["burst_safe"], true);
  EXPECT_EQ(v["gpus"][1]["peak_bytes"], 44 * kGi);
  EXPECT_EQ(v["gpus"][1]["victim_bytes"], 0);
  EXPECT_EQ(v["gpus"][1]["burst_safe"], false);
  EXPECT_EQ(NodeView(n, 1000, 60000, 1.1)["gpus"][0]["burst_safe"], false) << "48Gi above 1.1 x 40Gi";
}

}  // namespace
}  // namespace vramd::http
