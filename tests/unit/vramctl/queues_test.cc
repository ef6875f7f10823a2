// `vramctl queues` and the queue lines of `vramctl explain` (issue 16): the
// table from what GET /v1/queues writes (http::QueuesView of the hand-built
// view in tests/unit/http/tenancy_fixture.h), names from the cluster that
// cannot break a line, an answer of the wrong shape, and both commands
// against a real in-process vramd HTTP server.
#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "fakes/fake_clock.h"
#include "fakes/fake_ledger_store.h"
#include "http/json_views.h"
#include "http/tenancy_fixture.h"
#include "vramctl/commands.h"
#include "vramctl/output.h"
#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"

namespace vramctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

constexpr int64_t kGi = int64_t{1} << 30;

json FixtureAnswer() {
  // Through a string, as vramctl gets it.
  return json::parse(vramd::http::QueuesView(vramd::testing::TenancyFixture().statuses).dump());
}

std::string Printed(const json& answer, Format f, int* rc = nullptr) {
  ::testing::internal::CaptureStdout();
  int r = PrintQueues(answer, f);
  if (rc != nullptr) *rc = r;
  return ::testing::internal::GetCapturedStdout();
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1) {
    out.push_back(s.substr(start, nl - start));
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

TEST(VramctlQueues, TheTableHasTheQueuesColumns) {
  EXPECT_EQ(Printed(FixtureAnswer(), Format::kTable),
            "NAME       PARENT     DESERVED   LIMIT   ALLOCATED   FAIR SHARE   PENDING   VALID\n"
            "broken     broken     4Gi        -       0           0            0         Cycle\n"
            "default*   -          0          -       0           0            0         True\n"
            "research   -          24Gi       40Gi    30Gi        36Gi         8Gi       True\n"
            "team-a     research   16Gi       -       2Gi         16Gi         0         True\n"
            "team-b     research   8Gi        32Gi    28Gi        20Gi         8Gi       True\n"
            "(* no VramQueue object: the default queue of namespaces that no queue names)\n");
}

TEST(VramctlQueues, WideAddsWeightNonPreemptibleAndTheMessage) {
  const std::vector<std::string> lines = Lines(Printed(FixtureAnswer(), Format::kWide));
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_THAT(lines[0], HasSubstr("VALID   WEIGHT   NON-PREEMPTIBLE   MESSAGE"));
  EXPECT_THAT(lines[1],
              HasSubstr("Cycle   1        0                 queue broken: its parent chain comes back to itself"));
  EXPECT_THAT(lines[4], HasSubstr("True    2        2Gi               -"));
}

TEST(VramctlQueues, JsonIsTheServersAnswer) {
  const json answer = FixtureAnswer();
  EXPECT_EQ(json::parse(Printed(answer, Format::kJson)), answer);
}

TEST(VramctlQueues, NoQueuesSaysSo) {
  EXPECT_EQ(Printed(json{{"queues", json::array()}}, Format::kTable),
            "NAME   PARENT   DESERVED   LIMIT   ALLOCATED   FAIR SHARE   PENDING   VALID\n(no queues)\n");
}

TEST(VramctlQueues, NamesFromTheClusterCannotBreakALineOrTheTerminal) {
  json answer = FixtureAnswer();
  answer["queues"][3]["name"] = "evil\n\x1b[31mred\r\t\xc2\x9b" "2J";
  answer["queues"][3]["reason"] = "Bad\nReason";
  answer["queues"][3]["valid"] = false;
  const std::string out = Printed(answer, Format::kTable);
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos);
  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 7u) << out;
  EXPECT_EQ(lines[4].rfind("evil??[31mred???2J   research", 0), 0u) << lines[4];
  EXPECT_THAT(lines[4], HasSubstr("Bad?Reason"));
}

TEST(VramctlQueues, AnAnswerOfTheWrongShapePrintsDashesNotACrash) {
  const json answer = {{"queues", json::array({json{{"name", 5}, {"deserved_bytes", "x"}, {"valid", "yes"}},
                                               json(7), json{{"name", "ok"}, {"limit_bytes", nullptr}}})}};
  const std::vector<std::string> lines = Lines(Printed(answer, Format::kWide));
  ASSERT_EQ(lines.size(), 4u);
  // A name that is not a string is "?", every other cell of the wrong type "-".
  EXPECT_EQ(lines[1],
            "?      -        -          -       -           -            -         -       -        -"
            "                 -");
  EXPECT_EQ(lines[2], lines[1]) << "a queue that is not an object";
  EXPECT_EQ(lines[3].rfind("ok     -        -          -", 0), 0u) << lines[3];
  int rc = 0;
  ::testing::internal::CaptureStderr();
  Printed(json{{"nodes", json::array()}}, Format::kTable, &rc);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("no list of queues"));
  EXPECT_EQ(rc, 1);
}

TEST(VramctlQueues, IsInTheCommandTableUsageAndCompletion) {
  const Command* c = FindCommand("queues");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->run, &QueuesCommand);
  EXPECT_THAT(Usage("vramctl"), HasSubstr("  queues   "));
  for (const char* shell : {"bash", "zsh"}) {
    EXPECT_THAT(CompletionScript(shell), HasSubstr(" queues ")) << shell;
  }
}

TEST(VramctlQueues, TakesNoArguments) {
  Context c;
  c.target.scheme_host_port = "http://127.0.0.1:1";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(QueuesCommand(c, {"team-a"}), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("usage: vramctl queues"));
}

// ---- explain's lines ----

json ExplainAnswer() {
  return {{"pod", {{"namespace", "team-b"}, {"name", "train"}, {"uid", "u"}}},
          {"request", {{"total_bytes", 8 * kGi}, {"gpu_count", 1}, {"per_gpu_bytes", 8 * kGi}}},
          {"fits_on", 1},
          {"nodes", json::array({{{"node", "n1"}, {"verdict", "fits"}, {"gpus", json::array({0})}, {"score", 40}}})}};
}

json RefusingQueue() {
  return {{"name", "team-b"},         {"allocated_bytes", 28 * kGi}, {"fair_share_bytes", 20 * kGi},
          {"deserved_bytes", 8 * kGi}, {"limit_bytes", 32 * kGi},     {"preemptible", true},
          {"admitted", false},
          {"reason", "queue team-b at its limit: 28Gi allocated + 8Gi requested > limit 32Gi"}};
}

std::string Explained(const json& answer) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(PrintExplain(answer), 0);
  return ::testing::internal::GetCapturedStdout();
}

TEST(VramctlExplain, WithoutAQueueTheOutputIsAsBefore) {
  EXPECT_EQ(Explained(ExplainAnswer()),
            "pod team-b/train needs 8Gi; fits on 1 of 1 nodes now\n"
            "  n1                       fits on GPU 0 (score 40)\n");
}

TEST(VramctlExplain, AQueueThatRefusesThePodIsWhyItWaits) {
  json a = ExplainAnswer();
  a["queue"] = RefusingQueue();
  EXPECT_EQ(Explained(a),
            "pod team-b/train needs 8Gi; waits on its queue: queue team-b at its limit: 28Gi allocated + 8Gi "
            "requested > limit 32Gi\n"
            "  queue team-b: allocated 28Gi, fair share 20Gi, deserved 8Gi, limit 32Gi; the pod is preemptible (may "
            "run over quota)\n"
            "  n1                       fits on GPU 0 (score 40)\n");
}

TEST(VramctlExplain, AQueueThatAdmitsThePodIsALine) {
  json a = ExplainAnswer();
  a["queue"] = RefusingQueue();
  a["queue"]["admitted"] = true;
  a["queue"]["reason"] = "";
  a["queue"]["preemptible"] = false;
  a["queue"]["limit_bytes"] = nullptr;
  const std::vector<std::string> lines = Lines(Explained(a));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "pod team-b/train needs 8Gi; fits on 1 of 1 nodes now");
  EXPECT_EQ(lines[1],
            "  queue team-b: allocated 28Gi, fair share 20Gi, deserved 8Gi, limit -; the pod is not preemptible "
            "(in-quota VRAM only)");
}

TEST(VramctlExplain, ABoundPodDoesNotWaitOnItsQueue) {
  json a = ExplainAnswer();
  a["queue"] = RefusingQueue();
  a["bound_to"] = "n1";
  const std::vector<std::string> lines = Lines(Explained(a));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "pod team-b/train needs 8Gi; bound to n1; fits on 1 of 1 nodes now");
  EXPECT_THAT(lines[1], HasSubstr("queue team-b: allocated 28Gi"));
}

TEST(VramctlExplain, APodWithNoQueueAndAHostileQueueName) {
  json a = ExplainAnswer();
  a["queue"] = RefusingQueue();
  a["queue"]["name"] = nullptr;
  a["queue"]["admitted"] = true;
  EXPECT_THAT(Lines(Explained(a))[1], HasSubstr("queue: none (no queue serves its namespace"));
  a["queue"] = RefusingQueue();
  a["queue"]["name"] = "x\n\x1b]0;title\x07";
  a["queue"]["reason"] = "r\nr";
  const std::string out = Explained(a);
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  ASSERT_EQ(Lines(out).size(), 3u) << out;
  EXPECT_THAT(Lines(out)[0], HasSubstr("waits on its queue: r?r"));
  EXPECT_THAT(Lines(out)[1], HasSubstr("queue x??]0;title?: allocated"));
}

// ---- against vramd's HTTP routes ----

class VramctlQueuesServer : public ::testing::Test {
 protected:
  void Start(std::function<std::optional<vramd::ledger::TenancyView>()> tenancy) {
    store_.AddNode("n1", {40 * kGi});
    vramd::http::ApiServices svc;
    svc.store = &store_;
    svc.registry = &registry_;
    svc.clock = &clock_;
    svc.tenancy = std::move(tenancy);
    vramd::http::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    server_ = std::make_unique<vramd::http::Server>(so, &registry_);
    vramd::http::RegisterLedgerRoutes(*server_, svc);
    ASSERT_TRUE(server_->Start().ok());
    ctx_.target.scheme_host_port = "http://127.0.0.1:" + std::to_string(server_->port());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  // (exit status, stdout, stderr)
  std::tuple<int, std::string, std::string> Run(int (*cmd)(const Context&, const std::vector<std::string>&),
                                                const std::vector<std::string>& args) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    int rc = cmd(ctx_, args);
    std::string out = ::testing::internal::GetCapturedStdout();
    return {rc, out, ::testing::internal::GetCapturedStderr()};
  }

  vramd::testing::FakeLedgerStore store_;
  vramd::testing::FakeClock clock_;
  vramd::metrics::Registry registry_;
  std::unique_ptr<vramd::http::Server> server_;
  Context ctx_;
};

TEST_F(VramctlQueuesServer, QueuesOffFailsWithTheServersWords) {
  Start(nullptr);
  auto [rc, out, err] = Run(QueuesCommand, {});
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "vramctl: HTTP 404: queues are off (no VramQueue support in this deployment)\n");
}

TEST_F(VramctlQueuesServer, QueuesPrintsTheTableAndJson) {
  Start([] { return std::optional<vramd::ledger::TenancyView>(vramd::testing::TenancyFixture()); });
  auto [rc, out, err] = Run(QueuesCommand, {});
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(out, Printed(FixtureAnswer(), Format::kTable));
  ctx_.output = Format::kJson;
  auto [rc2, out2, err2] = Run(QueuesCommand, {});
  EXPECT_EQ(rc2, 0) << err2;
  EXPECT_EQ(json::parse(out2), FixtureAnswer());
}

// Calls ledger::AdmitToQueue in the server.
TEST_F(VramctlQueuesServer, ExplainSaysThePodWaitsOnItsQueue) {
  Start([] { return std::optional<vramd::ledger::TenancyView>(vramd::testing::TenancyFixture()); });
  const std::string file =
      (std::filesystem::temp_directory_path() / ("vramctl_queue_pod_" + std::to_string(::getpid()) + ".json")).string();
  {
    std::ofstream f(file);
    f << json{{"metadata", {{"name", "train"}, {"namespace", "team-b"}, {"uid", "u-train"}}},
              {"spec",
               {{"containers",
                 json::array({{{"name", "c"}, {"resources", {{"limits", {{"vramd.io/vram", "8Gi"}}}}}}})}}}}
             .dump();
  }
  auto [rc, out, err] = Run(ExplainCommand, {"-f", file});
  std::remove(file.c_str());
  EXPECT_EQ(rc, 0) << err;
  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 3u) << out;
  EXPECT_EQ(lines[0].rfind("pod team-b/train needs 8Gi; waits on its queue: ", 0), 0u) << lines[0];
  EXPECT_THAT(lines[0], HasSubstr("team-b"));
  EXPECT_THAT(lines[0], Not(HasSubstr("fits on")));
  EXPECT_EQ(lines[1],
            "  queue team-b: allocated 28Gi, fair share 20Gi, deserved 8Gi, limit 32Gi; the pod is preemptible (may "
            "run over quota)");
  EXPECT_THAT(lines[2], HasSubstr("fits on GPU 0"));
}

}  // namespace
}  // namespace vramctl
