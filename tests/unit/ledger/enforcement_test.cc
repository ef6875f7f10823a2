// The enforcement contract's pure rules (issue 34 part B), as tables.
#include "vramd/ledger/enforcement.h"

#include <gtest/gtest.h>

namespace vramd::ledger {
namespace {

constexpr int64_t GiB = int64_t{1} << 30;
constexpr char kA[] = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab";
constexpr char kB[] = "11111111-2222-3333-4444-555555555555";

Entry E(std::string uid, std::vector<int> gpus, int64_t per_gpu, int64_t peak, EntryState state = EntryState::kBound) {
  Entry e;
  e.pod_uid = std::move(uid);
  e.ns = "team";
  e.name = "p";
  e.gpus = std::move(gpus);
  e.per_gpu = per_gpu;
  e.peak_per_gpu = peak;
  e.state = state;
  return e;
}

TEST(DesiredLimits, SoftIsTheRequestHardThePeakOrTheRequest) {
  Node n;
  n.name = "gpu-1";
  n.entries = {E(kB, {1}, 4 * GiB, 0),                           // request only: hard = soft
               E(kA, {0, 1}, 8 * GiB, 12 * GiB),                  // a peak on two GPUs
               E("22222222-2222-3333-4444-555555555555", {0}, 2 * GiB, 0, EntryState::kHold),  // room, not a pod
               E("33333333-2222-3333-4444-555555555555", {0}, 2 * GiB, 0, EntryState::kTerminating),
               E("44444444-2222-3333-4444-555555555555", {}, 0, 0)};  // nothing granted
  std::vector<PodLimit> want = {
      {kA, 0, 8 * GiB, 12 * GiB},
      {kA, 1, 8 * GiB, 12 * GiB},
      {kB, 1, 4 * GiB, 4 * GiB},
      // A terminating pod keeps its limit until it is gone (the phantom rule keeps its VRAM too).
      {"33333333-2222-3333-4444-555555555555", 0, 2 * GiB, 2 * GiB},
  };
  EXPECT_EQ(DesiredLimits(n), want);
}

TEST(NodeModeRules, ParsedAndTheFirstMatchingLabelWins) {
  Result<NodeModeRules> r =
      ParseNodeModeRules("pool=inference:on, vramd.io/enforce=off:off,pool=training:dry-run");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  struct Case {
    std::map<std::string, std::string> labels;
    EnforceMode want;
  };
  const Case cases[] = {
      {{{"pool", "inference"}}, EnforceMode::kOn},
      {{{"pool", "training"}}, EnforceMode::kDryRun},
      {{{"pool", "inference"}, {"vramd.io/enforce", "off"}}, EnforceMode::kOn},  // the first rule
      {{{"vramd.io/enforce", "off"}}, EnforceMode::kOff},
      {{{"pool", "other"}}, EnforceMode::kDryRun},  // the fallback below
      {{}, EnforceMode::kDryRun},
  };
  for (const Case& c : cases) EXPECT_EQ(ModeForNode(c.labels, *r, EnforceMode::kDryRun), c.want);
  EXPECT_TRUE(ParseNodeModeRules("").ok());
  EXPECT_TRUE(ParseNodeModeRules("")->empty());
  for (const char* bad : {"pool=a", "pool:on", "=a:on", "pool=a:enforce", "pool=a/b:on", "po ol=a:on", "pool=a:on,,"}) {
    EXPECT_FALSE(ParseNodeModeRules(bad).ok()) << bad;
  }
}

TEST(CheckGpuEnforcement, Table) {
  struct Case {
    const char* name;
    GpuEnforcement e;
    const char* error;  // "" when accepted
  };
  const Case cases[] = {
      {"dmem, enforced", {"dmem", "", {{kA, EnforceState::kEnforced, ""}}}, ""},
      {"none with its reason", {"none", "no dmem controller", {{kA, EnforceState::kAccounted, "no dmem controller"}}}, ""},
      {"unknown backend", {"cuda", "", {}}, "backend"},
      {"none without a reason", {"none", "", {}}, "needs a reason"},
      {"failed without a reason", {"dmem", "", {{kA, EnforceState::kFailed, ""}}}, "without a reason"},
      {"a UID not canonical", {"dmem", "", {{"POD", EnforceState::kEnforced, ""}}}, "canonical"},
      {"a pod twice", {"dmem", "", {{kA, EnforceState::kEnforced, ""}, {kA, EnforceState::kEnforced, ""}}}, "twice"},
      {"not printable", {"nvml", "", {{kA, EnforceState::kFailed, "bad\nline"}}}, "printable"},
      {"too long", {"none", std::string(300, 'x'), {}}, "longer"},
  };
  for (const Case& c : cases) {
    Status s = CheckGpuEnforcement(0, c.e);
    if (*c.error == '\0') {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s.message();
    } else {
      ASSERT_FALSE(s.ok()) << c.name;
      EXPECT_NE(s.message().find(c.error), std::string::npos) << c.name << ": " << s.message();
    }
  }
}

TEST(PodEnforcementOn, TheWorstStateOverThePodsGpus) {
  Node n;
  Gpu g0, g1, g2;
  g0.index = 0;
  g1.index = 1;
  g2.index = 2;
  g0.enforcement = {"dmem", "", {{kA, EnforceState::kEnforced, ""}, {kB, EnforceState::kDryRun, "would"}}};
  g1.enforcement = {"none", "no dmem", {{kA, EnforceState::kAccounted, "no dmem"}}};
  g2.enforcement = {"dmem", "", {{kA, EnforceState::kFailed, "EACCES"}}};
  n.gpus = {g0, g1};
  ASSERT_TRUE(PodEnforcementOn(n, kA).has_value());
  EXPECT_EQ(PodEnforcementOn(n, kA)->state, EnforceState::kAccounted);
  EXPECT_EQ(DescribeEnforcement(*PodEnforcementOn(n, kA)), "accounted only: no dmem");
  n.gpus.push_back(g2);
  EXPECT_EQ(DescribeEnforcement(*PodEnforcementOn(n, kA)), "failed: EACCES");
  EXPECT_EQ(PodEnforcementOn(n, kB)->state, EnforceState::kDryRun);
  EXPECT_FALSE(PodEnforcementOn(n, "99999999-2222-3333-4444-555555555555").has_value());
}

}  // namespace
}  // namespace vramd::ledger
