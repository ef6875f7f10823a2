// Leader election on an in-memory lease and a fake clock: two electors as
// two replicas would run them (TryAcquireOrRenew is what the loop calls).
#include <gtest/gtest.h>

#include <memory>

#include "fakes/fake_clock.h"
#include "fakes/fake_lease.h"
#include "vramd/metrics/registry.h"
#include "vramd/reconcile/leader.h"

namespace vramd::reconcile {
namespace {

constexpr int kLeaseMs = 3000;

class Leader : public ::testing::Test {
 protected:
  double Transitions(metrics::Registry& r, const char* to) {
    return r.AddCounter("vramd_leader_transitions_total", "", {"to"}).With({to}).Value();
  }
  double IsLeaderGauge(metrics::Registry& r, const std::string& replica) {
    return r.AddGauge("vramd_is_leader", "", {"replica"}).With({replica}).Value();
  }

  testing::FakeClock clock_;
  std::shared_ptr<testing::FakeLease> lease_ = std::make_shared<testing::FakeLease>(&clock_);
  metrics::Registry registry_a_, registry_b_;
  LeaderElector a_{lease_, "replica-a", kLeaseMs, &registry_a_, &clock_};
  LeaderElector b_{lease_, "replica-b", kLeaseMs, &registry_b_, &clock_};
};

TEST_F(Leader, OnlyOneOfTwoElectorsLeads) {
  EXPECT_TRUE(a_.TryAcquireOrRenew());
  EXPECT_FALSE(b_.TryAcquireOrRenew());
  EXPECT_TRUE(a_.IsLeader());
  EXPECT_FALSE(b_.IsLeader());
  EXPECT_EQ(a_.CurrentLeader(), "replica-a");
  EXPECT_EQ(b_.CurrentLeader(), "replica-a");
  EXPECT_EQ(IsLeaderGauge(registry_a_, "replica-a"), 1);
  EXPECT_EQ(IsLeaderGauge(registry_b_, "replica-b"), 0);
}

TEST_F(Leader, RenewalKeepsTheLeaseBeyondItsFirstTerm) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(kLeaseMs / 3);  // the loop's renewal period
    EXPECT_TRUE(a_.TryAcquireOrRenew());
    EXPECT_FALSE(b_.TryAcquireOrRenew());
  }
  EXPECT_TRUE(a_.IsLeader());
  EXPECT_EQ(Transitions(registry_a_, "leader"), 1) << "renewals are not transitions";
}

TEST_F(Leader, ExpiryHandsTheLeaseToTheOtherElector) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  clock_.Advance(kLeaseMs);  // a stopped renewing (partitioned, stalled)
  EXPECT_FALSE(a_.IsLeader()) << "a steps down on its own";
  EXPECT_TRUE(b_.TryAcquireOrRenew());
  EXPECT_TRUE(b_.IsLeader());
  EXPECT_FALSE(a_.TryAcquireOrRenew()) << "a comes back as a follower";
  EXPECT_EQ(a_.CurrentLeader(), "replica-b");
}

TEST_F(Leader, ALeaderThatCannotRenewStepsDownBeforeTheLeaseLapses) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  clock_.Advance(kLeaseMs - kLeaseMs / 4);
  EXPECT_FALSE(a_.IsLeader());
  EXPECT_FALSE(b_.TryAcquireOrRenew()) << "the lease itself is still a's: no two leaders at once";
}

TEST_F(Leader, StopGivesTheLeaseUpSoTheOtherTakesOverAtOnce) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  a_.Stop();
  EXPECT_FALSE(a_.IsLeader());
  EXPECT_EQ(b_.CurrentLeader(), "");
  EXPECT_TRUE(b_.TryAcquireOrRenew());
  EXPECT_EQ(IsLeaderGauge(registry_a_, "replica-a"), 0);
}

TEST_F(Leader, StopByAFollowerLeavesTheLeaderAlone) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  ASSERT_FALSE(b_.TryAcquireOrRenew());
  b_.Stop();
  EXPECT_EQ(a_.CurrentLeader(), "replica-a");
  EXPECT_TRUE(a_.TryAcquireOrRenew());
}

TEST_F(Leader, TransitionsAreCountedEachWay) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  clock_.Advance(kLeaseMs);
  ASSERT_TRUE(b_.TryAcquireOrRenew());
  ASSERT_FALSE(a_.TryAcquireOrRenew());
  EXPECT_EQ(Transitions(registry_a_, "leader"), 1);
  EXPECT_EQ(Transitions(registry_a_, "follower"), 1);
  EXPECT_EQ(Transitions(registry_b_, "leader"), 1);
  EXPECT_EQ(Transitions(registry_b_, "follower"), 0);
}

TEST_F(Leader, AnUnreachableLeaseStoreMakesTheLeaderAFollower) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  lease_->unavailable = true;
  EXPECT_FALSE(a_.TryAcquireOrRenew());
  EXPECT_FALSE(a_.IsLeader());
  EXPECT_EQ(a_.CurrentLeader(), "") << "unknown reads as none";
  EXPECT_EQ(Transitions(registry_a_, "follower"), 1);
}

}  // namespace
}  // namespace vramd::reconcile
