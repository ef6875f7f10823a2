// The used hash's packed per-GPU field ("g:<idx>", ledger_decode.h): the
// round trip, the malformed values a decoder must refuse, and BuildNode
// reading a report written as packed fields exactly as the per-field
// layout vramd wrote before.
#include "store/ledger_decode.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace vramd::store {
namespace {

constexpr const char* kUid1 = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";
constexpr const char* kUid2 = "1b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";
constexpr const char* kUuid = "GPU-6b3a1c2e-7d4f-4e5a-9b8c-0d1e2f3a4b5c";

ledger::GpuUsage Gpu(int64_t total, int64_t outside, std::string uuid, std::vector<ledger::PodUsage> pods,
                     std::string unavailable = "", int64_t invalid_lists = 0) {
  ledger::GpuUsage g;
  g.total = total;
  g.outside_pods = outside;
  g.uuid = std::move(uuid);
  g.pods = std::move(pods);
  g.processes_unavailable = std::move(unavailable);
  g.invalid_process_lists = invalid_lists;
  return g;
}

TEST(PackedGpuUsage, RoundTripsEveryShape) {
  const struct {
    const char* name;
    ledger::GpuUsage g;
    const char* text;
  } cases[] = {
      {"no uuid, no pods", Gpu(80, 0, "", {}), "80,0,"},
      {"uuid, no pods", Gpu(85899345920, 5, kUuid, {}), "85899345920,5,GPU-6b3a1c2e-7d4f-4e5a-9b8c-0d1e2f3a4b5c"},
      {"one pod, no uuid", Gpu(80, 1, "", {{kUid1, 7}}), "80,1,,0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0=7"},
      {"two pods, zero bytes", Gpu(80, 0, kUuid, {{kUid1, 0}, {kUid2, 42}}),
       "80,0,GPU-6b3a1c2e-7d4f-4e5a-9b8c-0d1e2f3a4b5c,0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0=0,"
       "1b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0=42"},
      // Issue 31: the agent has no per-process figures (its reason travels
      // percent-encoded) and counts the lists it refused.
      {"processes unavailable, lists refused", Gpu(80, 0, kUuid, {}, "list failed: 3 > 2 entries, 100% bad=yes", 4),
       "80,0,GPU-6b3a1c2e-7d4f-4e5a-9b8c-0d1e2f3a4b5c,!n=4,!u=list failed: 3 > 2 entries%2C 100%25 bad%3Dyes"},
      {"refused lists only", Gpu(80, 1, "", {{kUid1, 7}}, "", 2), "80,1,,0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0=7,!n=2"},
      // Issue 32: the pods the agent saw run work.
      {"an active pod", Gpu(80, 0, "", {{kUid1, 7, true}, {kUid2, 0}}),
       "80,0,,0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0=7;a,1b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0=0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(PackGpuUsage(c.g), c.text);
    ledger::GpuUsage back;
    back.pods.push_back({"stale", 1});  // replaced, not appended to
    ASSERT_TRUE(UnpackGpuUsage(c.text, &back));
    EXPECT_EQ(back.total, c.g.total);
    EXPECT_EQ(back.outside_pods, c.g.outside_pods);
    EXPECT_EQ(back.uuid, c.g.uuid);
    EXPECT_EQ(back.pods, c.g.pods);
    EXPECT_EQ(back.processes_unavailable, c.g.processes_unavailable);
    EXPECT_EQ(back.invalid_process_lists, c.g.invalid_process_lists);
  }
}

TEST(PackedGpuUsage, RefusesMalformedValues) {
  const struct {
    const char* name;
    const char* text;
  } cases[] = {
      {"empty", ""},
      {"total only", "80"},
      {"no uuid part", "80,0"},
      {"total not a number", "x,0,"},
      {"negative total", "-1,0,"},
      {"negative outside", "80,-1,"},
      {"outside not a number", "80,1.5,"},
      {"uuid with '='", "80,0,a=b"},
      {"pod without '='", "80,0,,uid"},
      {"pod without uid", "80,0,,=5"},
      {"pod bytes negative", "80,0,,u=-5"},
      {"pod bytes missing", "80,0,,u="},
      {"pod bytes not a number", "80,0,,u=5x"},
      {"pod activity without bytes", "80,0,,u=;a"},
      {"pod activity unknown", "80,0,,u=5;b"},
      {"pod activity twice", "80,0,,u=5;a;a"},
      {"trailing comma", "80,0,,u=5,"},
      {"empty pod part", "80,0,,,u=5"},
      {"total overflows int64", "99999999999999999999,0,"},
      {"refused lists negative", "80,0,,!n=-1"},
      {"refused lists not a number", "80,0,,!n=two"},
      {"reason with a bad escape", "80,0,,!u=100%G1"},
      {"reason with a cut escape", "80,0,,!u=100%4"},
      {"unknown '!' part", "80,0,,!x=1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ledger::GpuUsage g;
    EXPECT_FALSE(UnpackGpuUsage(c.text, &g));
  }
}

// Issue 34: the agent's enforcement per GPU, "e:<idx>".
TEST(PackedEnforcement, RoundTripsAndRefusesMalformedValues) {
  const struct {
    const char* name;
    ledger::GpuEnforcement e;
    const char* text;
  } cases[] = {
      {"dmem, no pods", {"dmem", "", {}}, "dmem,"},
      {"none with a reason that needs escaping",
       {"none", "no dmem controller (cpu, io), driver 580 = old", {{kUid1, ledger::EnforceState::kAccounted, "no dmem, 100%"}}},
       "none,no dmem controller (cpu%2C io)%2C driver 580 %3D old,0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0=accounted:no dmem%2C 100%25"},
      {"every state",
       {"nvml", "", {{kUid1, ledger::EnforceState::kEnforced, ""}, {kUid2, ledger::EnforceState::kFailed, "EACCES: a:b"}}},
       "nvml,,0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0=enforced,1b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0=failed:EACCES: a:b"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(PackEnforcement(c.e), c.text);
    ledger::GpuEnforcement back;
    back.pods.push_back({"stale"});
    ASSERT_TRUE(UnpackEnforcement(c.text, &back));
    EXPECT_EQ(back, c.e);
  }
  for (const char* bad : {"", "cuda,", "dmem", "dmem,,u", "dmem,,=enforced", "dmem,,u=enforcing", "dmem,,u=failed:100%G1",
                          "dmem,%4"}) {
    ledger::GpuEnforcement e;
    EXPECT_FALSE(UnpackEnforcement(bad, &e)) << bad;
  }
}

Reply Str(std::string s) {
  Reply r;
  r.type = Reply::Type::kString;
  r.str = std::move(s);
  return r;
}

Reply Hash(const std::vector<std::pair<std::string, std::string>>& fields) {
  Reply r;
  r.type = Reply::Type::kArray;
  for (const auto& [f, v] : fields) {
    r.elements.push_back(Str(f));
    r.elements.push_back(Str(v));
  }
  return r;
}

ledger::Node Build(const std::vector<std::pair<std::string, std::string>>& used, Problems* problems) {
  ledger::Node node;
  node.name = "n1";
  Reply cap = Hash({{"0", "100"}, {"1", "100"}});
  const std::string entry = std::string(R"({"gpus":[1],"per_gpu":30,"state":"bound","created_ms":1})");
  Reply alloc = Hash({{kUid1, entry}});
  Reply models = Hash({});
  EntryDecoder decoder;
  BuildNode(&node, cap, alloc, Hash(used), models, &decoder, problems);
  return node;
}

TEST(PackedGpuUsage, BuildNodeReadsPackedFieldsAsThePerFieldLayout) {
  Problems p_old, p_new;
  const ledger::Node old_layout =
      Build({{"ts", "5000"}, {"v", "2"}, {"0", "10"}, {"total:0", "100"}, {"outside:0", "3"}, {"1", "40"},
             {"total:1", "100"}, {"outside:1", "0"}, {"uuid:1", kUuid}, {std::string("pod:1:") + kUid1, "35"},
             {std::string("pod:1:") + kUid2, "5"}},
            &p_old);
  const ledger::Node packed = Build({{"ts", "5000"},
                                     {"v", "3"},
                                     {"0", "10"},
                                     {"g:0", "100,3,"},
                                     {"1", "40"},
                                     {"g:1", std::string("100,0,") + kUuid + "," + kUid2 + "=5," + kUid1 + "=35"}},
                                    &p_new);
  EXPECT_EQ(p_old.count, 0u);
  EXPECT_EQ(p_new.count, 0u);
  ASSERT_EQ(packed.gpus.size(), 2u);
  ASSERT_EQ(old_layout.gpus.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(packed.gpus[i].used, old_layout.gpus[i].used);
    EXPECT_EQ(packed.gpus[i].used_ts_ms, 5000);
    EXPECT_EQ(packed.gpus[i].total, old_layout.gpus[i].total);
    EXPECT_EQ(packed.gpus[i].outside_pods, old_layout.gpus[i].outside_pods);
    EXPECT_EQ(packed.gpus[i].uuid, old_layout.gpus[i].uuid);
    EXPECT_EQ(packed.gpus[i].pods, old_layout.gpus[i].pods);  // sorted by UID either way
    EXPECT_EQ(packed.gpus[i].untracked, old_layout.gpus[i].untracked);
  }
  EXPECT_EQ(packed.gpus[1].total, 100);
  EXPECT_EQ(packed.gpus[0].outside_pods, 3);
  EXPECT_EQ(packed.gpus[1].uuid, kUuid);
  EXPECT_EQ(packed.gpus[1].untracked, 5);  // kUid2 has no entry here
  ASSERT_EQ(packed.entries.size(), 1u);
  EXPECT_EQ(packed.entries[0].used, 35);
  EXPECT_EQ(packed.entries[0].used_ts_ms, 5000);
  EXPECT_EQ(old_layout.entries[0].used, 35);
}

// A malformed packed field loses its GPU's per-pod figures, so the report's
// are not complete: the entries' usage stays unknown (not 0 as of the
// report), while the rest of the report still counts.
TEST(PackedGpuUsage, AMalformedPackedFieldIsSkippedAndCountedTheRestLoads) {
  Problems problems;
  const ledger::Node node = Build({{"ts", "5000"},
                                   {"v", "3"},
                                   {"0", "10"},
                                   {"g:0", "100,3"},
                                   {"1", "40"},
                                   {"g:1", std::string("100,0,,") + kUid1 + "=35"}},
                                  &problems);
  EXPECT_EQ(problems.count, 1u);
  ASSERT_EQ(problems.samples.size(), 1u);
  EXPECT_NE(problems.samples[0].find("'g:0' is malformed"), std::string::npos) << problems.samples[0];
  ASSERT_EQ(node.gpus.size(), 2u);
  EXPECT_EQ(node.gpus[0].used, 10);
  EXPECT_EQ(node.gpus[0].used_ts_ms, 5000);
  EXPECT_EQ(node.gpus[0].total, 0);  // its packed field was skipped
  EXPECT_EQ(node.gpus[1].total, 100);
  ASSERT_EQ(node.gpus[1].pods.size(), 1u);
  ASSERT_EQ(node.entries.size(), 1u);
  EXPECT_EQ(node.entries[0].used, 0);
  EXPECT_EQ(node.entries[0].used_ts_ms, 0) << "unknown, not reported as 0";
}

// Issue 31: on a GPU the agent has no per-process figures for, the pods'
// usage is unknown, not 0 (idle eviction and the watchdog must not read 0).
TEST(PackedGpuUsage, NoPerProcessFiguresLeaveThePodsUsageUnknown) {
  Problems problems;
  const ledger::Node node = Build({{"ts", "5000"},
                                   {"v", "3"},
                                   {"1", "40"},
                                   {"g:1", "100,0,,!n=1,!u=list refused"}},
                                  &problems);
  EXPECT_EQ(problems.count, 0u);
  ASSERT_EQ(node.gpus.size(), 2u);
  EXPECT_EQ(node.gpus[1].processes_unavailable, "list refused");
  EXPECT_EQ(node.gpus[1].invalid_process_lists, 1);
  EXPECT_EQ(node.gpus[1].used, 40);
  ASSERT_EQ(node.entries.size(), 1u);
  EXPECT_EQ(node.entries[0].used_ts_ms, 0) << "unknown, not reported as 0";
}

// A vramd that knows only version 2 ("v" -> "2", per-field) reads a packed
// report as one without per-pod figures; this version reads both.
TEST(PackedGpuUsage, OnlyVersionsTwoAndThreeCarryPerPodFigures) {
  for (const char* v : {"2", "3", "4", ""}) {
    SCOPED_TRACE(v);
    Problems problems;
    const ledger::Node node =
        Build({{"ts", "5000"}, {"v", v}, {"1", "40"}, {"g:1", std::string("100,0,,") + kUid1 + "=35"}}, &problems);
    ASSERT_EQ(node.entries.size(), 1u);
    const bool per_pod = std::string(v) == "2" || std::string(v) == "3";
    EXPECT_EQ(node.entries[0].used, per_pod ? 35 : 0);
    EXPECT_EQ(node.entries[0].used_ts_ms, per_pod ? 5000 : 0);
  }
}

// RebuildUsage (a refresh after a usage report alone) makes the node
// BuildNode makes of the same hashes, whatever the node's previous usage.
TEST(PackedGpuUsage, RebuildUsageEqualsBuildNode) {
  const std::vector<std::pair<std::string, std::string>> reports[] = {
      {},
      {{"ts", "100"}, {"v", "3"}, {"0", "5"}, {"g:0", "100,5,"}},
      {{"ts", "200"},
       {"v", "3"},
       {"0", "10"},
       {"g:0", "100,3,"},
       {"1", "40"},
       {"g:1", std::string("100,0,") + kUuid + "," + kUid1 + "=35," + kUid2 + "=5"}},
      {{"ts", "300"}, {"v", "2"}, {"1", "7"}, {std::string("pod:1:") + kUid1, "7"}},
  };
  for (size_t from = 0; from < std::size(reports); ++from) {
    for (size_t to = 0; to < std::size(reports); ++to) {
      SCOPED_TRACE("from " + std::to_string(from) + " to " + std::to_string(to));
      Problems p;
      const ledger::Node base = Build(reports[from], &p);
      const ledger::Node whole = Build(reports[to], &p);
      ASSERT_EQ(p.count, 0u);
      ledger::Node rebuilt;
      rebuilt.name = "n1";
      Reply cap = Hash({{"0", "100"}, {"1", "100"}});
      const bool per_pod = to >= 1;
      ASSERT_EQ(RebuildUsage(&rebuilt, base, cap, Hash(reports[to]), &p), per_pod);
      if (!per_pod) continue;  // the caller reads the whole node then
      EXPECT_EQ(p.count, 0u);
      ASSERT_EQ(rebuilt.gpus.size(), whole.gpus.size());
      for (size_t g = 0; g < whole.gpus.size(); ++g) {
        EXPECT_EQ(rebuilt.gpus[g].used, whole.gpus[g].used);
        EXPECT_EQ(rebuilt.gpus[g].used_ts_ms, whole.gpus[g].used_ts_ms);
        EXPECT_EQ(rebuilt.gpus[g].total, whole.gpus[g].total);
        EXPECT_EQ(rebuilt.gpus[g].outside_pods, whole.gpus[g].outside_pods);
        EXPECT_EQ(rebuilt.gpus[g].uuid, whole.gpus[g].uuid);
        EXPECT_EQ(rebuilt.gpus[g].pods, whole.gpus[g].pods);
        EXPECT_EQ(rebuilt.gpus[g].untracked, whole.gpus[g].untracked);
      }
      ASSERT_EQ(rebuilt.entries.size(), whole.entries.size());
      EXPECT_EQ(rebuilt.entries[0].used, whole.entries[0].used);
      EXPECT_EQ(rebuilt.entries[0].used_ts_ms, whole.entries[0].used_ts_ms);
      EXPECT_EQ(rebuilt.models, whole.models);
    }
  }
}

}  // namespace
}  // namespace vramd::store
