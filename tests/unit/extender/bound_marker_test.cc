#include "vramd/extender/bound_marker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "fakes/fake_ledger_store.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"

namespace vramd::extender {
namespace {

using vramd::testing::FakeLedgerStore;
using Batch = std::vector<std::string>;  // the uids of one FinishBinds call

// Waits (up to 10 s) until `done`; its last answer.
bool WaitUntil(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}


// Records each FinishBinds call's uids; answers each mark with `answer` (a
// per-uid status; ok when not named) or the whole call with `down`.
class RecordingStore : public FakeLedgerStore {
 public:
  Status FinishBinds(const std::vector<BoundMark>& marks, std::vector<Status>* results) override {
    entered = true;
    while (hold) std::this_thread::yield();
    MutexLock l(&mu);
    Batch b;
    for (const BoundMark& m : marks) b.push_back(m.pod_uid);
    calls.push_back(b);
    if (down) return Unavailable("valkey down");
    results->clear();
    for (const BoundMark& m : marks) {
      auto it = answer.find(m.pod_uid);
      results->push_back(it == answer.end() ? Status::Ok() : it->second);
    }
    return Status::Ok();
  }
  std::vector<Batch> Calls() {
    MutexLock l(&mu);
    return calls;
  }
  bool WaitForCalls(size_t n) {
    return WaitUntil([&] { return Calls().size() >= n; });
  }
  Mutex mu;
  std::vector<Batch> calls GUARDED_BY(mu);
  std::map<std::string, Status> answer;  // set before any mark
  std::atomic<bool> down = false, hold = false, entered = false;
};

double Marks(metrics::Registry& reg, const std::string& result) {
  return reg.AddCounter("vramd_bound_marks_total", "", {"result"}).With({result}).Value();
}

TEST(BoundMarker, MarksWithinTheWindowAreWrittenInOneCall) {
  RecordingStore store;
  metrics::Registry reg;
  BoundMarkerOptions opts;
  opts.batch_window_ms = 1000;
  BoundMarker marker(&store, &reg, opts);
  ASSERT_TRUE(marker.Mark("n1", "a"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the thread woke for "a" long ago
  ASSERT_TRUE(marker.Mark("n2", "b"));
  ASSERT_TRUE(store.WaitForCalls(1));
  marker.Stop();
  EXPECT_EQ(store.Calls(), (std::vector<Batch>{{"a", "b"}}))
      << "a mark was written on its own instead of waiting for the rest of its window";
  EXPECT_EQ(Marks(reg, "written"), 2);
  EXPECT_EQ(reg.AddCounter("vramd_bound_mark_batches_total", "").With({}).Value(), 1);
}

TEST(BoundMarker, StopWritesWhatIsQueuedWithoutWaitingOutTheWindow) {
  RecordingStore store;
  metrics::Registry reg;
  BoundMarkerOptions opts;
  opts.batch_window_ms = 60'000;
  BoundMarker marker(&store, &reg, opts);
  ASSERT_TRUE(marker.Mark("n1", "a"));
  ASSERT_TRUE(marker.Mark("n1", "b"));
  const auto start = std::chrono::steady_clock::now();
  marker.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "Stop waited out the window";
  EXPECT_EQ(store.Calls(), (std::vector<Batch>{{"a", "b"}}));
  EXPECT_FALSE(marker.Mark("n1", "c")) << "nothing is queued after Stop";
  marker.Stop();  // idempotent
  EXPECT_EQ(store.Calls().size(), 1u);
}

TEST(BoundMarker, AFullBatchIsWrittenBeforeTheWindowEnds) {
  RecordingStore store;
  metrics::Registry reg;
  BoundMarkerOptions opts;
  opts.batch_window_ms = 60'000;
  opts.max_batch = 3;
  BoundMarker marker(&store, &reg, opts);
  for (const char* uid : {"a", "b", "c"}) ASSERT_TRUE(marker.Mark("n1", uid));
  EXPECT_TRUE(store.WaitForCalls(1)) << "three marks (max_batch) waited for the 60 s window";
  marker.Stop();
  EXPECT_EQ(store.Calls(), (std::vector<Batch>{{"a", "b", "c"}}));
}

// Marks "a" on a marker whose store holds its first call, and waits until
// that call is under way: what is marked next queues up behind it.
void MarkAWhileItsCallHolds(RecordingStore* store, BoundMarker* marker) {
  ASSERT_TRUE(marker->Mark("n1", "a"));
  ASSERT_TRUE(WaitUntil([&] { return store->entered.load(); }));
}

TEST(BoundMarker, MoreThanABatchQueuedIsWrittenInCallsOfAtMostMaxBatch) {
  RecordingStore store;
  store.hold = true;
  metrics::Registry reg;
  BoundMarkerOptions opts;
  opts.batch_window_ms = 1;
  opts.max_batch = 2;
  BoundMarker marker(&store, &reg, opts);
  MarkAWhileItsCallHolds(&store, &marker);
  for (const char* uid : {"b", "c", "d", "e", "f"}) ASSERT_TRUE(marker.Mark("n1", uid));
  store.hold = false;
  marker.Stop();
  std::vector<Batch> calls = store.Calls();
  size_t total = 0;
  for (const Batch& b : calls) {
    EXPECT_LE(b.size(), 2u);
    total += b.size();
  }
  EXPECT_EQ(total, 6u) << "every mark written once";
}

TEST(BoundMarker, AFullQueueRefusesWithoutWaitingForTheStore) {
  RecordingStore store;
  store.hold = true;
  metrics::Registry reg;
  BoundMarkerOptions opts;
  opts.batch_window_ms = 1;
  opts.max_queued = 2;
  BoundMarker marker(&store, &reg, opts);
  MarkAWhileItsCallHolds(&store, &marker);
  EXPECT_TRUE(marker.Mark("n1", "b"));
  EXPECT_TRUE(marker.Mark("n1", "c"));
  EXPECT_FALSE(marker.Mark("n1", "d")) << "the queue holds b and c: the caller marks d itself";
  store.hold = false;
  marker.Stop();
  size_t total = 0;
  for (const Batch& b : store.Calls()) total += b.size();
  EXPECT_EQ(total, 3u);
}

TEST(BoundMarker, EachMarksResultIsCounted) {
  RecordingStore store;
  store.answer["gone"] = NotFound("no entry");
  store.answer["broken"] = Internal("unreadable entry");
  metrics::Registry reg;
  BoundMarker marker(&store, &reg);
  for (const char* uid : {"ok", "gone", "broken"}) ASSERT_TRUE(marker.Mark("n1", uid));
  marker.Stop();
  EXPECT_EQ(Marks(reg, "written"), 1);
  EXPECT_EQ(Marks(reg, "gone"), 1);
  EXPECT_EQ(Marks(reg, "failed"), 1);
}

TEST(BoundMarker, AFailedCallCountsItsWholeBatchFailedAndTheNextIsWritten) {
  RecordingStore store;
  store.down = true;
  metrics::Registry reg;
  BoundMarkerOptions opts;
  opts.batch_window_ms = 1;
  BoundMarker marker(&store, &reg, opts);
  ASSERT_TRUE(marker.Mark("n1", "a"));
  ASSERT_TRUE(marker.Mark("n1", "b"));
  ASSERT_TRUE(WaitUntil([&] { return Marks(reg, "failed") >= 2; }));
  store.down = false;
  ASSERT_TRUE(marker.Mark("n1", "c"));
  marker.Stop();
  EXPECT_EQ(Marks(reg, "written"), 1);
  EXPECT_EQ(Marks(reg, "failed"), 2) << "a and b may have gone in one call or two; both failed";
}

}  // namespace
}  // namespace vramd::extender
