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

}  // namespace
}  // namespace vramd::testing
