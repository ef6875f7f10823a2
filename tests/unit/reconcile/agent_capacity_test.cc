// Node sync's last capacity source (issue 14): the physical totals a node
// agent reported, minus the reserve, for a node with no config entry,
// annotation or GFD labels; never over those sources, and only on a node an
// admin marked as a GPU node (issue 33: node_sync.agent_capacity_labels).
#include <gtest/gtest.h>

#include "fakes/fake_kube_client.h"
#include "fakes/fake_ledger_store.h"
#include "vramd/config/config.h"
#include "vramd/reconcile/node_sync.h"

namespace vramd::reconcile {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

kube::NodeInfo Node(const std::string& name, std::map<std::string, std::string> annotations = {},
                    std::map<std::string, std::string> labels = {{"nvidia.com/gpu.present", "true"}}) {
  kube::NodeInfo n;
  n.name = name;
  n.uid = "uid-" + name;
  n.annotations = std::move(annotations);
  n.labels = std::move(labels);
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

// Issue 33 (attack): an agent (or whoever holds its credential) reports GPUs
// for a CPU-only node. Its report is never capacity unless an admin marked
// the node, by one of the configured labels with its exact value.
TEST(NodeSyncAgentCapacity, OnlyANodeMarkedAsAGpuNodeTakesItsAgentsTotals) {
  config::Config cfg;
  cfg.reserve_percent = 0;
  struct Case {
    const char* name;
    std::map<std::string, std::string> labels;
    bool capacity;
  } cases[] = {
      {"unlabelled", {}, false},
      {"GFD's gpu.present", {{"nvidia.com/gpu.present", "true"}}, true},
      {"gpu.present false", {{"nvidia.com/gpu.present", "false"}}, false},
      {"NFD's amd-gpu", {{"feature.node.kubernetes.io/amd-gpu", "true"}}, true},
      {"the admin-only node-restriction label", {{"node-restriction.kubernetes.io/vramd-gpu-node", "true"}}, true},
      {"a look-alike key", {{"vramd.io/gpu-node", "true"}}, false},
  };
  for (const Case& c : cases) {
    testing::FakeLedgerStore store;
    testing::FakeKubeClient kube;
    kube.nodes = {Node("n", {}, c.labels)};
    ASSERT_TRUE(store.PushReport("n", Report({0}, 80 * kGi), true).ok());
    metrics::Registry reg;
    NodeSync sync(cfg, &store, &kube, &reg);
    Result<NodeSyncStats> r = sync.SyncOnce();
    ASSERT_TRUE(r.ok()) << c.name;
    EXPECT_EQ((*store.Snapshot())->Find("n") != nullptr, c.capacity) << c.name;
    EXPECT_EQ(r->unmarked_reporters, c.capacity ? 0 : 1) << c.name;
  }
  // Configured otherwise: only that label marks; empty: none.
  for (const auto& [labels, want] : std::vector<std::pair<std::string, bool>>{
           {"example.com/gpu=yes", true}, {"", false}}) {
    cfg.node_sync_agent_capacity_labels = labels;
    testing::FakeLedgerStore store;
    testing::FakeKubeClient kube;
    kube.nodes = {Node("n", {}, {{"example.com/gpu", "yes"}})};
    ASSERT_TRUE(store.PushReport("n", Report({0}, 80 * kGi), true).ok());
    metrics::Registry reg;
    NodeSync sync(cfg, &store, &kube, &reg);
    ASSERT_TRUE(sync.SyncOnce().ok());
    EXPECT_EQ((*store.Snapshot())->Find("n") != nullptr, want) << labels;
  }
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
