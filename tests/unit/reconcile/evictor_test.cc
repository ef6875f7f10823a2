// The eviction path (issue 15, contract C3): each mode × outcome on the fake
// kube client — what is called, the Events and their texts, the counters.
#include "vramd/reconcile/evictor.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fakes/fake_kube_client.h"

namespace vramd::reconcile {
namespace {

using Event = testing::FakeKubeClient::PodEvent;
using Series = std::map<std::string, double>;  // "a,b" label values -> value

constexpr const char* kPressureDetail = "uses 10.7Gi, declared 3Gi; GPU 0 of node-1 has 0.8Gi free, floor 1.5Gi";
constexpr const char* kIdleDetail = "idle for 12m (TTL 10m); ml/pending needs 8Gi on node-1";

EvictionAction Pressure() {
  EvictionAction a;
  a.ns = "ml";
  a.name = "immich-ml";
  a.uid = "uid-immich";
  a.node = "node-1";
  a.gpu = 0;
  a.reason = "pressure";
  a.detail = kPressureDetail;
  return a;
}

EvictionAction Idle(bool with_for) {
  EvictionAction a;
  a.ns = "ml";
  a.name = "old-model";
  a.uid = "uid-old";
  a.node = "node-1";
  a.reason = "idle";
  a.detail = kIdleDetail;
  if (with_for) {
    a.for_ns = "ml";
    a.for_name = "pending";
    a.for_uid = "uid-pending";
  }
  return a;
}

Series Read(metrics::Registry& r, const char* name, std::vector<std::string> labels) {
  Series out;
  r.AddCounter(name, "", std::move(labels)).ForEach([&](const metrics::Labels& l, const metrics::Counter& c) {
    std::string key;
    for (const std::string& v : l) key += (key.empty() ? "" : ",") + v;
    out[key] = c.Value();
  });
  return out;
}

// Every series starts at 0; `changed` lists the ones a case moves.
Series Expect(Series changed, bool actions) {
  Series s;
  for (const char* reason : {"pressure", "idle"}) {
    if (actions) {
      s[std::string("dry-run,") + reason] = 0;
      s[std::string("enforce,") + reason] = 0;
    } else {
      s[std::string(reason) + ",blocked"] = 0;
      s[std::string(reason) + ",error"] = 0;
      s[std::string(reason) + ",not_leader"] = 0;
    }
  }
  for (const auto& [k, v] : changed) s[k] = v;
  return s;
}

struct Case {
  std::string name;
  EvictionAction action;
  ActionMode mode;
  std::function<void(testing::FakeKubeClient&)> setup;  // the pods are there unless it removes them
  ActionResult result;
  std::vector<std::string> calls;
  std::vector<Event> events;
  Series actions;   // vramd_watchdog_actions_total{mode,reason} that are not 0
  Series failures;  // vramd_watchdog_eviction_failures_total{reason,why} that are not 0
  bool evicted = false;  // the fake marked the pod deleting
};

std::vector<Case> Cases() {
  const Event would_recycle{"ml", "immich-ml", "uid-immich", "Warning", "VramdWouldEvict",
                            std::string("would recycle: ") + kPressureDetail};
  const Event recycled{"ml", "immich-ml", "uid-immich", "Warning", "VramdEvicted",
                       std::string("recycled: ") + kPressureDetail};
  const Event would_idle{"ml", "old-model", "uid-old", "Warning", "VramdWouldEvict",
                         std::string("would evict idle pod: ") + kIdleDetail};
  const Event evicted_idle{"ml", "old-model", "uid-old", "Warning", "VramdEvicted",
                           std::string("evicted idle pod: ") + kIdleDetail};
  EvictionAction reclaim = Pressure();
  reclaim.reason = "reclaim";
  reclaim.detail = "queue research is over its share";
  EvictionAction replaced = Pressure();
  replaced.uid = "uid-of-an-older-pod";

  return {
      {"DryRunPressurePostsWouldRecycleAndCounts", Pressure(), ActionMode::kDryRun, nullptr, ActionResult::kRecorded,
       {"event ml/immich-ml VramdWouldEvict"}, {would_recycle}, {{"dry-run,pressure", 1}}, {}},
      {"DryRunIdlePostsWouldEvictIdlePod", Idle(false), ActionMode::kDryRun, nullptr, ActionResult::kRecorded,
       {"event ml/old-model VramdWouldEvict"}, {would_idle}, {{"dry-run,idle", 1}}, {}},
      {"DryRunTellsThePendingPodToo", Idle(true), ActionMode::kDryRun, nullptr, ActionResult::kRecorded,
       {"event ml/old-model VramdWouldEvict", "event ml/pending VramdMadeRoom"},
       {would_idle,
        {"ml", "pending", "uid-pending", "Normal", "VramdMadeRoom",
         std::string("vramd would evict ml/old-model to make room: ") + kIdleDetail}},
       {{"dry-run,idle", 1}}, {}},
      {"DryRunCountsEvenWhenTheEventCannotBePosted", Pressure(), ActionMode::kDryRun,
       [](testing::FakeKubeClient& k) { k.fail_event = Unavailable("API down"); }, ActionResult::kRecorded,
       {"event ml/immich-ml VramdWouldEvict"}, {would_recycle}, {{"dry-run,pressure", 1}}, {}},
      {"DryRunOfAnotherReasonNamesIt", reclaim, ActionMode::kDryRun, nullptr, ActionResult::kRecorded,
       {"event ml/immich-ml VramdWouldEvict"},
       {{"ml", "immich-ml", "uid-immich", "Warning", "VramdWouldEvict",
         "would evict (reclaim): queue research is over its share"}},
       {{"dry-run,reclaim", 1}}, {}},
      {"EnforcePressureEvictsThenPostsRecycled", Pressure(), ActionMode::kEnforce, nullptr, ActionResult::kEvicted,
       {"evict ml/immich-ml", "event ml/immich-ml VramdEvicted"}, {recycled}, {{"enforce,pressure", 1}}, {},
       /*evicted=*/true},
      {"EnforceIdleEvictsAndTellsThePendingPod", Idle(true), ActionMode::kEnforce, nullptr, ActionResult::kEvicted,
       {"evict ml/old-model", "event ml/old-model VramdEvicted", "event ml/pending VramdMadeRoom"},
       {evicted_idle,
        {"ml", "pending", "uid-pending", "Normal", "VramdMadeRoom",
         std::string("vramd evicted ml/old-model to make room: ") + kIdleDetail}},
       {{"enforce,idle", 1}}, {}, /*evicted=*/true},
      {"EnforceBlockedByABudgetIsCountedWithoutEvents", Idle(true), ActionMode::kEnforce,
       [](testing::FakeKubeClient& k) { k.evict_blocked = true; }, ActionResult::kBlocked, {"evict ml/old-model"},
       {}, {}, {{"idle,blocked", 1}}},
      {"EnforceOfAGonePodDoesNothingElse", Pressure(), ActionMode::kEnforce,
       [](testing::FakeKubeClient& k) { k.DeletePod("ml", "immich-ml"); }, ActionResult::kGone,
       {"evict ml/immich-ml"}, {}, {}, {}},
      {"EnforceOfAReplacedPodIsGone", replaced, ActionMode::kEnforce, nullptr, ActionResult::kGone,
       {"evict ml/immich-ml"}, {}, {}, {}},
      {"EnforceApiErrorIsCountedAsAnError", Pressure(), ActionMode::kEnforce,
       [](testing::FakeKubeClient& k) { k.fail_evict = Internal("HTTP 403 (forbidden: check vramd's RBAC role)"); },
       ActionResult::kFailed, {"evict ml/immich-ml"}, {}, {}, {{"pressure,error", 1}}},
      {"EnforceStillCountsWhenTheEventCannotBePosted", Pressure(), ActionMode::kEnforce,
       [](testing::FakeKubeClient& k) { k.fail_event = Unavailable("API down"); }, ActionResult::kEvicted,
       {"evict ml/immich-ml", "event ml/immich-ml VramdEvicted"}, {recycled}, {{"enforce,pressure", 1}}, {},
       /*evicted=*/true},
  };
}

class EvictorTable : public ::testing::TestWithParam<Case> {};

TEST_P(EvictorTable, Acts) {
  const Case& c = GetParam();
  testing::FakeKubeClient kube;
  kube.AddPod("ml", "immich-ml", "uid-immich", "3Gi");
  kube.AddPod("ml", "old-model", "uid-old", "8Gi");
  kube.AddPod("ml", "pending", "uid-pending", "8Gi");
  if (c.setup) c.setup(kube);
  metrics::Registry registry;
  Evictor evictor(&kube, &registry);

  EXPECT_EQ(evictor.Act(c.action, c.mode), c.result);

  EXPECT_EQ(kube.calls, c.calls);
  ASSERT_EQ(kube.events.size(), c.events.size());
  for (size_t i = 0; i < c.events.size(); ++i) {
    const Event& got = kube.events[i];
    const Event& want = c.events[i];
    EXPECT_EQ(got.ns, want.ns) << i;
    EXPECT_EQ(got.name, want.name) << i;
    EXPECT_EQ(got.uid, want.uid) << i;
    EXPECT_EQ(got.type, want.type) << i;
    EXPECT_EQ(got.reason, want.reason) << i;
    EXPECT_EQ(got.message, want.message) << i;
  }
  EXPECT_EQ(Read(registry, "vramd_watchdog_actions_total", {"mode", "reason"}), Expect(c.actions, true));
  EXPECT_EQ(Read(registry, "vramd_watchdog_eviction_failures_total", {"reason", "why"}), Expect(c.failures, false));
  auto pod = kube.pods.find(c.action.ns + "/" + c.action.name);
  EXPECT_EQ(pod != kube.pods.end() && pod->second.deleting, c.evicted);
}

INSTANTIATE_TEST_SUITE_P(Evictor, EvictorTable, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(Evictor, SeriesOfBothReasonsAreExportedBeforeAnyAction) {
  testing::FakeKubeClient kube;
  metrics::Registry registry;
  Evictor evictor(&kube, &registry);
  const std::string text = registry.Render();
  for (const char* line : {
           "vramd_watchdog_actions_total{mode=\"dry-run\",reason=\"pressure\"} 0",
           "vramd_watchdog_actions_total{mode=\"enforce\",reason=\"idle\"} 0",
           "vramd_watchdog_eviction_failures_total{reason=\"pressure\",why=\"blocked\"} 0",
           "vramd_watchdog_eviction_failures_total{reason=\"idle\",why=\"error\"} 0",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

TEST(Evictor, RepeatedActionsAccumulateAndTwoEvictorsShareTheCounters) {
  testing::FakeKubeClient kube;
  kube.AddPod("ml", "immich-ml", "uid-immich", "3Gi");
  metrics::Registry registry;
  Evictor watchdog(&kube, &registry);
  Evictor idle(&kube, &registry);
  EXPECT_EQ(watchdog.Act(Pressure(), ActionMode::kDryRun), ActionResult::kRecorded);
  EXPECT_EQ(idle.Act(Pressure(), ActionMode::kDryRun), ActionResult::kRecorded);
  kube.evict_blocked = true;
  EXPECT_EQ(watchdog.Act(Pressure(), ActionMode::kEnforce), ActionResult::kBlocked);
  EXPECT_EQ(watchdog.Act(Pressure(), ActionMode::kEnforce), ActionResult::kBlocked);
  kube.evict_blocked = false;
  EXPECT_EQ(watchdog.Act(Pressure(), ActionMode::kEnforce), ActionResult::kEvicted);
  EXPECT_EQ(Read(registry, "vramd_watchdog_actions_total", {"mode", "reason"}),
            Expect({{"dry-run,pressure", 2}, {"enforce,pressure", 1}}, true));
  EXPECT_EQ(Read(registry, "vramd_watchdog_eviction_failures_total", {"reason", "why"}),
            Expect({{"pressure,blocked", 2}}, false));
}

// Issue 32: the fence is asked before every action; a replica that lost the
// leadership mid-pass evicts nothing more, posts no Event and counts why.
TEST(Evictor, TheFenceIsAskedBeforeEveryAction) {
  testing::FakeKubeClient kube;
  kube.AddPod("ml", "immich-ml", "uid-immich", "3Gi");
  metrics::Registry registry;
  bool leader = true;
  int asked = 0;
  Evictor evictor(&kube, &registry, [&] {
    ++asked;
    return leader;
  });
  EXPECT_EQ(evictor.Act(Pressure(), ActionMode::kDryRun), ActionResult::kRecorded);
  leader = false;
  const size_t events = kube.events.size();
  EXPECT_EQ(evictor.Act(Pressure(), ActionMode::kEnforce), ActionResult::kFenced);
  EXPECT_EQ(evictor.Act(Pressure(), ActionMode::kDryRun), ActionResult::kFenced);
  EXPECT_EQ(asked, 3);
  EXPECT_FALSE(kube.pods["ml/immich-ml"].deleting);
  EXPECT_EQ(kube.events.size(), events);
  EXPECT_EQ(std::count(kube.calls.begin(), kube.calls.end(), "evict ml/immich-ml"), 0);
  EXPECT_EQ(Read(registry, "vramd_watchdog_eviction_failures_total", {"reason", "why"}),
            Expect({{"pressure,not_leader", 2}}, false));
  leader = true;
  EXPECT_EQ(evictor.Act(Pressure(), ActionMode::kEnforce), ActionResult::kEvicted);
  EXPECT_TRUE(kube.pods["ml/immich-ml"].deleting);
}

TEST(Evictor, EventMessagesPerReasonAndMode) {
  EvictionAction a;
  a.detail = "d";
  struct Row {
    const char* reason;
    ActionMode mode;
    const char* want;
  };
  for (const Row& r : {Row{"pressure", ActionMode::kDryRun, "would recycle: d"},
                       Row{"pressure", ActionMode::kEnforce, "recycled: d"},
                       Row{"idle", ActionMode::kDryRun, "would evict idle pod: d"},
                       Row{"idle", ActionMode::kEnforce, "evicted idle pod: d"},
                       Row{"preempt", ActionMode::kDryRun, "would evict (preempt): d"},
                       Row{"preempt", ActionMode::kEnforce, "evicted (preempt): d"}}) {
    a.reason = r.reason;
    EXPECT_EQ(EvictionEventMessage(a, r.mode), r.want) << r.reason << " " << ActionModeName(r.mode);
  }
  EXPECT_STREQ(ActionModeName(ActionMode::kDryRun), "dry-run");
  EXPECT_STREQ(ActionModeName(ActionMode::kEnforce), "enforce");
}

}  // namespace
}  // namespace vramd::reconcile
