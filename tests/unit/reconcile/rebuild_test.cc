// The rebuild after a lost store (issue 11): the leader's pass re-adds what
// the cluster says is bound, and seals the ledger (VRAM granted again) only
// after the quiet period, from a fresh list of the pods, when every bound
// pod's entry is back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "fakes/fake_kube_client.h"
#include "fakes/fake_ledger_store.h"
#include "fakes/reconcile_helpers.h"
#include "vramd/reconcile/plan.h"
#include "vramd/reconcile/pod_watch.h"
#include "vramd/reconcile/reconciler.h"

namespace vramd::reconcile {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;


kube::PodInfo Bound(const std::string& name, const std::string& node, const std::string& gpus) {
  kube::PodInfo p;
  p.ns = "default";
  p.name = name;
  p.uid = "uid-" + name;
  p.node_name = node;
  p.phase = "Running";
  p.annotations = {{"vramd.io/gpus", gpus}, {"vramd.io/vram-per-gpu", std::to_string(4 * kGi)}};
  p.spec.ns = p.ns;
  p.spec.name = p.name;
  p.spec.uid = p.uid;
  p.spec.containers.push_back({"4Gi", "4Gi", false});
  return p;
}

// A VRAM pod not bound yet: a replica may have its bind in flight.
kube::PodInfo Pending(const std::string& name) {
  kube::PodInfo p = Bound(name, "", "");
  p.node_name.clear();
  p.phase = "Pending";
  p.annotations.clear();
  return p;
}


class Rebuild : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg.rebuild_quiet_ms = 5000;
    kube.pods["default/a"] = Bound("a", "n1", "0");
    watcher.Start();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!watcher.Synced() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(watcher.Synced());
    // The store is lost; node sync has brought the capacities back already.
    store.LoseStore();
    store.AddNode("n1", {16 * kGi, 16 * kGi});
  }
  void TearDown() override { watcher.Stop(); }

  bool HasEntry(const std::string& uid) {
    for (const ledger::Entry& e : store.Entries("n1")) {
      if (e.pod_uid == uid) return true;
    }
    return false;
  }

  config::Config cfg;
  testing::FakeLedgerStore store;
  testing::QuietWatchKube kube;
  metrics::Registry reg;
  PodWatcher watcher{&kube, nullptr, &reg};
  SystemClock clock;
  Reconciler rec{cfg, &store, &kube, nullptr, &watcher, nullptr, &clock, &reg};
};

TEST_F(Rebuild, TheLedgerIsSealedOnlyAfterTheQuietPeriodFromAFreshListOfThePods) {
  // Pod b waits for a bind that a replica granted before the loss, pod c for
  // room; the watch's copy (taken before they existed) does not show them,
  // the fresh list does: no early seal while a VRAM pod is pending.
  kube.pods["default/b"] = Pending("b");
  kube.pods["default/c"] = Pending("c");
  ASSERT_TRUE(rec.RunOnce().ok());
  EXPECT_FALSE(store.ReadSeal()->sealed);
  EXPECT_TRUE(HasEntry("uid-a")) << "re-adds do not wait for the quiet period";
  EXPECT_EQ(testing::Sample(reg, "vramd_ledger_rebuilding"), "1");
  EXPECT_EQ(testing::Sample(reg, "vramd_ledger_rebuilds_total{event=\"begun\"}"), "1");
  store::ReserveRequest rr;
  rr.node = "n1";
  rr.entry.pod_uid = "uid-new";
  rr.entry.gpus = {1};
  rr.entry.per_gpu = kGi;
  rr.require_sealed = true;
  EXPECT_EQ(store.Reserve(rr).status().code(), Code::kUnavailable);

  // A pod whose Binding landed after the watch's copy was taken (the watch
  // here never reports it): the sealing pass lists the pods afresh.
  kube.pods["default/b"] = Bound("b", "n1", "1");
  store.now_ms += 4999;
  ASSERT_TRUE(rec.RunOnce().ok());
  EXPECT_FALSE(store.ReadSeal()->sealed) << "sealed before the quiet period ended";
  // (b's entry may be back already: the early-seal check listed the pods afresh.)

  store.now_ms += 1;
  ASSERT_TRUE(rec.RunOnce().ok());
  EXPECT_TRUE(store.ReadSeal()->sealed);
  EXPECT_TRUE(HasEntry("uid-b")) << "the seal came without the pod bound after the watch's copy";
  EXPECT_EQ(store.seals, 1);
  // Pods refused meanwhile were parked by kube-scheduler: one node label
  // change sends them all back to its queue.
  EXPECT_EQ(std::count(kube.calls.begin(), kube.calls.end(), "label-node n1"), 1);
  EXPECT_EQ(testing::Sample(reg, "vramd_ledger_rebuilding"), "0");
  EXPECT_EQ(testing::Sample(reg, "vramd_ledger_rebuilds_total{event=\"sealed\"}"), "1");
  EXPECT_TRUE(store.Reserve(rr).ok());

  // A sealed ledger stays sealed: no second rebuild.
  ASSERT_TRUE(rec.RunOnce().ok());
  EXPECT_EQ(testing::Sample(reg, "vramd_ledger_rebuilds_total{event=\"begun\"}"), "1");
}

TEST_F(Rebuild, AFailedFreshListNeitherSealsNorLosesTheRebuild) {
  kube.pods["default/b"] = Pending("b");
  ASSERT_TRUE(rec.RunOnce().ok());
  EXPECT_FALSE(store.ReadSeal()->sealed);
  store.now_ms += 5000;
  kube.fail_list = Unavailable("apiserver down");
  EXPECT_FALSE(rec.RunOnce().ok());
  EXPECT_FALSE(store.ReadSeal()->sealed);
  kube.fail_list = Status::Ok();
  ASSERT_TRUE(rec.RunOnce().ok());
  EXPECT_TRUE(store.ReadSeal()->sealed);
  EXPECT_EQ(testing::Sample(reg, "vramd_ledger_rebuilds_total{event=\"begun\"}"), "1");
}

// Issue 30: a new store (or one lost while no VRAM pod was pending) has no
// bind in flight that could land later: sealed in the first pass, from a
// fresh list, instead of rebuild_quiet_ms later.
TEST_F(Rebuild, WithNoVramPodWaitingForABindTheLedgerIsSealedAtOnce) {
  kube.pods["default/cpu-only"] = Pending("cpu-only");
  kube.pods["default/cpu-only"].spec.containers = {{"", "", false}};
  kube.pods["default/done"] = Pending("done");
  kube.pods["default/done"].phase = "Succeeded";
  ASSERT_TRUE(rec.RunOnce().ok());
  EXPECT_TRUE(store.ReadSeal()->sealed) << "waited although no VRAM pod was waiting for a bind";
  EXPECT_TRUE(HasEntry("uid-a")) << "sealed without the bound pod's entry";
  EXPECT_EQ(store.seals, 1);
  EXPECT_GE(kube.list_pods_calls, 2) << "not confirmed on a fresh list (the watch lists once)";
}

TEST(AnyPodAwaitingBind, Table) {
  kube::PodInfo pending = Pending("p");
  kube::PodInfo bound = Bound("b", "n1", "0");
  kube::PodInfo no_vram = Pending("c");
  no_vram.spec.containers = {{"", "", false}};
  kube::PodInfo ended = Pending("e");
  ended.phase = "Failed";
  kube::PodInfo invalid = Pending("i");
  invalid.spec.containers = {{"lots", "lots", false}};
  EXPECT_FALSE(AnyPodAwaitingBind({}));
  EXPECT_TRUE(AnyPodAwaitingBind({pending}));
  EXPECT_FALSE(AnyPodAwaitingBind({bound, no_vram, ended, invalid}));
  EXPECT_TRUE(AnyPodAwaitingBind({bound, no_vram, ended, invalid, pending}));
}

}  // namespace
}  // namespace vramd::reconcile
