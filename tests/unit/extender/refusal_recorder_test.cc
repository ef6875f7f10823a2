#include "vramd/extender/refusal_recorder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fakes/fake_clock.h"
#include "fakes/fake_ledger_store.h"
#include "vramd/mutex.h"

namespace vramd::extender {
namespace {

using vramd::testing::FakeClock;
using vramd::testing::FakeLedgerStore;

store::Refusal R(const std::string& uid, std::vector<std::string> nodes = {"n1"}) {
  store::Refusal r;
  r.uid = uid;
  r.ns = "ml";
  r.name = "p-" + uid;
  r.per_gpu = 1 << 30;
  r.peak_per_gpu = 1 << 30;
  r.nodes = std::move(nodes);
  return r;
}

std::set<std::string> Uids(FakeLedgerStore& store) {
  std::set<std::string> out;
  Result<std::vector<store::Refusal>> rs = store.ReadRefusals(60'000);
  EXPECT_TRUE(rs.ok());
  if (rs.ok()) {
    for (const store::Refusal& r : *rs) out.insert(r.uid);
  }
  return out;
}

TEST(RefusalRecorder, StopWritesWhatIsQueued) {
  FakeLedgerStore store;
  FakeClock clock;
  RefusalRecorder rec(&store, &clock);
  EXPECT_TRUE(rec.Record(R("a")));
  EXPECT_TRUE(rec.Record(R("b")));
  rec.Stop();
  EXPECT_EQ(Uids(store), (std::set<std::string>{"a", "b"}));
  EXPECT_FALSE(rec.Record(R("c"))) << "nothing is queued after Stop";
  rec.Stop();  // idempotent
}

TEST(RefusalRecorder, AtMostOneRefusalPerPodPerInterval) {
  FakeLedgerStore store;
  FakeClock clock;
  RefusalRecorder rec(&store, &clock);
  EXPECT_TRUE(rec.Record(R("a")));
  EXPECT_FALSE(rec.Record(R("a")));
  clock.Advance(4'999);
  EXPECT_FALSE(rec.Record(R("a")));
  EXPECT_TRUE(rec.Record(R("b")));
  clock.Advance(1);
  EXPECT_TRUE(rec.Record(R("a")));
}

TEST(RefusalRecorder, ForgetDropsAQueuedRefusalAndTheStoredOne) {
  FakeLedgerStore store;
  FakeClock clock;
  {
    RefusalRecorder rec(&store, &clock);
    ASSERT_TRUE(rec.Record(R("a")));
    ASSERT_TRUE(rec.Record(R("b")));
  }  // the destructor stops it
  ASSERT_EQ(Uids(store), (std::set<std::string>{"a", "b"}));
  RefusalRecorder rec(&store, &clock);
  ASSERT_TRUE(rec.Record(R("c")));
  EXPECT_TRUE(rec.Forget("a"));
  EXPECT_TRUE(rec.Forget("c"));
  rec.Stop();
  EXPECT_EQ(Uids(store), (std::set<std::string>{"b"}));
}

TEST(RefusalRecorder, KeepsAtMostTheMaximumOfNodes) {
  FakeLedgerStore store;
  FakeClock clock;
  RefusalRecorder rec(&store, &clock);
  ASSERT_TRUE(rec.Record(R("a", std::vector<std::string>(store::kMaxRefusalNodes + 10, "n"))));
  rec.Stop();
  Result<std::vector<store::Refusal>> rs = store.ReadRefusals(60'000);
  ASSERT_TRUE(rs.ok());
  ASSERT_EQ(rs->size(), 1u);
  EXPECT_EQ((*rs)[0].nodes.size(), store::kMaxRefusalNodes);
  EXPECT_EQ((*rs)[0].ts_ms, store.now_ms);
}

// Forgets that come within the batch window are written in one round trip.
class CountingStore : public FakeLedgerStore {
 public:
  Status ForgetRefusals(const std::vector<std::string>& uids) override {
    {
      MutexLock l(&mu);
      calls.push_back(uids);
    }
    return FakeLedgerStore::ForgetRefusals(uids);
  }
  std::vector<std::vector<std::string>> Calls() {
    MutexLock l(&mu);
    return calls;
  }
  Mutex mu;
  std::vector<std::vector<std::string>> calls GUARDED_BY(mu);
};

TEST(RefusalRecorder, ForgetsWithinTheBatchWindowAreWrittenInOneRoundTrip) {
  CountingStore store;
  FakeClock clock;
  RefusalRecorderOptions opts;
  opts.batch_window_ms = 1000;
  RefusalRecorder rec(&store, &clock, opts);
  ASSERT_TRUE(rec.Forget("a"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the thread woke for "a" long ago
  ASSERT_TRUE(rec.Forget("b"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store.Calls().empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  rec.Stop();
  EXPECT_EQ(store.Calls(), (std::vector<std::vector<std::string>>{{"a", "b"}}))
      << "a forget was written on its own instead of waiting for the rest of its burst";
}

// A store whose RecordRefusals waits until released: the queue fills meanwhile.
class StuckStore : public FakeLedgerStore {
 public:
  Status RecordRefusals(const std::vector<store::Refusal>& refusals) override {
    entered = true;
    while (!release) std::this_thread::yield();
    return FakeLedgerStore::RecordRefusals(refusals);
  }
  std::atomic<bool> entered = false;
  std::atomic<bool> release = false;
};

TEST(RefusalRecorder, DropsWhenTheQueueIsFullWithoutWaitingForTheStore) {
  StuckStore store;
  FakeClock clock;
  RefusalRecorderOptions opts;
  opts.max_queued = 2;
  RefusalRecorder rec(&store, &clock, opts);
  ASSERT_TRUE(rec.Record(R("a")));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!store.entered && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(store.entered);
  EXPECT_TRUE(rec.Record(R("b")));
  EXPECT_TRUE(rec.Record(R("c")));
  EXPECT_FALSE(rec.Record(R("d"))) << "the queue holds b and c";
  store.release = true;
  rec.Stop();
  EXPECT_EQ(Uids(store), (std::set<std::string>{"a", "b", "c"}));
}

TEST(RefusalRecorder, TracksABoundedNumberOfPods) {
  FakeLedgerStore store;
  FakeClock clock;
  RefusalRecorderOptions opts;
  opts.max_tracked_uids = 2;
  RefusalRecorder rec(&store, &clock, opts);
  EXPECT_TRUE(rec.Record(R("a")));
  EXPECT_TRUE(rec.Record(R("b")));
  EXPECT_FALSE(rec.Record(R("c")));
  clock.Advance(5'000);  // a and b's intervals passed: they are forgotten
  EXPECT_TRUE(rec.Record(R("c")));
}

TEST(RefusalRecorder, AStoreErrorLosesTheBatchOnly) {
  FakeLedgerStore store;
  FakeClock clock;
  store.unavailable = true;
  {
    RefusalRecorder rec(&store, &clock);
    EXPECT_TRUE(rec.Record(R("a")));
  }
  store.unavailable = false;
  EXPECT_TRUE(Uids(store).empty());
  RefusalRecorder rec(&store, &clock);
  EXPECT_TRUE(rec.Record(R("a")));
  rec.Stop();
  EXPECT_EQ(Uids(store), (std::set<std::string>{"a"}));
}

}  // namespace
}  // namespace vramd::extender
