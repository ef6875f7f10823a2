// The runtime protection's pass (issue 15) on the fakes: what reaches the
// Evictor (dry-run Events, enforce evictions), the cooldown and the rate
// limit, the pressure gauge, and idle eviction fed by filter's refusals, the
// pod watch and GPU-lock activity. The decisions themselves are table-tested
// in tests/unit/ledger/protection_test.cc.
#include "vramd/reconcile/protection.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "fakes/fake_clock.h"
#include "fakes/fake_ledger_store.h"
#include "fakes/reconcile_helpers.h"

namespace vramd::reconcile {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kMi = int64_t{1} << 20;

const char* const kImmich = "00000000-0000-4000-8000-000000000001";
const char* const kLlama = "00000000-0000-4000-8000-000000000002";
const char* const kOld = "00000000-0000-4000-8000-000000000003";
const char* const kNew = "00000000-0000-4000-8000-000000000004";

class ProtectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg.watchdog_mode = "dry-run";
    cfg.idle_mode = "dry-run";
    cfg.watchdog_interval_ms = 1000;
    store.now_ms = clock.NowMs();
    store.AddNode("t4", {16 * kGi});
    store.AddNode("idle", {16 * kGi});
  }
  void TearDown() override {
    if (watcher) watcher->Stop();
  }

  void Start() {
    evictor = std::make_unique<Evictor>(&kube, &reg);
    watcher = std::make_unique<PodWatcher>(&kube, nullptr, &reg);
    watcher->Start();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!watcher->Synced() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(watcher->Synced());
    prot = std::make_unique<Protection>(ProtectionSettingsFrom(cfg, ledger::Policy{}), &store, watcher.get(),
                                        evictor.get(), lock_activity, &clock, &reg);
  }

  void Bound(const std::string& node, const std::string& name, const std::string& uid, int64_t bytes,
             int64_t idle_ttl_ms = 0, bool owned = true) {
    ledger::Entry e;
    e.pod_uid = uid;
    e.ns = "default";
    e.name = name;
    e.gpus = {0};
    e.per_gpu = bytes;
    e.state = ledger::EntryState::kBound;
    e.idle_ttl_ms = idle_ttl_ms;
    if (owned) {  // a controller recreates it: idle eviction may take it
      e.owner_kind = "ReplicaSet";
      e.owner_uid = "rs-" + uid;
    }
    ASSERT_TRUE(store.PutEntry(node, e).ok());
    kube.AddPod("default", name, uid, "1Gi");
    kube.pods["default/" + name].node_name = node;
    kube.pods["default/" + name].phase = "Running";
  }

  // model-old (kOld, idle TTL 60 s) reported unchanged on "idle" now and
  // one TTL later, a pass after each: the idle actions of the second pass
  // (-1 when a pass failed).
  int IdleActionsAfterOneTtlOfFreshReports() {
    Report("idle", {{kOld, 10 * kGi}});
    if (!prot->RunOnce().ok()) return -1;
    clock.Advance(61'000);
    Report("idle", {{kOld, 10 * kGi}});
    Result<ProtectionStats> r = prot->RunOnce();
    return r.ok() ? r->idle_actions : -1;
  }

  void Report(const std::string& node, std::vector<ledger::PodUsage> pods) {
    ledger::UsageReport r;
    ledger::GpuUsage g;
    g.index = 0;
    g.total = 16 * kGi;
    for (const auto& p : pods) g.used += p.used;
    std::sort(pods.begin(), pods.end(), [](const auto& a, const auto& b) { return a.uid < b.uid; });
    g.pods = std::move(pods);
    r.gpus.push_back(g);
    store.now_ms = clock.NowMs();
    ASSERT_TRUE(store.PushReport(node, r, true).ok());
  }

  // immich-ml and llama-swap over their budgets on t4; one leader's pass
  // evicts immich-ml (with `dies`, the leader's store is gone the moment the
  // API accepted the eviction); then a new leader, with no memory of its
  // own, runs a pass one second later under the same pressure. Call once per
  // fresh store (each call starts from new entries and pods).
  Result<ProtectionStats> NewLeaderPassAfterAnEviction(bool dies) {
    cfg.watchdog_mode = "enforce";
    cfg.watchdog_pressure_reports = 1;
    Bound("t4", "immich-ml", kImmich, 3000 * kMi);
    Bound("t4", "llama-swap", kLlama, 5000 * kMi);
    Start();
    ReportBothOverBudget();
    if (dies) kube.on_evicted = [this] { store.unavailable = true; };
    (void)prot->RunOnce();
    kube.on_evicted = nullptr;
    store.unavailable = false;
    EXPECT_TRUE(kube.pods["default/immich-ml"].deleting);
    prot = std::make_unique<Protection>(ProtectionSettingsFrom(cfg, ledger::Policy{}), &store, watcher.get(),
                                        evictor.get(), lock_activity, &clock, &reg);
    clock.Advance(1000);
    ReportBothOverBudget();
    (void)store.SetEntryState("t4", kImmich, ledger::EntryState::kTerminating);
    return prot->RunOnce();
  }
  void ExpectNoSecondEviction(const Result<ProtectionStats>& r) {
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->gpus_under_pressure, 1);
    EXPECT_EQ(r->gated, 1);
    EXPECT_EQ(r->watchdog_actions, 0);
    EXPECT_FALSE(kube.pods["default/llama-swap"].deleting);
  }

  // immich-ml (3000Mi) uses 8Gi, llama-swap (5000Mi) 7.5Gi on t4's 16Gi: both
  // over their budgets, 0.5Gi free, 1Gi short of the 1.5Gi floor.
  void ReportBothOverBudget() { Report("t4", {{kImmich, 8 * kGi}, {kLlama, 7680 * kMi}}); }

  std::vector<testing::FakeKubeClient::PodEvent> EventsOf(const std::string& name, const std::string& reason) {
    std::vector<testing::FakeKubeClient::PodEvent> out;
    for (const auto& e : kube.events) {
      if (e.name == name && e.reason == reason) out.push_back(e);
    }
    return out;
  }

  config::Config cfg;
  testing::FakeLedgerStore store;
  testing::QuietWatchKube kube;
  metrics::Registry reg;
  testing::FakeClock clock;
  LockActivityFn lock_activity;
  std::unique_ptr<Evictor> evictor;
  std::unique_ptr<PodWatcher> watcher;
  std::unique_ptr<Protection> prot;
};

TEST(ProtectionText, DetailsNameTheNumbers) {
  ledger::GpuPressure p;
  p.node = "node-1";
  p.gpu = 0;
  p.free = 800 * kMi;
  p.floor = 1536 * kMi;
  ledger::WatchdogVictim v;
  v.reason = ledger::VictimReason::kOverBudget;
  v.used = 10 * kGi + 716 * kMi;
  v.declared = 3 * kGi;
  p.victim = v;
  EXPECT_EQ(WatchdogDetail(p, &*p.victim), "uses 10.7Gi, declared 3Gi; GPU 0 of node-1 has 800Mi free, floor 1.5Gi");
  p.victim->reason = ledger::VictimReason::kDesignatedVictim;
  p.victim->used = 2 * kGi;
  EXPECT_EQ(WatchdogDetail(p, &*p.victim), "designated victim uses 2Gi; GPU 0 of node-1 has 800Mi free, floor 1.5Gi");
  p.victims = {*p.victim, v};
  EXPECT_EQ(WatchdogDetail(p, &*p.victim),
            "designated victim uses 2Gi; GPU 0 of node-1 has 800Mi free, floor 1.5Gi; one of 2 pods evicted together "
            "to free it");
  ledger::IdleEviction e;
  e.node = "node-1";
  e.idle_ms = 12 * 60'000 + 5'000;
  EXPECT_EQ(IdleDetail(e, 10 * 60'000), "idle for 12m5s (idle-ttl 10m)");
  e.for_ns = "ml";
  e.for_name = "llama-70b";
  e.for_uid = kNew;
  e.idle_ms = 3 * 3600'000 + 60'000;
  EXPECT_EQ(IdleDetail(e, 90'000), "idle for 3h1m (idle-ttl 1m30s); makes room for ml/llama-70b on node-1");
}

TEST_F(ProtectionTest, DryRunRecordsOneEventPerGpuWithinTheCooldownAndEvictsNothing) {
  cfg.watchdog_pressure_reports = 1;  // the persistence rule has its own test
  Bound("t4", "immich-ml", kImmich, 3000 * kMi);
  Bound("t4", "llama-swap", kLlama, 5000 * kMi);
  Start();
  Report("t4", {{kImmich, 11 * kGi}, {kLlama, 4454 * kMi}});
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->gpus_under_pressure, 1);
  EXPECT_EQ(r->watchdog_actions, 1);
  auto ev = EventsOf("immich-ml", "VramdWouldEvict");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].message, "would recycle: uses 11Gi, declared 2.9Gi; GPU 0 of t4 has 666Mi free, floor 1.5Gi");
  EXPECT_TRUE(EventsOf("llama-swap", "VramdWouldEvict").empty());
  EXPECT_FALSE(kube.pods["default/immich-ml"].deleting);
  EXPECT_EQ(testing::Sample(reg, "vramd_gpu_under_pressure{node=\"t4\",gpu=\"0\"}"), "1");
  EXPECT_EQ(testing::Sample(reg, "vramd_watchdog_actions_total{mode=\"dry-run\",reason=\"pressure\"}"), "1");

  // Within the cooldown: gated, no second Event.
  clock.Advance(60'000);
  Report("t4", {{kImmich, 11 * kGi}, {kLlama, 4454 * kMi}});
  r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gated, 1);
  EXPECT_EQ(EventsOf("immich-ml", "VramdWouldEvict").size(), 1u);
  // After it: again.
  clock.Advance(cfg.watchdog_cooldown_ms);
  Report("t4", {{kImmich, 11 * kGi}, {kLlama, 4454 * kMi}});
  ASSERT_TRUE(prot->RunOnce().ok());
  EXPECT_EQ(EventsOf("immich-ml", "VramdWouldEvict").size(), 2u);
  // The pressure goes: the gauge falls to 0.
  Report("t4", {{kImmich, 2 * kGi}, {kLlama, 4454 * kMi}});
  r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gpus_under_pressure, 0);
  EXPECT_EQ(testing::Sample(reg, "vramd_gpu_under_pressure{node=\"t4\",gpu=\"0\"}"), "0");
}

TEST_F(ProtectionTest, EnforceEvictsAndABlockedEvictionIsRetriedNextPass) {
  cfg.watchdog_mode = "enforce";
  cfg.watchdog_pressure_reports = 1;  // the persistence rule has its own test
  Bound("t4", "immich-ml", kImmich, 3000 * kMi);
  Start();
  Report("t4", {{kImmich, 15 * kGi}});
  kube.evict_blocked = true;
  ASSERT_TRUE(prot->RunOnce().ok());
  EXPECT_FALSE(kube.pods["default/immich-ml"].deleting);
  EXPECT_TRUE(EventsOf("immich-ml", "VramdEvicted").empty());
  EXPECT_EQ(testing::Sample(reg, "vramd_watchdog_eviction_failures_total{reason=\"pressure\",why=\"blocked\"}"), "1");
  // A blocked eviction does not start the cooldown: retried next pass.
  kube.evict_blocked = false;
  clock.Advance(1000);
  Report("t4", {{kImmich, 15 * kGi}});
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->watchdog_actions, 1);
  EXPECT_TRUE(kube.pods["default/immich-ml"].deleting);
  auto ev = EventsOf("immich-ml", "VramdEvicted");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].message.rfind("recycled: uses 15Gi, declared 2.9Gi; GPU 0 of t4", 0), 0u) << ev[0].message;
}

// Issue 32: one report below the floor is a spike. The watchdog acts once
// the pressure (with a cause) persisted watchdog.pressure_reports (default 3)
// consecutive reports; a pass that sees the same report again counts nothing,
// and a report without the pressure starts the count again.
TEST_F(ProtectionTest, TheWatchdogActsOnlyOnPressureThatPersistedItsReports) {
  cfg.watchdog_mode = "enforce";
  ASSERT_EQ(cfg.watchdog_pressure_reports, 3);  // the default
  Bound("t4", "immich-ml", kImmich, 3000 * kMi);
  Start();
  auto pass = [&](bool new_report, int64_t immich_used) {
    clock.Advance(1000);
    if (new_report) Report("t4", {{kImmich, immich_used}});
    Result<ProtectionStats> r = prot->RunOnce();
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : ProtectionStats{};
  };
  // Two reports under pressure, each seen by two passes: not yet.
  for (int report = 1; report <= 2; ++report) {
    for (bool fresh : {true, false}) {
      SCOPED_TRACE("report " + std::to_string(report) + (fresh ? "" : ", seen again"));
      ProtectionStats st = pass(fresh, 15 * kGi);
      EXPECT_EQ(st.gpus_under_pressure, 1);
      EXPECT_EQ(st.persisting, 1);
      EXPECT_EQ(testing::Sample(reg, "vramd_watchdog_pressure_persisting"), "1");
      EXPECT_EQ(st.watchdog_actions, 0);
    }
  }
  // The pressure goes for one report: the count starts again.
  EXPECT_EQ(pass(true, 2 * kGi).gpus_under_pressure, 0);
  for (int report = 1; report <= 2; ++report) {
    SCOPED_TRACE("after the gap, report " + std::to_string(report));
    EXPECT_EQ(pass(true, 15 * kGi).watchdog_actions, 0);
  }
  EXPECT_FALSE(kube.pods["default/immich-ml"].deleting);
  // The third consecutive report: evicted.
  ProtectionStats st = pass(true, 15 * kGi);
  EXPECT_EQ(st.persisting, 0);
  EXPECT_EQ(testing::Sample(reg, "vramd_watchdog_pressure_persisting"), "0");
  EXPECT_EQ(st.watchdog_actions, 1);
  EXPECT_TRUE(kube.pods["default/immich-ml"].deleting);
}

// Issue 32: the fewest victims that cover the deficit go as one action: two
// pods 924Mi over their 100Mi, each using 1Gi, beside one within its budget:
// 0.1Gi free, 1.4Gi short of the floor, so neither alone is enough.
TEST_F(ProtectionTest, TheFewestVictimsThatCoverTheDeficitAreEvictedTogether) {
  cfg.watchdog_mode = "enforce";
  cfg.watchdog_pressure_reports = 1;
  const char* const kA = "00000000-0000-4000-8000-00000000000a";
  const char* const kB = "00000000-0000-4000-8000-00000000000b";
  const char* const kC = "00000000-0000-4000-8000-00000000000c";
  Bound("t4", "a", kA, 100 * kMi);
  Bound("t4", "b", kB, 100 * kMi);
  Bound("t4", "c", kC, 14'234 * kMi);
  Start();
  Report("t4", {{kA, 1 * kGi}, {kB, 1 * kGi}, {kC, 14'234 * kMi}});
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->watchdog_actions, 2);
  EXPECT_TRUE(kube.pods["default/a"].deleting);
  EXPECT_TRUE(kube.pods["default/b"].deleting);
  EXPECT_FALSE(kube.pods["default/c"].deleting);
  auto ev = EventsOf("a", "VramdEvicted");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_NE(ev[0].message.find("one of 2 pods evicted together to free it"), std::string::npos) << ev[0].message;
}

// Issue 32: a victim a PodDisruptionBudget protects is passed over for the
// next candidate in the same pass, not retried alone every pass.
TEST_F(ProtectionTest, AVictimBlockedByItsBudgetFallsThroughToTheNext) {
  cfg.watchdog_mode = "enforce";
  cfg.watchdog_pressure_reports = 1;
  Bound("t4", "immich-ml", kImmich, 3000 * kMi);
  Bound("t4", "llama-swap", kLlama, 5000 * kMi);
  Start();
  kube.evict_blocked_pods = {"default/immich-ml"};
  ReportBothOverBudget();
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->watchdog_actions, 1);
  EXPECT_FALSE(kube.pods["default/immich-ml"].deleting);
  EXPECT_TRUE(kube.pods["default/llama-swap"].deleting);
  EXPECT_EQ(testing::Sample(reg, "vramd_watchdog_eviction_failures_total{reason=\"pressure\",why=\"blocked\"}"), "1");
  EXPECT_EQ(EventsOf("llama-swap", "VramdEvicted").size(), 1u);
}

// Issue 32: the idle evictions made for one waiting pod are one action and
// go whole. model-new needs both idle models gone; a PodDisruptionBudget
// protects model-b: the pre-check (dry-run evictions) finds it before
// model-a goes, and neither goes.
TEST_F(ProtectionTest, IdleEvictionsForOnePodArePrecheckedAndGoWholeOrNotAtAll) {
  cfg.idle_mode = "enforce";
  const char* const kA = "00000000-0000-4000-8000-00000000000a";
  const char* const kB = "00000000-0000-4000-8000-00000000000b";
  Bound("idle", "model-a", kA, 8 * kGi, /*idle_ttl_ms=*/60'000);
  Bound("idle", "model-b", kB, 8 * kGi, /*idle_ttl_ms=*/60'000);
  kube.AddPod("default", "model-new", kNew, "12Gi");  // pending
  Start();
  Report("idle", {{kA, 7 * kGi}, {kB, 7 * kGi}});
  ASSERT_TRUE(prot->RunOnce().ok());
  clock.Advance(61'000);
  Report("idle", {{kA, 7 * kGi}, {kB, 7 * kGi}});
  store::Refusal ref;
  ref.uid = kNew;
  ref.ns = "default";
  ref.name = "model-new";
  ref.per_gpu = ref.peak_per_gpu = 12 * kGi;
  ref.gpu_count = 1;
  ref.nodes = {"idle"};
  ASSERT_TRUE(store.RecordRefusals({ref}).ok());
  kube.evict_blocked_pods = {"default/model-b"};
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->idle_candidates, 2);
  EXPECT_EQ(r->blocked, 1);
  EXPECT_EQ(r->idle_actions, 0);
  EXPECT_EQ(kube.CallCount("dry-run-evict default/model-"), 2u);
  EXPECT_EQ(kube.CallCount("evict "), 0u);
  EXPECT_FALSE(kube.pods["default/model-a"].deleting) << "model-a went without model-b: half an action";
  // Without the budget, both go in the next pass (the claims were given back).
  kube.evict_blocked_pods.clear();
  clock.Advance(1000);
  Report("idle", {{kA, 7 * kGi}, {kB, 7 * kGi}});
  r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->idle_actions, 2);
  EXPECT_TRUE(kube.pods["default/model-a"].deleting);
  EXPECT_TRUE(kube.pods["default/model-b"].deleting);
}

// Issue 32: a terminating pod's use is relief on its way until its
// deletionTimestamp plus 30 s (the pod watch's copy); a pod stuck past that
// no longer holds the watchdog back.
TEST_F(ProtectionTest, ATerminatingPodsUseHoldsTheWatchdogBackUntilItsDeletionTime) {
  cfg.watchdog_mode = "enforce";
  cfg.watchdog_pressure_reports = 1;
  cfg.watchdog_cooldown_ms = 0;
  Bound("t4", "immich-ml", kImmich, 3000 * kMi);
  Bound("t4", "llama-swap", kLlama, 5000 * kMi);
  ASSERT_TRUE(store.SetEntryState("t4", kLlama, ledger::EntryState::kTerminating).ok());
  kube.pods["default/llama-swap"].deleting = true;
  kube.pods["default/llama-swap"].deletion_ms = clock.NowMs() + 10'000;
  Start();
  ReportBothOverBudget();  // llama-swap terminating
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gpus_under_pressure, 1);
  EXPECT_EQ(r->watchdog_actions, 0);
  EXPECT_FALSE(kube.pods["default/immich-ml"].deleting);
  // 40 s later llama-swap is still there: stuck, no longer relief.
  clock.Advance(40'001);
  ReportBothOverBudget();
  r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->watchdog_actions, 1);
  EXPECT_TRUE(kube.pods["default/immich-ml"].deleting);
}

// Issue 32: the budget lives in the store and is claimed before the
// eviction: a new leader one second after the old one evicted immich-ml sees
// the GPU's cooldown running and evicts nobody, also when the old leader died
// right after the API accepted its eviction (its store gone with it: nothing
// it would write later lands).
TEST_F(ProtectionTest, ALeaderChangeKeepsTheCooldown) {
  ExpectNoSecondEviction(NewLeaderPassAfterAnEviction(/*dies=*/false));
}

TEST_F(ProtectionTest, ALeaderThatDiesRightAfterItsEvictionLeavesTheCooldownBehind) {
  ExpectNoSecondEviction(NewLeaderPassAfterAnEviction(/*dies=*/true));
}

// Issue 32: the fence in the store. This replica still believes it leads
// (its Evictor's own check says yes), but another replica holds the leader
// lease in the store: the claim is refused and nothing is evicted.
TEST_F(ProtectionTest, AReplicaThatLostTheLeaseInTheStoreEvictsNothing) {
  cfg.watchdog_mode = "enforce";
  cfg.watchdog_pressure_reports = 1;
  Bound("t4", "immich-ml", kImmich, 3000 * kMi);
  Bound("t4", "llama-swap", kLlama, 5000 * kMi);
  Start();
  ProtectionSettings s = ProtectionSettingsFrom(cfg, ledger::Policy{});
  s.leader_identity = "replica-a";
  prot = std::make_unique<Protection>(s, &store, watcher.get(), evictor.get(), lock_activity, &clock, &reg);
  store.leader_holder = "replica-b";
  ReportBothOverBudget();
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gpus_under_pressure, 1);
  EXPECT_EQ(r->gated, 1);
  EXPECT_EQ(r->watchdog_actions, 0);
  EXPECT_EQ(kube.CallCount("evict "), 0u);
  // Holding it again, the same pass acts.
  store.leader_holder = "replica-a";
  clock.Advance(1000);
  ReportBothOverBudget();
  r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->watchdog_actions, 1);
}

TEST_F(ProtectionTest, OffDoesNothingAndAnUnsealedLedgerDecidesNothing) {
  cfg.watchdog_mode = "off";
  cfg.idle_mode = "off";
  Bound("t4", "immich-ml", kImmich, 3000 * kMi);
  Start();
  Report("t4", {{kImmich, 15 * kGi}});
  ASSERT_TRUE(prot->RunOnce().ok());
  EXPECT_TRUE(kube.events.empty());

  cfg.watchdog_mode = "enforce";
  prot = std::make_unique<Protection>(ProtectionSettingsFrom(cfg, ledger::Policy{}), &store, watcher.get(),
                                      evictor.get(), nullptr, &clock, &reg);
  store.LoseStore();  // unsealed (and empty)
  store.AddNode("t4", {16 * kGi});
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gpus_under_pressure, 0);
  EXPECT_TRUE(kube.events.empty());
}

TEST_F(ProtectionTest, MaybeRunKeepsTheInterval) {
  Start();
  EXPECT_TRUE(prot->MaybeRun().has_value());
  clock.Advance(cfg.watchdog_interval_ms - 1);
  EXPECT_FALSE(prot->MaybeRun().has_value());
  clock.Advance(1);
  EXPECT_TRUE(prot->MaybeRun().has_value());
}

TEST_F(ProtectionTest, AnIdleModelIsEvictedOnlyForAPodRefusedForVram) {
  cfg.idle_mode = "enforce";
  Bound("idle", "model-old", kOld, 12 * kGi, /*idle_ttl_ms=*/60'000);
  kube.AddPod("default", "model-new", kNew, "8Gi");  // pending
  Start();
  // Idle needs evidence: the agent reports the model's usage, unchanged.
  Report("idle", {{kOld, 10 * kGi}});
  ASSERT_TRUE(prot->RunOnce().ok());  // first sighting: active now
  clock.Advance(61'000);
  Report("idle", {{kOld, 10 * kGi}});
  // Idle, but nobody waits: nothing.
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->idle_candidates, 0);
  EXPECT_EQ(testing::Sample(reg, "vramd_idle_pods"), "1");
  EXPECT_FALSE(kube.pods["default/model-old"].deleting);
  // Filter refused model-new on "idle" for room.
  store::Refusal ref;
  ref.uid = kNew;
  ref.ns = "default";
  ref.name = "model-new";
  ref.per_gpu = 8 * kGi;
  ref.peak_per_gpu = 8 * kGi;
  ref.gpu_count = 1;
  ref.nodes = {"idle"};
  ASSERT_TRUE(store.RecordRefusals({ref}).ok());
  r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->waiting_pods, 1);
  EXPECT_EQ(r->idle_actions, 1);
  EXPECT_TRUE(kube.pods["default/model-old"].deleting);
  auto ev = EventsOf("model-old", "VramdEvicted");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].message, "evicted idle pod: idle for 1m1s (idle-ttl 1m); makes room for default/model-new on idle");
  ASSERT_EQ(EventsOf("model-new", "VramdMadeRoom").size(), 1u);
  EXPECT_EQ(testing::Sample(reg, "vramd_watchdog_actions_total{mode=\"enforce\",reason=\"idle\"}"), "1");

  // Issue 32: the room is model-new's. Held from the moment model-old's
  // entry goes (reconcile, once the pod is really gone): a replacement of
  // model-old (or anyone) finds it spent, model-new finds it free.
  EXPECT_EQ(r->holds, 1);
  auto hold_of_new = [&]() -> std::optional<ledger::Entry> {
    ledger::SnapshotPtr snap = *store.Snapshot();
    for (const ledger::Entry& e : snap->Find("idle")->entries) {
      if (e.pod_uid == kNew) return e;
    }
    return std::nullopt;
  };
  EXPECT_FALSE(hold_of_new().has_value());  // model-old still terminates: its VRAM is still its own
  ASSERT_TRUE(*store.Release("idle", kOld));
  std::optional<ledger::Entry> hold = hold_of_new();
  ASSERT_TRUE(hold.has_value());
  EXPECT_EQ(hold->state, ledger::EntryState::kHold);
  EXPECT_EQ(hold->per_gpu, 8 * kGi);
  EXPECT_EQ(hold->hold_until_ms - hold->created_ms, cfg.eviction_hold_ms);
  Report("idle", {});  // the agent: model-old's processes are gone
  ledger::SnapshotPtr snap = *store.Snapshot();
  ledger::VramRequest replacement{.total = 12 * kGi, .gpu_count = 1, .per_gpu = 12 * kGi, .peak_per_gpu = 12 * kGi};
  replacement.uid = "replacement-of-model-old";
  EXPECT_TRUE(ledger::Filter(*snap, {"idle"}, replacement, ledger::Policy{}, clock.NowMs()).fits.empty());
  ledger::VramRequest waiting{.total = 8 * kGi, .gpu_count = 1, .per_gpu = 8 * kGi, .peak_per_gpu = 8 * kGi};
  waiting.uid = kNew;
  EXPECT_EQ(ledger::Filter(*snap, {"idle"}, waiting, ledger::Policy{}, clock.NowMs()).fits.size(), 1u);
  // And no second eviction for model-new while its hold lasts.
  clock.Advance(1000);
  r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->idle_candidates, 0);
}

TEST_F(ProtectionTest, LockActivityKeepsAPodActiveAndAnUnreadableSignalSkipsIdleEviction) {
  cfg.idle_mode = "enforce";
  cfg.idle_policy = "always";
  Bound("idle", "model-old", kOld, 12 * kGi, 60'000);
  int64_t last_lock = 0;
  bool lock_store_down = false;
  lock_activity = [&](const std::vector<std::string>& nodes) -> Result<std::map<std::string, int64_t>> {
    if (lock_store_down) return Unavailable("lock store down");
    EXPECT_EQ(nodes, std::vector<std::string>{"idle"});
    return std::map<std::string, int64_t>{{kOld, last_lock}};
  };
  Start();
  Report("idle", {{kOld, 10 * kGi}});
  ASSERT_TRUE(prot->RunOnce().ok());
  for (int i = 0; i < 3; ++i) {  // a heartbeat every 50 s keeps it active
    clock.Advance(50'000);
    Report("idle", {{kOld, 10 * kGi}});
    last_lock = clock.NowMs();
    Result<ProtectionStats> r = prot->RunOnce();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->idle_candidates, 0);
  }
  clock.Advance(61'000);
  Report("idle", {{kOld, 10 * kGi}});
  lock_store_down = true;  // no signal: no idle eviction at all
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->idle_actions, 0);
  EXPECT_FALSE(kube.pods["default/model-old"].deleting);
  lock_store_down = false;
  r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->idle_actions, 1);
  EXPECT_TRUE(kube.pods["default/model-old"].deleting);
}

// Issue 32: without a fresh usage report the pod is not idle, however long
// its TTL has passed (before: idle after its TTL when no agent reported).
TEST_F(ProtectionTest, WithoutFreshUsageAPodIsNeverIdle) {
  cfg.idle_mode = "enforce";
  cfg.idle_policy = "always";
  Bound("idle", "model-old", kOld, 12 * kGi, 60'000);
  Start();
  Report("idle", {{kOld, 10 * kGi}});
  ASSERT_TRUE(prot->RunOnce().ok());
  for (int i = 0; i < 5; ++i) {  // the agent went silent: its last report ages
    clock.Advance(61'000);
    Result<ProtectionStats> r = prot->RunOnce();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->idle_actions, 0) << "pass " << i;
  }
  EXPECT_FALSE(kube.pods["default/model-old"].deleting);
  EXPECT_EQ(testing::Sample(reg, "vramd_idle_pods"), "0");
  // Reports again, unchanged: idle one TTL later, evicted.
  EXPECT_EQ(IdleActionsAfterOneTtlOfFreshReports(), 1);
  EXPECT_TRUE(kube.pods["default/model-old"].deleting);
}

// Issue 32: a bare pod (no controller) is never idle-evicted unless it opted in.
TEST_F(ProtectionTest, ABarePodIsNeverIdleEvicted) {
  cfg.idle_mode = "enforce";
  cfg.idle_policy = "always";
  Bound("idle", "model-old", kOld, 12 * kGi, 60'000, /*owned=*/false);
  Start();
  EXPECT_EQ(IdleActionsAfterOneTtlOfFreshReports(), 0);
  EXPECT_FALSE(kube.pods["default/model-old"].deleting);
}

TEST_F(ProtectionTest, RefusalsOfPodsNoLongerPendingAreForgotten) {
  cfg.idle_mode = "dry-run";
  Bound("idle", "model-old", kOld, 12 * kGi, 60'000);
  kube.AddPod("default", "model-new", kNew, "8Gi");
  kube.pods["default/model-new"].node_name = "elsewhere";  // bound meanwhile
  Start();
  store::Refusal ref;
  ref.uid = kNew;
  ref.ns = "default";
  ref.name = "model-new";
  ref.per_gpu = 8 * kGi;
  ref.gpu_count = 1;
  ref.nodes = {"idle"};
  ASSERT_TRUE(store.RecordRefusals({ref}).ok());
  clock.Advance(61'000);
  Result<ProtectionStats> r = prot->RunOnce();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->waiting_pods, 0);
  EXPECT_TRUE(kube.events.empty());
  Result<std::vector<store::Refusal>> left = store.ReadRefusals(3'600'000);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
}

}  // namespace
}  // namespace vramd::reconcile
