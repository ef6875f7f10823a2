#include "vramd/ledger/capacity.h"

#include <gtest/gtest.h>

namespace vramd::ledger {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
using Map = std::map<std::string, std::string>;

TEST(Capacity, GfdLabelsGiveCountTimesMib) {
  Result<PhysicalGpus> g = GpusFromNodeMetadata({{"nvidia.com/gpu.count", "2"}, {"nvidia.com/gpu.memory", "81920"}}, {});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->source, "gfd");
  EXPECT_EQ(g->bytes, (std::vector<int64_t>{80 * kGi, 80 * kGi}));
}

TEST(Capacity, AnnotationWinsOverLabelsAndAllowsMixedGpus) {
  Result<PhysicalGpus> g = GpusFromNodeMetadata({{"nvidia.com/gpu.count", "1"}, {"nvidia.com/gpu.memory", "8192"}},
                                                {{"vramd.io/capacity", "80Gi, 24Gi"}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->source, "annotation");
  EXPECT_EQ(g->bytes, (std::vector<int64_t>{80 * kGi, 24 * kGi}));
}

TEST(Capacity, NodeWithoutSourcesHasNoGpus) {
  Result<PhysicalGpus> g = GpusFromNodeMetadata({{"nvidia.com/gpu.count", "1"}}, {});
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->bytes.empty());
}

struct BadMeta {
  const char* name;
  Map labels, annotations;
  const char* message_part;
};

class CapacityRejects : public ::testing::TestWithParam<BadMeta> {};

TEST_P(CapacityRejects, NamingTheSource) {
  Result<PhysicalGpus> g = GpusFromNodeMetadata(GetParam().labels, GetParam().annotations);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find(GetParam().message_part), std::string::npos) << g.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Capacity, CapacityRejects,
    ::testing::Values(
        BadMeta{"AnnotationGarbage", {}, {{"vramd.io/capacity", "80Gi,lots"}}, "vramd.io/capacity"},
        BadMeta{"AnnotationEmptyItem", {}, {{"vramd.io/capacity", "80Gi,,8Gi"}}, "vramd.io/capacity"},
        BadMeta{"CountNotNumber", {{"nvidia.com/gpu.count", "two"}, {"nvidia.com/gpu.memory", "8192"}}, {},
                "nvidia.com/gpu.count"},
        BadMeta{"MemoryNegative", {{"nvidia.com/gpu.count", "1"}, {"nvidia.com/gpu.memory", "-5"}}, {},
                "nvidia.com/gpu.memory"},
        BadMeta{"AbsurdCount", {{"nvidia.com/gpu.count", "100000"}, {"nvidia.com/gpu.memory", "8192"}}, {},
                "out of range"}),
    [](const auto& info) { return info.param.name; });

TEST(Capacity, ReserveSubtractsTheLargerOfPercentAndMinimum) {
  EXPECT_EQ(CapacityAfterReserve(100 * kGi, 3, 0), 97 * kGi);
  EXPECT_EQ(CapacityAfterReserve(8 * kGi, 3, kGi), 7 * kGi);
  EXPECT_EQ(CapacityAfterReserve(kGi, 0, 2 * kGi), 0);
}

}  // namespace
}  // namespace vramd::ledger
