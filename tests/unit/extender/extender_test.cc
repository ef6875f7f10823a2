#include "vramd/extender/extender.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "fakes/fake_kube_client.h"
#include "fakes/fake_ledger_store.h"

namespace vramd::extender {
namespace {

using nlohmann::json;
using vramd::testing::FakeKubeClient;
using vramd::testing::FakeLedgerStore;

constexpr int64_t kGi = int64_t{1} << 30;

class FixedClock : public Clock {
 public:
  int64_t NowMs() const override { return 1'000'000; }
};

std::string FilterBody(const std::string& uid, const std::string& vram, std::vector<std::string> nodes,
                       const std::string& extra_annotations = "") {
  json names = nodes;
  json pod = {{"metadata", {{"name", "p-" + uid}, {"namespace", "default"}, {"uid", uid}}},
              {"spec", {{"containers", json::array({{{"name", "c"}, {"resources", {{"limits", {{"vramd.io/vram", vram}}}}}}})}}}};
  if (!extra_annotations.empty()) pod["metadata"]["annotations"] = json::parse(extra_annotations);
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();
}

// A preempt call for pod `uid` (40Gi) with kube-scheduler's proposal: `victim` on node "big".
std::string PreemptBody(const std::string& uid, const std::string& victim) {
  json body = json::parse(FilterBody(uid, "40Gi", {}));
  body.erase("NodeNames");
  body["NodeNameToMetaVictims"] = {{"big", {{"Pods", {{{"UID", victim}}}}, {"NumPDBViolations", 0}}}};
  return body.dump();
}

std::string BindBody(const std::string& uid, const std::string& node) {
  return json{{"PodName", "p-" + uid}, {"PodNamespace", "default"}, {"PodUID", uid}, {"Node", node}}.dump();
}

class StandaloneExtender : public ::testing::Test {
 protected:
  void SetUp() override {
    store.AddNode("big", {96 * kGi});
    store.AddNode("small", {8 * kGi});
  }
  FakeLedgerStore store;
  FixedClock clock;
  metrics::Registry registry;
  Extender ext{Options{}, &store, nullptr, &clock, &registry};
};

TEST_F(StandaloneExtender, FilterKeepsNodesWhereThePodFitsAndExplainsTheRest) {
  Response r = ext.Filter(FilterBody("u1", "32Gi", {"big", "small", "cpu"}));
  ASSERT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j["NodeNames"], json::array({"big"}));
  EXPECT_EQ(j["FailedAndUnresolvableNodes"]["small"], "GPU too small for 32Gi (largest: 8Gi)");
  EXPECT_TRUE(j["FailedAndUnresolvableNodes"].contains("cpu"));
  EXPECT_EQ(j["Error"], "");
}

TEST_F(StandaloneExtender, BindAfterFilterReservesAndSecondPodIsRefused) {
  ASSERT_EQ(ext.Filter(FilterBody("u1", "60Gi", {"big"})).status, 200);
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  ASSERT_EQ(store.Entries("big").size(), 1u);
  EXPECT_EQ(store.Entries("big")[0].per_gpu, 60 * kGi);
  EXPECT_EQ(store.Entries("big")[0].state, ledger::EntryState::kBound);

  json f = json::parse(ext.Filter(FilterBody("u2", "40Gi", {"big"})).body);
  EXPECT_TRUE(f["NodeNames"].empty());
  EXPECT_EQ(f["FailedNodes"]["big"], "no GPU with 40Gi free (best: 36Gi)");
  std::string err = json::parse(ext.Bind(BindBody("u2", "big")).body)["Error"];
  EXPECT_NE(err.find("largest free is 36Gi"), std::string::npos) << err;
  EXPECT_EQ(store.Entries("big").size(), 1u);
}

TEST_F(StandaloneExtender, BindIsIdempotentByPodUid) {
  ASSERT_EQ(ext.Filter(FilterBody("u1", "10Gi", {"big"})).status, 200);
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  EXPECT_EQ(store.Entries("big").size(), 1u);
  EXPECT_EQ(store.reserves, 1);
}

TEST_F(StandaloneExtender, BindRecordsThePodsPriorityClassPeakAndVictimInItsEntry) {
  json body = json::parse(FilterBody("u1", "10Gi", {"big"}, R"({"vramd.io/vram-peak":"12Gi","vramd.io/model":"m"})"));
  body["Pod"]["spec"]["priority"] = -1000;
  body["Pod"]["spec"]["priorityClassName"] = "vramd-disposable";
  ASSERT_EQ(ext.Filter(body.dump()).status, 200);
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  ASSERT_EQ(store.Entries("big").size(), 1u);
  const ledger::Entry e = store.Entries("big")[0];
  EXPECT_EQ(e.ns, "default");
  EXPECT_EQ(e.name, "p-u1");
  EXPECT_EQ(e.per_gpu, 10 * kGi);
  EXPECT_EQ(e.peak_per_gpu, 12 * kGi);
  EXPECT_EQ(e.model, "m");
  EXPECT_EQ(e.priority, -1000);
  EXPECT_EQ(e.priority_class, "vramd-disposable");
  EXPECT_TRUE(e.victim);
  EXPECT_EQ(e.used, 0);             // nothing observed yet
  EXPECT_EQ(e.last_active_ms, 0);
}

TEST_F(StandaloneExtender, BindRecordsThePodsIdleTtlAndABadOneIsRefusedAtFilter) {
  ASSERT_EQ(ext.Filter(FilterBody("u1", "10Gi", {"big"}, R"({"vramd.io/idle-ttl":"10m"})")).status, 200);
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  ASSERT_EQ(store.Entries("big").size(), 1u);
  EXPECT_EQ(store.Entries("big")[0].idle_ttl_ms, 600'000);

  json j = json::parse(ext.Filter(FilterBody("u2", "10Gi", {"big"}, R"({"vramd.io/idle-ttl":"-5m"})")).body);
  EXPECT_TRUE(j["NodeNames"].empty());
  EXPECT_EQ(j["FailedAndUnresolvableNodes"]["big"],
            "invalid VRAM request: annotation vramd.io/idle-ttl=\"-5m\": negative: the TTL must be greater than zero");
}

std::vector<store::Refusal> Refusals(FakeLedgerStore& store) {
  Result<std::vector<store::Refusal>> rs = store.ReadRefusals(60'000);
  EXPECT_TRUE(rs.ok());
  return rs.ok() ? *rs : std::vector<store::Refusal>{};
}

TEST(ExtenderRefusals, APodRefusedForRoomIsRecordedWithItsDemandAndTheNodes) {
  FakeLedgerStore store;
  store.AddNode("full", {8 * kGi});
  store.AddNode("big", {16 * kGi});
  FixedClock clock;
  metrics::Registry registry;
  {
    Extender ext{Options{}, &store, nullptr, &clock, &registry};
    ASSERT_EQ(ext.Filter(FilterBody("u0", "6Gi", {"full"})).status, 200);
    ASSERT_EQ(json::parse(ext.Bind(BindBody("u0", "full")).body)["Error"], "");
    ASSERT_EQ(ext.Filter(FilterBody("u1", "12Gi", {"big"})).status, 200);
    ASSERT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
    // u2 fits on neither now; "tiny" does not exist (unresolvable); the GPU of "full" could hold it later.
    json body = json::parse(FilterBody("u2", "8Gi", {"full", "big", "tiny"},
                                       R"({"vramd.io/idle-ttl":"1h"})"));
    body["Pod"]["spec"]["priority"] = 7;
    json j = json::parse(ext.Filter(body.dump()).body);
    ASSERT_TRUE(j["NodeNames"].empty());
    // A pod that fits somewhere, and one no node could ever hold, are not recorded.
    ASSERT_EQ(json::parse(ext.Filter(FilterBody("u3", "1Gi", {"full", "big"})).body)["NodeNames"].size(), 2u);
    ASSERT_TRUE(json::parse(ext.Filter(FilterBody("u4", "64Gi", {"full", "big"})).body)["NodeNames"].empty());
  }  // the recorder writes what is queued as the extender goes
  std::vector<store::Refusal> rs = Refusals(store);
  ASSERT_EQ(rs.size(), 1u);
  const store::Refusal& r = rs[0];
  EXPECT_EQ(r.uid, "u2");
  EXPECT_EQ(r.ns, "default");
  EXPECT_EQ(r.name, "p-u2");
  EXPECT_EQ(r.per_gpu, 8 * kGi);
  EXPECT_EQ(r.peak_per_gpu, 8 * kGi);
  EXPECT_EQ(r.gpu_count, 1);
  EXPECT_EQ(r.priority, 7);
  EXPECT_FALSE(r.victim);
  EXPECT_EQ(r.idle_ttl_ms, 3'600'000);
  EXPECT_EQ(r.nodes, (std::vector<std::string>{"full", "big"}));
  EXPECT_EQ(r.ts_ms, store.now_ms);
}

TEST(ExtenderRefusals, ASuccessfulBindForgetsThePodsRefusal) {
  FakeLedgerStore store;
  store.AddNode("n1", {8 * kGi});
  FixedClock clock;
  metrics::Registry registry;
  {
    Extender ext{Options{}, &store, nullptr, &clock, &registry};
    ASSERT_EQ(ext.Filter(FilterBody("u0", "6Gi", {"n1"})).status, 200);
    ASSERT_EQ(json::parse(ext.Bind(BindBody("u0", "n1")).body)["Error"], "");
    ASSERT_TRUE(json::parse(ext.Filter(FilterBody("u1", "4Gi", {"n1"})).body)["NodeNames"].empty());
  }
  ASSERT_EQ(Refusals(store).size(), 1u);
  ASSERT_TRUE(store.Release("n1", "u0").ok());
  {
    Extender ext{Options{}, &store, nullptr, &clock, &registry};
    ASSERT_EQ(json::parse(ext.Filter(FilterBody("u1", "4Gi", {"n1"})).body)["NodeNames"].size(), 1u);
    ASSERT_EQ(json::parse(ext.Bind(BindBody("u1", "n1")).body)["Error"], "");
  }
  EXPECT_TRUE(Refusals(store).empty());
}

TEST_F(StandaloneExtender, BindOfUnknownPodIsRefusedInStandaloneMode) {
  std::string err = json::parse(ext.Bind(BindBody("never-filtered", "big")).body)["Error"];
  EXPECT_NE(err.find("was not seen by filter"), std::string::npos);
}

TEST_F(StandaloneExtender, LedgerUnavailableIsAnExtenderErrorNotAHang) {
  store.unavailable = true;
  Response r = ext.Filter(FilterBody("u1", "1Gi", {"big"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("VRAM ledger unavailable"), std::string::npos);
  EXPECT_EQ(ext.Prioritize(FilterBody("u1", "1Gi", {"big"})).status, 503);
}

TEST_F(StandaloneExtender, InvalidQuantityMakesEveryNodeUnresolvableWithTheReason) {
  json j = json::parse(ext.Filter(FilterBody("u1", "0.5", {"big", "small"})).body);
  EXPECT_TRUE(j["NodeNames"].empty());
  std::string why = j["FailedAndUnresolvableNodes"]["big"];
  EXPECT_NE(why.find("invalid VRAM request"), std::string::npos);
  EXPECT_NE(why.find("whole number of bytes"), std::string::npos);
}

TEST_F(StandaloneExtender, PodWithoutVramPassesEveryNode) {
  json body = json::parse(FilterBody("u1", "1Gi", {"big", "cpu"}));
  body["Pod"]["spec"]["containers"][0]["resources"] = json::object();
  json j = json::parse(ext.Filter(body.dump()).body);
  EXPECT_EQ(j["NodeNames"], json::array({"big", "cpu"}));
}

TEST_F(StandaloneExtender, MalformedBodiesAre400WithJsonError) {
  for (const char* b : {"", "{", "[]", "{\"Pod\":5,\"NodeNames\":[]}"}) {
    Response r = ext.Filter(b);
    EXPECT_EQ(r.status, 400) << b;
    EXPECT_FALSE(json::parse(r.body)["Error"].get<std::string>().empty()) << b;
    EXPECT_EQ(ext.Prioritize(b).status, 400) << b;
    EXPECT_EQ(ext.Bind(b).status, 400) << b;
  }
}

TEST_F(StandaloneExtender, PrioritizeScoresEveryNodeGiven) {
  json j = json::parse(ext.Prioritize(FilterBody("u1", "4Gi", {"big", "small"})).body);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["Host"], "big");
  EXPECT_EQ(j[0]["Score"], 5);
  EXPECT_EQ(j[1]["Score"], 0);
}

TEST_F(StandaloneExtender, PreemptKeepsOnlyNodesWhereVictimsFreeEnoughVram) {
  ASSERT_EQ(ext.Filter(FilterBody("v1", "80Gi", {"big"})).status, 200);
  ASSERT_EQ(json::parse(ext.Bind(BindBody("v1", "big")).body)["Error"], "");
  json body = json::parse(FilterBody("u2", "40Gi", {}));
  body.erase("NodeNames");
  body["NodeNameToMetaVictims"] = {{"big", {{"Pods", {{{"UID", "v1"}}}}, {"NumPDBViolations", 0}}},
                                   {"small", {{"Pods", {{{"UID", "x"}}}}, {"NumPDBViolations", 0}}},
                                   {"empty", {{"Pods", json::array()}, {"NumPDBViolations", 0}}}};
  Response r = ext.Preempt(body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body)["NodeNameToMetaVictims"];
  EXPECT_TRUE(j.contains("big"));
  EXPECT_FALSE(j.contains("small"));  // 40Gi never fits an 8Gi GPU
  EXPECT_FALSE(j.contains("empty"));  // never a node with no victims
}

// Issue 32: with an agent reporting, the victims' measured usage goes with
// them (before, U still held their bytes and every preemption was vetoed).
TEST_F(StandaloneExtender, PreemptCountsTheVictimsMeasuredUsageAsFreed) {
  const std::string v1 = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab";  // reports name pods by canonical UIDs
  ASSERT_EQ(ext.Filter(FilterBody(v1, "80Gi", {"big"})).status, 200);
  ASSERT_EQ(json::parse(ext.Bind(BindBody(v1, "big")).body)["Error"], "");
  ledger::UsageReport report;
  report.version = 2;
  ledger::GpuUsage g;
  g.index = 0;
  g.total = 96 * kGi;
  g.used = 79 * kGi;  // v1's 78Gi and 1Gi outside pods
  g.outside_pods = 1 * kGi;
  g.pods = {ledger::PodUsage{v1, 78 * kGi}};
  report.gpus.push_back(g);
  store.now_ms = clock.NowMs();
  const Status pushed = store.PushReport("big", report, true);
  ASSERT_TRUE(pushed.ok()) << pushed.message();
  json body = json::parse(FilterBody("u2", "40Gi", {}));
  body.erase("NodeNames");
  body["NodeNameToMetaVictims"] = {{"big", {{"Pods", {{{"UID", v1}}}}, {"NumPDBViolations", 0}}}};
  Response r = ext.Preempt(body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(json::parse(r.body)["NodeNameToMetaVictims"].contains("big")) << r.body;
  // Without the victim, the measured usage stands: 40Gi does not fit 96 - 79.
  json f = json::parse(ext.Filter(FilterBody("u2", "40Gi", {"big"})).body);
  EXPECT_TRUE(f["NodeNames"].empty()) << f.dump();
}

// Issue 32: a pod that holds room vramd's own eviction made for it gets no
// victims from kube-scheduler's preemption (one eviction per pod), and a
// bind takes its own hold (filter does not count it against the pod).
TEST_F(StandaloneExtender, APodHoldingRoomGetsNoPreemptionVictimsAndBindsIntoItsHold) {
  ASSERT_EQ(ext.Filter(FilterBody("v1", "40Gi", {"big"})).status, 200);
  ASSERT_EQ(json::parse(ext.Bind(BindBody("v1", "big")).body)["Error"], "");
  ledger::Entry hold;
  hold.pod_uid = "u2";
  hold.ns = "default";
  hold.name = "u2";
  hold.gpus = {0};
  hold.per_gpu = 40 * kGi;
  hold.state = ledger::EntryState::kHold;
  ASSERT_EQ(*store.HoldRoom("big", {}, hold, 60'000), store::LedgerStore::HoldOutcome::kHeld);
  Response r = ext.Preempt(PreemptBody("u2", "v1"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(json::parse(r.body)["NodeNameToMetaVictims"].empty()) << r.body;
  // Anyone else may still preempt there.
  r = ext.Preempt(PreemptBody("u3", "v1"));
  EXPECT_TRUE(json::parse(r.body)["NodeNameToMetaVictims"].contains("big")) << r.body;
  // The room is spent for u3 and free for u2, whose bind takes its hold.
  EXPECT_TRUE(json::parse(ext.Filter(FilterBody("u3", "40Gi", {"big"})).body)["NodeNames"].empty());
  EXPECT_EQ(json::parse(ext.Filter(FilterBody("u2", "40Gi", {"big"})).body)["NodeNames"], json::array({"big"}));
  ASSERT_EQ(json::parse(ext.Bind(BindBody("u2", "big")).body)["Error"], "");
  ledger::SnapshotPtr snap = *store.Snapshot();
  EXPECT_EQ(ledger::FindHold(*snap, "u2"), nullptr);
}

// Issue 32: while room is still being made for a pod (its victims
// terminating, the hold not yet written), it gets no victims either; once
// the room is held, the rule above takes over.
TEST_F(StandaloneExtender, APodWhoseRoomIsStillBeingMadeGetsNoPreemptionVictims) {
  ASSERT_EQ(ext.Filter(FilterBody("v1", "40Gi", {"big"})).status, 200);
  ASSERT_EQ(json::parse(ext.Bind(BindBody("v1", "big")).body)["Error"], "");
  ASSERT_EQ(ext.Filter(FilterBody("v2", "40Gi", {"big"})).status, 200);
  ASSERT_EQ(json::parse(ext.Bind(BindBody("v2", "big")).body)["Error"], "");
  auto preempt = [&](const std::string& uid) {
    Response r = ext.Preempt(PreemptBody(uid, "v2"));
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["NodeNameToMetaVictims"].contains("big");
  };
  EXPECT_TRUE(preempt("u2"));  // nothing made for it yet
  ledger::Entry hold;
  hold.pod_uid = "u2";
  hold.ns = "default";
  hold.name = "u2";
  hold.gpus = {0};
  hold.per_gpu = 40 * kGi;
  hold.state = ledger::EntryState::kHold;
  ASSERT_EQ(*store.HoldRoom("big", {"v1"}, hold, 60'000), store::LedgerStore::HoldOutcome::kPending);
  EXPECT_FALSE(preempt("u2"));
  EXPECT_TRUE(preempt("u3")) << "anyone else may";
  ASSERT_TRUE(*store.Release("big", "v1"));  // the victim goes: the hold is written
  EXPECT_FALSE(store.HoldPending("u2").value());
  ASSERT_NE(ledger::FindHold(**store.Snapshot(), "u2"), nullptr);
  EXPECT_FALSE(preempt("u2"));
}

class KubeExtender : public ::testing::Test {
 protected:
  void SetUp() override {
    store.AddNode("big", {96 * kGi});
    kube.AddPod("default", "p-u1", "u1", "32Gi");
  }
  FakeLedgerStore store;
  FakeKubeClient kube;
  FixedClock clock;
  metrics::Registry registry;
  Extender ext{Options{}, &store, &kube, &clock, &registry};
};

TEST_F(KubeExtender, BindReadsThePodOnceAndAnnotatesInTheBinding) {
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  // Not filtered on this replica: the pod is read, then one Binding carries
  // the annotations (no separate PATCH).
  ASSERT_EQ(kube.calls, (std::vector<std::string>{"get default/p-u1", "bind default/p-u1 big"}));
  const auto& ann = kube.pods["default/p-u1"].annotations;
  EXPECT_EQ(ann.at("vramd.io/gpus"), "0");
  EXPECT_EQ(ann.at("vramd.io/vram-per-gpu"), std::to_string(32 * kGi));
  EXPECT_EQ(kube.pods["default/p-u1"].node_name, "big");
  EXPECT_EQ(store.Entries("big").at(0).state, ledger::EntryState::kBound);
}

TEST_F(KubeExtender, GpuUuidsComeFromTheAgentsReportWhenTheCapacityHasNone) {
  // Issue 14: "big" has no UUID from its capacity source; its agent reports one.
  EXPECT_EQ(kube.pods["default/p-u1"].annotations.count("vramd.io/gpu-uuids"), 0u);
  ledger::UsageReport report;
  ledger::GpuUsage g;
  g.index = 0;
  g.uuid = "GPU-5e2d0a00-1111-2222-3333-444455556666";
  g.total = 100 * kGi;
  g.used = kGi;
  report.gpus.push_back(g);
  ASSERT_TRUE(store.PushReport("big", report, false).ok());
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  EXPECT_EQ(kube.pods["default/p-u1"].annotations.at("vramd.io/gpu-uuids"), "GPU-5e2d0a00-1111-2222-3333-444455556666");
}

TEST_F(KubeExtender, BindOfAPodReadFromTheApiRecordsItsPriorityInItsEntry) {
  kube.pods["default/p-u1"].spec.priority = 100000;
  kube.pods["default/p-u1"].spec.priority_class = "homelab-critical";
  kube.pods["default/p-u1"].spec.disposable = "true";
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  ASSERT_EQ(store.Entries("big").size(), 1u);
  EXPECT_EQ(store.Entries("big")[0].priority, 100000);
  EXPECT_EQ(store.Entries("big")[0].priority_class, "homelab-critical");
  EXPECT_TRUE(store.Entries("big")[0].victim);
}

TEST_F(KubeExtender, BindAfterFilterOnThisReplicaMakesOneApiCall) {
  ASSERT_EQ(ext.Filter(FilterBody("u1", "32Gi", {"big"})).status, 200);
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  ASSERT_EQ(kube.calls, (std::vector<std::string>{"bind default/p-u1 big"}));
  EXPECT_EQ(kube.pods["default/p-u1"].annotations.at("vramd.io/gpus"), "0");
  EXPECT_EQ(store.Entries("big").at(0).state, ledger::EntryState::kBound);
}

TEST_F(KubeExtender, TheBindIsInFlightWhileTheBindingIsCreatedAndNotAfter) {
  ASSERT_EQ(ext.Filter(FilterBody("u1", "32Gi", {"big"})).status, 200);
  std::set<std::string> during;
  size_t entries_during = 0;
  kube.on_bind = [&] {
    during = *store.BindsInFlight();
    entries_during = store.Entries("big").size();
  };
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  EXPECT_EQ(during, std::set<std::string>{"u1"});  // set with the reservation, by the reserve call
  EXPECT_EQ(entries_during, 1u);
  EXPECT_TRUE(store.BindsInFlight()->empty());    // cleared together with marking it bound
  EXPECT_EQ(store.Entries("big").at(0).state, ledger::EntryState::kBound);
}

// Issue 36: with the bound marker, the bind answers before its pod's entry
// is marked bound; until the marker's batch is written the entry stays
// reserved and the bind in flight (both hold the VRAM), and the batch marks
// it bound and clears the mark (here when the extender stops: the window is
// a minute).
TEST(KubeExtenderBoundMarker, TheEntryIsMarkedBoundAfterTheAnswerAndTheBindStaysInFlightUntilThen) {
  FakeLedgerStore store;
  FakeKubeClient kube;
  FixedClock clock;
  metrics::Registry registry;
  store.AddNode("big", {96 * kGi});
  kube.AddPod("default", "p-u1", "u1", "32Gi");
  Options opts;
  opts.bound_mark_window_ms = 60'000;
  {
    Extender ext{opts, &store, &kube, &clock, &registry};
    EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
    EXPECT_EQ(kube.pods["default/p-u1"].node_name, "big");
    ASSERT_EQ(store.Entries("big").size(), 1u);
    EXPECT_EQ(store.Entries("big")[0].state, ledger::EntryState::kReserved);
    EXPECT_EQ(*store.BindsInFlight(), std::set<std::string>{"u1"});
  }
  EXPECT_EQ(store.Entries("big").at(0).state, ledger::EntryState::kBound);
  EXPECT_TRUE(store.BindsInFlight()->empty());
  EXPECT_EQ(registry.AddCounter("vramd_bound_marks_total", "", {"result"}).With({"written"}).Value(), 1);
}

// Issue 11: a store that lost data is unsealed until the leader rebuilt it;
// meanwhile no verb grants anything, and each says why (kube-scheduler retries).
TEST_F(KubeExtender, NothingIsGrantedWhileTheLedgerIsBeingRebuilt) {
  store.LoseStore();
  store.AddNode("big", {96 * kGi});  // capacities come back before the entries
  Response f = ext.Filter(FilterBody("u1", "32Gi", {"big"}));
  EXPECT_EQ(f.status, 200);
  EXPECT_THAT(json::parse(f.body)["Error"].get<std::string>(), ::testing::HasSubstr("being rebuilt"));
  EXPECT_TRUE(json::parse(f.body)["NodeNames"].is_null() || json::parse(f.body)["NodeNames"].empty()) << f.body;
  Response p = ext.Prioritize(FilterBody("u1", "32Gi", {"big"}));
  EXPECT_EQ(p.status, 503);
  EXPECT_THAT(p.body, ::testing::HasSubstr("being rebuilt"));
  EXPECT_THAT(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"].get<std::string>(),
              ::testing::HasSubstr("being rebuilt"));
  EXPECT_TRUE(store.Entries("big").empty());
  EXPECT_TRUE(kube.pods["default/p-u1"].node_name.empty()) << "no Binding while unsealed";
  // Sealed again (the rebuild found everything): granted as before.
  store.now_ms += 1;
  ASSERT_TRUE(store.BeginRebuild("test").ok());
  ASSERT_TRUE(store.Seal(store.ReadSeal()->rebuild_token, {}).ok());
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  EXPECT_EQ(kube.pods["default/p-u1"].node_name, "big");
}

TEST_F(KubeExtender, FailedBindingLeavesNoBindInFlight) {
  kube.fail_bind = Unavailable("apiserver down");
  EXPECT_NE(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  EXPECT_TRUE(store.BindsInFlight()->empty());
}

TEST_F(KubeExtender, ALaggingWatchedViewNeverRejectsABind) {
  // The watched view predates the node (or shows it full): the first choice
  // fails on it, and the bind reads the ledger again instead of refusing.
  store.watched_view = ledger::Snapshot{};
  ASSERT_EQ(ext.Filter(FilterBody("u1", "32Gi", {"big"})).status, 200);
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  EXPECT_EQ(store.Entries("big").size(), 1u);
  EXPECT_EQ(kube.pods["default/p-u1"].node_name, "big");
}

TEST_F(KubeExtender, AnEntryOnlyTheWatchedViewShowsIsNotTrusted) {
  // The view still shows an entry of this pod that reconcile has freed since:
  // the bind must reserve again, not bind on GPUs it no longer holds.
  ledger::Snapshot lagging = (*store.Snapshot())->Clone();
  ledger::Entry ghost;
  ghost.pod_uid = "u1";
  ghost.ns = "default";
  ghost.name = "p-u1";
  ghost.gpus = {0};
  ghost.per_gpu = 32 * kGi;
  lagging.nodes["big"].entries.push_back(ghost);
  store.watched_view = std::move(lagging);
  ASSERT_EQ(ext.Filter(FilterBody("u1", "32Gi", {"big"})).status, 200);
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  EXPECT_EQ(store.reserves, 1);
  ASSERT_EQ(store.Entries("big").size(), 1u);
  EXPECT_EQ(store.Entries("big").at(0).state, ledger::EntryState::kBound);
}

TEST_F(KubeExtender, FailedBindingReleasesTheReservationAndAnnotatesNothing) {
  kube.fail_bind = Unavailable("apiserver down");
  std::string err = json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"];
  EXPECT_NE(err.find("apiserver down"), std::string::npos);
  EXPECT_TRUE(store.Entries("big").empty());
  EXPECT_EQ(store.releases, 1);
  EXPECT_TRUE(kube.pods["default/p-u1"].annotations.empty());
  EXPECT_TRUE(kube.pods["default/p-u1"].node_name.empty());
}

TEST_F(KubeExtender, PodReplacedAfterFilterIsRefusedByTheBindingAndReleased) {
  ASSERT_EQ(ext.Filter(FilterBody("u1", "32Gi", {"big"})).status, 200);
  kube.pods["default/p-u1"].uid = "u1-new";  // deleted and created again
  std::string err = json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"];
  EXPECT_NE(err.find("now has UID u1-new, not u1 (it was replaced)"), std::string::npos) << err;
  EXPECT_TRUE(store.Entries("big").empty());
  EXPECT_EQ(store.releases, 1);
  EXPECT_TRUE(kube.pods["default/p-u1"].node_name.empty());
}

TEST_F(KubeExtender, PodBoundElsewhereAfterFilterIsRefusedAndReleased) {
  store.AddNode("other", {96 * kGi});
  ASSERT_EQ(ext.Filter(FilterBody("u1", "32Gi", {"big"})).status, 200);
  kube.pods["default/p-u1"].node_name = "other";
  std::string err = json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"];
  EXPECT_NE(err.find("already bound to node other"), std::string::npos) << err;
  EXPECT_TRUE(store.Entries("big").empty());
}

TEST_F(KubeExtender, PodAlreadyBoundToTheSameNodeIsSuccess) {
  kube.pods["default/p-u1"].node_name = "big";
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  std::string err = json::parse(ext.Bind(BindBody("u1", "other")).body)["Error"];
  EXPECT_NE(err.find("already bound to node big"), std::string::npos);
}

TEST_F(KubeExtender, BindingConflictWherePodIsBoundHereIsSuccess) {
  kube.bind_conflict_then_bound = true;
  EXPECT_EQ(json::parse(ext.Bind(BindBody("u1", "big")).body)["Error"], "");
  EXPECT_EQ(store.Entries("big").size(), 1u);
}

TEST_F(KubeExtender, ReplacedPodIsRefused) {
  json body = json::parse(BindBody("u1", "big"));
  body["PodUID"] = "other-uid";
  std::string err = json::parse(ext.Bind(body.dump()).body)["Error"];
  EXPECT_NE(err.find("was replaced"), std::string::npos);
  EXPECT_TRUE(store.Entries("big").empty());
}

TEST_F(KubeExtender, TensorParallelPodGetsTwoGpus) {
  store.AddNode("quad", {80 * kGi, 80 * kGi, 80 * kGi, 80 * kGi});
  kube.AddPod("default", "p-tp", "tp", "128Gi", "2");
  EXPECT_EQ(json::parse(ext.Bind(BindBody("tp", "quad")).body)["Error"], "");
  EXPECT_EQ(kube.pods["default/p-tp"].annotations.at("vramd.io/gpus"), "0,1");
  EXPECT_EQ(kube.pods["default/p-tp"].annotations.at("vramd.io/vram-per-gpu"), std::to_string(64 * kGi));
}

}  // namespace
}  // namespace vramd::extender
