// Malformed pods and nodes (issue 11): skipped with a warning, one Warning
// Event per object and reason, counted in vramd_reconcile_malformed_objects;
// the rest of the pass goes on. And a node sync loop that survives an
// exception escaping its step.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "fakes/fake_kube_client.h"
#include "fakes/fake_ledger_store.h"
#include "fakes/reconcile_helpers.h"
#include "vramd/metrics/thread_guard.h"
#include "vramd/reconcile/node_sync.h"
#include "vramd/reconcile/pod_watch.h"
#include "vramd/reconcile/reconciler.h"

namespace vramd::reconcile {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

size_t CountCalls(const testing::FakeKubeClient& kube, const std::string& call) {
  return static_cast<size_t>(std::count(kube.calls.begin(), kube.calls.end(), call));
}


kube::NodeInfo Node(const std::string& name, std::map<std::string, std::string> labels,
                    std::map<std::string, std::string> annotations) {
  kube::NodeInfo n;
  n.name = name;
  n.uid = "uid-" + name;
  n.labels = std::move(labels);
  n.annotations = std::move(annotations);
  return n;
}

TEST(NodeSyncMalformed, HostileNodesAreSkippedReportedOnceAndTheOthersSynced) {
  config::Config cfg;
  testing::FakeLedgerStore store;
  testing::FakeKubeClient kube;
  // An entry on a node whose annotation turns hostile later is kept.
  ASSERT_TRUE(store.SetCapacity("was-good", {{0, 8 * kGi, ""}}).ok());
  ASSERT_TRUE(store.SetCapacity("departed", {{0, 8 * kGi, ""}}).ok());
  kube.nodes = {
      Node("good", {{"nvidia.com/gpu.count", "1"}, {"nvidia.com/gpu.memory", "8192"}}, {}),
      Node("cap-1e30", {}, {{"vramd.io/capacity", "1e30"}}),
      Node("cap-negative", {}, {{"vramd.io/capacity", "-5Gi"}}),
      Node("cap-text", {}, {{"vramd.io/capacity", "eighty gigabytes"}}),
      Node("gfd-count", {{"nvidia.com/gpu.count", "99999999999999"}, {"nvidia.com/gpu.memory", "8192"}}, {}),
      Node("gfd-memory", {{"nvidia.com/gpu.count", "1"}, {"nvidia.com/gpu.memory", "9999999999999999999"}}, {}),
      Node("was-good", {}, {{"vramd.io/capacity", "7Ei,7Ei"}}),
  };
  metrics::Registry reg;
  NodeSync sync(cfg, &store, &kube, &reg);
  for (int pass = 0; pass < 3; ++pass) {
    Result<NodeSyncStats> r = sync.SyncOnce();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->invalid, 6);
    ASSERT_EQ(r->malformed.size(), 6u);
  }
  ledger::SnapshotPtr snap = *store.Snapshot();
  ASSERT_NE(snap->Find("good"), nullptr);
  EXPECT_EQ(snap->Find("good")->gpus.size(), 1u);
  ASSERT_NE(snap->Find("was-good"), nullptr) << "a malformed node's entry must stay as it is";
  EXPECT_EQ(snap->Find("was-good")->gpus[0].capacity, 8 * kGi);
  EXPECT_EQ(snap->Find("departed"), nullptr) << "a malformed node must not keep departed nodes in the ledger";
  EXPECT_EQ(snap->Find("cap-1e30"), nullptr);
  for (const char* name : {"cap-1e30", "cap-negative", "cap-text", "gfd-count", "gfd-memory", "was-good"}) {
    EXPECT_EQ(CountCalls(kube, std::string("node-event ") + name + " " + kMalformedNodeEventReason), 1u) << name;
  }
  EXPECT_EQ(CountCalls(kube, std::string("node-event good ") + kMalformedNodeEventReason), 0u);
  EXPECT_EQ(testing::Sample(reg, "vramd_reconcile_malformed_objects{kind=\"node\"}"), "6");
  EXPECT_EQ(testing::Sample(reg, "vramd_reconcile_malformed_reports_total{kind=\"node\"}"), "6");

  // Fixed: the gauge falls; broken again with another reason: reported again.
  kube.nodes[1] = Node("cap-1e30", {}, {{"vramd.io/capacity", "80Gi"}});
  kube.nodes[2] = Node("cap-negative", {}, {{"vramd.io/capacity", "-6Gi"}});
  ASSERT_TRUE(sync.SyncOnce().ok());
  EXPECT_EQ(testing::Sample(reg, "vramd_reconcile_malformed_objects{kind=\"node\"}"), "5");
  EXPECT_EQ(CountCalls(kube, std::string("node-event cap-negative ") + kMalformedNodeEventReason), 2u);
  EXPECT_EQ(testing::Sample(reg, "vramd_reconcile_malformed_reports_total{kind=\"node\"}"), "7");
}

TEST(NodeSyncMalformed, AnEventTheApiServerCouldNotTakeIsRetried) {
  config::Config cfg;
  testing::FakeLedgerStore store;
  testing::FakeKubeClient kube;
  kube.nodes = {Node("bad", {}, {{"vramd.io/capacity", "1e30"}})};
  kube.fail_event = Unavailable("apiserver down");
  metrics::Registry reg;
  NodeSync sync(cfg, &store, &kube, &reg);
  ASSERT_TRUE(sync.SyncOnce().ok());
  kube.fail_event = Status::Ok();
  ASSERT_TRUE(sync.SyncOnce().ok());
  ASSERT_TRUE(sync.SyncOnce().ok());
  const std::string call = std::string("node-event bad ") + kMalformedNodeEventReason;
  EXPECT_EQ(CountCalls(kube, call), 2u);
  EXPECT_EQ(testing::Sample(reg, "vramd_reconcile_malformed_reports_total{kind=\"node\"}"), "1");
}

TEST(NodeSyncLoop, SurvivesAnExceptionEscapingAPass) {
  config::Config cfg;
  cfg.node_sync_interval_ms = 20;
  testing::FakeLedgerStore store;
  testing::FakeKubeClient kube;
  metrics::Registry reg;
  NodeSync sync(cfg, &store, &kube, &reg);
  std::atomic<int> calls{0};
  sync.SetNodeSource([&]() -> std::optional<std::vector<kube::NodeInfo>> {
    if (++calls == 1) throw std::out_of_range("stoll");
    return std::vector<kube::NodeInfo>{
        Node("good", {{"nvidia.com/gpu.count", "1"}, {"nvidia.com/gpu.memory", "8192"}}, {})};
  });
  const uint64_t before = metrics::ThreadErrors(metrics::kThreadNodeSync);
  sync.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while ((*store.Snapshot())->Find("good") == nullptr && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sync.Stop();
  EXPECT_NE((*store.Snapshot())->Find("good"), nullptr) << "the loop died with its first pass";
  EXPECT_EQ(metrics::ThreadErrors(metrics::kThreadNodeSync), before + 1);
  EXPECT_GE(calls.load(), 2);
}


kube::PodInfo BoundPod(const std::string& name, const char* vram, std::map<std::string, std::string> annotations) {
  kube::PodInfo p;
  p.ns = "default";
  p.name = name;
  p.uid = "uid-" + name;
  p.node_name = "n1";
  p.phase = "Running";
  p.annotations = annotations;
  p.spec.ns = p.ns;
  p.spec.name = p.name;
  p.spec.uid = p.uid;
  p.spec.containers.push_back({std::string(vram), std::string(vram), false});
  if (auto it = annotations.find("vramd.io/gpu-count"); it != annotations.end()) p.spec.gpu_count = it->second;
  return p;
}

TEST(ReconcilerMalformed, HostilePodsAreReportedOnceAndTheLedgerStaysSane) {
  config::Config cfg;
  testing::FakeLedgerStore store;
  testing::QuietWatchKube kube;
  ASSERT_TRUE(store.SetCapacity("n1", {{0, 80 * kGi, ""}, {1, 80 * kGi, ""}}).ok());
  for (const kube::PodInfo& p :
       {BoundPod("huge", "8Gi", {{"vramd.io/gpus", "0"}, {"vramd.io/vram-per-gpu", "9999999999999999999"}}),
        BoundPod("dup", "4Gi", {{"vramd.io/gpus", "1,1"}, {"vramd.io/vram-per-gpu", "4294967296"}}),
        BoundPod("count", "4Gi", {{"vramd.io/gpu-count", "99999999999999"}}),
        BoundPod("good", "2Gi", {{"vramd.io/gpus", "1"}, {"vramd.io/vram-per-gpu", "2147483648"}})}) {
    kube.pods[p.ns + "/" + p.name] = p;
  }
  metrics::Registry reg;
  PodWatcher watcher(&kube, nullptr, &reg);
  watcher.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!watcher.Synced() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(watcher.Synced());
  SystemClock clock;
  Reconciler rec(cfg, &store, &kube, nullptr, &watcher, nullptr, &clock, &reg);
  for (int pass = 0; pass < 3; ++pass) {
    Result<PassStats> r = rec.RunOnce();
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  watcher.Stop();

  for (const char* name : {"huge", "dup", "count"}) {
    EXPECT_EQ(CountCalls(kube, std::string("event default/") + name + " " + kMalformedPodEventReason), 1u) << name;
  }
  EXPECT_EQ(CountCalls(kube, std::string("event default/good ") + kMalformedPodEventReason), 0u);
  EXPECT_EQ(testing::Sample(reg, "vramd_reconcile_malformed_objects{kind=\"pod\"}"), "3");
  EXPECT_EQ(testing::Sample(reg, "vramd_reconcile_malformed_reports_total{kind=\"pod\"}"), "3");

  // The ledger: the good pod from its annotations, the malformed ones with a
  // valid request from their request, the invalid request not at all.
  ledger::SnapshotPtr snap = *store.Snapshot();
  const ledger::Node* n1 = snap->Find("n1");
  ASSERT_NE(n1, nullptr);
  std::map<std::string, const ledger::Entry*> by_name;
  for (const ledger::Entry& e : n1->entries) by_name[e.name] = &e;
  ASSERT_EQ(by_name.size(), 3u);
  EXPECT_EQ(by_name["good"]->per_gpu, 2 * kGi);
  EXPECT_EQ(by_name["huge"]->per_gpu, 8 * kGi);
  EXPECT_EQ(by_name["dup"]->per_gpu, 4 * kGi);
  EXPECT_EQ(by_name.count("count"), 0u);
  for (int64_t a : ledger::AllocatedPerGpu(*n1)) EXPECT_LE(a, 80 * kGi);
}

}  // namespace
}  // namespace vramd::reconcile
