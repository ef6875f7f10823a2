#include "vramd/ledger/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace vramd::ledger {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kGi = int64_t{1} << 30;

struct MetricsCase {
  const char* name;
  Vectors v;
  SixMetrics want;
};

class SixMetricsTable : public ::testing::TestWithParam<MetricsCase> {};

TEST_P(SixMetricsTable, Computes) {
  SixMetrics m = ComputeMetrics(GetParam().v);
  const SixMetrics& w = GetParam().want;
  EXPECT_DOUBLE_EQ(m.over_subscription, w.over_subscription);
  EXPECT_DOUBLE_EQ(m.utilization, w.utilization);
  EXPECT_DOUBLE_EQ(m.saturation, w.saturation);
  EXPECT_EQ(m.headroom, w.headroom);
  EXPECT_EQ(m.potential, w.potential);
  EXPECT_DOUBLE_EQ(m.risk, w.risk);
}

INSTANTIATE_TEST_SUITE_P(
    Metrics, SixMetricsTable,
    ::testing::Values(
        // The capacity model's example: 96Gi, devstral 54 + hermes 32 co-loaded.
        MetricsCase{"WorkedExampleAtNaturalCeiling", {96 * kGi, 86 * kGi, 86 * kGi},
                    {86.0 / 96, 1.0, 86.0 / 96, 10 * kGi, 0, 0.0}},
        MetricsCase{"IdleReservedMemory", {80 * kGi, 60 * kGi, 20 * kGi},
                    {0.75, 1.0 / 3, 0.25, 60 * kGi, 40 * kGi, 40.0 / 60}},
        MetricsCase{"AllZero", {0, 0, 0}, {0, 0, 0, 0, 0, 0}},
        MetricsCase{"ZeroCapacityWithAllocation", {0, 4 * kGi, 4 * kGi}, {kInf, 1, kInf, -4 * kGi, 0, kInf}},
        MetricsCase{"NothingAllocatedButUsed", {8 * kGi, 0, 2 * kGi}, {0, kInf, 0.25, 6 * kGi, -2 * kGi, -1.0 / 3}},
        MetricsCase{"HeadroomZeroPotentialPositiveIsInfiniteRisk", {8 * kGi, 10 * kGi, 8 * kGi},
                    {1.25, 0.8, 1.0, 0, 2 * kGi, kInf}},
        MetricsCase{"HeadroomZeroPotentialZeroIsZeroRisk", {8 * kGi, 8 * kGi, 8 * kGi}, {1, 1, 1, 0, 0, 0}},
        MetricsCase{"HeadroomZeroPotentialNegativeIsInfiniteRisk", {8 * kGi, 6 * kGi, 8 * kGi},
                    {0.75, 8.0 / 6, 1, 0, -2 * kGi, kInf}},
        MetricsCase{"UsageAboveCapacityNegativeHeadroom", {8 * kGi, 4 * kGi, 10 * kGi},
                    {0.5, 2.5, 1.25, -2 * kGi, -6 * kGi, kInf}}),
    [](const auto& info) { return info.param.name; });

TEST(SafeRatio, ZeroOverZeroIsZeroAndAnythingElseOverZeroIsInf) {
  EXPECT_EQ(SafeRatio(0, 0), 0);
  EXPECT_EQ(SafeRatio(1, 0), kInf);
  EXPECT_EQ(SafeRatio(-1, 0), kInf);
  EXPECT_DOUBLE_EQ(SafeRatio(1, 4), 0.25);
}

TEST(Vectors, UsageFallsBackToAllocationWhenStaleOrMissing) {
  Node n;
  n.name = "n";
  n.gpus = {Gpu{0, "", 10 * kGi, 3 * kGi, 1000}, Gpu{1, "", 10 * kGi, 9 * kGi, 0}};
  n.entries = {Entry{"a", "ns", "a", {0, 1}, 2 * kGi}};
  auto fresh = GpuVectors(n, /*now_ms=*/1500, /*usage_max_age_ms=*/1000);
  EXPECT_EQ(fresh[0].used, 3 * kGi);  // fresh report
  EXPECT_EQ(fresh[1].used, 2 * kGi);  // never reported: U = A
  auto stale = GpuVectors(n, /*now_ms=*/5000, /*usage_max_age_ms=*/1000);
  EXPECT_EQ(stale[0].used, 2 * kGi);
  Vectors sum = SumVectors(fresh);
  EXPECT_EQ(sum.capacity, 20 * kGi);
  EXPECT_EQ(sum.allocated, 4 * kGi);
  EXPECT_EQ(sum.used, 5 * kGi);
}

}  // namespace
}  // namespace vramd::ledger
