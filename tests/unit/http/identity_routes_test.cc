// The ledger routes with identities on (issue 33), over HTTP on the
// in-memory store and the fake API server: each attack of the issue is made
// and refused with nothing changed; reads show a pod's name only to callers
// who may get it.
#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fakes/fake_clock.h"
#include "fakes/fake_kube_client.h"
#include "fakes/fake_ledger_store.h"
#include "vramd/http/auth.h"
#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"

namespace vramd::http {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

constexpr int64_t kGi = int64_t{1} << 30;
constexpr const char* kShared = "shared-secret";
constexpr const char* kPodA = "aaaaaaaa-0000-0000-0000-000000000001";   // team-a/train on n1
constexpr const char* kPodB = "bbbbbbbb-0000-0000-0000-000000000002";   // team-b/serve on n1

using testing::ServiceAccountUser;

class IdentityRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.now_ms = clock_.NowMs();
    store_.AddNode("n1", {70 * kGi, 70 * kGi});
    store_.AddNode("n2", {70 * kGi});
    Put(store_, "n1", kPodA, "team-a", "train", 0);
    Put(store_, "n1", kPodB, "team-b", "serve", 1);
    // The agents of n1 and n2 (1.20 tokens: the node comes from the pod).
    AddAgent("agent-n1", "vramd-agent-n1", "11111111-0000-0000-0000-000000000001", "n1");
    AddAgent("agent-n2", "vramd-agent-n2", "22222222-0000-0000-0000-000000000002", "n2");
    kube_.tokens["tenant-a"] = ServiceAccountUser("team-a", "default", "train", kPodA);
    kube_.access["system:serviceaccount:team-a:default\nteam-a"] = true;
    kube_.tokens["admin"] = ServiceAccountUser("ops", "admin", "", "");
    kube_.access["system:serviceaccount:ops:admin\n"] = true;  // may get pods everywhere
    kube::PodInfo train;
    train.ns = "team-a";
    train.name = "train";
    train.uid = kPodA;
    train.node_name = "n1";
    kube_.pods["team-a/train"] = train;
    kube::PodInfo target;
    target.ns = "team-b";
    target.name = "serve";
    target.uid = kPodB;
    kube_.pods["team-b/serve"] = target;

    AuthOptions o = SharedTokenOnly(kShared);
    o.identities = true;
    o.agent_namespace = "vramd";
    o.agent_service_account = "vramd-agent";
    ApiServices svc;
    svc.store = &store_;
    svc.registry = &registry_;
    svc.clock = &clock_;
    svc.kube = &kube_;
    svc.auth = std::make_shared<Authenticator>(o, &kube_, &clock_);
    svc.node_in_cluster = [](const std::string&) { return std::optional<bool>(true); };
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    server_ = std::make_unique<Server>(so, &registry_);
    RegisterLedgerRoutes(*server_, svc);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override { server_->Stop(); }

  static void Put(testing::FakeLedgerStore& store, const std::string& node, const char* uid, const char* ns,
                  const char* name, int gpu) {
    ledger::Entry e;
    e.pod_uid = uid;
    e.ns = ns;
    e.name = name;
    e.gpus = {gpu};
    e.per_gpu = 10 * kGi;
    e.state = ledger::EntryState::kBound;
    ASSERT_TRUE(store.PutEntry(node, e).ok());
  }
  void AddAgent(const std::string& token, const std::string& pod, const std::string& uid, const std::string& node) {
    kube_.tokens[token] = ServiceAccountUser("vramd", "vramd-agent", pod, uid);
    kube::PodInfo p;
    p.ns = "vramd";
    p.name = pod;
    p.uid = uid;
    p.node_name = node;
    kube_.pods["vramd/" + pod] = p;
  }
  static httplib::Headers Bearer(const char* token) {
    httplib::Headers h;
    if (token != nullptr) h.emplace("Authorization", std::string("Bearer ") + token);
    return h;
  }
  std::pair<int, std::string> Report(const std::string& node, const char* token, int64_t used = 69 * kGi) {
    const std::string body = R"({"version":2,"gpus":[{"index":0,"total_bytes":)" + std::to_string(80 * kGi) +
                             R"(,"used_bytes":)" + std::to_string(used) + "}]}";
    auto r = client_->Put("/v1/nodes/" + node + "/usage", Bearer(token), body, "application/json");
    return r ? std::pair(r->status, r->body) : std::pair(0, std::string("no answer"));
  }
  std::pair<int, json> Get(const std::string& path, const char* token) {
    auto r = client_->Get(path, Bearer(token));
    if (!r) return {0, json()};
    json j = json::parse(r->body, nullptr, false);
    return {r->status, j};
  }

  testing::FakeLedgerStore store_;
  testing::FakeKubeClient kube_;
  testing::FakeClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(IdentityRoutesTest, AnAgentReportsForItsOwnNodeOnly) {
  auto [ok, ok_body] = Report("n1", "agent-n1", 9 * kGi);
  ASSERT_EQ(ok, 200) << ok_body;
  const uint64_t epoch = (*store_.Snapshot())->epoch;
  const int reports = store_.reports;
  struct Attack {
    const char* name;
    std::string node;
    const char* token;
    int status;
    const char* says;
  } attacks[] = {
      {"n2's agent marks n1 full", "n1", "agent-n2", 403, "reports for that node only"},
      {"the shared token marks n1 full", "n1", kShared, 403, "shared API token"},
      {"a tenant's pod token", "n1", "tenant-a", 403, "not the node agent"},
      {"a forged token", "n1", "forged", 401, "did not authenticate"},
      {"no token", "n1", nullptr, 401, "agent's ServiceAccount token"},
      {"n1's agent invents a node", "cpu-7", "agent-n1", 403, "reports for that node only"},
  };
  for (const Attack& a : attacks) {
    auto [status, body] = Report(a.node, a.token);
    EXPECT_EQ(status, a.status) << a.name << ": " << body;
    EXPECT_THAT(body, HasSubstr(a.says)) << a.name;
  }
  EXPECT_EQ((*store_.Snapshot())->epoch, epoch);
  EXPECT_EQ(store_.reports, reports);
  EXPECT_EQ((*store_.Snapshot())->Find("n1")->gpus[0].used, 9 * kGi);  // the agent's own figure stands
}

TEST_F(IdentityRoutesTest, ReadsNeedACredentialAndShowOnlyPodsTheCallerMayGet) {
  EXPECT_EQ(Get("/v1/nodes", nullptr).first, 401);
  EXPECT_EQ(Get("/v1/nodes/n1", nullptr).first, 401);
  EXPECT_EQ(Get("/v1/nodes", "forged").first, 401);

  auto [status, nodes] = Get("/v1/nodes/n1", "tenant-a");
  ASSERT_EQ(status, 200) << nodes.dump();
  ASSERT_EQ(nodes["pods"].size(), 2u);
  int shown = 0, hidden = 0;
  for (const json& p : nodes["pods"]) {
    if (p.value("hidden", false)) {
      ++hidden;
      EXPECT_FALSE(p.contains("name")) << p.dump();
      EXPECT_FALSE(p.contains("uid")) << p.dump();
      EXPECT_FALSE(p.contains("namespace")) << p.dump();
      EXPECT_EQ(p["vram_per_gpu_bytes"], 10 * kGi);  // the figures stay
    } else {
      ++shown;
      EXPECT_EQ(p["namespace"], "team-a");
      EXPECT_EQ(p["uid"], kPodA);
    }
  }
  EXPECT_EQ(shown, 1);
  EXPECT_EQ(hidden, 1);
  EXPECT_NE(nodes.dump().find("team-a"), std::string::npos);
  EXPECT_EQ(nodes.dump().find("team-b"), std::string::npos);
  EXPECT_EQ(nodes.dump().find(kPodB), std::string::npos);

  for (const char* all : {"admin", kShared}) {
    auto [s, full] = Get("/v1/nodes", all);
    ASSERT_EQ(s, 200);
    EXPECT_NE(full.dump().find(kPodB), std::string::npos) << all;
  }
}

TEST_F(IdentityRoutesTest, ExplainReadsAPodOnlyForACallerWhoMayGetIt) {
  const std::string path = "/v1/explain?namespace=team-b&pod=serve";
  auto [denied, body] = Get(path, "tenant-a");
  EXPECT_EQ(denied, 403) << body.dump();
  EXPECT_EQ(std::count(kube_.calls.begin(), kube_.calls.end(), "get team-b/serve"), 0)
      << "vramd read the pod for a caller who may not";
  EXPECT_EQ(Get(path, nullptr).first, 401);
  // An RBAC rule with resourceNames: this one pod, not its namespace.
  kube_.access["system:serviceaccount:team-a:default\nteam-b/serve"] = true;
  auto [one, one_answer] = Get(path, "tenant-a");
  EXPECT_EQ(one, 200) << one_answer.dump();
  EXPECT_EQ(Get("/v1/explain?namespace=team-b&pod=other", "tenant-a").first, 403);
  auto [allowed, answer] = Get(path, "admin");
  EXPECT_EQ(allowed, 200) << answer.dump();
  EXPECT_EQ(answer["pod"]["uid"], kPodB);
  EXPECT_EQ(std::count(kube_.calls.begin(), kube_.calls.end(), "get team-b/serve"), 2);
}

}  // namespace
}  // namespace vramd::http
