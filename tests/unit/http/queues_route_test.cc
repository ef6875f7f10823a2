// GET /v1/queues and explain's "queue" over HTTP (issue 16), from a
// hand-built TenancyView (tenancy_fixture.h): queues off is a 404 saying so,
// an unreadable state a 503, otherwise every queue sorted by name with its
// figures; names from the cluster come back as valid, escaped JSON. Explain
// shows the pod's queue and whether it admits the pod (ledger::AdmitToQueue).
#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "fakes/fake_clock.h"
#include "fakes/fake_ledger_store.h"
#include "http/json_views.h"
#include "http/tenancy_fixture.h"
#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"

namespace vramd::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

constexpr int64_t kGi = int64_t{1} << 30;

class QueuesRouteTest : public ::testing::Test {
 protected:
  void Start(std::function<std::optional<ledger::TenancyView>()> tenancy) {
    store_.AddNode("n1", {40 * kGi});
    ApiServices svc;
    svc.store = &store_;
    svc.registry = &registry_;
    svc.clock = &clock_;
    svc.tenancy = std::move(tenancy);
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
  std::pair<int, std::string> Get(const std::string& path) {
    auto r = client_->Get(path);
    if (!r) return {0, "no answer"};
    return {r->status, r->body};
  }
  // POST /v1/explain for a pod of `ns` asking `vram` with `priority`.
  json Explain(const std::string& ns, const std::string& vram, int priority) {
    const json pod = {
        {"metadata", {{"name", "train"}, {"namespace", ns}, {"uid", "u-train"}}},
        {"spec",
         {{"priority", priority},
          {"containers", json::array({{{"name", "c"}, {"resources", {{"limits", {{"vramd.io/vram", vram}}}}}}})}}}};
    auto r = client_->Post("/v1/explain", pod.dump(), "application/json");
    if (!r) return json{{"no answer", true}};
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body, nullptr, false);
  }

  testing::FakeLedgerStore store_;
  testing::FakeClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(QueuesRouteTest, QueuesOffIsA404SayingSo) {
  Start(nullptr);
  auto [status, body] = Get("/v1/queues");
  EXPECT_EQ(status, 404);
  EXPECT_EQ(json::parse(body)["error"], "queues are off (no VramQueue support in this deployment)");
}

TEST_F(QueuesRouteTest, AStateThatCannotBeReadIsA503) {
  Start([] { return std::optional<ledger::TenancyView>(); });
  auto [status, body] = Get("/v1/queues");
  EXPECT_EQ(status, 503) << body;
  EXPECT_THAT(json::parse(body)["error"].get<std::string>(), HasSubstr("queues cannot be read now"));
}

TEST_F(QueuesRouteTest, EveryQueueSortedByNameWithItsFigures) {
  Start([] { return std::optional<ledger::TenancyView>(testing::TenancyFixture()); });
  auto [status, body] = Get("/v1/queues");
  ASSERT_EQ(status, 200) << body;
  const json q = json::parse(body)["queues"];
  ASSERT_EQ(q.size(), 5u) << body;
  std::vector<std::string> names;
  for (const json& x : q) names.push_back(x["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"broken", "default", "research", "team-a", "team-b"}))
      << "the synthetic default queue, last in the set, is sorted in by name";
  EXPECT_EQ(q[4], (json{{"name", "team-b"},
                        {"parent", "research"},
                        {"valid", true},
                        {"reason", "Valid"},
                        {"message", ""},
                        {"deserved_bytes", 8 * kGi},
                        {"limit_bytes", 32 * kGi},
                        {"weight", 1},
                        {"allocated_bytes", 28 * kGi},
                        {"allocated_nonpreemptible_bytes", 0},
                        {"pending_bytes", 8 * kGi},
                        {"fair_share_bytes", 20 * kGi},
                        {"synthetic", false}}));
  EXPECT_TRUE(q[3]["limit_bytes"].is_null()) << "team-a has no limit";
  EXPECT_EQ(q[3]["weight"], 2);
  EXPECT_EQ(q[3]["allocated_nonpreemptible_bytes"], 2 * kGi);
  EXPECT_EQ(q[2]["parent"], "");
  EXPECT_EQ(q[2]["fair_share_bytes"], 36 * kGi);
  EXPECT_EQ(q[1]["synthetic"], true);
  EXPECT_EQ(q[0]["valid"], false);
  EXPECT_EQ(q[0]["reason"], "Cycle");
  EXPECT_THAT(q[0]["message"].get<std::string>(), HasSubstr("comes back to itself"));
}

TEST_F(QueuesRouteTest, NoQueuesIsAnEmptyList) {
  Start([] {
    ledger::TenancyView v;
    v.set = std::make_shared<ledger::QueueSet>();
    return std::optional<ledger::TenancyView>(v);
  });
  auto [status, body] = Get("/v1/queues");
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body), (json{{"queues", json::array()}}));
}

TEST_F(QueuesRouteTest, HostileNamesComeBackAsValidEscapedJson) {
  const std::string quote = "a\"b\\c</script>";
  const std::string controls = "x\n\r\t\x1b[31my";
  const std::string not_utf8 = "bad\xff\xfe";
  Start([=] {
    ledger::TenancyView v;
    v.set = std::make_shared<ledger::QueueSet>();
    for (const std::string& n : {quote, controls, not_utf8}) {
      ledger::QueueStatus s;
      s.name = n;
      s.parent = n;
      s.message = "queue " + n + " is broken";
      s.reason = "Invalid";
      s.valid = false;
      v.statuses.push_back(s);
    }
    return std::optional<ledger::TenancyView>(v);
  });
  auto [status, body] = Get("/v1/queues");
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(body.find('\n'), std::string::npos);
  EXPECT_EQ(body.find('\x1b'), std::string::npos);
  const json j = json::parse(body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << body;
  const json& q = j["queues"];
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0]["name"], quote);
  EXPECT_EQ(q[0]["message"], "queue " + quote + " is broken");
  EXPECT_EQ(q[1]["name"], "bad\xEF\xBF\xBD\xEF\xBF\xBD") << "bytes that are not UTF-8 become U+FFFD";
  EXPECT_EQ(q[2]["name"], controls);
  EXPECT_EQ(q[2]["parent"], controls);
}

TEST(QueueExplainView, APodWithNoQueueHasNullFigures) {
  const ledger::TenancyView v = testing::TenancyFixture();
  ledger::Admission a;  // ok, queue -1
  const json j = QueueExplainView(v, a, true);
  EXPECT_TRUE(j["name"].is_null());
  EXPECT_TRUE(j["allocated_bytes"].is_null());
  EXPECT_EQ(j["admitted"], true);
  EXPECT_EQ(j["preemptible"], true);
  EXPECT_EQ(j["reason"], "");
  a.queue = 99;  // an index the statuses do not have
  EXPECT_TRUE(QueueExplainView(v, a, false)["name"].is_null());
}

// ---- explain (these call ledger::AdmitToQueue) ----

TEST_F(QueuesRouteTest, ExplainShowsTheQueueThatRefusesThePod) {
  Start([] { return std::optional<ledger::TenancyView>(testing::TenancyFixture()); });
  const json j = Explain("team-b", "8Gi", 0);  // priority 0: preemptible
  ASSERT_TRUE(j.contains("queue")) << j.dump();
  const json& q = j["queue"];
  EXPECT_EQ(q["name"], "team-b");
  EXPECT_EQ(q["admitted"], false);
  EXPECT_EQ(q["preemptible"], true);
  EXPECT_EQ(q["allocated_bytes"], 28 * kGi);
  EXPECT_EQ(q["fair_share_bytes"], 20 * kGi);
  EXPECT_EQ(q["deserved_bytes"], 8 * kGi);
  EXPECT_EQ(q["limit_bytes"], 32 * kGi);
  EXPECT_THAT(q["reason"].get<std::string>(), HasSubstr("team-b")) << "28Gi + 8Gi > limit 32Gi";
  EXPECT_EQ(j["fits_on"], 1) << "the GPUs have room: only the queue refuses";
}

TEST_F(QueuesRouteTest, ExplainShowsTheQueueThatAdmitsThePod) {
  Start([] { return std::optional<ledger::TenancyView>(testing::TenancyFixture()); });
  const json j = Explain("team-a", "4Gi", 1000);  // priority 1000: not preemptible, in quota
  ASSERT_TRUE(j.contains("queue")) << j.dump();
  EXPECT_EQ(j["queue"]["name"], "team-a");
  EXPECT_EQ(j["queue"]["admitted"], true);
  EXPECT_EQ(j["queue"]["preemptible"], false);
  EXPECT_EQ(j["queue"]["reason"], "");
  EXPECT_TRUE(j["queue"]["limit_bytes"].is_null());
  const json d = Explain("elsewhere", "4Gi", 0);
  EXPECT_EQ(d["queue"]["name"], "default") << "a namespace no queue names falls in the default queue";
  EXPECT_EQ(d["queue"]["admitted"], true);
}

TEST_F(QueuesRouteTest, ExplainHasNoQueueWhenQueuesAreOff) {
  Start(nullptr);
  const json j = Explain("team-b", "8Gi", 0);
  EXPECT_FALSE(j.contains("queue")) << j.dump();
  EXPECT_EQ(j["fits_on"], 1);
}

TEST_F(QueuesRouteTest, ExplainHasNoQueueWithoutVramQueueObjects) {
  Start([] {
    ledger::TenancyView v = testing::TenancyFixture();
    auto set = std::make_shared<ledger::QueueSet>(*v.set);
    set->objects = 0;  // only the synthetic default queue: tenancy changes nothing
    v.set = set;
    return std::optional<ledger::TenancyView>(v);
  });
  const json j = Explain("team-b", "8Gi", 0);
  EXPECT_FALSE(j.contains("queue")) << j.dump();
}

TEST_F(QueuesRouteTest, ExplainStillAnswersWhenTheQueuesCannotBeRead) {
  Start([] { return std::optional<ledger::TenancyView>(); });
  const json j = Explain("team-b", "8Gi", 0);
  EXPECT_FALSE(j.contains("queue")) << j.dump();
  EXPECT_EQ(j["fits_on"], 1);
}

}  // namespace
}  // namespace vramd::http
