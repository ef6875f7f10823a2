// The in-memory FakeLockStore (tests/unit/fakes), which the gpulock unit
// tests rely on, answers like the Valkey LockStore: the same seeded sequence
// of operations runs on both and every answer is compared. TTLs are long, so
// no lock expires while it runs (expiry is covered by each side's own tests).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "unit/fakes/fake_clock.h"
#include "unit/fakes/fake_lock_store.h"
#include "vramd/store/lock_store.h"
#include "vramd/store/valkey_client.h"

namespace vramd {
namespace {

std::string Describe(const store::LockRecord& r) {
  std::string s = r.node + "/" + std::to_string(r.gpu) + " holder=" + r.holder + " token=" + std::to_string(r.token) +
                  " waiters=";
  for (const store::LockWaiter& w : r.waiters) s += w.owner + ",";
  return s;
}

TEST(LockStoreParity, TheFakeAnswersLikeValkeyOverARandomSequence) {
  const char* url = std::getenv("VRAMD_TEST_VALKEY_URL");
  if (url == nullptr || *url == '\0') GTEST_FAIL() << "VRAMD_TEST_VALKEY_URL is not set";
  store::ValkeyOptions opts;
  opts.url = url;
  opts.key_prefix = "vramdtest-parity-" + std::to_string(std::random_device{}());
  auto client = store::NewValkeyClient(opts);
  ASSERT_TRUE(client->Command({"PING"}).ok()) << "cannot reach the test server";
  std::shared_ptr<store::LockStore> real = store::NewValkeyLockStore(client);
  testing::FakeClock clock;
  testing::FakeLockStore fake(&clock);

  const std::vector<std::string> owners = {"pod-a/0", "pod-b/0", "pod-c/0", "pod-d/0"};
  std::mt19937 rng(12345);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int step = 0; step < 400; ++step) {
    const std::string node = pick(2) == 0 ? "n1" : "n2";
    const int gpu = pick(2);
    const std::string& owner = owners[static_cast<size_t>(pick(4))];
    const std::string at = "step " + std::to_string(step) + " " + node + "/" + std::to_string(gpu) + " " + owner;
    switch (pick(4)) {
      case 0: {
        const bool may_join = pick(4) != 0;
        auto r = real->Acquire(node, gpu, owner, 60'000, 2, may_join);
        auto f = fake.Acquire(node, gpu, owner, 60'000, 2, may_join);
        ASSERT_TRUE(r.ok() && f.ok()) << at;
        EXPECT_EQ(r->state, f->state) << at << " acquire";
        EXPECT_EQ(r->token, f->token) << at;
        EXPECT_EQ(r->position, f->position) << at;
        EXPECT_EQ(r->previous_expired, f->previous_expired) << at;
        break;
      }
      case 1: {
        const int64_t ttl = pick(2) == 0 ? 0 : 30'000 + pick(3) * 10'000;
        auto r = real->Heartbeat(node, gpu, owner, ttl, 60'000);
        auto f = fake.Heartbeat(node, gpu, owner, ttl, 60'000);
        ASSERT_TRUE(r.ok() && f.ok()) << at;
        EXPECT_EQ(r->ownership, f->ownership) << at << " heartbeat";
        EXPECT_EQ(r->token, f->token) << at;
        EXPECT_EQ(r->ttl_ms, f->ttl_ms) << at;
        break;
      }
      case 2: {
        auto r = real->Release(node, gpu, owner);
        auto f = fake.Release(node, gpu, owner);
        ASSERT_TRUE(r.ok() && f.ok()) << at;
        EXPECT_EQ(r->released, f->released) << at << " release";
        EXPECT_EQ(r->left_queue, f->left_queue) << at;
        EXPECT_EQ(r->ownership, f->ownership) << at;
        break;
      }
      default: {
        const std::string holder = pick(2) == 0 ? owner : "";
        const std::vector<std::string> waiters = {owners[static_cast<size_t>(pick(4))]};
        auto r = real->Reap(node, gpu, holder, waiters);
        auto f = fake.Reap(node, gpu, holder, waiters);
        ASSERT_TRUE(r.ok() && f.ok()) << at;
        EXPECT_EQ(r->freed, f->freed) << at << " reap";
        EXPECT_EQ(r->waiters_removed, f->waiters_removed) << at;
        break;
      }
    }
    if (step % 20 == 19) {
      auto r = real->List();
      auto f = fake.List();
      ASSERT_TRUE(r.ok() && f.ok()) << at;
      ASSERT_EQ(r->size(), f->size()) << at;
      for (size_t i = 0; i < r->size(); ++i) EXPECT_EQ(Describe((*r)[i]), Describe((*f)[i])) << at;
      // The same pods have lock activity on each node (times differ: the fake's clock stands still).
      for (const char* n : {"n1", "n2"}) {
        auto ra = real->ReadActivity({n});
        auto fa = fake.ReadActivity({n});
        ASSERT_TRUE(ra.ok() && fa.ok()) << at;
        std::vector<std::string> rp, fp;
        for (const auto& [pod, ms] : *ra) rp.push_back(pod);
        for (const auto& [pod, ms] : *fa) fp.push_back(pod);
        EXPECT_EQ(rp, fp) << at << " activity on " << n;
      }
    }
    if (::testing::Test::HasFailure()) break;
  }
  std::string cursor = "0";
  do {
    auto r = client->Command({"SCAN", cursor, "MATCH", client->prefix() + ":*", "COUNT", "1000"});
    if (!r.ok() || r->elements.size() != 2) break;
    cursor = r->elements[0].str;
    for (const auto& k : r->elements[1].elements) (void)client->Command({"DEL", k.str});
  } while (cursor != "0");
}

}  // namespace
}  // namespace vramd
