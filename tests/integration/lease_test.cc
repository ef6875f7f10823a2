// The Valkey Lease (store::NewValkeyLease, src/store/lua/lease_*.lua) against
// a real Redis-protocol server: the semantics leader election relies on
// (tests/unit/reconcile/leader_test.cc runs the elector on a fake lease).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "vramd/store/lease.h"
#include "vramd/store/valkey_client.h"

namespace vramd {
namespace {

class ValkeyLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("VRAMD_TEST_VALKEY_URL");
    if (url == nullptr || *url == '\0') {
      GTEST_FAIL() << "VRAMD_TEST_VALKEY_URL is not set (e.g. redis://127.0.0.1:16399 of a throwaway server)";
    }
    store::ValkeyOptions opts;
    opts.url = url;
    opts.key_prefix = "vramdtest-lease-" + std::to_string(std::random_device{}());
    client_ = store::NewValkeyClient(opts);
    ASSERT_TRUE(client_->Command({"PING"}).ok()) << "cannot reach the test server";
    lease_ = store::NewValkeyLease(client_, "leader");
  }
  void TearDown() override {
    if (client_) (void)client_->Command({"DEL", client_->prefix() + ":leader"});
  }

  std::shared_ptr<store::ValkeyClient> client_;
  std::shared_ptr<store::Lease> lease_;
};

TEST_F(ValkeyLeaseTest, OneHolderAtATimeInTheLeaderKey) {
  EXPECT_EQ(*lease_->Holder(), "");
  EXPECT_TRUE(*lease_->TryAcquireOrRenew("a", 60'000));
  EXPECT_FALSE(*lease_->TryAcquireOrRenew("b", 60'000));
  EXPECT_EQ(*lease_->Holder(), "a");
  Result<store::Reply> raw = client_->Command({"GET", client_->prefix() + ":leader"});
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->str, "a") << "the key documented in docs/architecture.md";
}

TEST_F(ValkeyLeaseTest, RenewalResetsTheTtl) {
  ASSERT_TRUE(*lease_->TryAcquireOrRenew("a", 1'000));
  EXPECT_TRUE(*lease_->TryAcquireOrRenew("a", 60'000));
  Result<store::Reply> ttl = client_->Command({"PTTL", client_->prefix() + ":leader"});
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(ttl->integer, 1'000);
}

TEST_F(ValkeyLeaseTest, OnlyTheHolderReleases) {
  ASSERT_TRUE(*lease_->TryAcquireOrRenew("a", 60'000));
  EXPECT_FALSE(*lease_->Release("b"));
  EXPECT_EQ(*lease_->Holder(), "a");
  EXPECT_TRUE(*lease_->Release("a"));
  EXPECT_EQ(*lease_->Holder(), "");
  EXPECT_TRUE(*lease_->TryAcquireOrRenew("b", 60'000));
}

TEST_F(ValkeyLeaseTest, ALapsedLeaseGoesToTheNextTaker) {
  ASSERT_TRUE(*lease_->TryAcquireOrRenew("a", 50));
  // The server's clock decides; wait (bounded) for it to drop the key.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (*lease_->Holder() == "a" && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(*lease_->TryAcquireOrRenew("b", 60'000));
  EXPECT_EQ(*lease_->Holder(), "b");
}

TEST_F(ValkeyLeaseTest, AWrongTypedKeyIsAnErrorNotALease) {
  ASSERT_TRUE(client_->Command({"HSET", client_->prefix() + ":leader", "x", "1"}).ok());
  Result<bool> r = lease_->TryAcquireOrRenew("a", 60'000);
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_EQ(lease_->Holder().status().code(), Code::kInternal);
}

}  // namespace
}  // namespace vramd
