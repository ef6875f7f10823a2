// The verbs with tenancy (issue 16): filter and bind admit a pod against its
// queue (ledger::AdmitToQueue), the preempt verb drops victims the queues'
// rules forbid. Standalone extender on the fake store; the queue set is built
// by the pure core from hand-written objects.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fakes/fake_ledger_store.h"
#include "vramd/extender/extender.h"

namespace vramd::extender {
namespace {

using nlohmann::json;
using vramd::testing::FakeLedgerStore;

constexpr int64_t kGi = int64_t{1} << 30;

class FixedClock : public Clock {
 public:
  int64_t NowMs() const override { return 10'000'000; }
};

json Pod(const std::string& ns, const std::string& uid, const std::string& vram, int priority = 0) {
  json pod = {{"metadata", {{"name", "p-" + uid}, {"namespace", ns}, {"uid", uid}}},
              {"spec",
               {{"priority", priority},
                {"containers", json::array({{{"name", "c"}, {"resources", {{"limits", {{"vramd.io/vram", vram}}}}}}})}}}};
  return pod;
}

std::string FilterBody(const json& pod, std::vector<std::string> nodes) {
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}}.dump();
}

std::string BindBody(const json& pod, const std::string& node) {
  return json{{"PodName", pod["metadata"]["name"]},
              {"PodNamespace", pod["metadata"]["namespace"]},
              {"PodUID", pod["metadata"]["uid"]},
              {"Node", node}}
      .dump();
}

ledger::QueueSpec Spec(const std::string& name, std::vector<std::string> namespaces, int64_t deserved,
                       std::optional<int64_t> limit = std::nullopt) {
  ledger::QueueSpec s;
  s.name = name;
  s.namespaces = std::move(namespaces);
  s.deserved = deserved;
  s.limit = limit;
  return s;
}

class QueueExtender : public ::testing::Test {
 protected:
  void SetUp() override {
    store.AddNode("n1", {16 * kGi});
    store.AddNode("n2", {16 * kGi});
    set = std::make_shared<const ledger::QueueSet>(ledger::BuildQueueSet(
        {Spec("team-a", {"team-a"}, 8 * kGi, 12 * kGi), Spec("team-b", {"team-b"}, 4 * kGi)}, policy));
    Options o;
    o.tenancy.queues = [this] { return set; };
    o.tenancy.view = [this]() -> std::optional<ledger::TenancyView> {
      Result<ledger::SnapshotPtr> snap = store.Snapshot();
      if (!snap.ok()) return std::nullopt;
      return ledger::ComputeTenancy(set, **snap, pending, policy);
    };
    o.tenancy.policy = policy;
    ext = std::make_unique<Extender>(std::move(o), &store, nullptr, &clock, &registry);
  }

  // Filters then binds; returns bind's error ("" when bound).
  std::string Place(const json& pod, const std::string& node) {
    EXPECT_EQ(ext->Filter(FilterBody(pod, {node})).status, 200);
    return json::parse(ext->Bind(BindBody(pod, node)).body)["Error"];
  }

  ledger::TenancyPolicy policy;  // priority below 100: preemptible
  ledger::QueueSetPtr set;
  std::vector<ledger::PendingPod> pending;
  FakeLedgerStore store;
  FixedClock clock;
  metrics::Registry registry;
  std::unique_ptr<Extender> ext;
};

TEST_F(QueueExtender, FilterRefusesEveryNodeWhenThePodWouldTakeItsQueueAboveItsLimit) {
  ASSERT_EQ(Place(Pod("team-a", "a1", "8Gi"), "n1"), "");
  json j = json::parse(ext->Filter(FilterBody(Pod("team-a", "a2", "6Gi"), {"n1", "n2"})).body);
  EXPECT_TRUE(j["NodeNames"].empty());
  ASSERT_TRUE(j["FailedAndUnresolvableNodes"].contains("n2"));
  const std::string why = j["FailedAndUnresolvableNodes"]["n2"];
  EXPECT_NE(why.find("queue team-a at its limit"), std::string::npos) << why;
  EXPECT_NE(why.find("12Gi"), std::string::npos) << why;
  EXPECT_EQ(j["FailedAndUnresolvableNodes"]["n1"], why);
  // Within the limit it passes; another queue is not affected.
  EXPECT_EQ(json::parse(ext->Filter(FilterBody(Pod("team-a", "a3", "4Gi"), {"n2"})).body)["NodeNames"].size(), 1u);
  EXPECT_EQ(json::parse(ext->Filter(FilterBody(Pod("team-b", "b1", "12Gi"), {"n2"})).body)["NodeNames"].size(), 1u);
}

// Issue 32: a pod its queue refused is recorded with the nodes kube-scheduler
// offered it, so that reclaim plans (and nudges kube-scheduler) only for
// nodes the pod may use; before, with none, reclaim planned on every node.
TEST_F(QueueExtender, AQueueRefusalRecordsTheNodesKubeSchedulerOffered) {
  ASSERT_EQ(Place(Pod("team-a", "a1", "8Gi"), "n1"), "");
  ASSERT_TRUE(json::parse(ext->Filter(FilterBody(Pod("team-a", "a2", "6Gi"), {"n2"})).body)["NodeNames"].empty());
  ext.reset();  // the recorder writes what is queued
  Result<std::vector<store::Refusal>> rs = store.ReadRefusals(60'000);
  ASSERT_TRUE(rs.ok());
  ASSERT_EQ(rs->size(), 1u);
  EXPECT_EQ((*rs)[0].uid, "a2");
  EXPECT_EQ((*rs)[0].nodes, (std::vector<std::string>{"n2"}));
}

TEST_F(QueueExtender, BindChecksTheQueueAgainAfterOtherBindsOfTheSameQueue) {
  // Both pass filter while the queue holds nothing; binding both would take
  // team-a to 14Gi over its 12Gi limit.
  const json a1 = Pod("team-a", "a1", "7Gi"), a2 = Pod("team-a", "a2", "7Gi");
  ASSERT_EQ(json::parse(ext->Filter(FilterBody(a1, {"n1"})).body)["NodeNames"].size(), 1u);
  ASSERT_EQ(json::parse(ext->Filter(FilterBody(a2, {"n2"})).body)["NodeNames"].size(), 1u);
  EXPECT_EQ(json::parse(ext->Bind(BindBody(a1, "n1")).body)["Error"], "");
  const std::string err = json::parse(ext->Bind(BindBody(a2, "n2")).body)["Error"];
  EXPECT_NE(err.find("queue team-a at its limit"), std::string::npos) << err;
  EXPECT_TRUE(store.Entries("n2").empty());
  // Binding the first again is idempotent: its own reservation is not counted twice.
  EXPECT_EQ(json::parse(ext->Bind(BindBody(a1, "n1")).body)["Error"], "");
}

TEST_F(QueueExtender, NonPreemptiblePodsMayUseOnlyTheDeservedQuota) {
  // team-b deserves 4Gi: a non-preemptible pod (priority 100) of 6Gi is refused,
  // a preemptible one (priority 0) may borrow.
  json j = json::parse(ext->Filter(FilterBody(Pod("team-b", "b1", "6Gi", 100), {"n1"})).body);
  ASSERT_TRUE(j["NodeNames"].empty());
  const std::string why = j["FailedAndUnresolvableNodes"]["n1"];
  EXPECT_NE(why.find("team-b"), std::string::npos) << why;
  EXPECT_NE(why.find("4Gi"), std::string::npos) << why;
  EXPECT_EQ(Place(Pod("team-b", "b2", "6Gi", 0), "n1"), "");
  EXPECT_EQ(Place(Pod("team-b", "b3", "3Gi", 100), "n2"), "");  // within the deserved 4Gi
}

TEST_F(QueueExtender, ANamespaceWithoutAQueueAndAnEmptySetAreNotRefused) {
  EXPECT_EQ(Place(Pod("elsewhere", "x1", "16Gi", 1000), "n1"), "");
  set = std::make_shared<const ledger::QueueSet>(ledger::BuildQueueSet({}, policy));
  EXPECT_EQ(Place(Pod("team-a", "a1", "16Gi", 1000), "n2"), "");
}

TEST_F(QueueExtender, PreemptDropsANodeWhoseVictimsTheQueuesProtect) {
  set = std::make_shared<const ledger::QueueSet>(ledger::BuildQueueSet(
      {Spec("team-a", {"team-a"}, 16 * kGi), Spec("team-b", {"team-b"}, 4 * kGi)}, policy));
  // team-b borrows 24Gi while team-a is quiet: n1 whole, 8Gi of n2.
  ASSERT_EQ(Place(Pod("team-b", "b1", "8Gi"), "n1"), "");
  ASSERT_EQ(Place(Pod("team-b", "b2", "8Gi"), "n1"), "");
  ASSERT_EQ(Place(Pod("team-b", "b3", "8Gi", 95), "n2"), "");
  // team-a waits for 16Gi: fair shares 16Gi each, team-b may lose 8Gi.
  for (const char* uid : {"a1", "a2"}) {
    ledger::PendingPod p;
    p.uid = uid;
    p.ns = "team-a";
    p.name = std::string("p-") + uid;
    p.demand.total = p.demand.per_gpu = 8 * kGi;
    p.demand.ns = "team-a";
    pending.push_back(p);
  }
  auto preempt = [&](const json& pod, const std::string& node, std::vector<std::string> victims) {
    json body = json::parse(FilterBody(pod, {}));
    body.erase("NodeNames");
    json pods = json::array();
    for (const std::string& v : victims) pods.push_back({{"UID", v}});
    body["NodeNameToMetaVictims"] = {{node, {{"Pods", pods}, {"NumPDBViolations", 0}}}};
    Response r = ext->Preempt(body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["NodeNameToMetaVictims"];
  };
  // One team-b pod for team-a's 8Gi: team-b stays at its fair share.
  EXPECT_TRUE(preempt(Pod("team-a", "a1", "8Gi"), "n1", {"b2"}).contains("n1"));
  // Both: team-b falls to 8Gi, below its fair share of 16Gi but not below
  // its deserved 4Gi, and team-a stays within its deserved 16Gi: the
  // deserved rule (issue 32) allows it.
  EXPECT_TRUE(preempt(Pod("team-a", "a1", "16Gi"), "n1", {"b1", "b2"}).contains("n1"));
  // Inside team-b: a priority-90 pod may take priority-0 b1, never priority-95 b3.
  EXPECT_TRUE(preempt(Pod("team-b", "b4", "8Gi", 90), "n1", {"b1"}).contains("n1"));
  EXPECT_FALSE(preempt(Pod("team-b", "b4", "16Gi", 90), "n2", {"b3"}).contains("n2"));
}

}  // namespace
}  // namespace vramd::extender
