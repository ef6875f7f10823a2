// LockService's lock semantics on an in-memory LockStore and a fake clock
// (the Valkey store runs the same cases against a real server in
// tests/integration/gpulock_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "fakes/fake_clock.h"
#include "fakes/fake_lock_store.h"
#include "vramd/gpulock/locks.h"
#include "vramd/metrics/registry.h"

namespace vramd::gpulock {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kTtl = 1000;
const std::string kA = "pod-a/worker-0";
const std::string kB = "pod-b/worker-0";
const std::string kC = "pod-c/worker-0";

class Locks : public ::testing::Test {
 protected:
  LockService& Service(LockOptions opts = {}) {
    service_ = std::make_unique<LockService>(store_, &registry_, opts);
    return *service_;
  }
  Result<AcquireResult> Acquire(const std::string& owner, int64_t ttl_ms = kTtl) {
    return service_->Acquire("node-1", 0, owner, ttl_ms);
  }
  std::vector<std::string> Waiters() {
    Result<std::vector<LockInfo>> locks = service_->List();
    std::vector<std::string> out;
    if (locks.ok() && !locks->empty()) {
      for (const Waiter& w : locks->front().waiters) out.push_back(w.owner);
    }
    return out;
  }
  std::string Holder() {
    Result<std::vector<LockInfo>> locks = service_->List();
    return locks.ok() && !locks->empty() ? locks->front().holder : "?";
  }
  double Counter(const std::string& name, metrics::Labels labels = {}, std::vector<std::string> names = {}) {
    return registry_.AddCounter(name, "", std::move(names)).With(labels).Value();
  }

  testing::FakeClock clock_;
  std::shared_ptr<testing::FakeLockStore> store_ = std::make_shared<testing::FakeLockStore>(&clock_);
  metrics::Registry registry_;
  std::unique_ptr<LockService> service_;
};

TEST_F(Locks, AFreeLockIsGrantedWithTheFirstToken) {
  Service();
  Result<AcquireResult> r = Acquire(kA);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->outcome, AcquireOutcome::kGranted);
  EXPECT_EQ(r->token, 1u);
  EXPECT_EQ(r->ttl_ms, kTtl);
  EXPECT_FALSE(r->refreshed);
  EXPECT_EQ(Holder(), kA);
}

TEST_F(Locks, ReacquireByTheHolderKeepsTheTokenAndResetsTheTtl) {
  Service();
  ASSERT_TRUE(Acquire(kA).ok());
  clock_.Advance(900);
  Result<AcquireResult> again = Acquire(kA);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, AcquireOutcome::kGranted);
  EXPECT_TRUE(again->refreshed);
  EXPECT_EQ(again->token, 1u);
  clock_.Advance(900);  // 1800 ms after the first grant, 900 after the refresh
  EXPECT_EQ(Holder(), kA);
}

TEST_F(Locks, WaitersAreQueuedAndServedInArrivalOrder) {
  Service();
  ASSERT_TRUE(Acquire(kA).ok());
  Result<AcquireResult> b = Acquire(kB, 5000);
  Result<AcquireResult> c = Acquire(kC, 5000);
  ASSERT_TRUE(b.ok() && c.ok());
  EXPECT_EQ(b->outcome, AcquireOutcome::kQueued);
  EXPECT_EQ(b->position, 1);
  EXPECT_EQ(c->position, 2);
  EXPECT_THAT(Waiters(), ElementsAre(kB, kC));

  ASSERT_TRUE(service_->Release("node-1", 0, kA).ok());
  // The lock is free but only the head may take it.
  Result<AcquireResult> c_again = Acquire(kC, 5000);
  ASSERT_TRUE(c_again.ok());
  EXPECT_EQ(c_again->outcome, AcquireOutcome::kQueued);
  EXPECT_EQ(c_again->position, 2) << "a poll keeps the place, it does not jump the queue";
  clock_.Advance(30);
  Result<AcquireResult> b_again = Acquire(kB, 5000);
  ASSERT_TRUE(b_again.ok());
  EXPECT_EQ(b_again->outcome, AcquireOutcome::kGranted);
  EXPECT_EQ(b_again->waited_ms, 30);
  EXPECT_THAT(Waiters(), ElementsAre(kC));
}

TEST_F(Locks, AFullQueueTurnsNewWaitersAway) {
  LockOptions opts;
  opts.max_queue = 1;
  Service(opts);
  ASSERT_TRUE(Acquire(kA).ok());
  EXPECT_EQ(Acquire(kB)->outcome, AcquireOutcome::kQueued);
  EXPECT_EQ(Acquire(kC)->outcome, AcquireOutcome::kQueueFull);
  EXPECT_EQ(Counter("vramd_lock_operations_total", {"acquire", "queue_full"}, {"op", "result"}), 1);
}

TEST_F(Locks, HeartbeatExtendsTheHoldersTtl) {
  Service();
  ASSERT_TRUE(Acquire(kA).ok());
  clock_.Advance(800);
  Result<HeartbeatResult> hb = service_->Heartbeat("node-1", 0, kA);
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_EQ(hb->token, 1u);
  EXPECT_EQ(hb->ttl_ms, kTtl) << "no TTL given: the grant's";
  clock_.Advance(800);  // past the first TTL, within the renewed one
  EXPECT_EQ(Holder(), kA);
  EXPECT_EQ(Acquire(kB)->outcome, AcquireOutcome::kQueued);
}

TEST_F(Locks, HeartbeatWithANewTtlKeepsItForLaterHeartbeats) {
  Service();
  ASSERT_TRUE(Acquire(kA).ok());
  ASSERT_EQ(service_->Heartbeat("node-1", 0, kA, 5000)->ttl_ms, 5000);
  EXPECT_EQ(service_->Heartbeat("node-1", 0, kA)->ttl_ms, 5000);
}

TEST_F(Locks, ExpiryHandsTheLockToTheNextWaiterWithAHigherToken) {
  Service();
  ASSERT_TRUE(Acquire(kA).ok());
  ASSERT_EQ(Acquire(kB, 5000)->outcome, AcquireOutcome::kQueued);
  clock_.Advance(kTtl);  // A never heartbeats
  Result<AcquireResult> b = Acquire(kB, 5000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->outcome, AcquireOutcome::kGranted);
  EXPECT_EQ(b->token, 2u);
  EXPECT_EQ(Counter("vramd_lock_expirations_total"), 1) << "counted at the next grant";

  Result<HeartbeatResult> late = service_->Heartbeat("node-1", 0, kA);
  EXPECT_EQ(late.status().code(), Code::kConflict);
  EXPECT_THAT(late.status().message(), HasSubstr("held by another owner"));
}

TEST_F(Locks, ALateHolderLearnsItsLockExpiredOnce) {
  Service();
  ASSERT_TRUE(Acquire(kA).ok());
  clock_.Advance(kTtl + 1);
  Result<HeartbeatResult> late = service_->Heartbeat("node-1", 0, kA);
  EXPECT_EQ(late.status().code(), Code::kConflict);
  EXPECT_THAT(late.status().message(), HasSubstr("expired (no heartbeat within its TTL)"));
  EXPECT_EQ(Counter("vramd_lock_expirations_total"), 1);
  Result<ReleaseResult> again = service_->Release("node-1", 0, kA);
  EXPECT_THAT(again.status().message(), HasSubstr("is free"));
  EXPECT_EQ(Counter("vramd_lock_expirations_total"), 1) << "one expiry, counted once";
  EXPECT_EQ(Acquire(kB)->token, 2u);
  EXPECT_EQ(Counter("vramd_lock_expirations_total"), 1) << "the next grant does not count it again";
}

TEST_F(Locks, FencingTokensIncreaseWithEveryGrantAndSurviveRelease) {
  Service();
  std::set<uint64_t> seen;
  uint64_t last = 0;
  for (const std::string& owner : {kA, kB, kC, kA}) {
    Result<AcquireResult> r = Acquire(owner);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->outcome, AcquireOutcome::kGranted);
    EXPECT_GT(r->token, last);
    last = r->token;
    ASSERT_TRUE(service_->Release("node-1", 0, owner).ok());
  }
  EXPECT_EQ(last, 4u);
  EXPECT_EQ(service_->Acquire("node-1", 1, kA, kTtl)->token, 1u) << "each GPU has its own fence";
}

TEST_F(Locks, ReleaseByANonOwnerIsRefusedAndLeavesTheHolder) {
  Service();
  ASSERT_TRUE(Acquire(kA).ok());
  Result<ReleaseResult> r = service_->Release("node-1", 0, kB);
  EXPECT_EQ(r.status().code(), Code::kConflict);
  EXPECT_THAT(r.status().message(), HasSubstr("held by another owner"));
  EXPECT_EQ(Holder(), kA);
  EXPECT_EQ(Counter("vramd_lock_operations_total", {"release", "not_owner"}, {"op", "result"}), 1);
}

TEST_F(Locks, AWaiterThatReleasesLeavesTheQueue) {
  Service();
  ASSERT_TRUE(Acquire(kA).ok());
  ASSERT_TRUE(Acquire(kB).ok());
  Result<ReleaseResult> r = service_->Release("node-1", 0, kB);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->released);
  EXPECT_TRUE(r->left_queue);
  EXPECT_TRUE(Waiters().empty());
}

TEST_F(Locks, AWaiterThatStopsPollingLosesItsPlace) {
  Service();
  ASSERT_TRUE(Acquire(kA, 5000).ok());
  ASSERT_EQ(Acquire(kB, 500)->position, 1);
  ASSERT_EQ(Acquire(kC, 5000)->position, 2);
  clock_.Advance(500);
  EXPECT_THAT(Waiters(), ElementsAre(kC));
  ASSERT_TRUE(service_->Release("node-1", 0, kA).ok());
  EXPECT_EQ(Acquire(kC)->outcome, AcquireOutcome::kGranted);
}

TEST_F(Locks, ReapFreesOnlyLocksAndPlacesOfPodsThatAreGone) {
  Service();
  const std::string gone_pod = "0b6f2c7e-1a2b-4c3d-8e9f-0123456789ab";
  const std::string live_pod = "1c7a3d8f-2b3c-4d4e-9fa0-123456789abc";
  const std::string gone = gone_pod + "/trainer-0";
  const std::string live = live_pod + "/trainer-0";
  ASSERT_TRUE(service_->Acquire("node-1", 0, gone, kTtl).ok());
  ASSERT_TRUE(service_->Acquire("node-1", 1, live, kTtl).ok());
  ASSERT_TRUE(service_->Acquire("node-1", 1, gone, kTtl).ok());  // queued behind the live one
  ASSERT_TRUE(service_->Acquire("node-1", 0, "local/dev", kTtl).ok());  // not a pod: never reaped
  std::set<std::string> asked;
  Result<int> freed = service_->ReapLocksOfMissingPods([&](const std::string& uid) {
    asked.insert(uid);
    return uid != gone_pod;
  });
  ASSERT_TRUE(freed.ok()) << freed.status().message();
  EXPECT_EQ(*freed, 1);
  EXPECT_EQ(asked, (std::set<std::string>{gone_pod, live_pod}));
  Result<std::vector<LockInfo>> locks = service_->List();
  ASSERT_TRUE(locks.ok());
  ASSERT_EQ(locks->size(), 2u);
  EXPECT_EQ((*locks)[0].holder, "");
  ASSERT_EQ((*locks)[0].waiters.size(), 1u);
  EXPECT_EQ((*locks)[0].waiters[0].owner, "local/dev");
  EXPECT_EQ((*locks)[1].holder, live);
  EXPECT_TRUE((*locks)[1].waiters.empty());
  EXPECT_EQ(Counter("vramd_lock_operations_total", {"reap", "freed"}, {"op", "result"}), 1);
}

TEST_F(Locks, LockCallsRecordTheirPodsActivityPerNode) {
  Service();
  const int64_t t0 = clock_.NowMs();
  ASSERT_TRUE(Acquire(kA).ok());  // granted
  clock_.Advance(10);
  ASSERT_TRUE(Acquire(kB).ok());  // queued
  clock_.Advance(10);
  ASSERT_TRUE(service_->Heartbeat("node-1", 0, kA).ok());
  ASSERT_TRUE(service_->Acquire("node-2", 3, "pod-c/x", kTtl).ok());
  Result<std::map<std::string, int64_t>> a = store_->ReadActivity({"node-1"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::map<std::string, int64_t>{{"pod-a", t0 + 20}, {"pod-b", t0 + 10}}));
  clock_.Advance(10);
  ASSERT_TRUE(service_->Release("node-1", 0, kB).ok());  // leaves the queue
  a = store_->ReadActivity({"node-1", "node-2"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::map<std::string, int64_t>{{"pod-a", t0 + 20}, {"pod-b", t0 + 30}, {"pod-c", t0 + 20}}));
  EXPECT_TRUE(store_->ReadActivity({"node-3"})->empty());
}

TEST_F(Locks, ReapForgetsTheActivityOfPodsThatAreGone) {
  Service();
  const std::string gone_pod = "0b6f2c7e-1a2b-4c3d-8e9f-0123456789ab";
  const std::string live_pod = "1c7a3d8f-2b3c-4d4e-9fa0-123456789abc";
  ASSERT_TRUE(service_->Acquire("node-1", 0, gone_pod + "/a", kTtl).ok());
  ASSERT_TRUE(service_->Release("node-1", 0, gone_pod + "/a").ok());  // no lock left, activity kept
  ASSERT_TRUE(service_->Acquire("node-1", 1, live_pod + "/a", kTtl).ok());
  ASSERT_TRUE(service_->Acquire("node-1", 1, "local/dev", kTtl).ok());
  std::set<std::string> asked;
  Result<int> freed = service_->ReapLocksOfMissingPods([&](const std::string& uid) {
    asked.insert(uid);
    return uid != gone_pod;
  });
  ASSERT_TRUE(freed.ok()) << freed.status().message();
  EXPECT_EQ(*freed, 0);
  EXPECT_EQ(asked, (std::set<std::string>{gone_pod, live_pod}));
  Result<std::map<std::string, int64_t>> a = store_->ReadActivity({"node-1"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 2u);
  EXPECT_FALSE(a->contains(gone_pod));
  EXPECT_TRUE(a->contains(live_pod));
  EXPECT_TRUE(a->contains("local"));  // not a pod UID: never reaped
}

TEST_F(Locks, InvalidInputNeverReachesTheStore) {
  Service();
  EXPECT_EQ(service_->Acquire("node 1", 0, kA, kTtl).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->Acquire("node-1", -1, kA, kTtl).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->Acquire("node-1", 0, "no-slash", kTtl).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->Acquire("node-1", 0, kA, kMinTtlMs - 1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->Heartbeat("node-1", 0, kA, kMaxTtlMs + 1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->Release("node-1", 0, "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->calls, 0);
}

TEST_F(Locks, AnUnavailableStoreIsReportedAsSuch) {
  Service();
  store_->unavailable = true;
  EXPECT_EQ(Acquire(kA).status().code(), Code::kUnavailable);
  EXPECT_EQ(service_->Heartbeat("node-1", 0, kA).status().code(), Code::kUnavailable);
  EXPECT_EQ(service_->Release("node-1", 0, kA).status().code(), Code::kUnavailable);
  EXPECT_EQ(service_->List().status().code(), Code::kUnavailable);
  EXPECT_EQ(Counter("vramd_lock_operations_total", {"acquire", "error"}, {"op", "result"}), 1);
}

}  // namespace
}  // namespace vramd::gpulock
