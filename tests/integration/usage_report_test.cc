// The node agent's usage report in the Valkey store (issue 14), against a
// real Redis-protocol server: the report lands (GPU used/total/uuid/outside,
// entries' used), unknown UIDs become untracked, a refusal changes nothing,
// the old report still works, a cached snapshot sees the report, and a node
// only the cluster knows keeps its totals for node sync.
// Needs VRAMD_TEST_VALKEY_URL; fails without it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "vramd/ledger/enforcement.h"
#include "vramd/ledger/fit.h"
#include "vramd/ledger/placement.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"
#include "vramd/store/valkey_store.h"

namespace vramd::store {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGi = int64_t{1} << 30;
constexpr const char* kUidA = "aaaaaaaa-0000-0000-0000-000000000001";
constexpr const char* kUidB = "bbbbbbbb-0000-0000-0000-000000000002";
constexpr const char* kUidZombie = "dddddddd-0000-0000-0000-00000000000d";

class UsageReportStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("VRAMD_TEST_VALKEY_URL");
    if (url == nullptr || *url == '\0') GTEST_FAIL() << "VRAMD_TEST_VALKEY_URL is not set (see scripts/test.sh)";
    std::mt19937_64 rng(std::random_device{}());
    opts_.url = url;
    opts_.key_prefix = "vramdtest-" + std::to_string(rng() % 1'000'000'000'000ULL);
    client_ = NewValkeyClient(opts_);
    store_ = NewValkeyLedgerStore(client_);
    ASSERT_TRUE(store_->SetCapacity("n1", {{0, 70 * kGi, ""}, {1, 70 * kGi, "GPU-from-config"}}).ok());
    ASSERT_TRUE(store_->PutEntry("n1", Entry(kUidA, {0, 1}, 10 * kGi)).ok());
    ASSERT_TRUE(store_->PutEntry("n1", Entry(kUidB, {1}, 10 * kGi)).ok());
  }
  void TearDown() override {
    if (!client_) return;
    auto r = client_->Command({"KEYS", opts_.key_prefix + ":*"});
    if (!r.ok()) return;
    std::vector<std::string> del{"DEL"};
    for (const auto& k : r->elements) del.push_back(k.str);
    if (del.size() > 1) (void)client_->Command(del);
  }

  // Another replica's store, with its epoch watch started and (within 5 s) live.
  auto WatchingStore() {
    auto watching = NewValkeyLedgerStore(NewValkeyClient(opts_));
    watching->StartEpochWatch();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!watching->EpochWatchLive() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return watching;
  }

  static ledger::Entry Entry(const std::string& uid, std::vector<int> gpus, int64_t per_gpu) {
    ledger::Entry e;
    e.pod_uid = uid;
    e.ns = "ml";
    e.name = "pod-" + uid.substr(0, 4);
    e.gpus = std::move(gpus);
    e.per_gpu = per_gpu;
    e.state = ledger::EntryState::kBound;
    return e;
  }
  static ledger::UsageReport Report() {
    ledger::UsageReport r;
    r.agent = "vramd-agent/0.2.0";
    r.gpus = {{.index = 0, .uuid = "GPU-0000", .total = 80 * kGi, .used = 12 * kGi, .outside_pods = kGi,
               .pods = {{kUidA, 6 * kGi}, {kUidZombie, 5 * kGi}}},
              {.index = 1, .uuid = "GPU-1111", .total = 80 * kGi, .used = 11 * kGi,
               .pods = {{kUidA, 8 * kGi}, {kUidB, 3 * kGi}}}};
    return r;
  }
  // A snapshot read by a store that has no cache yet.
  ledger::SnapshotPtr Fresh() {
    auto s = NewValkeyLedgerStore(client_)->Snapshot();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : std::make_shared<ledger::Snapshot>();
  }
  std::string Dump() {  // every key of this test's prefix with its content
    std::string out;
    auto keys = client_->Command({"KEYS", opts_.key_prefix + ":*"});
    std::vector<std::string> names;
    for (const auto& k : keys->elements) names.push_back(k.str);
    std::sort(names.begin(), names.end());
    for (const std::string& k : names) {
      auto d = client_->Command({"DUMP", k});
      out += k + "=" + (d.ok() ? d->str : "?") + "\n";
    }
    return out;
  }

  ValkeyOptions opts_;
  std::shared_ptr<ValkeyClient> client_;
  std::unique_ptr<LedgerStore> store_;
};

TEST_F(UsageReportStoreTest, AReportLandsAndFillsEntriesAndUntrackedBytes) {
  ASSERT_TRUE(store_->Snapshot().ok());  // a cached snapshot: the report must reach it
  Status s = store_->PushReport("n1", Report(), false);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const ledger::SnapshotPtr& snap : {*store_->Snapshot(), Fresh()}) {
    const ledger::Node* n = snap->Find("n1");
    ASSERT_NE(n, nullptr);
    const ledger::Gpu& g0 = n->gpus[0];
    const ledger::Gpu& g1 = n->gpus[1];
    EXPECT_EQ(g0.used, 12 * kGi);
    EXPECT_GT(g0.used_ts_ms, 0);
    EXPECT_EQ(g0.total, 80 * kGi);
    EXPECT_EQ(g0.uuid, "GPU-0000");         // the capacity had none: the reported one
    EXPECT_EQ(g1.uuid, "GPU-from-config");  // the config's wins
    EXPECT_EQ(g0.outside_pods, kGi);
    EXPECT_EQ(g0.untracked, 5 * kGi);  // the zombie
    EXPECT_EQ(g1.untracked, 0);
    ASSERT_EQ(g0.pods.size(), 2u);
    EXPECT_EQ(g0.pods[1], (ledger::PodUsage{kUidZombie, 5 * kGi}));
    ASSERT_EQ(n->entries.size(), 2u);
    for (const ledger::Entry& e : n->entries) {
      EXPECT_EQ(e.used, e.pod_uid == kUidA ? 8 * kGi : 3 * kGi) << e.pod_uid;  // largest over its GPUs
      EXPECT_EQ(e.used_ts_ms, g0.used_ts_ms);
    }
  }
  auto reported = store_->ReportedGpus();
  ASSERT_TRUE(reported.ok());
  EXPECT_EQ(reported->at("n1"),
            (std::vector<ReportedGpu>{{0, 80 * kGi, "GPU-0000"}, {1, 80 * kGi, "GPU-1111"}}));
}

// Issue 32: the agent's activity evidence reaches the entries of every
// replica's snapshot (Entry::busy: any of the pod's GPUs says it ran), and
// the next report without it clears it.
TEST_F(UsageReportStoreTest, APodsActivityReachesItsEntryAndClears) {
  ASSERT_TRUE(store_->Snapshot().ok());
  ledger::UsageReport r = Report();
  r.gpus[1].pods[0].active = true;  // pod A ran on GPU 1 only
  ASSERT_TRUE(store_->PushReport("n1", r, false).ok());
  for (const ledger::SnapshotPtr& snap : {*store_->Snapshot(), Fresh()}) {
    const ledger::Node* n = snap->Find("n1");
    ASSERT_NE(n, nullptr);
    EXPECT_TRUE(n->gpus[1].pods[0].active);
    EXPECT_FALSE(n->gpus[0].pods[0].active);
    for (const ledger::Entry& e : n->entries) EXPECT_EQ(e.busy, e.pod_uid == kUidA) << e.pod_uid;
  }
  ASSERT_TRUE(store_->PushReport("n1", Report(), false).ok());
  for (const ledger::SnapshotPtr& snap : {*store_->Snapshot(), Fresh()}) {
    for (const ledger::Entry& e : snap->Find("n1")->entries) EXPECT_FALSE(e.busy) << e.pod_uid;
  }
}

// Issue 34: the agent's enforcement per GPU reaches every replica's
// snapshot; the next report without it clears it.
TEST_F(UsageReportStoreTest, EnforcementTravelsWithTheReportAndClears) {
  ASSERT_TRUE(store_->Snapshot().ok());
  ledger::UsageReport r = Report();
  r.gpus[0].enforcement = {"none", "no dmem controller (cpu, io), driver 580.159.04 older than R615",
                           {{kUidA, ledger::EnforceState::kAccounted, "no dmem controller (cpu, io), driver 580.159.04 older than R615"}}};
  r.gpus[1].enforcement = {"dmem", "", {{kUidA, ledger::EnforceState::kEnforced, ""},
                                        {kUidB, ledger::EnforceState::kFailed, "writing dmem.max: Permission denied"}}};
  ASSERT_TRUE(store_->PushReport("n1", r, false).ok());
  for (const ledger::SnapshotPtr& snap : {*store_->Snapshot(), Fresh()}) {
    const ledger::Node* n = snap->Find("n1");
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->gpus[0].enforcement, r.gpus[0].enforcement);
    EXPECT_EQ(n->gpus[1].enforcement, r.gpus[1].enforcement);
    EXPECT_EQ(ledger::PodEnforcementOn(*n, kUidA)->state, ledger::EnforceState::kAccounted);  // the worst
    EXPECT_EQ(ledger::PodEnforcementOn(*n, kUidB)->state, ledger::EnforceState::kFailed);
  }
  EXPECT_EQ(store_->MalformedFieldsSkipped(), 0u);
  ASSERT_TRUE(store_->PushReport("n1", Report(), false).ok());
  const ledger::SnapshotPtr after = Fresh();
  const ledger::Node* n = after->Find("n1");
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->gpus[0].enforcement.backend.empty());
  EXPECT_TRUE(n->gpus[1].enforcement.pods.empty());
}

// Issue 31: the agent's reason for having no per-process figures, and its
// count of refused process lists, reach every replica's snapshot; the next
// report without them clears them.
TEST_F(UsageReportStoreTest, ProcessesUnavailableTravelsWithTheReportAndClears) {
  ASSERT_TRUE(store_->Snapshot().ok());
  ledger::UsageReport r = Report();
  r.gpus[1].pods.clear();
  r.gpus[1].processes_unavailable = "nvmlDeviceGetRunningProcessDetailList: 3 entries for room of 2, pid 0 (refused)";
  r.gpus[1].invalid_process_lists = 2;
  ASSERT_TRUE(store_->PushReport("n1", r, false).ok());
  for (const ledger::SnapshotPtr& snap : {*store_->Snapshot(), Fresh()}) {
    const ledger::Node* n = snap->Find("n1");
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->gpus[1].processes_unavailable, r.gpus[1].processes_unavailable);
    EXPECT_EQ(n->gpus[1].invalid_process_lists, 2);
    EXPECT_TRUE(n->gpus[0].processes_unavailable.empty());
    EXPECT_EQ(n->gpus[0].invalid_process_lists, 0);
  }
  EXPECT_EQ(store_->MalformedFieldsSkipped(), 0u);
  ASSERT_TRUE(store_->PushReport("n1", Report(), false).ok());
  const ledger::SnapshotPtr after = Fresh();  // held: the node points into it
  const ledger::Node* n = after->Find("n1");
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->gpus[1].processes_unavailable.empty());
  EXPECT_EQ(n->gpus[1].invalid_process_lists, 0);
}

TEST_F(UsageReportStoreTest, AZombieRaisesUAboveAAndTheReserveScriptRefusesAccordingly) {
  // GPU 0: C = 70Gi, A = 10Gi; the agent measures 65Gi (a zombie holds 55Gi).
  ledger::UsageReport r = Report();
  r.gpus[0].used = 65 * kGi;
  r.gpus[0].pods = {{kUidA, 10 * kGi}, {kUidZombie, 55 * kGi}};
  ASSERT_TRUE(store_->PushReport("n1", r, false).ok());
  EXPECT_EQ(Fresh()->Find("n1")->gpus[0].untracked, 55 * kGi);
  ReserveRequest req;
  req.node = "n1";
  req.entry = Entry("cccccccc-0000-0000-0000-00000000000c", {0}, 20 * kGi);  // fits on A alone
  auto res = store_->Reserve(req);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), Code::kInsufficient);
  EXPECT_THAT(res.status().message(), HasSubstr("used 65Gi"));
}

TEST_F(UsageReportStoreTest, ARefusedReportChangesNothing) {
  ASSERT_TRUE(store_->PushReport("n1", Report(), false).ok());
  const std::string before = Dump();
  ledger::UsageReport unknown_gpu = Report();
  unknown_gpu.gpus.push_back({.index = 7, .total = 80 * kGi, .used = kGi});
  Status s = store_->PushReport("n1", unknown_gpu, false);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "node n1 has no GPU 7");
  ledger::UsageReport absurd = Report();
  absurd.gpus[1].used = 81 * kGi;  // above its total
  EXPECT_EQ(store_->PushReport("n1", absurd, false).code(), Code::kInvalidArgument);
  ledger::UsageReport bad_uid = Report();
  bad_uid.gpus[0].pods.push_back({"NOT-A-UID", 1});
  EXPECT_EQ(store_->PushReport("n1", bad_uid, false).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->PushReport("ghost", Report(), false).code(), Code::kNotFound);
  EXPECT_EQ(Dump(), before) << "a refused report must change no key (epoch and change log included)";
}

TEST_F(UsageReportStoreTest, TheOldReportStillWorksAndDropsTheAgentsFigures) {
  ASSERT_TRUE(store_->PushReport("n1", Report(), false).ok());
  ASSERT_TRUE(store_->PushUsage("n1", {{1, 2 * kGi}}).ok());
  ledger::SnapshotPtr snap = Fresh();
  const ledger::Node* n = snap->Find("n1");
  EXPECT_EQ(n->gpus[0].used_ts_ms, 0) << "a report replaces the previous one";
  EXPECT_EQ(n->gpus[1].used, 2 * kGi);
  EXPECT_GT(n->gpus[1].used_ts_ms, 0);
  EXPECT_EQ(n->gpus[1].total, 0);
  EXPECT_TRUE(n->gpus[1].pods.empty());
  EXPECT_EQ(n->gpus[1].uuid, "GPU-from-config");
  EXPECT_EQ(n->gpus[0].uuid, "");
  for (const ledger::Entry& e : n->entries) EXPECT_EQ(e.used_ts_ms, 0) << "no per-pod figures in the old report";
  // The totals of the last agent report stay for node sync.
  EXPECT_EQ(store_->ReportedGpus()->count("n1"), 1u);
}

TEST_F(UsageReportStoreTest, ANodeOnlyTheClusterKnowsKeepsItsTotalsAndMovesNoEpoch) {
  auto epoch = client_->Command({"GET", opts_.key_prefix + ":epoch"});
  ASSERT_TRUE(store_->PushReport("gpu-new", Report(), /*in_cluster=*/true).ok());
  EXPECT_EQ(client_->Command({"GET", opts_.key_prefix + ":epoch"})->str, epoch->str);
  EXPECT_EQ(Fresh()->Find("gpu-new"), nullptr);
  auto reported = store_->ReportedGpus();
  ASSERT_TRUE(reported.ok());
  ASSERT_EQ(reported->count("gpu-new"), 1u);
  EXPECT_EQ(reported->at("gpu-new")[1].total, 80 * kGi);
  EXPECT_EQ(client_->Command({"EXISTS", opts_.key_prefix + ":{gpu-new}:used"})->integer, 0)
      << "only the totals are kept for a node not in the ledger";
  // Node sync adds it; its next report lands as on any node.
  ASSERT_TRUE(store_->SetCapacity("gpu-new", {{0, 79 * kGi, ""}, {1, 79 * kGi, ""}}).ok());
  EXPECT_EQ(Fresh()->Find("gpu-new")->gpus[0].used_ts_ms, 0);
  ASSERT_TRUE(store_->PushReport("gpu-new", Report(), false).ok());
  EXPECT_EQ(Fresh()->Find("gpu-new")->gpus[0].untracked, 11 * kGi);
  ASSERT_TRUE(store_->RemoveNode("gpu-new").ok());
  EXPECT_EQ(store_->ReportedGpus()->count("gpu-new"), 0u);
}

TEST_F(UsageReportStoreTest, AReportAsLargeAsTheBoundsAllowIsWrittenWhole) {
  ledger::UsageReport r;
  r.gpus = {{.index = 0, .total = 80 * kGi, .used = 80 * kGi}, {.index = 1, .total = 80 * kGi, .used = 0}};
  for (size_t i = 0; i < ledger::kMaxReportPodFigures; ++i) {
    char uid[40];
    std::snprintf(uid, sizeof uid, "%08zx-0000-0000-0000-000000000000", i);
    r.gpus[0].pods.push_back({uid, 1});
  }
  std::sort(r.gpus[0].pods.begin(), r.gpus[0].pods.end(), [](auto& a, auto& b) { return a.uid < b.uid; });
  Status s = store_->PushReport("n1", r, false);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ledger::SnapshotPtr snap = Fresh();  // keeps the node alive while it is read
  const ledger::Node* n = snap->Find("n1");
  EXPECT_EQ(n->gpus[0].pods.size(), ledger::kMaxReportPodFigures);
  EXPECT_EQ(n->gpus[0].untracked, static_cast<int64_t>(ledger::kMaxReportPodFigures));
}

TEST_F(UsageReportStoreTest, AWatchingReplicaSeesAReportThroughTheUsageRefresher) {
  auto watching = WatchingStore();
  ASSERT_TRUE(watching->EpochWatchLive());
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  // Written by this process (the route's store) and by another: both arrive
  // within the refresher's period, without a refresh on the caller's thread.
  ASSERT_TRUE(watching->PushReport("n1", Report(), false).ok());
  auto seen = [&](int64_t used) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      auto s = watching->WatchedSnapshot();
      if (s.ok() && (*s)->Find("n1")->gpus[0].used == used) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  EXPECT_TRUE(seen(12 * kGi));
  ledger::UsageReport r = Report();
  r.gpus[0].used = 13 * kGi;
  ASSERT_TRUE(store_->PushReport("n1", r, false).ok());
  EXPECT_TRUE(seen(13 * kGi));
  // A ledger change is still seen on the next call (its notification is not usage only).
  ASSERT_TRUE(store_->RemoveNode("n1").ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool gone = false;
  while (!gone && std::chrono::steady_clock::now() < deadline) {
    gone = (*watching->WatchedSnapshot())->Find("n1") == nullptr;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(gone);
}

// The usage refresher builds its new snapshot beside the cached one (it
// holds the cached one while it refreshes, so the refresh copies it), and
// frees the replaced one itself once nobody holds it: a snapshot a caller
// holds never changes, over many rounds, whether the caller still holds it
// when the next refresh lands or lets it go first.
TEST_F(UsageReportStoreTest, SnapshotsHeldAcrossUsageRefreshesNeverChange) {
  auto watching = WatchingStore();
  ASSERT_TRUE(watching->EpochWatchLive());
  ASSERT_TRUE(store_->PushReport("n1", Report(), false).ok());
  auto wait_for = [&](int64_t used) -> ledger::SnapshotPtr {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      auto s = watching->WatchedSnapshot();
      if (s.ok() && (*s)->Find("n1")->gpus[0].used == used) return *s;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return nullptr;
  };
  ledger::SnapshotPtr held = wait_for(12 * kGi);
  ASSERT_NE(held, nullptr);
  std::vector<ledger::SnapshotPtr> kept;  // every other round's snapshot stays held to the end
  for (int round = 1; round <= 6; ++round) {
    ledger::UsageReport r = Report();
    r.gpus[0].used = (12 + round) * kGi;
    ASSERT_TRUE(store_->PushReport("n1", r, false).ok());
    ledger::SnapshotPtr next = wait_for((12 + round) * kGi);
    ASSERT_NE(next, nullptr) << "round " << round;
    EXPECT_NE(next.get(), held.get());
    EXPECT_EQ(held->Find("n1")->gpus[0].used, (11 + round) * kGi) << "round " << round;
    if (round % 2 == 0) kept.push_back(held);
    held = std::move(next);
  }
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(kept[i]->Find("n1")->gpus[0].used, (13 + 2 * static_cast<int64_t>(i)) * kGi);
  }
}

}  // namespace
}  // namespace vramd::store
