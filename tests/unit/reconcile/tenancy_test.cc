// The leader's queue pass (reconcile::Tenancy) on the fakes: the queue set
// from the watch's specs, status patches only when a figure changes, the
// per-queue gauges, and reclaim through the Evictor (dry-run here: Events,
// nothing evicted) within the per-pod cooldown.
#include "vramd/reconcile/tenancy.h"

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "fakes/fake_kube_client.h"
#include "fakes/fake_ledger_store.h"

namespace vramd::reconcile {
namespace {

using vramd::testing::FakeClock;
using vramd::testing::FakeKubeClient;
using vramd::testing::FakeLedgerStore;

constexpr int64_t kGi = int64_t{1} << 30;

ledger::QueueSpec Spec(const std::string& name, const std::string& ns, int64_t deserved) {
  ledger::QueueSpec s;
  s.name = name;
  s.uid = "uid-" + name;
  s.namespaces = {ns};
  s.deserved = deserved;
  return s;
}

ledger::Entry Bound(const std::string& uid, const std::string& ns, int64_t bytes, int64_t created_ms) {
  ledger::Entry e;
  e.pod_uid = uid;
  e.ns = ns;
  e.name = uid;
  e.gpus = {0};
  e.per_gpu = bytes;
  e.state = ledger::EntryState::kBound;
  e.created_ms = created_ms;
  e.owner_kind = "ReplicaSet";  // a controller recreates it: reclaim may take it
  e.owner_uid = "rs-" + uid;
  return e;
}

class TenancyPass : public ::testing::Test {
 protected:
  void SetUp() override {
    store.now_ms = clock.NowMs();
    store.AddNode("n1", {16 * kGi});
    store.AddNode("n2", {16 * kGi});
    // Team B borrowed all 32Gi while team A was quiet.
    ASSERT_TRUE(store.PutEntry("n1", Bound("b1", "team-b", 16 * kGi, clock.NowMs() - 60'000)).ok());
    ASSERT_TRUE(store.PutEntry("n2", Bound("b2", "team-b", 16 * kGi, clock.NowMs() - 30'000)).ok());
    specs = {Spec("team-a", "team-a", 16 * kGi), Spec("team-b", "team-b", 8 * kGi)};
    TenancySettings s;
    s.reclaim = ActionMode::kDryRun;
    s.cooldown_ms = 30'000;
    tenancy = std::make_unique<Tenancy>(s, [this] { return specs; }, &store, &kube, nullptr, &evictor, &clock,
                                        &registry);
    tenancy->Refresh();
  }

  // Team A's pod of 16Gi, refused by filter for room.
  void TeamAWaits() {
    store::Refusal r;
    r.uid = "a1";
    r.ns = "team-a";
    r.name = "a1";
    r.per_gpu = 16 * kGi;
    r.nodes = {"n1", "n2"};
    ASSERT_TRUE(store.RecordRefusals({r}).ok());
  }

  FakeClock clock;
  FakeLedgerStore store;
  FakeKubeClient kube;
  metrics::Registry registry;
  Evictor evictor{&kube, &registry};
  std::vector<ledger::QueueSpec> specs;
  std::unique_ptr<Tenancy> tenancy;
};

TEST_F(TenancyPass, WritesEachQueuesStatusOnceUntilAFigureChanges) {
  Result<TenancyStats> r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->queues, 2);
  EXPECT_EQ(r->status_patches, 2);
  ASSERT_EQ(kube.queue_status_patches.size(), 2u);
  const auto& [name, body] = kube.queue_status_patches[1];
  EXPECT_EQ(name, "team-b");
  EXPECT_NE(body.find("\"allocated\":\"32Gi\""), std::string::npos) << body;
  EXPECT_NE(body.find("\"fairShare\":\"32Gi\""), std::string::npos) << body;  // team A wants nothing
  // Nothing changed: nothing written.
  r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status_patches, 0);
  // Team A waits: both queues' figures change.
  TeamAWaits();
  r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status_patches, 2);
  EXPECT_NE(kube.queue_status_patches.back().second.find("\"fairShare\":\"16Gi\""), std::string::npos)
      << kube.queue_status_patches.back().second;
}

TEST_F(TenancyPass, AStatusWriteThatFailsIsCountedAndTriedAgainNextPass) {
  kube.fail_patch_queue_status = Internal("403 forbidden: vramqueues/status");
  Result<TenancyStats> r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status_errors, 2);
  EXPECT_EQ(r->status_patches, 0);
  r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status_errors, 2);  // nothing was written: both are tried again
  kube.fail_patch_queue_status = Status::Ok();
  r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status_patches, 2);
}

TEST_F(TenancyPass, ExportsPerQueueGaugesAndDropsThoseOfDeletedQueues) {
  ASSERT_TRUE(tenancy->RunOnce().ok());
  std::string text = registry.Render();
  EXPECT_NE(text.find("vramd_queue_allocated_bytes{queue=\"team-b\"} 34359738368"), std::string::npos) << text;
  EXPECT_NE(text.find("vramd_queue_deserved_bytes{queue=\"team-a\"} 17179869184"), std::string::npos) << text;
  EXPECT_NE(text.find("vramd_queue_valid{queue=\"team-a\"} 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("vramd_queue_limit_bytes{queue="), std::string::npos) << text;  // no limits
  specs.pop_back();
  tenancy->Refresh();
  ASSERT_TRUE(tenancy->RunOnce().ok());
  text = registry.Render();
  EXPECT_EQ(text.find("queue=\"team-b\""), std::string::npos) << text;
  EXPECT_NE(text.find("vramd_queue_valid{queue=\"team-a\"} 1"), std::string::npos) << text;
}

TEST_F(TenancyPass, ReclaimsForAnEntitledPendingPodOncePerCooldown) {
  TeamAWaits();
  Result<TenancyStats> r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->pending_pods, 1);
  EXPECT_EQ(r->plans, 1);
  EXPECT_EQ(r->evictions, 1);
  // Dry-run: the youngest team-b pod gets the Event; nothing is evicted.
  ASSERT_FALSE(kube.events.empty());
  EXPECT_EQ(kube.events[0].name, "b2");
  EXPECT_EQ(kube.events[0].reason, kWouldEvictEventReason);
  EXPECT_NE(kube.events[0].message.find("would evict (reclaim): reclaim for team-a/a1 of queue team-a"),
            std::string::npos)
      << kube.events[0].message;
  EXPECT_EQ(kube.CallCount("evict "), 0u);
  // Within the cooldown the same pod's plan is held back.
  clock.Advance(1'000);
  r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->plans, 1);
  EXPECT_EQ(r->gated, 1);
  EXPECT_EQ(r->evictions, 0);
  const std::string text = registry.Render();
  EXPECT_NE(text.find("vramd_queue_reclaims_total{kind=\"reclaim\",mode=\"dry-run\"} 1"), std::string::npos)
      << text;
}

TEST_F(TenancyPass, ABrokenQueueGetsItsConditionAndTheOthersKeepWorking) {
  ledger::QueueSpec bad = Spec("team-c", "team-a", 1 * kGi);  // team-a's namespace, and younger
  bad.created_ms = 1;
  specs[0].created_ms = 0;
  specs.push_back(bad);
  tenancy->Refresh();
  Result<TenancyStats> r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->queues, 3);
  EXPECT_EQ(r->invalid, 1);
  bool seen = false;
  for (const auto& [name, body] : kube.queue_status_patches) {
    if (name != "team-c") continue;
    seen = true;
    EXPECT_NE(body.find("\"status\":\"False\""), std::string::npos) << body;
    EXPECT_NE(body.find("NamespaceConflict"), std::string::npos) << body;
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(tenancy->Queues()->QueueOf("team-a"), tenancy->Queues()->Find("team-a"));
}

TEST_F(TenancyPass, APendingPodThatFitsNowMakesKubeSchedulerRetryOnce) {
  // b2 is gone: 16Gi free on n2. Team A's pod was refused before that and
  // kube-scheduler parked it.
  ASSERT_TRUE(store.Release("n2", "b2").ok());
  TeamAWaits();
  clock.Advance(1'000);
  Result<TenancyStats> r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->nudges, 0);  // refused a moment ago: kube-scheduler may be on it
  clock.Advance(2'000);
  r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->plans, 0);  // nothing to evict for it
  EXPECT_EQ(r->nudges, 1);
  EXPECT_EQ(kube.CallCount("label-node n2"), 1u);
  clock.Advance(1'000);
  r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->nudges, 0);  // not again so soon
  EXPECT_EQ(kube.CallCount("label-node "), 1u);
}

TEST_F(TenancyPass, RoomStillHeldByATerminatingPodIsNeitherReclaimedAgainNorNudgedFor) {
  // b2 was evicted for team A's pod and is terminating: its room is on its way.
  ledger::Entry leaving = Bound("b2", "team-b", 16 * kGi, clock.NowMs() - 30'000);
  leaving.state = ledger::EntryState::kTerminating;
  ASSERT_TRUE(store.PutEntry("n2", leaving).ok());
  TeamAWaits();
  clock.Advance(5'000);
  Result<TenancyStats> r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->plans, 0);   // no second victim for the same pod
  EXPECT_EQ(r->nudges, 0);  // kube-scheduler still sees n2 full
  EXPECT_EQ(kube.CallCount("label-node "), 0u);
  // Gone: now the room is there, and the parked pod is retried.
  ASSERT_TRUE(store.Release("n2", "b2").ok());
  r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->nudges, 1);
  EXPECT_EQ(kube.CallCount("label-node n2"), 1u);
}

// Issue 32: an enforced reclaim holds the room it makes for its pod. It
// becomes the pod's hold when the victim's entry goes (the phantom rule kept
// it until then), a replacement of the victim finds it spent, the pod gets no
// second victim and is nudged to its room.
TEST_F(TenancyPass, AnEnforcedReclaimHoldsTheRoomForItsPodAndNudgesItThere) {
  TenancySettings s;
  s.reclaim = ActionMode::kEnforce;
  s.cooldown_ms = 1'000;
  s.hold_ms = 60'000;
  tenancy = std::make_unique<Tenancy>(s, [this] { return specs; }, &store, &kube, nullptr, &evictor, &clock,
                                      &registry);
  tenancy->Refresh();
  kube.AddPod("team-b", "b2", "b2", "16Gi");
  TeamAWaits();
  Result<TenancyStats> r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->evictions, 1);
  EXPECT_TRUE(kube.pods["team-b/b2"].deleting);
  EXPECT_EQ(r->holds, 1);
  // b2 terminates, then is gone: the room is a1's from that moment.
  ASSERT_TRUE(store.SetEntryState("n2", "b2", ledger::EntryState::kTerminating).ok());
  ASSERT_TRUE(*store.Release("n2", "b2"));
  ledger::SnapshotPtr snap = *store.Snapshot();
  std::string_view on;
  const ledger::Entry* hold = ledger::FindHold(*snap, "a1", &on);
  ASSERT_NE(hold, nullptr);
  EXPECT_EQ(on, "n2");
  EXPECT_EQ(hold->per_gpu, 16 * kGi);
  ledger::VramRequest replacement;
  replacement.total = replacement.per_gpu = replacement.peak_per_gpu = 16 * kGi;
  replacement.uid = "b2-replacement";
  EXPECT_TRUE(ledger::Filter(*snap, {"n2"}, replacement, ledger::Policy{}, clock.NowMs()).fits.empty());
  // No second victim for a1 (after the cooldown too); a1 is nudged to n2.
  clock.Advance(5'000);
  r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->plans, 0);
  EXPECT_EQ(r->evictions, 0);
  EXPECT_EQ(r->nudges, 1);
  EXPECT_EQ(kube.CallCount("label-node n2"), 1u);
  EXPECT_EQ(kube.CallCount("evict "), 1u);
}

// Issue 32: a reclaim plan of several victims goes whole: one a
// PodDisruptionBudget would keep is found by the dry-run pre-check before
// any goes, and none goes.
TEST_F(TenancyPass, APlanOfSeveralVictimsIsPrecheckedAndGoesWholeOrNotAtAll) {
  TenancySettings s;
  s.reclaim = ActionMode::kEnforce;
  tenancy = std::make_unique<Tenancy>(s, [this] { return specs; }, &store, &kube, nullptr, &evictor, &clock,
                                      &registry);
  tenancy->Refresh();
  // Team B's 16Gi on n1 as two 8Gi pods; team A's pod needs all of n1 (or n2).
  ASSERT_TRUE(store.Release("n1", "b1").ok());
  ASSERT_TRUE(store.PutEntry("n1", Bound("b1a", "team-b", 8 * kGi, clock.NowMs() - 60'000)).ok());
  ASSERT_TRUE(store.PutEntry("n1", Bound("b1b", "team-b", 8 * kGi, clock.NowMs() - 50'000)).ok());
  ASSERT_TRUE(store.Release("n2", "b2").ok());
  ASSERT_TRUE(store.PutEntry("n2", Bound("b2a", "team-b", 8 * kGi, clock.NowMs() - 40'000)).ok());
  ASSERT_TRUE(store.PutEntry("n2", Bound("b2b", "team-b", 8 * kGi, clock.NowMs() - 30'000)).ok());
  for (const char* name : {"b1a", "b1b", "b2a", "b2b"}) kube.AddPod("team-b", name, name, "8Gi");
  kube.evict_blocked_pods = {"team-b/b2a"};  // the plan's second victim: a budget keeps it
  TeamAWaits();
  Result<TenancyStats> r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->plans, 1);
  EXPECT_EQ(r->blocked, 1);
  EXPECT_EQ(r->evictions, 0);
  EXPECT_EQ(kube.CallCount("dry-run-evict team-b/b2b"), 1u);
  EXPECT_EQ(kube.CallCount("dry-run-evict team-b/b2a"), 1u);
  EXPECT_EQ(kube.CallCount("evict "), 0u);
  EXPECT_FALSE(kube.pods["team-b/b2b"].deleting) << "b2b went without b2a: half a plan";
}

TEST_F(TenancyPass, NoQueueObjectsChangeNothing) {
  specs.clear();
  tenancy->Refresh();
  TeamAWaits();
  Result<TenancyStats> r = tenancy->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->queues, 0);
  EXPECT_EQ(r->plans, 0);
  EXPECT_TRUE(kube.queue_status_patches.empty());
  EXPECT_TRUE(kube.events.empty());
}

}  // namespace
}  // namespace vramd::reconcile
