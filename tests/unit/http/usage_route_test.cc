// PUT /v1/nodes/{node}/usage over HTTP, on the in-memory store: what is
// accepted lands in the ledger views, what is refused is a 400 (401, 503)
// that changes nothing.
#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "fakes/fake_clock.h"
#include "fakes/fake_kube_client.h"
#include "fakes/fake_ledger_store.h"
#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"

namespace vramd::http {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

constexpr int64_t kGi = int64_t{1} << 30;
constexpr const char* kToken = "t0ken";
constexpr const char* kUidA = "aaaaaaaa-0000-0000-0000-000000000001";
constexpr const char* kUidZombie = "dddddddd-0000-0000-0000-00000000000d";

class UsageRouteTest : public ::testing::Test {
 protected:
  void Start(std::function<std::optional<bool>(const std::string&)> in_cluster = nullptr,
             std::function<ledger::EnforceMode(const std::string&)> enforce_mode = nullptr) {
    store_.now_ms = clock_.NowMs();
    store_.AddNode("n1", {70 * kGi, 70 * kGi});
    ledger::Entry e;
    e.pod_uid = kUidA;
    e.ns = "ml";
    e.name = "train";
    e.gpus = {0};
    e.per_gpu = 10 * kGi;
    e.state = ledger::EntryState::kBound;
    ASSERT_TRUE(store_.PutEntry("n1", e).ok());
    ApiServices svc;
    svc.store = &store_;
    svc.registry = &registry_;
    svc.clock = &clock_;
    svc.api_token = kToken;
    svc.node_in_cluster = std::move(in_cluster);
    svc.enforce_mode = std::move(enforce_mode);
    svc.kube = kube_;
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    server_ = std::make_unique<Server>(so, &registry_);
    RegisterLedgerRoutes(*server_, svc);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  // (status, body)
  std::pair<int, std::string> Put(const std::string& node, const std::string& body, const char* token = kToken) {
    httplib::Headers h;
    if (token != nullptr) h.emplace("Authorization", std::string("Bearer ") + token);
    auto r = client_->Put("/v1/nodes/" + node + "/usage", h, body, "application/json");
    if (!r) return {0, "no answer"};
    return {r->status, r->body};
  }
  json Node(const std::string& name) {
    auto r = client_->Get("/v1/nodes/" + name);
    return r ? json::parse(r->body) : json();
  }

  kube::KubeClient* kube_ = nullptr;  // set before Start for the Events
  testing::FakeLedgerStore store_;
  testing::FakeClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

std::string AgentReport(int64_t used0 = 9 * kGi) {
  return R"({"version":2,"agent":"vramd-agent/0.2.0","source":"nvml","gpus":[
    {"index":0,"uuid":"GPU-aaaa","total_bytes":)" + std::to_string(80 * kGi) + R"(,"used_bytes":)" +
         std::to_string(used0) + R"(,"outside_pods_bytes":)" + std::to_string(kGi) + R"(,
     "pods":[{"uid":")" + kUidA + R"(","used_bytes":)" + std::to_string(5 * kGi) + R"(},
             {"uid":")" + kUidZombie + R"(","used_bytes":)" + std::to_string(3 * kGi) + R"(}]},
    {"index":1,"total_bytes":)" + std::to_string(80 * kGi) + R"(,"used_bytes":0}]})";
}

TEST_F(UsageRouteTest, AnAgentReportLandsInTheNodeView) {
  Start();
  auto [status, body] = Put("n1", AgentReport());
  ASSERT_EQ(status, 200) << body;
  json n = Node("n1");
  const json& g0 = n["gpus"][0];
  EXPECT_EQ(g0["used_bytes"], 9 * kGi);
  EXPECT_EQ(g0["uuid"], "GPU-aaaa");  // the capacity had none
  EXPECT_EQ(g0["reported_total_bytes"], 80 * kGi);
  EXPECT_EQ(g0["outside_pods_bytes"], kGi);
  EXPECT_EQ(g0["untracked_bytes"], 3 * kGi);
  ASSERT_EQ(g0["untracked_pods"].size(), 1u);
  EXPECT_EQ(g0["untracked_pods"][0]["uid"], kUidZombie);
  EXPECT_EQ(n["pods"][0]["used_per_gpu_bytes"], 5 * kGi);
  EXPECT_EQ(n["pods"][0]["usage_reported_ms"], clock_.NowMs());
}

// Issue 34: the answer to a report carries the node's mode and its pods'
// limits; the next report's enforcement shows per pod in /v1/nodes.
TEST_F(UsageRouteTest, TheAnswerCarriesTheLimitsAndTheNextReportsEnforcementShows) {
  Start(nullptr, [](const std::string& node) { return node == "n1" ? ledger::EnforceMode::kOn : ledger::EnforceMode::kOff; });
  auto [status, body] = Put("n1", AgentReport());
  ASSERT_EQ(status, 200) << body;
  json answer = json::parse(body);
  EXPECT_EQ(answer["enforce"]["mode"], "on");
  ASSERT_EQ(answer["enforce"]["limits"].size(), 1u) << body;
  EXPECT_EQ(answer["enforce"]["limits"][0],
            (json{{"uid", kUidA}, {"index", 0}, {"soft", 10 * kGi}, {"hard", 10 * kGi}}));
  EXPECT_TRUE(Node("n1")["pods"][0]["enforcement"].is_null());  // not reported yet

  json report = json::parse(AgentReport());
  report["gpus"][0]["enforcement"] = {{"backend", "none"},
                                      {"reason", "no dmem controller (cgroup v2 controllers: cpu io memory)"},
                                      {"pods", {{{"uid", kUidA}, {"state", "accounted"},
                                                 {"reason", "no dmem controller (cgroup v2 controllers: cpu io memory)"}}}}};
  ASSERT_EQ(Put("n1", report.dump()).first, 200);
  json n = Node("n1");
  EXPECT_EQ(n["gpus"][0]["enforcement"]["backend"], "none");
  EXPECT_EQ(n["pods"][0]["enforcement"]["state"], "accounted");
  EXPECT_EQ(n["pods"][0]["enforcement"]["summary"],
            "accounted only: no dmem controller (cgroup v2 controllers: cpu io memory)");
  EXPECT_EQ(n["pods"][0]["enforcement"]["gpus"], (json{{"0", "accounted"}}));
}

// A pod whose limit could not be set gets one Warning Event (not one per pass).
TEST_F(UsageRouteTest, AFailedEnforcementPostsOneEventOnThePod) {
  testing::FakeKubeClient kube;
  kube_ = &kube;
  Start(nullptr, [](const std::string&) { return ledger::EnforceMode::kOn; });
  json report = json::parse(AgentReport());
  report["gpus"][0]["enforcement"] = {
      {"backend", "dmem"},
      {"reason", ""},
      {"pods", {{{"uid", kUidA}, {"state", "failed"}, {"reason", "writing dmem.max: Permission denied"}}}}};
  for (int pass = 0; pass < 3; ++pass) ASSERT_EQ(Put("n1", report.dump()).first, 200);
  ASSERT_EQ(kube.events.size(), 1u);
  EXPECT_EQ(kube.events[0].reason, "VramEnforcementFailed");
  EXPECT_EQ(kube.events[0].type, "Warning");
  EXPECT_EQ(kube.events[0].ns + "/" + kube.events[0].name, "ml/train");
  EXPECT_THAT(kube.events[0].message, HasSubstr("GPU 0 (dmem): writing dmem.max: Permission denied"));
  // Enforced again, then failing again: a second Event.
  report["gpus"][0]["enforcement"]["pods"][0] = {{"uid", kUidA}, {"state", "enforced"}};
  ASSERT_EQ(Put("n1", report.dump()).first, 200);
  report["gpus"][0]["enforcement"]["pods"][0] = {{"uid", kUidA}, {"state", "failed"}, {"reason", "EBUSY"}};
  ASSERT_EQ(Put("n1", report.dump()).first, 200);
  EXPECT_EQ(kube.events.size(), 2u);
  // A zombie's failure (no entry here) is not vramd's to speak of.
  report["gpus"][0]["enforcement"]["pods"] = {{{"uid", kUidZombie}, {"state", "failed"}, {"reason", "EBUSY"}}};
  ASSERT_EQ(Put("n1", report.dump()).first, 200);
  EXPECT_EQ(kube.events.size(), 2u);
}

TEST_F(UsageRouteTest, ExplainShowsThePodsUsageWhereThereIsNoRoom) {
  Start();
  ASSERT_EQ(Put("n1", AgentReport(65 * kGi)).first, 200);  // GPU 0: U = 65Gi of C = 70Gi
  const json pod = {
      {"metadata",
       {{"name", "big"}, {"namespace", "default"}, {"uid", "u-big"}, {"annotations", {{"vramd.io/gpu-count", "2"}}}}},
      {"spec", {{"containers", json::array({{{"name", "c"}, {"resources", {{"limits", {{"vramd.io/vram", "130Gi"}}}}}}})}}}};
  auto r = client_->Post("/v1/explain", pod.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json row = json::parse(r->body)["nodes"][0];
  ASSERT_EQ(row["verdict"], "no_room_now") << row.dump();
  const json& usage = row["usage"];
  ASSERT_EQ(usage["gpus"].size(), 2u) << usage.dump();
  EXPECT_EQ(usage["gpus"][0]["used_bytes"], 65 * kGi);
  EXPECT_EQ(usage["gpus"][0]["untracked_bytes"], 3 * kGi);
  EXPECT_EQ(usage["gpus"][0]["outside_pods_bytes"], kGi);
  ASSERT_EQ(usage["pods"].size(), 1u);
  EXPECT_EQ(usage["pods"][0]["name"], "train");
  EXPECT_EQ(usage["pods"][0]["used_per_gpu_bytes"], 5 * kGi);
}

TEST_F(UsageRouteTest, TheOldReportStillWorks) {
  Start();
  auto [status, body] = Put("n1", R"({"gpus":{"1":"2Gi"}})");
  ASSERT_EQ(status, 200) << body;
  json n = Node("n1");
  EXPECT_EQ(n["gpus"][1]["used_bytes"], 2 * kGi);
  EXPECT_EQ(n["gpus"][1]["reported_total_bytes"], 0);
  EXPECT_EQ(n["pods"][0]["usage_reported_ms"], 0);  // no per-pod figures in the old report
}

TEST_F(UsageRouteTest, RefusalsAre400sThatChangeNothing) {
  Start([](const std::string& n) { return std::optional<bool>(n == "cpu-node"); });
  const uint64_t epoch = (*store_.Snapshot())->epoch;
  struct Case {
    const char* name;
    std::string node, body;
    int status;
    const char* says;
  };
  const std::string big = std::to_string(81 * kGi);
  const std::vector<Case> cases = {
      {"unknown node", "nope", AgentReport(), 400, "node nope is not in the ledger, nor a GPU node of the cluster"},
      {"unknown GPU", "n1", R"({"gpus":[{"index":5,"total_bytes":10,"used_bytes":1}]})", 400, "node n1 has no GPU 5"},
      {"unknown GPU (old report)", "n1", R"({"gpus":{"5":1}})", 400, "node n1 has no GPU 5"},
      {"used > total", "n1", AgentReport(81 * kGi), 400, "is larger than total_bytes"},
      {"bad uid", "n1", R"({"gpus":[{"index":0,"total_bytes":10,"used_bytes":1,"pods":[{"uid":"x","used_bytes":1}]}]})",
       400, "is not a canonical UID"},
      {"float", "n1", R"({"gpus":[{"index":0,"total_bytes":10,"used_bytes":0.5}]})", 400, "whole number of bytes"},
  };
  for (const Case& c : cases) {
    auto [status, body] = Put(c.node, c.body);
    EXPECT_EQ(status, c.status) << c.name << ": " << body;
    EXPECT_THAT(body, HasSubstr(c.says)) << c.name;
  }
  EXPECT_EQ(Put("n1", AgentReport(), nullptr).first, 401);
  EXPECT_EQ(Put("n1", AgentReport(), "wrong").first, 401);
  EXPECT_EQ((*store_.Snapshot())->epoch, epoch);
  EXPECT_EQ(store_.reports, 0);
  EXPECT_TRUE(store_.ReportedGpus()->empty());
}

TEST_F(UsageRouteTest, ANodeOfTheClusterNotInTheLedgerHasItsTotalsKept) {
  Start([](const std::string& n) { return std::optional<bool>(n == "gpu-new"); });
  auto [status, body] = Put("gpu-new", AgentReport());
  ASSERT_EQ(status, 200) << body;
  auto reported = store_.ReportedGpus();
  ASSERT_TRUE(reported.ok());
  ASSERT_EQ(reported->count("gpu-new"), 1u);
  EXPECT_EQ(reported->at("gpu-new").size(), 2u);
  EXPECT_EQ(reported->at("gpu-new")[0].total, 80 * kGi);
  EXPECT_EQ(reported->at("gpu-new")[0].uuid, "GPU-aaaa");
}

TEST_F(UsageRouteTest, TheOldReportCannotIntroduceANode) {
  Start([](const std::string& n) { return std::optional<bool>(n == "gpu-new"); });
  auto [status, body] = Put("gpu-new", R"({"gpus":{"0":1}})");
  EXPECT_EQ(status, 400);
  EXPECT_THAT(body, HasSubstr("node gpu-new is not in the ledger"));
  EXPECT_TRUE(store_.ReportedGpus()->empty());
}

TEST_F(UsageRouteTest, AnUnsyncedNodeListIs503) {
  Start([](const std::string&) { return std::optional<bool>(); });
  auto [status, body] = Put("gpu-new", AgentReport());
  EXPECT_EQ(status, 503);
  EXPECT_THAT(body, HasSubstr("not synced"));
  EXPECT_EQ(store_.reports, 0);
}

TEST_F(UsageRouteTest, StandaloneAnUnknownNodeIs400) {
  Start();
  auto [status, body] = Put("nope", R"({"gpus":{"0":1}})");
  EXPECT_EQ(status, 400);
  EXPECT_THAT(body, HasSubstr("node nope is not in the ledger"));
}

}  // namespace
}  // namespace vramd::http
