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
                "out of range"},
        // Hostile shapes (issue 11): none may throw, each names its source.
        BadMeta{"Annotation1e30", {}, {{"vramd.io/capacity", "1e30"}}, "vramd.io/capacity"},
        BadMeta{"AnnotationNegative", {}, {{"vramd.io/capacity", "-5Gi"}}, "negative"},
        BadMeta{"AnnotationText", {}, {{"vramd.io/capacity", "eighty gigabytes"}}, "vramd.io/capacity"},
        BadMeta{"AnnotationPastInt64", {}, {{"vramd.io/capacity", "9999999999999999999"}}, "vramd.io/capacity"},
        BadMeta{"AnnotationAbovePerGpuBound", {}, {{"vramd.io/capacity", "80Gi,2Pi"}}, "GPU 1 claims 2Pi"},
        BadMeta{"AnnotationSumWouldOverflow", {}, {{"vramd.io/capacity", "7Ei,7Ei"}}, "more than the 1Pi"},
        BadMeta{"AnnotationEmpty", {}, {{"vramd.io/capacity", ""}}, "vramd.io/capacity"},
        BadMeta{"AnnotationTooManyGpus", {}, {{"vramd.io/capacity", [] {
                                                 std::string s = "1Gi";
                                                 for (int i = 0; i < 1100; ++i) s += ",1Gi";
                                                 return s;
                                               }()}},
                "too many GPUs"},
        BadMeta{"CountPastInt64",
                {{"nvidia.com/gpu.count", "99999999999999999999999"}, {"nvidia.com/gpu.memory", "8192"}}, {},
                "out of range"},
        BadMeta{"Count14Digits", {{"nvidia.com/gpu.count", "99999999999999"}, {"nvidia.com/gpu.memory", "8192"}}, {},
                "nvidia.com/gpu.count"},
        BadMeta{"CountWhitespace", {{"nvidia.com/gpu.count", " 1"}, {"nvidia.com/gpu.memory", "8192"}}, {},
                "not a whole number"},
        BadMeta{"CountPlusSign", {{"nvidia.com/gpu.count", "+1"}, {"nvidia.com/gpu.memory", "8192"}}, {},
                "not a whole number"},
        BadMeta{"MemoryPastInt64", {{"nvidia.com/gpu.count", "1"}, {"nvidia.com/gpu.memory", "9999999999999999999"}},
                {}, "nvidia.com/gpu.memory"},
        BadMeta{"MemoryAbovePerGpuBound", {{"nvidia.com/gpu.count", "8"}, {"nvidia.com/gpu.memory", "1099511627776"}},
                {}, "out of range"},
        BadMeta{"MemoryFraction", {{"nvidia.com/gpu.count", "1"}, {"nvidia.com/gpu.memory", "8192.5"}}, {},
                "nvidia.com/gpu.memory"}),
    [](const auto& info) { return info.param.name; });

TEST(Capacity, LargestAcceptedGpuIsThePerGpuBound) {
  Result<PhysicalGpus> a = GpusFromNodeMetadata({}, {{"vramd.io/capacity", "1Pi"}});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->bytes, (std::vector<int64_t>{kMaxBytesPerGpu}));
  Result<PhysicalGpus> g = GpusFromNodeMetadata(
      {{"nvidia.com/gpu.count", "1024"}, {"nvidia.com/gpu.memory", std::to_string(kMaxBytesPerGpu >> 20)}}, {});
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->bytes.size(), 1024u);
  EXPECT_EQ(g->bytes[0], kMaxBytesPerGpu);
}

TEST(Capacity, ReserveSubtractsTheLargerOfPercentAndMinimum) {
  EXPECT_EQ(CapacityAfterReserve(100 * kGi, 3, 0), 97 * kGi);
  EXPECT_EQ(CapacityAfterReserve(8 * kGi, 3, kGi), 7 * kGi);
  EXPECT_EQ(CapacityAfterReserve(kGi, 0, 2 * kGi), 0);
}

}  // namespace
}  // namespace vramd::ledger
