// GPU locks (LockService) against a real Redis-protocol server.
// Needs VRAMD_TEST_VALKEY_URL (e.g. redis://127.0.0.1:16399); fails without it.
// Every test works under its own random key prefix and deletes its keys.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "integration/shared_server.h"
#include "vramd/gpulock/locks.h"
#include "vramd/metrics/registry.h"
#include "vramd/store/valkey_client.h"

namespace vramd::gpulock {
namespace {

using ::testing::HasSubstr;
using Steady = std::chrono::steady_clock;

int64_t MsSince(Steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t).count();
}

class GpuLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::optional<store::ValkeyOptions> o = itest::SharedServerOptions(16);
    if (!o) GTEST_FAIL() << itest::kNoSharedServer;
    store::ValkeyOptions opts = *o;
    client_ = store::NewValkeyClient(opts);
    auto ping = client_->Command({"PING"});
    ASSERT_TRUE(ping.ok()) << "cannot reach the test server: " << ping.status().ToString();
    LockOptions lo;
    lo.max_waiting_calls = 64;
    locks_ = std::make_unique<LockService>(store::NewValkeyLockStore(client_), &registry_, lo);
  }

  void TearDown() override {
    locks_.reset();
    if (!client_) return;
    itest::DeleteKeys(*client_, client_->prefix());
  }

  std::string HolderKey(const std::string& node, int gpu) const {
    return client_->prefix() + ":lock:gpu:{" + node + "}:" + std::to_string(gpu);
  }

  AcquireResult MustAcquire(const std::string& node, int gpu, const std::string& owner, int64_t ttl_ms,
                            int64_t wait_ms = 0) {
    auto r = locks_->Acquire(node, gpu, owner, ttl_ms, wait_ms);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : AcquireResult{};
  }

  bool HolderExists(const std::string& node, int gpu) {
    auto r = client_->Command({"EXISTS", HolderKey(node, gpu)});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return !r.ok() || r->integer != 0;
  }

  // The owners queued for the lock, in order (LockService::List's view).
  std::vector<std::string> WaitersOf(const std::string& node, int gpu) {
    std::vector<std::string> out;
    auto list = locks_->List();
    if (!list.ok()) return out;
    for (const LockInfo& l : *list) {
      if (l.node != node || l.gpu != gpu) continue;
      for (const Waiter& w : l.waiters) out.push_back(w.owner);
    }
    return out;
  }

  // Polls `done` every 5 ms for at most 5 s.
  static bool Eventually(const std::function<bool()>& done) {
    const auto until = Steady::now() + std::chrono::seconds(5);
    while (Steady::now() < until) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  }

  double Expirations() const {
    std::string text = registry_.Render();
    auto at = text.find("\nvramd_lock_expirations_total ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + std::string("\nvramd_lock_expirations_total ").size()));
  }

  metrics::Registry registry_;
  std::shared_ptr<store::ValkeyClient> client_;
  std::unique_ptr<LockService> locks_;
};

// (a) ≥ 8 clients × 50 critical sections on one GPU: no two sections overlap
// and the fencing tokens of successive holders strictly increase.
TEST_F(GpuLockTest, MutualExclusionUnderContentionWithIncreasingTokens) {
  constexpr int kThreads = 8;
  constexpr int kSections = 50;
  struct Section {
    uint64_t token;
    Steady::time_point enter, exit;
  };
  std::atomic<int> inside{0}, overlaps{0}, errors{0};
  std::mutex mu;
  std::vector<Section> sections;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string owner = "pod-" + std::to_string(t) + "/worker";
      start.arrive_and_wait();
      for (int i = 0; i < kSections; ++i) {
        auto give_up = Steady::now() + std::chrono::seconds(60);
        Result<AcquireResult> r = Internal("not tried");
        do {
          r = locks_->Acquire("n1", 0, owner, 10'000, 5'000);
        } while (r.ok() && r->outcome == AcquireOutcome::kQueued && Steady::now() < give_up);
        if (!r.ok() || r->outcome != AcquireOutcome::kGranted) {
          ++errors;
          return;
        }
        Section s;
        s.token = r->token;
        s.enter = Steady::now();
        if (inside.fetch_add(1) != 0) ++overlaps;
        // The critical section itself: holding the lock a while is what
        // gives an overlap the chance to show (not a synchronisation).
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        inside.fetch_sub(1);
        s.exit = Steady::now();
        {
          std::lock_guard<std::mutex> lock(mu);
          sections.push_back(s);
        }
        auto rel = locks_->Release("n1", 0, owner);
        if (!rel.ok() || !rel->released) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(errors.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(sections.size(), static_cast<size_t>(kThreads * kSections));
  std::sort(sections.begin(), sections.end(), [](const Section& a, const Section& b) { return a.enter < b.enter; });
  for (size_t i = 1; i < sections.size(); ++i) {
    EXPECT_LE(sections[i - 1].exit, sections[i].enter) << "sections " << i - 1 << " and " << i << " overlap";
    EXPECT_LT(sections[i - 1].token, sections[i].token) << "token did not increase at section " << i;
  }
}

// (b) A holder that stops heartbeating loses the lock. The bound: a waiter
// polling with wait gets it within TTL + one poll interval (50 ms) + one
// script round trip; the test logs the measured time and asserts only that
// the takeover happens (within TTL + 5 s, to stay robust on a loaded machine).
TEST_F(GpuLockTest, AnExpiredHolderLosesTheLockAndItsLateCallsAreRefused) {
  constexpr int64_t kTtl = 300;
  AcquireResult a = MustAcquire("n1", 0, "pod-a/old", kTtl);
  ASSERT_EQ(a.outcome, AcquireOutcome::kGranted);
  auto granted_at = Steady::now();
  AcquireResult b;
  while (MsSince(granted_at) < kTtl + 5000) {
    b = MustAcquire("n1", 0, "pod-b/new", 10'000, 1000);
    if (b.outcome == AcquireOutcome::kGranted) break;
  }
  int64_t took = MsSince(granted_at);
  ASSERT_EQ(b.outcome, AcquireOutcome::kGranted) << "no takeover within TTL + 5 s";
  std::printf("[ measured ] takeover after an expired holder: %lld ms (TTL %lld ms)\n",
              static_cast<long long>(took), static_cast<long long>(kTtl));
  EXPECT_GE(took, kTtl - 5);  // not before the TTL (server and test clocks differ a little)
  EXPECT_GT(b.token, a.token);
  EXPECT_EQ(Expirations(), 1);

  auto hb = locks_->Heartbeat("n1", 0, "pod-a/old");
  ASSERT_FALSE(hb.ok());
  EXPECT_EQ(hb.status().code(), Code::kConflict);
  EXPECT_THAT(hb.status().message(), HasSubstr("held by another owner"));
  auto rel = locks_->Release("n1", 0, "pod-a/old");
  ASSERT_FALSE(rel.ok());
  EXPECT_EQ(rel.status().code(), Code::kConflict);
  // The new holder is untouched.
  auto hb2 = locks_->Heartbeat("n1", 0, "pod-b/new");
  ASSERT_TRUE(hb2.ok()) << hb2.status().ToString();
  EXPECT_EQ(hb2->token, b.token);
}

TEST_F(GpuLockTest, ALateHeartbeatOnAFreeLockSaysItExpiredAndCountsOnce) {
  ASSERT_EQ(MustAcquire("n1", 1, "pod-a/x", 150).outcome, AcquireOutcome::kGranted);
  // The server expires the holder key after the TTL: wait for that, not a time.
  ASSERT_TRUE(Eventually([&] { return !HolderExists("n1", 1); })) << "the 150 ms lock never expired";
  auto hb = locks_->Heartbeat("n1", 1, "pod-a/x");
  ASSERT_FALSE(hb.ok());
  EXPECT_EQ(hb.status().code(), Code::kConflict);
  EXPECT_THAT(hb.status().message(), HasSubstr("expired"));
  auto rel = locks_->Release("n1", 1, "pod-a/x");
  ASSERT_FALSE(rel.ok());
  EXPECT_THAT(rel.status().message(), HasSubstr("is free"));
  // Counted at the heartbeat, not again at the next grant.
  ASSERT_EQ(MustAcquire("n1", 1, "pod-b/y", 1000).outcome, AcquireOutcome::kGranted);
  EXPECT_EQ(Expirations(), 1);
}

// (c) Waiters are granted in arrival order, whatever order they poll in.
TEST_F(GpuLockTest, WaitersAreGrantedInArrivalOrder) {
  ASSERT_EQ(MustAcquire("n1", 0, "pod-h/holder", 10'000).outcome, AcquireOutcome::kGranted);
  EXPECT_EQ(MustAcquire("n1", 0, "pod-a/a", 10'000).position, 1);
  EXPECT_EQ(MustAcquire("n1", 0, "pod-b/b", 10'000).position, 2);
  EXPECT_EQ(MustAcquire("n1", 0, "pod-c/c", 10'000).position, 3);
  // Polling again keeps the place.
  EXPECT_EQ(MustAcquire("n1", 0, "pod-b/b", 10'000).position, 2);
  ASSERT_TRUE(locks_->Release("n1", 0, "pod-h/holder").ok());

  // C and B poll before A: the lock is free but not theirs.
  AcquireResult c = MustAcquire("n1", 0, "pod-c/c", 10'000);
  EXPECT_EQ(c.outcome, AcquireOutcome::kQueued);
  EXPECT_EQ(c.position, 3);
  EXPECT_EQ(MustAcquire("n1", 0, "pod-b/b", 10'000).outcome, AcquireOutcome::kQueued);
  AcquireResult a = MustAcquire("n1", 0, "pod-a/a", 10'000);
  ASSERT_EQ(a.outcome, AcquireOutcome::kGranted);
  ASSERT_TRUE(locks_->Release("n1", 0, "pod-a/a").ok());

  EXPECT_EQ(MustAcquire("n1", 0, "pod-c/c", 10'000).position, 2);
  AcquireResult b = MustAcquire("n1", 0, "pod-b/b", 10'000);
  ASSERT_EQ(b.outcome, AcquireOutcome::kGranted);
  EXPECT_GT(b.token, a.token);
  ASSERT_TRUE(locks_->Release("n1", 0, "pod-b/b").ok());
  AcquireResult c2 = MustAcquire("n1", 0, "pod-c/c", 10'000);
  ASSERT_EQ(c2.outcome, AcquireOutcome::kGranted);
  EXPECT_GT(c2.token, b.token);
}

TEST_F(GpuLockTest, BlockingWaitersAreGrantedInArrivalOrder) {
  ASSERT_EQ(MustAcquire("n1", 0, "pod-h/holder", 10'000).outcome, AcquireOutcome::kGranted);
  std::mutex mu;
  std::vector<std::string> order;
  std::vector<std::thread> threads;
  for (const char* who : {"pod-a/a", "pod-b/b", "pod-c/c"}) {
    // Queue each one before starting the next, so arrival order is known.
    ASSERT_EQ(MustAcquire("n1", 0, who, 10'000).outcome, AcquireOutcome::kQueued);
    threads.emplace_back([&, who] {
      for (int i = 0; i < 20; ++i) {
        auto r = locks_->Acquire("n1", 0, who, 10'000, 2'000);
        if (r.ok() && r->outcome == AcquireOutcome::kGranted) {
          {
            std::lock_guard<std::mutex> lock(mu);
            order.push_back(who);
          }
          // Works a while holding it (the thing under test: the next waiter
          // must wait through a held lock, not find it free).
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          (void)locks_->Release("n1", 0, who);
          return;
        }
      }
    });
  }
  ASSERT_TRUE(locks_->Release("n1", 0, "pod-h/holder").ok());
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<std::string>{"pod-a/a", "pod-b/b", "pod-c/c"}));
}

// (d) A waiter that stops polling loses its place after its own TTL.
TEST_F(GpuLockTest, AWaiterThatStopsPollingLosesItsPlaceAfterItsTtl) {
  ASSERT_EQ(MustAcquire("n1", 0, "pod-h/holder", 10'000).outcome, AcquireOutcome::kGranted);
  EXPECT_EQ(MustAcquire("n1", 0, "pod-a/quitter", 300).position, 1);
  EXPECT_EQ(MustAcquire("n1", 0, "pod-b/patient", 10'000).position, 2);
  ASSERT_TRUE(locks_->Release("n1", 0, "pod-h/holder").ok());
  // The quitter still heads the queue within its TTL.
  EXPECT_EQ(MustAcquire("n1", 0, "pod-b/patient", 10'000).outcome, AcquireOutcome::kQueued);
  // Its 300 ms pass: the listing leaves the expired waiter out.
  ASSERT_TRUE(Eventually([&] { return WaitersOf("n1", 0) == std::vector<std::string>{"pod-b/patient"}; }))
      << "the expired waiter is still listed";
  AcquireResult b = MustAcquire("n1", 0, "pod-b/patient", 10'000);
  EXPECT_EQ(b.outcome, AcquireOutcome::kGranted);
  // The quitter comes back: it is at the tail now.
  EXPECT_EQ(MustAcquire("n1", 0, "pod-c/c", 10'000).position, 1);
  EXPECT_EQ(MustAcquire("n1", 0, "pod-a/quitter", 10'000).position, 2);
}

// (e) The leader frees locks of pods that no longer exist.
TEST_F(GpuLockTest, ReapFreesLocksOfMissingPodsOnly) {
  const std::string gone = "0b6f2c7e-1a2b-4c3d-8e9f-0123456789ab";
  const std::string alive = "11111111-2222-4333-8444-555555555555";
  const std::string gone_waiter = "99999999-8888-4777-8666-555555555555";
  ASSERT_EQ(MustAcquire("n1", 0, gone + "/w", 60'000).outcome, AcquireOutcome::kGranted);
  ASSERT_EQ(MustAcquire("n1", 1, alive + "/w", 60'000).outcome, AcquireOutcome::kGranted);
  ASSERT_EQ(MustAcquire("n2", 0, "local/dev-box", 60'000).outcome, AcquireOutcome::kGranted);
  ASSERT_EQ(MustAcquire("n1", 1, gone_waiter + "/w", 60'000).position, 1);
  std::set<std::string> asked;
  auto freed = locks_->ReapLocksOfMissingPods([&](const std::string& uid) {
    asked.insert(uid);
    return uid == alive;
  });
  ASSERT_TRUE(freed.ok()) << freed.status().ToString();
  EXPECT_EQ(*freed, 1);
  EXPECT_EQ(asked, (std::set<std::string>{gone, alive, gone_waiter})) << "\"local\" is not a pod UID";
  auto list = locks_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].holder, "");                // n1/0: freed
  EXPECT_EQ((*list)[1].holder, alive + "/w");      // n1/1: kept
  EXPECT_TRUE((*list)[1].waiters.empty());         // its gone waiter removed
  EXPECT_EQ((*list)[2].holder, "local/dev-box");   // n2/0: never reaped
  EXPECT_EQ(MustAcquire("n1", 0, "pod-x/next", 1000).outcome, AcquireOutcome::kGranted);
  EXPECT_EQ(Expirations(), 0) << "a reaped lock did not expire";
}

int64_t ServerMs(store::ValkeyClient& c) {
  auto t = c.Command({"TIME"});
  EXPECT_TRUE(t.ok() && t->elements.size() == 2);
  if (!t.ok() || t->elements.size() != 2) return 0;
  return std::stoll(t->elements[0].str) * 1000 + std::stoll(t->elements[1].str) / 1000;
}

TEST_F(GpuLockTest, LockCallsStampTheirPodsActivityWithTheServersTime) {
  std::shared_ptr<store::LockStore> s = store::NewValkeyLockStore(client_);
  auto activity = [&](std::vector<std::string> nodes) {
    auto a = s->ReadActivity(nodes);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? *a : std::map<std::string, int64_t>{};
  };
  EXPECT_TRUE(activity({"n1", "n2"}).empty());
  const int64_t t0 = ServerMs(*client_);
  ASSERT_EQ(s->Acquire("n1", 0, "pod-a/x", 60'000, 8, true)->state, store::LockAcquireState::kGranted);
  ASSERT_EQ(s->Acquire("n1", 0, "pod-b/y", 60'000, 8, true)->state, store::LockAcquireState::kQueued);
  ASSERT_EQ(s->Acquire("n2", 1, "pod-c/z", 60'000, 8, true)->state, store::LockAcquireState::kGranted);
  const int64_t t1 = ServerMs(*client_);
  std::map<std::string, int64_t> a = activity({"n1"});
  ASSERT_EQ(a.size(), 2u);
  for (const auto& [pod, ms] : a) {
    EXPECT_GE(ms, t0) << pod;
    EXPECT_LE(ms, t1) << pod;
  }
  EXPECT_EQ(activity({"n1", "n2"}).size(), 3u);
  EXPECT_TRUE(activity({"n3"}).empty());

  // Each later call moves its pod's time on; a refused one does not.
  auto later = [&](const std::string& pod, const std::function<void()>& call) {
    const int64_t before = activity({"n1"})[pod];
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // the server's clock must move
    call();
    EXPECT_GT(activity({"n1"})[pod], before) << pod;
  };
  later("pod-a", [&] { EXPECT_EQ(s->Acquire("n1", 0, "pod-a/x", 60'000, 8, true)->state,
                                 store::LockAcquireState::kRefreshed); });
  later("pod-a", [&] { EXPECT_EQ(s->Heartbeat("n1", 0, "pod-a/x", 0, 60'000)->ownership, store::LockOwnership::kHolder); });
  later("pod-b", [&] { EXPECT_EQ(s->Acquire("n1", 0, "pod-b/y", 60'000, 8, true)->state,
                                 store::LockAcquireState::kQueued); });
  later("pod-a", [&] { EXPECT_TRUE(s->Release("n1", 0, "pod-a/x")->released); });
  later("pod-b", [&] { EXPECT_TRUE(s->Release("n1", 0, "pod-b/y")->left_queue); });
  const int64_t b = activity({"n1"})["pod-b"];
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  EXPECT_EQ(s->Heartbeat("n1", 0, "pod-b/y", 0, 60'000)->ownership, store::LockOwnership::kFree);
  EXPECT_EQ(activity({"n1"})["pod-b"], b) << "a refused heartbeat is no activity";

  // Values that are not times are skipped; forgetting removes only the pods named.
  ASSERT_TRUE(client_->Command({"HSET", client_->prefix() + ":{n1}:active", "pod-x", "soon", "pod-y", "-5"}).ok());
  a = activity({"n1", "n2"});
  EXPECT_EQ(a.size(), 3u);
  EXPECT_FALSE(a.contains("pod-x"));
  ASSERT_TRUE(s->ForgetActivity({"n1", "n2"}, {"pod-a", "pod-c"}).ok());
  a = activity({"n1", "n2"});
  EXPECT_EQ(a.size(), 1u);
  EXPECT_TRUE(a.contains("pod-b"));
}

TEST_F(GpuLockTest, ReapForgetsTheActivityOfMissingPodsOnly) {
  const std::string gone = "0b6f2c7e-1a2b-4c3d-8e9f-0123456789ab";
  const std::string alive = "11111111-2222-4333-8444-555555555555";
  ASSERT_EQ(MustAcquire("n1", 0, gone + "/w", 60'000).outcome, AcquireOutcome::kGranted);
  ASSERT_TRUE(locks_->Release("n1", 0, gone + "/w").ok());
  ASSERT_EQ(MustAcquire("n1", 1, alive + "/w", 60'000).outcome, AcquireOutcome::kGranted);
  ASSERT_EQ(MustAcquire("n1", 1, "local/dev-box", 60'000).position, 1);
  auto freed = locks_->ReapLocksOfMissingPods([&](const std::string& uid) { return uid == alive; });
  ASSERT_TRUE(freed.ok()) << freed.status().ToString();
  auto a = store::NewValkeyLockStore(client_)->ReadActivity({"n1"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a->contains(gone));
  EXPECT_TRUE(a->contains(alive));
  EXPECT_TRUE(a->contains("local"));
}

TEST_F(GpuLockTest, ReacquireByTheHolderKeepsTheTokenAndResetsTheTtl) {
  AcquireResult a = MustAcquire("n1", 0, "pod-a/x", 1000);
  ASSERT_EQ(a.outcome, AcquireOutcome::kGranted);
  EXPECT_FALSE(a.refreshed);
  AcquireResult again = MustAcquire("n1", 0, "pod-a/x", 60'000);
  ASSERT_EQ(again.outcome, AcquireOutcome::kGranted);
  EXPECT_TRUE(again.refreshed);
  EXPECT_EQ(again.token, a.token);
  auto pttl = client_->Command({"PTTL", HolderKey("n1", 0)});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(pttl->integer, 50'000);
  // Heartbeat without a TTL keeps the TTL of the (re)grant.
  auto hb = locks_->Heartbeat("n1", 0, "pod-a/x");
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->ttl_ms, 60'000);
  EXPECT_EQ(hb->token, a.token);
}

TEST_F(GpuLockTest, ReleaseIsOwnerOnlyAndAWaiterCanLeaveTheQueue) {
  ASSERT_EQ(MustAcquire("n1", 0, "pod-a/x", 10'000).outcome, AcquireOutcome::kGranted);
  ASSERT_EQ(MustAcquire("n1", 0, "pod-b/y", 10'000).position, 1);
  ASSERT_EQ(MustAcquire("n1", 0, "pod-c/z", 10'000).position, 2);
  auto bad = locks_->Release("n1", 0, "pod-q/q");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kConflict);
  EXPECT_THAT(bad.status().message(), HasSubstr("held by another owner"));
  auto left = locks_->Release("n1", 0, "pod-b/y");
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->left_queue);
  EXPECT_FALSE(left->released);
  EXPECT_EQ(MustAcquire("n1", 0, "pod-c/z", 10'000).position, 1);
  auto rel = locks_->Release("n1", 0, "pod-a/x");
  ASSERT_TRUE(rel.ok());
  EXPECT_TRUE(rel->released);
  EXPECT_EQ(MustAcquire("n1", 0, "pod-c/z", 10'000).outcome, AcquireOutcome::kGranted);
}

// A client that gave up (it released to leave the queue) while its blocking
// call still runs on the server: the call neither re-queues nor gets the lock.
TEST_F(GpuLockTest, AWaitingCallEndsWhenItsOwnerLeavesTheQueue) {
  ASSERT_EQ(MustAcquire("n1", 0, "pod-a/x", 10'000).outcome, AcquireOutcome::kGranted);
  Result<AcquireResult> waited = Internal("not run");
  auto started = Steady::now();
  std::thread waiter([&] { waited = locks_->Acquire("n1", 0, "pod-b/y", 10'000, 10'000); });
  ASSERT_TRUE(Eventually([&] { return WaitersOf("n1", 0) == std::vector<std::string>{"pod-b/y"}; }))
      << "the waiting call never queued";
  auto left = locks_->Release("n1", 0, "pod-b/y");
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->left_queue);
  ASSERT_TRUE(locks_->Release("n1", 0, "pod-a/x").ok());
  waiter.join();
  EXPECT_LT(MsSince(started), 5'000);
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.status().code(), Code::kConflict);
  auto list = locks_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].holder, "") << "the abandoned call was not granted";
  EXPECT_TRUE((*list)[0].waiters.empty()) << "nor queued again";
}

TEST_F(GpuLockTest, ListAndMetricsShowHoldersWaitersAndTokens) {
  ASSERT_EQ(MustAcquire("n1", 3, "pod-a/x", 10'000).outcome, AcquireOutcome::kGranted);
  ASSERT_EQ(MustAcquire("n1", 3, "pod-b/y", 10'000).position, 1);
  auto list = locks_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  const LockInfo& l = (*list)[0];
  EXPECT_EQ(l.node, "n1");
  EXPECT_EQ(l.gpu, 3);
  EXPECT_EQ(l.holder, "pod-a/x");
  EXPECT_GT(l.ttl_ms, 9000);
  EXPECT_EQ(l.token, 1u);
  EXPECT_GT(l.granted_ms, 0);
  ASSERT_EQ(l.waiters.size(), 1u);
  EXPECT_EQ(l.waiters[0].owner, "pod-b/y");
  std::string text = registry_.Render();
  EXPECT_THAT(text, HasSubstr("vramd_lock_held{node=\"n1\",gpu=\"3\"} 1"));
  EXPECT_THAT(text, HasSubstr("vramd_lock_waiters{node=\"n1\",gpu=\"3\"} 1"));
  EXPECT_THAT(text, HasSubstr("vramd_lock_fencing_token{node=\"n1\",gpu=\"3\"} 1"));
  EXPECT_THAT(text, HasSubstr("vramd_lock_operations_total{op=\"acquire\",result=\"granted\"} 1"));
  EXPECT_THAT(text, HasSubstr("vramd_lock_wait_seconds_count 1"));
}

TEST_F(GpuLockTest, ListSkipsKeysUnderTheLockPrefixThatNoLockWouldHave) {
  ASSERT_EQ(MustAcquire("n1", 2, "pod-a/x", 10'000).outcome, AcquireOutcome::kGranted);
  const std::string base = client_->prefix() + ":lock:gpu:{";
  for (const std::string& key : {base + "bad node}:0", base + "n1}:abc", base + "n1}:5000", base + "n1}:12345",
                                 base + "}:0", base + "no-close:0"}) {
    ASSERT_TRUE(client_->Command({"SET", key, "x"}).ok());
  }
  auto list = locks_->List();
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].node, "n1");
  EXPECT_EQ((*list)[0].gpu, 2);
}

TEST_F(GpuLockTest, AFullQueueRefusesNewWaiters) {
  LockOptions lo;
  lo.max_queue = 2;
  metrics::Registry reg;
  LockService small(store::NewValkeyLockStore(client_), &reg, lo);
  ASSERT_EQ(small.Acquire("n1", 0, "pod-a/x", 10'000)->outcome, AcquireOutcome::kGranted);
  EXPECT_EQ(small.Acquire("n1", 0, "pod-b/x", 10'000)->outcome, AcquireOutcome::kQueued);
  EXPECT_EQ(small.Acquire("n1", 0, "pod-c/x", 10'000)->outcome, AcquireOutcome::kQueued);
  EXPECT_EQ(small.Acquire("n1", 0, "pod-d/x", 10'000)->outcome, AcquireOutcome::kQueueFull);
  EXPECT_EQ(small.Acquire("n1", 0, "pod-b/x", 10'000)->position, 1) << "queued waiters still poll";
}

TEST_F(GpuLockTest, InvalidArgumentsAreRefusedBeforeValkey) {
  EXPECT_EQ(locks_->Acquire("n1", 0, "no-slash", 1000).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(locks_->Acquire("n1", 0, "pod/a b", 1000).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(locks_->Acquire("n{1}", 0, "pod/a", 1000).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(locks_->Acquire("n1", -1, "pod/a", 1000).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(locks_->Acquire("n1", 0, "pod/a", 10).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(locks_->Heartbeat("n1", 0, "pod/a", 1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(locks_->Release("n1", 0, "").status().code(), Code::kInvalidArgument);
  auto list = locks_->List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST_F(GpuLockTest, StopMakesAWaitingAcquireReturnAtOnce) {
  ASSERT_EQ(MustAcquire("n1", 0, "pod-a/x", 10'000).outcome, AcquireOutcome::kGranted);
  auto started = Steady::now();
  std::thread waiter([&] { (void)locks_->Acquire("n1", 0, "pod-b/y", 10'000, 20'000); });
  ASSERT_TRUE(Eventually([&] { return WaitersOf("n1", 0) == std::vector<std::string>{"pod-b/y"}; }))
      << "the waiting call never queued";
  locks_->Stop();
  waiter.join();
  EXPECT_LT(MsSince(started), 5'000);
}

TEST(GpuLockUnavailableTest, AClosedPortIsUnavailable) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);  // nothing listens there now
  store::ValkeyOptions opts;
  opts.url = "redis://127.0.0.1:" + std::to_string(port);
  metrics::Registry reg;
  LockService locks(store::NewValkeyLockStore(store::NewValkeyClient(opts)), &reg);
  auto r = locks.Acquire("n1", 0, "pod-a/x", 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(locks.List().status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace vramd::gpulock
