#include "vramd/agent/pusher.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

#include "agent/temp_tree.h"

namespace vramd::agent {
namespace {

TEST(AgentPushDelay, BacksOffOnFailuresAndWaitsLongAfterARefusal) {
  struct Case {
    const char* name;
    int64_t interval;
    PushKind kind;
    int failures;
    int64_t want;
  } cases[] = {
      {"ok", 5000, PushKind::kOk, 0, 5000},
      {"first_failure_waits_one_interval", 5000, PushKind::kFailed, 1, 5000},
      {"second_doubles", 5000, PushKind::kFailed, 2, 10000},
      {"fourth", 5000, PushKind::kFailed, 4, 40000},
      {"capped_at_a_minute", 5000, PushKind::kFailed, 5, 60000},
      {"many_failures_stay_capped", 5000, PushKind::kFailed, 1000, 60000},
      {"long_interval_is_its_own_cap", 120000, PushKind::kFailed, 3, 120000},
      {"refused_waits_a_minute", 5000, PushKind::kRejected, 1, 60000},
      {"refused_with_a_long_interval", 300000, PushKind::kRejected, 1, 300000},
  };
  for (const Case& c : cases) EXPECT_EQ(NextDelayMs(c.interval, c.kind, c.failures), c.want) << c.name;
}

class PushServer {
 public:
  PushServer() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~PushServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  httplib::Server& server() { return server_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(AgentPusher, PutsTheReportWithTheTokenToTheNodesUsage) {
  PushServer s;
  std::string path, auth, body, type;
  s.server().Put("/v1/nodes/gpu-1/usage", [&](const httplib::Request& r, httplib::Response& w) {
    path = r.path;
    auth = r.get_header_value("Authorization");
    body = r.body;
    type = r.get_header_value("Content-Type");
    w.set_content("{\"node\":\"gpu-1\"}", "application/json");
  });
  testing::TempTree t;
  std::string token = t.Write("token", "s3cr3t\n");
  Result<std::unique_ptr<Pusher>> p = MakeHttpPusher(s.url(), "gpu-1", token, "", 2000);
  ASSERT_TRUE(p.ok()) << p.status().message();
  PushOutcome out = (*p)->Push("{\"version\":2}");
  EXPECT_EQ(out.kind, PushKind::kOk);
  EXPECT_EQ(out.status, 200);
  EXPECT_EQ(path, "/v1/nodes/gpu-1/usage");
  EXPECT_EQ(auth, "Bearer s3cr3t");
  EXPECT_EQ(body, "{\"version\":2}");
  EXPECT_EQ(type, "application/json");

  t.Write("token", "rotated");  // read again before every push
  EXPECT_EQ((*p)->Push("{}").kind, PushKind::kOk);
  EXPECT_EQ(auth, "Bearer rotated");
}

TEST(AgentPusher, ABasePathPrefixIsKept) {
  PushServer s;
  std::string path;
  s.server().Put(R"(/vramd/v1/nodes/n/usage)", [&](const httplib::Request& r, httplib::Response&) { path = r.path; });
  Result<std::unique_ptr<Pusher>> p = MakeHttpPusher(s.url() + "/vramd/", "n", "", "", 2000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Push("{}").kind, PushKind::kOk);
  EXPECT_EQ(path, "/vramd/v1/nodes/n/usage");
}

TEST(AgentPusher, FourHundredsAreRefusalsWithVramdsMessageAndFiveHundredsFailures) {
  PushServer s;
  int status = 400;
  s.server().Put("/v1/nodes/n/usage", [&](const httplib::Request&, httplib::Response& w) {
    w.status = status;
    w.set_content("{\"error\":\"unknown node n\"}\n", "application/json");
  });
  Result<std::unique_ptr<Pusher>> p = MakeHttpPusher(s.url(), "n", "", "", 2000);
  ASSERT_TRUE(p.ok());
  PushOutcome out = (*p)->Push("{}");
  EXPECT_EQ(out.kind, PushKind::kRejected);
  EXPECT_EQ(out.status, 400);
  EXPECT_EQ(out.message, "{\"error\":\"unknown node n\"}");
  status = 401;
  EXPECT_EQ((*p)->Push("{}").kind, PushKind::kRejected);
  status = 503;
  out = (*p)->Push("{}");
  EXPECT_EQ(out.kind, PushKind::kFailed);
  EXPECT_EQ(out.status, 503);
}

TEST(AgentPusher, NoServerAndNoTokenFileAreFailures) {
  int port = 0;
  {
    PushServer gone;  // a port that was just free: nothing listens there now
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  Result<std::unique_ptr<Pusher>> p = MakeHttpPusher("http://127.0.0.1:" + std::to_string(port), "n", "", "", 500);
  ASSERT_TRUE(p.ok());
  PushOutcome out = (*p)->Push("{}");
  EXPECT_EQ(out.kind, PushKind::kFailed);
  EXPECT_EQ(out.status, 0);
  EXPECT_NE(out.message.find("no answer"), std::string::npos);

  PushServer s;
  Result<std::unique_ptr<Pusher>> q = MakeHttpPusher(s.url(), "n", "/nonexistent/token", "", 500);
  ASSERT_TRUE(q.ok());
  out = (*q)->Push("{}");
  EXPECT_EQ(out.kind, PushKind::kFailed);
  EXPECT_EQ(out.message, "cannot read the token file /nonexistent/token");
}

TEST(AgentPusher, ABadServerUrlIsRefused) {
  EXPECT_FALSE(MakeHttpPusher("vramd:8080", "n", "", "", 500).ok());
  EXPECT_FALSE(MakeHttpPusher("http://vramd:8080", "", "", "", 500).ok());
}

}  // namespace
}  // namespace vramd::agent
