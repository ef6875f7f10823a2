#include "vramd/agent/report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>

namespace vramd::agent {
namespace {

constexpr int64_t GiB = int64_t{1} << 30, MiB = int64_t{1} << 20;
const std::string kA = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab";
const std::string kB = "11111111-2222-3333-4444-555555555555";

GpuReading Gpu(int index, int64_t total, int64_t used, std::vector<ProcessUsage> procs) {
  GpuReading g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.total_bytes = total;
  g.used_bytes = used;
  g.processes = std::move(procs);
  return g;
}

struct ReportCase {
  const char* name;
  std::vector<GpuReading> readings;
  PodOfPid pods;
  std::vector<GpuReport> want;
};

TEST(AgentReport, BuildsPerPodAndOutsidePodsBytes) {
  const ReportCase cases[] = {
      {"no_gpus", {}, {}, {}},
      {"idle_gpu", {Gpu(0, 80 * GiB, 512 * MiB, {})}, {}, {{0, "GPU-0", "", 80 * GiB, 512 * MiB, 0, false, {}, "", 0}}},
      {"two_processes_of_one_pod_add_up",
       {Gpu(0, 80 * GiB, 10 * GiB, {{10, 3 * GiB}, {11, 4 * GiB}})},
       {{10, kA}, {11, kA}},
       {{0, "GPU-0", "", 80 * GiB, 10 * GiB, 0, false, {{kA, 7 * GiB}}, "", 0}}},
      {"host_process_is_outside_pods",
       {Gpu(0, 80 * GiB, 10 * GiB, {{10, 3 * GiB}, {99, 100 * MiB}, {98, 20 * MiB}})},
       {{10, kA}},
       {{0, "GPU-0", "", 80 * GiB, 10 * GiB, 120 * MiB, false, {{kA, 3 * GiB}}, "", 0}}},
      {"pods_sorted_by_uid_and_gpus_by_index",
       {Gpu(1, 16 * GiB, 2 * GiB, {{20, GiB}}), Gpu(0, 16 * GiB, 3 * GiB, {{21, GiB}, {20, 2 * GiB}})},
       {{20, kB}, {21, kA}},
       {{0, "GPU-0", "", 16 * GiB, 3 * GiB, 0, false, {{kA, GiB}, {kB, 2 * GiB}}, "", 0},
        {1, "GPU-1", "", 16 * GiB, 2 * GiB, 0, false, {{kB, GiB}}, "", 0}}},
      {"figures_above_total_are_capped",
       {Gpu(0, 8 * GiB, 9 * GiB, {{10, 6 * GiB}, {11, 5 * GiB}, {12, 9 * GiB}})},
       {{10, kA}, {11, kA}},
       {{0, "GPU-0", "", 8 * GiB, 8 * GiB, 8 * GiB, false, {{kA, 8 * GiB}}, "", 0}}},
      {"sums_near_int64_max_saturate_at_total",
       {Gpu(0, INT64_MAX, INT64_MAX, {{10, INT64_MAX}, {11, INT64_MAX}, {12, INT64_MAX}, {13, INT64_MAX}})},
       {{10, kA}, {11, kA}},
       {{0, "GPU-0", "", INT64_MAX, INT64_MAX, INT64_MAX, false, {{kA, INT64_MAX}}, "", 0}}},
      {"a_process_gone_or_in_two_pods_counts_nowhere",
       {Gpu(0, 80 * GiB, 10 * GiB, {{10, 3 * GiB}, {11, 4 * GiB}, {12, 2 * GiB}, {99, 100 * MiB}})},
       {{10, kA}, {11, kNotAttributed}, {12, kNotAttributed}},
       {{0, "GPU-0", "", 80 * GiB, 10 * GiB, 100 * MiB, false, {{kA, 3 * GiB}}, "", 0}}},
      {"negative_figures_become_zero",
       {Gpu(0, 8 * GiB, -1, {{10, -5}})},
       {{10, kA}},
       {{0, "GPU-0", "", 8 * GiB, 0, 0, false, {{kA, 0}}, "", 0}}},
  };
  for (const ReportCase& c : cases) {
    Report r = BuildReport("vramd-agent/test", "nvml", c.readings, c.pods);
    EXPECT_EQ(r.agent, "vramd-agent/test") << c.name;
    EXPECT_EQ(r.source, "nvml") << c.name;
    EXPECT_EQ(r.gpus, c.want) << c.name;
  }
}

TEST(AgentReport, UnavailablePerProcessFiguresAttributeNothing) {
  GpuReading g = Gpu(0, 80 * GiB, 10 * GiB, {{10, 3 * GiB}, {99, GiB}});  // whatever a source left there
  g.processes_unavailable = "the compute process list fails validation";
  g.invalid_process_lists = 1;
  Report r = BuildReport("a", "nvml", {g}, {{10, kA}});
  ASSERT_EQ(r.gpus.size(), 1u);
  EXPECT_EQ(r.gpus[0].pods, std::vector<PodUsage>{});
  EXPECT_EQ(r.gpus[0].outside_pods_bytes, 0);
  EXPECT_EQ(r.gpus[0].used_bytes, 10 * GiB);
  EXPECT_EQ(r.gpus[0].processes_unavailable, "the compute process list fails validation");
  EXPECT_EQ(r.gpus[0].invalid_process_lists, 1);
  nlohmann::json j = nlohmann::json::parse(ReportJson(r))["gpus"][0];
  EXPECT_EQ(j, (nlohmann::json{{"index", 0},
                               {"uuid", "GPU-0"},
                               {"total_bytes", 80 * GiB},
                               {"used_bytes", 10 * GiB},
                               {"mig", false},
                               {"processes_unavailable", "the compute process list fails validation"},
                               {"invalid_process_lists", 1}}));
}

TEST(AgentReport, MigAndNamesPassThrough) {
  GpuReading g = Gpu(3, 80 * GiB, GiB, {});
  g.mig = true;
  g.name = "NVIDIA A100-SXM4-80GB";
  Report r = BuildReport("a", "nvml", {g}, {});
  ASSERT_EQ(r.gpus.size(), 1u);
  EXPECT_TRUE(r.gpus[0].mig);
  EXPECT_EQ(r.gpus[0].name, "NVIDIA A100-SXM4-80GB");
}

TEST(AgentReport, JsonIsTheSharedContract) {
  Report r;
  r.agent = "vramd-agent/0.2.0";
  r.source = "nvml";
  r.gpus.push_back({0, "GPU-5e2d", "NVIDIA H100 80GB HBM3", 85520809984, 4294967296, 104857600, false,
                    {{kA, 4190109696}}, "", 0});
  r.gpus.push_back({1, "", "", 100, 0, 0, true, {}, "", 0});
  nlohmann::json j = nlohmann::json::parse(ReportJson(r));
  nlohmann::json want = {
      {"version", 2},
      {"agent", "vramd-agent/0.2.0"},
      {"source", "nvml"},
      {"gpus",
       {{{"index", 0},
         {"uuid", "GPU-5e2d"},
         {"name", "NVIDIA H100 80GB HBM3"},
         {"total_bytes", 85520809984},
         {"used_bytes", 4294967296},
         {"outside_pods_bytes", 104857600},
         {"mig", false},
         {"pods", {{{"uid", kA}, {"used_bytes", 4190109696}}}}},
        {{"index", 1},
         {"total_bytes", 100},
         {"used_bytes", 0},
         {"outside_pods_bytes", 0},
         {"mig", true},
         {"pods", nlohmann::json::array()}}}},
  };
  EXPECT_EQ(j, want);
}

TEST(AgentReport, JsonEscapesNames) {
  Report r;
  r.agent = "a";
  r.source = "drm";
  r.gpus.push_back({0, "u\"1", "card \\ \n\x01", 1, 0, 0, false, {}, "", 0});
  nlohmann::json j = nlohmann::json::parse(ReportJson(r));
  EXPECT_EQ(j["gpus"][0]["uuid"], "u\"1");
  EXPECT_EQ(j["gpus"][0]["name"], "card \\ \n\x01");
}


// Issue 32: a pod is active on a GPU when one of its processes ran there;
// without per-process activity, when the GPU is busy at all; never when
// nothing is known. The JSON says "active" only when true.
TEST(AgentReport, APodIsActiveWhenOneOfItsProcessesRanOrItsGpuIsBusy) {
  struct Case {
    const char* name;
    bool activity_known;
    int utilization;
    std::vector<ProcessUsage> procs;
    std::vector<PodUsage> want;
  };
  const Case cases[] = {
      {"one_process_of_the_pod_ran", true, 30, {{10, GiB, false}, {11, GiB, true}, {20, GiB, false}},
       {{kA, 2 * GiB, true}, {kB, GiB, false}}},
      {"known_and_none_ran_even_on_a_busy_gpu", true, 90, {{10, GiB, false}, {20, GiB, false}},
       {{kA, GiB, false}, {kB, GiB, false}}},
      {"unknown_per_process_busy_gpu_makes_every_pod_active", false, 1, {{10, GiB, false}, {20, GiB, false}},
       {{kA, GiB, true}, {kB, GiB, true}}},
      {"unknown_per_process_idle_gpu", false, 0, {{10, GiB, true}}, {{kA, GiB, false}}},
      {"nothing_known", false, -1, {{10, GiB, true}}, {{kA, GiB, false}}},
      {"an_outside_process_that_ran_makes_no_pod_active", true, 50, {{10, GiB, false}, {99, GiB, true}},
       {{kA, GiB, false}}},
  };
  for (const Case& c : cases) {
    GpuReading g = Gpu(0, 80 * GiB, 10 * GiB, c.procs);
    g.activity_known = c.activity_known;
    g.utilization_percent = c.utilization;
    Report r = BuildReport("a", "nvml", {g}, {{10, kA}, {11, kA}, {20, kB}});
    ASSERT_EQ(r.gpus.size(), 1u) << c.name;
    EXPECT_EQ(r.gpus[0].pods, c.want) << c.name;
    EXPECT_EQ(r.gpus[0].utilization_percent, c.utilization) << c.name;
  }
  GpuReading g = Gpu(0, 80 * GiB, 10 * GiB, {{10, GiB, true}, {20, GiB, false}});
  g.activity_known = true;
  g.utilization_percent = 12;
  nlohmann::json j = nlohmann::json::parse(ReportJson(BuildReport("a", "nvml", {g}, {{10, kA}, {20, kB}})));
  EXPECT_EQ(j["gpus"][0]["pods"], (nlohmann::json{{{"uid", kA}, {"used_bytes", GiB}, {"active", true}},
                                                 {{"uid", kB}, {"used_bytes", GiB}}}));
  EXPECT_EQ(j["gpus"][0]["utilization_percent"], 12);
}

}  // namespace
}  // namespace vramd::agent
