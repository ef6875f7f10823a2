// Node sync inside reconcile passes (issue 17): pod events bring a pass up to
// every reconcile_min_gap_ms, and a sync reads every Node, so the leader syncs
// capacities only when a Node changed, during a rebuild, or once the interval
// has passed since the last sync that succeeded.
#include <gtest/gtest.h>

#include <optional>

#include "fakes/fake_kube_client.h"
#include "fakes/fake_ledger_store.h"
#include "vramd/config/config.h"
#include "vramd/reconcile/node_sync.h"

namespace vramd::reconcile {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

TEST(NodeSyncDue, Table) {
  const std::optional<int64_t> never;
  const struct {
    const char* what;
    bool force, changed;
    std::optional<int64_t> last_ok;
    int64_t now;
    bool due;
  } cases[] = {
      {"no sync yet", false, false, never, 1'000, true},
      {"nothing changed, within the interval", false, false, 1'000, 5'999, false},
      {"nothing changed, interval reached", false, false, 1'000, 6'000, true},
      {"nothing changed, long after", false, false, 1'000, 100'000, true},
      {"a node changed", false, true, 1'000, 1'001, true},
      {"a rebuild forces it", true, false, 1'000, 1'001, true},
      {"the same millisecond", false, false, 1'000, 1'000, false},
      {"the clock went back", false, false, 1'000, 999, true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(NodeSyncDue(c.force, c.changed, c.last_ok, c.now, /*interval_ms=*/5'000), c.due) << c.what;
  }
}

kube::NodeInfo Node(const std::string& name, const std::string& capacity) {
  kube::NodeInfo n;
  n.name = name;
  n.uid = "uid-" + name;
  n.annotations["vramd.io/capacity"] = capacity;
  return n;
}

int64_t Capacity(testing::FakeLedgerStore& store, const std::string& node) {
  const ledger::SnapshotPtr snap = *store.Snapshot();  // held while `n` points into it
  const ledger::Node* n = snap->Find(node);
  return n == nullptr || n->gpus.empty() ? -1 : n->gpus[0].capacity;
}

TEST(NodeSyncIfDue, SyncsOnANodeChangeARebuildOrTheIntervalAndSkipsOtherwise) {
  config::Config cfg;
  cfg.reserve_percent = 0;
  cfg.reserve_min_bytes = 0;
  cfg.node_sync_interval_ms = 5'000;
  testing::FakeLedgerStore store;
  testing::FakeKubeClient kube;
  kube.nodes = {Node("a", "40Gi")};
  metrics::Registry reg;
  NodeSync sync(cfg, &store, &kube, &reg);

  std::optional<Result<NodeSyncStats>> r = sync.SyncIfDue(10'000, false);
  ASSERT_TRUE(r.has_value()) << "the first pass syncs";
  ASSERT_TRUE(r->ok()) << r->status().message();
  EXPECT_EQ(Capacity(store, "a"), 40 * kGi);

  // A Node changes without the watch saying so: passes within the interval skip it.
  kube.nodes = {Node("a", "48Gi")};
  EXPECT_FALSE(sync.SyncIfDue(10'250, false).has_value());
  EXPECT_FALSE(sync.SyncIfDue(14'999, false).has_value());
  EXPECT_EQ(Capacity(store, "a"), 40 * kGi);
  // ... until the interval has passed.
  r = sync.SyncIfDue(15'000, false);
  ASSERT_TRUE(r.has_value() && r->ok());
  EXPECT_EQ(Capacity(store, "a"), 48 * kGi);

  // The node watch's change: the next pass syncs, however soon.
  kube.nodes = {Node("a", "56Gi")};
  sync.NodesChanged();
  r = sync.SyncIfDue(15'001, false);
  ASSERT_TRUE(r.has_value() && r->ok());
  EXPECT_EQ(Capacity(store, "a"), 56 * kGi);
  EXPECT_FALSE(sync.SyncIfDue(15'002, false).has_value()) << "the change was taken";

  // A rebuild (the ledger's capacities may be gone) forces it.
  kube.nodes = {Node("a", "64Gi")};
  r = sync.SyncIfDue(15'003, /*force=*/true);
  ASSERT_TRUE(r.has_value() && r->ok());
  EXPECT_EQ(Capacity(store, "a"), 64 * kGi);

  // A pass that fails leaves the change pending: the next pass syncs again.
  kube.nodes = {Node("a", "72Gi")};
  sync.NodesChanged();
  store.unavailable = true;
  r = sync.SyncIfDue(15'004, false);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->ok());
  store.unavailable = false;
  r = sync.SyncIfDue(15'005, false);
  ASSERT_TRUE(r.has_value()) << "a failed pass is retried on the next one";
  ASSERT_TRUE(r->ok()) << r->status().message();
  EXPECT_EQ(Capacity(store, "a"), 72 * kGi);
}

}  // namespace
}  // namespace vramd::reconcile
