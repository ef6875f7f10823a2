// The Valkey LedgerStore's filter refusals (RecordRefusals, ReadRefusals,
// ForgetRefusals) against a real server. Each test works under its own
// random key prefix and deletes its keys.
#include <gtest/gtest.h>

#include <map>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "integration/shared_server.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"

namespace vramd {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

class RefusalStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::optional<store::ValkeyOptions> o = itest::SharedServerOptions(4);
    if (!o) GTEST_FAIL() << itest::kNoSharedServer;
    client_ = store::NewValkeyClient(*o);
    auto ping = client_->Command({"PING"});
    ASSERT_TRUE(ping.ok()) << "cannot reach the test server: " << ping.status().ToString();
    store_ = store::NewValkeyLedgerStore(client_);
  }
  void TearDown() override {
    store_.reset();
    if (client_) itest::DeleteKeys(*client_, client_->prefix());
  }

  int64_t ServerMs() {
    auto t = client_->Command({"TIME"});
    EXPECT_TRUE(t.ok() && t->elements.size() == 2);
    if (!t.ok() || t->elements.size() != 2) return 0;
    return std::stoll(t->elements[0].str) * 1000 + std::stoll(t->elements[1].str) / 1000;
  }
  std::map<std::string, store::Refusal> Read(int64_t max_age_ms = 600'000) {
    auto rs = store_->ReadRefusals(max_age_ms);
    EXPECT_TRUE(rs.ok()) << rs.status().ToString();
    std::map<std::string, store::Refusal> out;
    if (rs.ok()) {
      for (const store::Refusal& r : *rs) out[r.uid] = r;
    }
    return out;
  }
  int64_t Count(const std::string& key, const char* cmd) {
    auto r = client_->Command({cmd, client_->prefix() + key});
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->integer : -1;
  }

  std::shared_ptr<store::ValkeyClient> client_;
  std::unique_ptr<store::LedgerStore> store_;
};

store::Refusal R(const std::string& uid) {
  store::Refusal r;
  r.uid = uid;
  r.ns = "ml";
  r.name = "p-" + uid;
  r.per_gpu = 8 * kGi;
  r.peak_per_gpu = 12 * kGi;
  r.gpu_count = 2;
  r.victim = true;
  r.priority = -5;
  r.idle_ttl_ms = 600'000;
  r.nodes = {"node-1", "node-2"};
  return r;
}

TEST_F(RefusalStoreTest, RecordStampsTheServersTimeAndReadReturnsEveryField) {
  EXPECT_TRUE(Read().empty());
  const int64_t t0 = ServerMs();
  ASSERT_TRUE(store_->RecordRefusals({R("u1"), R("u2")}).ok());
  const int64_t t1 = ServerMs();
  std::map<std::string, store::Refusal> got = Read();
  ASSERT_EQ(got.size(), 2u);
  store::Refusal want = R("u1");
  want.ts_ms = got["u1"].ts_ms;
  EXPECT_EQ(got["u1"], want);
  EXPECT_GE(got["u1"].ts_ms, t0);
  EXPECT_LE(got["u1"].ts_ms, t1);

  // A pod's newer refusal replaces its older one.
  store::Refusal again = R("u1");
  again.nodes = {"node-3"};
  ASSERT_TRUE(store_->RecordRefusals({again}).ok());
  got = Read();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got["u1"].nodes, (std::vector<std::string>{"node-3"}));
}

TEST_F(RefusalStoreTest, ForgetDeletesOnlyThePodsNamed) {
  ASSERT_TRUE(store_->RecordRefusals({R("u1"), R("u2"), R("u3")}).ok());
  ASSERT_TRUE(store_->ForgetRefusals({"u1", "u3", "never"}).ok());
  std::map<std::string, store::Refusal> got = Read();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got.contains("u2"));
  EXPECT_EQ(Count(":refused:ts", "ZCARD"), 1);
}

TEST_F(RefusalStoreTest, OldRefusalsAreDroppedAndDeleted) {
  ASSERT_TRUE(store_->RecordRefusals({R("old")}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the server's clock must move
  ASSERT_TRUE(store_->RecordRefusals({R("new")}).ok());
  std::map<std::string, store::Refusal> got = Read(20);
  EXPECT_EQ(got.size(), 1u);
  EXPECT_TRUE(got.contains("new"));
  EXPECT_EQ(Count(":refused", "HLEN"), 1) << "the old one is deleted, not only left out";
  EXPECT_EQ(Count(":refused:ts", "ZCARD"), 1);
}

TEST_F(RefusalStoreTest, MalformedValuesAreSkippedAndDeleted) {
  ASSERT_TRUE(store_->RecordRefusals({R("good")}).ok());
  const std::string key = client_->prefix() + ":refused";
  ASSERT_TRUE(client_->Command({"HSET", key, "junk", "soon", "neg", R"({"ts_ms":1,"per_gpu":-1})"}).ok());
  // A readable one the time index does not list, stamped long ago: too old.
  ASSERT_TRUE(client_->Command({"HSET", key, "stray", R"({"ts_ms":1000,"per_gpu":1})"}).ok());
  std::map<std::string, store::Refusal> got = Read();
  EXPECT_EQ(got.size(), 1u);
  EXPECT_TRUE(got.contains("good"));
  EXPECT_EQ(Count(":refused", "HLEN"), 1);
}

TEST_F(RefusalStoreTest, TheStoreKeepsAtMostTheMaximumDroppingTheOldest) {
  // Fill to the maximum in batches, then one more batch: as many of the oldest go.
  std::vector<store::Refusal> batch;
  for (size_t i = 0; i < store::kMaxRefusals; ++i) {
    batch.push_back(R("p" + std::to_string(i)));
    if (batch.size() == 1000) {
      ASSERT_TRUE(store_->RecordRefusals(batch).ok());
      batch.clear();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // later batches are newer
    }
  }
  ASSERT_TRUE(store_->RecordRefusals(batch).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(Count(":refused", "HLEN"), static_cast<int64_t>(store::kMaxRefusals));
  ASSERT_TRUE(store_->RecordRefusals({R("latest-1"), R("latest-2")}).ok());
  EXPECT_EQ(Count(":refused", "HLEN"), static_cast<int64_t>(store::kMaxRefusals));
  EXPECT_EQ(Count(":refused:ts", "ZCARD"), static_cast<int64_t>(store::kMaxRefusals));
  std::map<std::string, store::Refusal> got = Read();
  EXPECT_TRUE(got.contains("latest-1"));
  EXPECT_TRUE(got.contains("latest-2"));
  // Two of the first batch (same time; the zset orders ties by uid) went.
  int first_batch_left = 0;
  for (int i = 0; i < 1000; ++i) first_batch_left += got.contains("p" + std::to_string(i)) ? 1 : 0;
  EXPECT_EQ(first_batch_left, 998);
  EXPECT_TRUE(got.contains("p9999"));
}

}  // namespace
}  // namespace vramd
