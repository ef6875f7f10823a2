// The ledger's entry format against a real Redis-protocol server: entries as
// vramd 0.1 laid them out (tests/data/ledger/entries-v0.1.jsonl, written
// straight into P:{NODE}:alloc) load through the real ValkeyLedgerStore without
// loss and survive its write scripts; the fields added since round-trip
// through every write path. Needs VRAMD_TEST_VALKEY_URL; fails without it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>

#include "data/ledger/entries_v0_1.h"
#include "integration/shared_server.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"

namespace vramd::store {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGi = int64_t{1} << 30;

// Every field, none at its default.
ledger::Entry Everything(const std::string& uid) {
  ledger::Entry e;
  e.pod_uid = uid;
  e.ns = "ml";
  e.name = "pod-" + uid;
  e.gpus = {0, 1};
  e.per_gpu = 2 * kGi;
  e.peak_per_gpu = 3 * kGi;
  e.model = "模型-🚀";
  e.state = ledger::EntryState::kReserved;
  e.created_ms = 1'795'000'000'000;
  e.priority = -1000;
  e.priority_class = "vramd-disposable";
  e.victim = true;
  e.used = kGi + 7;
  e.used_ts_ms = 1'795'000'060'000;
  e.last_active_ms = 1'795'000'050'000;
  return e;
}

class LedgerCompatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::optional<ValkeyOptions> o = itest::SharedServerOptions(4);
    if (!o) GTEST_FAIL() << itest::kNoSharedServer;
    ValkeyOptions opts = *o;
    prefix_ = opts.key_prefix;
    client_ = NewValkeyClient(opts);
    store_ = NewValkeyLedgerStore(client_);
    Status ping = store_->Ping();
    ASSERT_TRUE(ping.ok()) << ping.ToString();
  }

  void TearDown() override {
    if (!client_) return;
    itest::DeleteKeys(*client_, prefix_);
  }

  std::string Key(const std::string& suffix) const { return prefix_ + ":" + suffix; }
  std::string NodeKey(const std::string& node, const std::string& part) const {
    return prefix_ + ":{" + node + "}:" + part;
  }

  Reply Raw(std::vector<std::string> argv) {
    auto r = client_->Command(argv);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Reply{};
  }

  // Lays the fixture's entries out on `node` as vramd 0.1 did: each line is
  // the value of its pod's field in the node's alloc hash, and P:pods names
  // the node holding it.
  void WriteVersion01Entries(const std::string& node) {
    std::vector<GpuCapacity> gpus;
    // Room for them all on GPUs 0-7; GPUs 8 and 9 hold none of them, so a new
    // reservation fits there under the peak rule (fit.h): on 0-7 the 0.1
    // entries' peaks (up to 2^53 - 1 bytes) leave no room for more.
    for (int i = 0; i < 10; ++i) gpus.push_back({i, 256 * kGi, ""});
    ASSERT_TRUE(store_->SetCapacity(node, gpus).ok());
    const std::vector<std::string> lines = testing::EntriesV01Lines();
    ASSERT_FALSE(lines.empty()) << testing::EntriesV01Path();
    std::vector<std::string> alloc{"HSET", NodeKey(node, "alloc")};
    std::vector<std::string> pods{"HSET", Key("pods")};
    for (size_t i = 0; i < lines.size(); ++i) {
      alloc.insert(alloc.end(), {testing::EntriesV01Uid(i), lines[i]});
      pods.insert(pods.end(), {testing::EntriesV01Uid(i), node});
    }
    Raw(alloc);
    Raw(pods);
    Raw({"INCR", Key("epoch")});
  }

  // The node's entries in a snapshot read by a store without a cache, by UID.
  std::map<std::string, ledger::Entry> Loaded(const std::string& node) {
    auto store = NewValkeyLedgerStore(client_);
    auto snap = store->Snapshot();
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    EXPECT_EQ(store->MalformedFieldsSkipped(), expect_malformed_);
    std::map<std::string, ledger::Entry> out;
    if (!snap.ok()) return out;
    if (const ledger::Node* n = (*snap)->Find(node)) {
      for (const ledger::Entry& e : n->entries) out.emplace(e.pod_uid, e);
    }
    return out;
  }

  std::string prefix_;
  std::shared_ptr<ValkeyClient> client_;
  std::unique_ptr<LedgerStore> store_;
  uint64_t expect_malformed_ = 0;
};

TEST_F(LedgerCompatTest, Version01EntriesLoadWithoutLoss) {
  WriteVersion01Entries("n1");
  const std::vector<ledger::Entry> want = testing::EntriesV01();
  std::map<std::string, ledger::Entry> got = Loaded("n1");
  ASSERT_EQ(got.size(), want.size());
  for (const ledger::Entry& w : want) {
    SCOPED_TRACE(w.pod_uid);
    ASSERT_TRUE(got.count(w.pod_uid));
    const ledger::Entry& g = got.at(w.pod_uid);
    // Every field 0.1 wrote, one by one (clearer failures), then the whole entry
    // (the fields added since read as their defaults).
    EXPECT_EQ(g.ns, w.ns);
    EXPECT_EQ(g.name, w.name);
    EXPECT_EQ(g.gpus, w.gpus);
    EXPECT_EQ(g.per_gpu, w.per_gpu);
    EXPECT_EQ(g.peak_per_gpu, w.peak_per_gpu);
    EXPECT_EQ(g.model, w.model);
    EXPECT_EQ(g.state, w.state);
    EXPECT_EQ(g.created_ms, w.created_ms);
    EXPECT_EQ(g, w);
  }
}

TEST_F(LedgerCompatTest, Version01EntriesSurviveTheStoresWrites) {
  WriteVersion01Entries("n1");
  std::vector<ledger::Entry> want = testing::EntriesV01();
  // set_state's in-place rewrite of an old entry, then a new entry beside them.
  ASSERT_TRUE(store_->SetEntryState("n1", want[0].pod_uid, ledger::EntryState::kBound).ok());
  want[0].state = ledger::EntryState::kBound;
  ASSERT_TRUE(store_->SetEntryState("n1", want[2].pod_uid, ledger::EntryState::kBound).ok());
  want[2].state = ledger::EntryState::kBound;
  ReserveRequest rr;
  rr.node = "n1";
  rr.entry = Everything("new-pod");
  rr.entry.gpus = {0, 1};  // where the 0.1 entries' peaks already break the peak rule
  Result<ReserveOutcome> refused = store_->Reserve(rr);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("peak demand would be"));
  rr.entry.gpus = {8, 9};  // beside them in the same hash, on GPUs they do not hold
  Result<ReserveOutcome> r = store_->Reserve(rr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();

  std::map<std::string, ledger::Entry> got = Loaded("n1");
  ASSERT_EQ(got.size(), want.size() + 1);
  for (const ledger::Entry& w : want) EXPECT_EQ(got.at(w.pod_uid), w) << w.pod_uid;
  ledger::Entry fresh = Everything("new-pod");
  fresh.gpus = {8, 9};
  fresh.created_ms = got.at("new-pod").created_ms;  // stamped with the server's time
  EXPECT_GT(fresh.created_ms, 0);
  EXPECT_EQ(got.at("new-pod"), fresh);
}

TEST_F(LedgerCompatTest, NewFieldsRoundTripThroughEveryWritePath) {
  ASSERT_TRUE(store_->SetCapacity("n1", {{0, 16 * kGi, ""}, {1, 16 * kGi, ""}}).ok());
  ReserveRequest rr;
  rr.node = "n1";
  rr.entry = Everything("reserved");
  Result<ReserveOutcome> r = store_->Reserve(rr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(store_->PutEntry("n1", Everything("put")).ok());
  ledger::Entry stamped = Everything("stamped");
  stamped.created_ms = 0;  // PutEntry stamps the server's time
  ASSERT_TRUE(store_->PutEntry("n1", stamped).ok());
  ASSERT_TRUE(store_->SetEntryState("n1", "put", ledger::EntryState::kTerminating).ok());
  ASSERT_TRUE(store_->FinishBind("n1", "reserved").ok());

  std::map<std::string, ledger::Entry> got = Loaded("n1");
  ASSERT_EQ(got.size(), 3u);
  ledger::Entry want = Everything("reserved");
  want.state = ledger::EntryState::kBound;
  want.created_ms = got.at("reserved").created_ms;
  EXPECT_EQ(got.at("reserved"), want);
  want = Everything("put");
  want.state = ledger::EntryState::kTerminating;
  EXPECT_EQ(got.at("put"), want);
  want = Everything("stamped");
  want.created_ms = got.at("stamped").created_ms;
  EXPECT_GT(want.created_ms, 0);
  EXPECT_EQ(got.at("stamped"), want);
}

TEST_F(LedgerCompatTest, ANewFieldOutOfBoundsIsNeitherWrittenNorRead) {
  ASSERT_TRUE(store_->SetCapacity("n1", {{0, 16 * kGi, ""}, {1, 16 * kGi, ""}}).ok());
  ledger::Entry e = Everything("bad");
  e.used = -1;
  Status s = store_->PutEntry("n1", e);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("\"used\" is not a byte count"));
  ReserveRequest rr;
  rr.node = "n1";
  rr.entry = Everything("bad-class");
  rr.entry.priority_class.assign(254, 'c');
  EXPECT_EQ(store_->Reserve(rr).status().code(), Code::kInvalidArgument);

  // Written behind the store's back: skipped as malformed, the rest still read.
  ASSERT_TRUE(store_->PutEntry("n1", Everything("good")).ok());
  Raw({"HSET", NodeKey("n1", "alloc"), "raw-bad",
       R"({"ns":"x","name":"y","gpus":[0],"per_gpu":1,"peak_per_gpu":1,"model":"","state":"bound",)"
       R"("last_active_ms":-3,"created_ms":1})"});
  Raw({"INCR", Key("epoch")});
  expect_malformed_ = 1;
  std::map<std::string, ledger::Entry> got = Loaded("n1");
  EXPECT_EQ(got.size(), 1u);
  EXPECT_TRUE(got.count("good"));
}

}  // namespace
}  // namespace vramd::store
