// Node sync's last capacity source (issue 14): the physical totals a node
// agent reported, minus the reserve, for a node with no config entry,
// annotation or GFD labels; never over those sources.
#include <gtest/gtest.h>

#include "fakes/fake_kube_client.h"
#include "fakes/fake_ledger_store.h"
#include "vramd/config/config.h"
#include "vramd/reconcile/node_sync.h"

namespace vramd::reconcile {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

kube::NodeInfo Node(const std::string& name, std::map<std::string, std::string> annotations = {}) {
  kube::NodeInfo n;
  n.name = name;
  n.uid = "uid-" + name;
  n.annotations = std::move(annotations);
  return n;
}

ledger::UsageReport Report(std::vector<int> indices, int64_t total) {
  ledger::UsageReport r;
  for (int i : indices) r.gpus.push_back({.index = i, .uuid = "GPU-" + std::to_string(i), .total = total, .used = 0});
  return r;
}

TEST(NodeSyncAgentCapacity, ANodeWithNoOtherSourceGetsTheAgentsTotalsMinusTheReserve) {
  config::Config cfg;
  cfg.reserve_percent = 0;
  cfg.reserve_min_bytes = kGi;
  testing::FakeLedgerStore store;
  testing::FakeKubeClient kube;
  kube.nodes = {Node("bare"), Node("annotated", {{"vramd.io/capacity", "40Gi"}}), Node("cpu-only")};
  // The route accepted these reports because the node watch knows the nodes.
  ASSERT_TRUE(store.PushReport("bare", Report({0, 2}, 80 * kGi), /*in_cluster=*/true).ok());
  ASSERT_TRUE(store.PushReport("annotated", Report({0}, 80 * kGi), true).ok());
  ASSERT_TRUE(store.PushReport("gone", Report({0}, 80 * kGi), true).ok());  // left the cluster since
  metrics::Registry reg;
  NodeSync sync(cfg, &store, &kube, &reg);
  Result<NodeSyncStats> r = sync.SyncOnce();
  ASSERT_TRUE(r.ok()) << r.status().message();

  ledger::SnapshotPtr snap = *store.Snapshot();
  const ledger::Node* bare = snap->Find("bare");
  ASSERT_NE(bare, nullptr);
  ASSERT_EQ(bare->gpus.size(), 2u);
  EXPECT_EQ(bare->gpus[0].index, 0);
  EXPECT_EQ(bare->gpus[1].index, 2);  // the agent's indices, not positions
  EXPECT_EQ(bare->gpus[1].capacity, 79 * kGi);
  ASSERT_NE(snap->Find("annotated"), nullptr);
  EXPECT_EQ(snap->Find("annotated")->gpus[0].capacity, 39 * kGi) << "the annotation wins over the agent";
  EXPECT_EQ(snap->Find("cpu-only"), nullptr);
  EXPECT_EQ(snap->Find("gone"), nullptr);
  EXPECT_EQ(store.ReportedGpus()->count("gone"), 0u) << "a departed node's report is forgotten";
  EXPECT_EQ(store.ReportedGpus()->count("bare"), 1u);

  // A second pass writes nothing; a later report on the node in the ledger lands.
  Result<NodeSyncStats> again = sync.SyncOnce();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->capacity_writes, 0);
  ASSERT_TRUE(store.PushReport("bare", Report({0, 2}, 80 * kGi), false).ok());
}

TEST(NodeSyncAgentCapacity, AStoreThatCannotAnswerFailsThePassAndRemovesNothing) {
  config::Config cfg;
  testing::FakeLedgerStore store;
  testing::FakeKubeClient kube;
  kube.nodes = {Node("bare")};
  ASSERT_TRUE(store.PushReport("bare", Report({0}, 80 * kGi), true).ok());
  metrics::Registry reg;
  NodeSync sync(cfg, &store, &kube, &reg);
  ASSERT_TRUE(sync.SyncOnce().ok());
  ASSERT_NE((*store.Snapshot())->Find("bare"), nullptr);
  store.unavailable = true;
  EXPECT_FALSE(sync.SyncOnce().ok());
  store.unavailable = false;
  EXPECT_NE((*store.Snapshot())->Find("bare"), nullptr);
}

}  // namespace
}  // namespace vramd::reconcile
