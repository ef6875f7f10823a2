// The in-memory LedgerStore keeps every field of an entry, as the Valkey
// store does (tests/integration/ledger_compat_test.cc): tests of the features
// that read the new fields can rely on it.
#include "fakes/fake_ledger_store.h"

#include <gtest/gtest.h>

namespace vramd::testing {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

ledger::Entry Everything(const std::string& uid) {
  ledger::Entry e;
  e.pod_uid = uid;
  e.ns = "ml";
  e.name = "pod-" + uid;
  e.gpus = {0};
  e.per_gpu = 4 * kGi;
  e.peak_per_gpu = 6 * kGi;
  e.model = "llama";
  e.state = ledger::EntryState::kBound;
  e.created_ms = 123;
  e.priority = 100000;
  e.priority_class = "vramd-critical";
  e.victim = true;
  e.used = 3 * kGi;
  e.used_ts_ms = 456;
  e.last_active_ms = 789;
  return e;
}

TEST(FakeLedgerStore, ReserveAndPutEntryKeepEveryField) {
  FakeLedgerStore store;
  store.AddNode("n1", {16 * kGi});
  store::ReserveRequest rr;
  rr.node = "n1";
  rr.entry = Everything("a");
  ASSERT_TRUE(store.Reserve(rr).ok());
  ASSERT_TRUE(store.PutEntry("n1", Everything("b")).ok());

  Result<ledger::SnapshotPtr> snap = store.Snapshot();
  ASSERT_TRUE(snap.ok());
  const ledger::Node* n1 = (*snap)->Find("n1");
  ASSERT_NE(n1, nullptr);
  ASSERT_EQ(n1->entries.size(), 2u);
  ledger::Entry reserved = Everything("a");
  reserved.created_ms = store.now_ms;  // a reservation is stamped by the store
  EXPECT_EQ(n1->entries[0], reserved);
  EXPECT_EQ(n1->entries[1], Everything("b"));
}

// The fake's usage reports behave as the Valkey store's
// (tests/integration/valkey_store_test.cc, "PushReport..."): entries' used
// from their pods' figures, unknown UIDs summed as untracked, a refusal
// changes nothing.
constexpr const char* kUidA = "aaaaaaaa-0000-0000-0000-000000000001";
constexpr const char* kUidZombie = "dddddddd-0000-0000-0000-00000000000d";

ledger::UsageReport AgentReport() {
  ledger::UsageReport r;
  r.gpus = {{.index = 0, .uuid = "GPU-0", .total = 80 * kGi, .used = 9 * kGi, .outside_pods = kGi,
             .pods = {{kUidA, 5 * kGi}, {kUidZombie, 3 * kGi}}},
            {.index = 1, .uuid = "GPU-1", .total = 80 * kGi, .used = 7 * kGi, .pods = {{kUidA, 7 * kGi}}}};
  return r;
}

TEST(FakeLedgerStore, AReportFillsEntriesUsedAndSumsUnknownPodsAsUntracked) {
  FakeLedgerStore store;
  store.AddNode("n1", {70 * kGi, 70 * kGi});
  ledger::Entry a = Everything(kUidA);
  a.gpus = {0, 1};
  a.used = 0;
  a.used_ts_ms = 0;
  ASSERT_TRUE(store.PutEntry("n1", a).ok());
  ASSERT_TRUE(store.PushReport("n1", AgentReport(), false).ok());
  Result<ledger::SnapshotPtr> snap = store.Snapshot();
  ASSERT_TRUE(snap.ok());
  const ledger::Node* n1 = (*snap)->Find("n1");
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ(n1->entries[0].used, 7 * kGi);  // its largest figure
  EXPECT_EQ(n1->entries[0].used_ts_ms, store.now_ms);
  EXPECT_EQ(n1->gpus[0].used, 9 * kGi);
  EXPECT_EQ(n1->gpus[0].total, 80 * kGi);
  EXPECT_EQ(n1->gpus[0].uuid, "GPU-0");
  EXPECT_EQ(n1->gpus[0].outside_pods, kGi);
  EXPECT_EQ(n1->gpus[0].untracked, 3 * kGi);
  EXPECT_EQ(n1->gpus[1].untracked, 0);
}

TEST(FakeLedgerStore, ARefusedReportChangesNothing) {
  FakeLedgerStore store;
  store.AddNode("n1", {70 * kGi});
  const uint64_t epoch = (*store.Snapshot())->epoch;
  ledger::UsageReport r = AgentReport();  // names GPU 1, which n1 lacks
  Status s = store.PushReport("n1", r, false);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "node n1 has no GPU 1");
  EXPECT_EQ(store.PushReport("ghost", r, false).code(), Code::kNotFound);
  EXPECT_EQ((*store.Snapshot())->epoch, epoch);
  EXPECT_EQ((*store.Snapshot())->Find("n1")->gpus[0].used_ts_ms, 0);
  EXPECT_TRUE(store.ReportedGpus()->empty());
}

TEST(FakeLedgerStore, ANodeOnlyTheClusterKnowsKeepsItsTotalsForNodeSync) {
  FakeLedgerStore store;
  ASSERT_TRUE(store.PushReport("gpu-1", AgentReport(), /*in_cluster=*/true).ok());
  EXPECT_EQ((*store.Snapshot())->Find("gpu-1"), nullptr);
  auto reported = store.ReportedGpus();
  ASSERT_TRUE(reported.ok());
  ASSERT_EQ(reported->count("gpu-1"), 1u);
  EXPECT_EQ(reported->at("gpu-1"), (std::vector<store::ReportedGpu>{{0, 80 * kGi, "GPU-0"}, {1, 80 * kGi, "GPU-1"}}));
  ASSERT_TRUE(store.RemoveNode("gpu-1").ok());
  EXPECT_TRUE(store.ReportedGpus()->empty());
}

}  // namespace
}  // namespace vramd::testing
