// The REST client against a fake API server (httplib::Server on 127.0.0.1,
// port 0) run in-process: request shapes, error mapping, lists, watches, TLS.
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "vramd/kube/kube_client.h"
#include "vramd/kube/secrets.h"

namespace vramd::kube {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "vramd-kube-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& content) const {
    fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
    return p.string();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  return json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"message", message}, {"reason", reason}, {"code", code}}
      .dump();
}

std::string PodJson(const std::string& name, const std::string& extra_metadata = "") {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"ml","uid":"uid-)" + name +
         R"(","resourceVersion":"5")" + extra_metadata +
         R"(},"spec":{"nodeName":"n1","containers":[{"resources":{"limits":{"vramd.io/vram":"8Gi"}}}]},)"
         R"("status":{"phase":"Running"}})";
}

// An httplib server bound to 127.0.0.1:<any port>; Start() serves on its own
// thread (register handlers first). Handlers of endless streams poll
// released() and end when the test is over.
class FakeApiServer {
 public:
  explicit FakeApiServer(std::unique_ptr<httplib::Server> server = std::make_unique<httplib::Server>())
      : server_(std::move(server)) {
    server_->set_tcp_nodelay(true);  // as Go's net/http: no delayed-ACK stalls on keep-alive
    port_ = server_->bind_to_any_port("127.0.0.1");
  }
  ~FakeApiServer() { Shutdown(); }

  void Start() {
    if (!thread_.joinable()) thread_ = std::thread([this] { server_->listen_after_bind(); });
  }
  void Shutdown() {
    released_ = true;
    if (!thread_.joinable()) return;
    // stop() only works once the server is running.
    while (!server_->is_running()) std::this_thread::sleep_for(1ms);
    server_->stop();
    thread_.join();
  }

  httplib::Server* operator->() { return server_.get(); }
  int port() const { return port_; }
  bool released() const { return released_.load(); }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> released_{false};
};

class RestClientTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GT(server_.port(), 0); }

  std::unique_ptr<KubeClient> Client(Options opts = {}) {
    opts.api_url = "http://127.0.0.1:" + std::to_string(server_.port());
    if (opts.token_file.empty()) opts.token_file = token_file_;
    server_.Start();
    Result<std::unique_ptr<KubeClient>> c = NewRestClient(opts);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  // Records the last request the server saw (handlers run on server threads).
  void Record(const httplib::Request& req) {
    std::lock_guard<std::mutex> lock(mu_);
    last_ = req;
    authorizations_.push_back(req.get_header_value("Authorization"));
  }
  httplib::Request Last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  std::vector<std::string> Authorizations() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }

  TempDir dir_;
  std::string token_file_ = dir_.Write("token", "tok-1\n");
  std::mutex mu_;
  httplib::Request last_;
  std::vector<std::string> authorizations_;
  FakeApiServer server_;  // last: stopped before what its handlers use goes away
};

// --- Bind -----------------------------------------------------------------

TEST_F(RestClientTest, BindPostsABindingWithTheBearerToken) {
  server_->Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
                [&](const httplib::Request& req, httplib::Response& res) {
                  Record(req);
                  res.status = 201;
                  res.set_content(req.body, "application/json");
                });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  Status st = client->Bind("ml", "hermes", "uid-1", "ness-linux3");
  ASSERT_TRUE(st.ok()) << st.ToString();

  httplib::Request req = Last();
  EXPECT_EQ(req.path, "/api/v1/namespaces/ml/pods/hermes/binding");
  EXPECT_EQ(req.get_header_value("Authorization"), "Bearer tok-1");
  EXPECT_EQ(req.get_header_value("Content-Type"), "application/json");
  json body = json::parse(req.body);
  EXPECT_EQ(body, json::parse(R"({"apiVersion":"v1","kind":"Binding",
      "metadata":{"name":"hermes","namespace":"ml","uid":"uid-1"},
      "target":{"apiVersion":"v1","kind":"Node","name":"ness-linux3"}})"));
}

// The Binding's body is written by hand (no json tree): annotations and
// names with characters JSON must escape come out as valid JSON, equal to
// what a JSON library makes of the same values.
TEST_F(RestClientTest, BindCarriesItsAnnotationsEscapedInTheBinding) {
  server_->Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
                [&](const httplib::Request& req, httplib::Response& res) {
                  Record(req);
                  res.status = 201;
                });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  const std::map<std::string, std::string> ann = {{"vramd.io/gpus", "0,3"},
                                                  {"vramd.io/note", "quote \" back\\slash \n tab\t \x01 \xc3\xa9"},
                                                  {"vramd.io/vram-per-gpu", "8589934592"}};
  Status st = client->Bind("ml", "her\"mes", "uid-1", "ness-linux3", ann);
  ASSERT_TRUE(st.ok()) << st.ToString();
  json body = json::parse(Last().body);  // throws (fails) on invalid JSON
  EXPECT_EQ(body, (json{{"apiVersion", "v1"},
                        {"kind", "Binding"},
                        {"metadata", {{"name", "her\"mes"}, {"namespace", "ml"}, {"uid", "uid-1"}, {"annotations", ann}}},
                        {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "ness-linux3"}}}}));
}

TEST_F(RestClientTest, BindMapsApiErrors) {
  server_->Post(R"(/api/v1/namespaces/ml/pods/([^/]+)/binding)", [&](const httplib::Request& req,
                                                                     httplib::Response& res) {
    const std::string pod = req.matches[1];
    if (pod == "taken") {
      res.status = 409;
      res.set_content(StatusBody(409, "Conflict",
                                 "Operation cannot be fulfilled on pods/binding \"taken\": pod taken is already "
                                 "assigned to node \"n2\""),
                      "application/json");
    } else if (pod == "gone") {
      res.status = 404;
      res.set_content(StatusBody(404, "NotFound", "pods \"gone\" not found"), "application/json");
    } else if (pod == "denied") {
      res.status = 403;
      res.set_content(StatusBody(403, "Forbidden",
                                 "pods \"denied\" is forbidden: User \"system:serviceaccount:vramd:vramd\" cannot "
                                 "create resource \"pods/binding\""),
                      "application/json");
    } else {
      res.status = 503;
      res.set_content("etcd leader changed", "text/plain");
    }
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);

  Status taken = client->Bind("ml", "taken", "u", "n1");
  EXPECT_EQ(taken.code(), Code::kConflict);
  EXPECT_NE(taken.message().find("HTTP 409"), std::string::npos) << taken.message();
  EXPECT_NE(taken.message().find("already assigned to node \"n2\""), std::string::npos) << taken.message();

  Status gone = client->Bind("ml", "gone", "u", "n1");
  EXPECT_EQ(gone.code(), Code::kNotFound);
  EXPECT_NE(gone.message().find("pods \"gone\" not found"), std::string::npos) << gone.message();

  Status denied = client->Bind("ml", "denied", "u", "n1");
  EXPECT_EQ(denied.code(), Code::kInternal);
  EXPECT_NE(denied.message().find("RBAC"), std::string::npos) << denied.message();
  EXPECT_NE(denied.message().find("cannot create resource"), std::string::npos) << denied.message();

  Status broken = client->Bind("ml", "broken", "u", "n1");
  EXPECT_EQ(broken.code(), Code::kUnavailable);
  EXPECT_NE(broken.message().find("HTTP 503: etcd leader changed"), std::string::npos) << broken.message();
}

TEST_F(RestClientTest, UnreachableServerIsUnavailable) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  server_.Shutdown();  // the port is closed now
  Status st = client->Bind("ml", "p", "u", "n1");
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_EQ(st.message().find("tok-1"), std::string::npos);
}

TEST_F(RestClientTest, ConcurrentBindsRunOnSeparateConnections) {
  constexpr int kBinds = 4;
  std::mutex m;
  std::condition_variable cv;
  int in_flight = 0;
  int max_in_flight = 0;
  server_->Post(R"(/api/v1/namespaces/ml/pods/([^/]+)/binding)", [&](const httplib::Request&,
                                                                     httplib::Response& res) {
    std::unique_lock<std::mutex> lock(m);
    max_in_flight = std::max(max_in_flight, ++in_flight);
    cv.notify_all();
    // Holds every bind until all are in flight at once (or gives up).
    cv.wait_for(lock, 2s, [&] { return max_in_flight >= kBinds; });
    --in_flight;
    res.status = 201;
    res.set_content("{}", "application/json");
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  std::vector<std::thread> threads;
  std::vector<Status> results(kBinds);
  for (int i = 0; i < kBinds; ++i) {
    threads.emplace_back([&, i] { results[i] = client->Bind("ml", "p" + std::to_string(i), "u", "n1"); });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(max_in_flight, kBinds);
}

// More calls than pooled connections: the others wait for one to come back
// (and are woken when it does, well before their timeout); a call that finds
// none free within the timeout fails and says why.
TEST_F(RestClientTest, CallsBeyondThePoolWaitForAConnectionAndTimeOutWhenNoneComesBack) {
  std::atomic<int> in_flight{0}, max_in_flight{0};
  std::atomic<int> hold_ms{50};
  server_->Post(R"(/api/v1/namespaces/ml/pods/([^/]+)/binding)", [&](const httplib::Request&,
                                                                     httplib::Response& res) {
    int now = ++in_flight;
    for (int m = max_in_flight.load(); now > m && !max_in_flight.compare_exchange_weak(m, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms.load()));
    --in_flight;
    res.status = 201;
    res.set_content("{}", "application/json");
  });
  Options o;
  o.max_connections = 1;
  o.timeout_ms = 3000;
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  constexpr int kBinds = 6;
  std::vector<std::thread> threads;
  std::vector<Status> results(kBinds);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kBinds; ++i) {
    threads.emplace_back([&, i] { results[i] = client->Bind("ml", "p" + std::to_string(i), "u", "n1"); });
  }
  for (auto& t : threads) t.join();
  const auto took = std::chrono::steady_clock::now() - t0;
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(max_in_flight.load(), 1) << "more calls on the wire than pooled connections";
  // Six binds of 50 ms one after another; a waiter nobody woke would sleep
  // out its 3 s timeout.
  EXPECT_LT(took, 2500ms) << "waiting calls were not woken when the connection came back";

  // Each bind now holds the connection 600 ms, a call waits at most 1 s:
  // of two calls queued behind a holder, the first gets the connection at
  // 600 ms and the second gives up at 1 s.
  hold_ms = 600;
  Options shorter = o;
  shorter.timeout_ms = 1000;
  auto impatient = Client(shorter);
  ASSERT_NE(impatient, nullptr);
  std::thread holder([&] { EXPECT_TRUE(impatient->Bind("ml", "holder", "u", "n1").ok()); });
  for (int i = 0; i < 200 && in_flight.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(in_flight.load(), 1);
  Status late[2];
  std::thread a([&] { late[0] = impatient->Bind("ml", "late-a", "u", "n1"); });
  std::thread b([&] { late[1] = impatient->Bind("ml", "late-b", "u", "n1"); });
  for (std::thread* t : {&holder, &a, &b}) t->join();
  const int failed = static_cast<int>(!late[0].ok()) + static_cast<int>(!late[1].ok());
  ASSERT_EQ(failed, 1) << late[0].ToString() << " / " << late[1].ToString();
  const Status& gave_up = late[0].ok() ? late[1] : late[0];
  EXPECT_EQ(gave_up.code(), Code::kUnavailable) << gave_up.ToString();
  EXPECT_NE(gave_up.message().find("all 1 API connections stayed busy for 1000 ms"), std::string::npos)
      << gave_up.ToString();
}

// --- Token rotation ----------------------------------------------------------

TEST_F(RestClientTest, TokenIsReReadWhenTheFileChanges) {
  server_->Get(R"(/api/v1/namespaces/ml/pods/([^/]+))", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    res.set_content(PodJson(req.matches[1]), "application/json");
  });
  Options o;
  o.token_check_ms = 0;  // checked before every call
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->GetPod("ml", "a").ok());
  ASSERT_TRUE(client->GetPod("ml", "a").ok());

  dir_.Write("token", "tok-2-rotated\n");
  fs::last_write_time(token_file_, fs::last_write_time(token_file_) + 10s);
  ASSERT_TRUE(client->GetPod("ml", "a").ok());

  // A token file that vanishes mid-rotation: the last good token is kept.
  fs::remove(token_file_);
  ASSERT_TRUE(client->GetPod("ml", "a").ok());

  EXPECT_EQ(Authorizations(), (std::vector<std::string>{"Bearer tok-1", "Bearer tok-1", "Bearer tok-2-rotated",
                                                        "Bearer tok-2-rotated"}));
}

// By default the file is checked at most once a second, not on every call
// (a stat per call was 1.5 % of vramd's CPU): a rotated token is used from
// the first call a second after the last check.
TEST_F(RestClientTest, TheTokenFileIsCheckedAtMostOnceASecond) {
  server_->Get(R"(/api/v1/namespaces/ml/pods/([^/]+))", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    res.set_content(PodJson(req.matches[1]), "application/json");
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->GetPod("ml", "a").ok());
  dir_.Write("token", "tok-2-rotated\n");
  fs::last_write_time(token_file_, fs::last_write_time(token_file_) + 10s);
  ASSERT_TRUE(client->GetPod("ml", "a").ok());  // within the second: not looked at yet
  std::this_thread::sleep_for(1100ms);
  ASSERT_TRUE(client->GetPod("ml", "a").ok());
  EXPECT_EQ(Authorizations(), (std::vector<std::string>{"Bearer tok-1", "Bearer tok-1", "Bearer tok-2-rotated"}));
}

// --- Get, patch, events ----------------------------------------------------

TEST_F(RestClientTest, GetPodDecodesThePodOrSaysNotFound) {
  server_->Get(R"(/api/v1/namespaces/ml/pods/([^/]+))", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] == "missing") {
      res.status = 404;
      res.set_content(StatusBody(404, "NotFound", "pods \"missing\" not found"), "application/json");
      return;
    }
    if (req.matches[1] == "garbage") {
      res.set_content("<html>proxy error</html>", "text/html");
      return;
    }
    res.set_content(PodJson(req.matches[1], R"(,"deletionTimestamp":"2026-11-21T06:10:00Z")"), "application/json");
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  Result<PodInfo> pod = client->GetPod("ml", "hermes");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->name, "hermes");
  EXPECT_EQ(pod->uid, "uid-hermes");
  EXPECT_EQ(pod->node_name, "n1");
  EXPECT_TRUE(pod->deleting);
  EXPECT_EQ(pod->spec.containers.at(0).limit, "8Gi");

  EXPECT_EQ(client->GetPod("ml", "missing").status().code(), Code::kNotFound);
  EXPECT_EQ(client->GetPod("ml", "garbage").status().code(), Code::kInternal);
}

TEST_F(RestClientTest, PatchAnnotationsSendsAMergePatch) {
  server_->Patch(R"(/api/v1/.*)", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    res.set_content("{}", "application/json");
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);

  Status st = client->PatchPodAnnotations("ml", "hermes", {{"vramd.io/gpus", "0,1"}, {"vramd.io/old", std::nullopt}});
  ASSERT_TRUE(st.ok()) << st.ToString();
  httplib::Request req = Last();
  EXPECT_EQ(req.method, "PATCH");
  EXPECT_EQ(req.path, "/api/v1/namespaces/ml/pods/hermes");
  EXPECT_EQ(req.get_header_value("Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(json::parse(req.body),
            json::parse(R"({"metadata":{"annotations":{"vramd.io/gpus":"0,1","vramd.io/old":null}}})"));

  st = client->PatchNodeAnnotations("ness-linux3", {{"vramd.io/nudge", "42"}});
  ASSERT_TRUE(st.ok()) << st.ToString();
  req = Last();
  EXPECT_EQ(req.path, "/api/v1/nodes/ness-linux3");
  EXPECT_EQ(json::parse(req.body), json::parse(R"({"metadata":{"annotations":{"vramd.io/nudge":"42"}}})"));
}

TEST_F(RestClientTest, PostPodEventCreatesACoreV1Event) {
  server_->Post("/api/v1/namespaces/ml/events", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    res.status = 201;
    res.set_content(req.body, "application/json");
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  PodInfo pod;
  pod.name = "hermes";
  pod.ns = "ml";
  pod.uid = "uid-1";
  Status st = client->PostPodEvent(pod, "Warning", "VramReleased", std::string(3000, 'x'));
  ASSERT_TRUE(st.ok()) << st.ToString();

  json ev = json::parse(Last().body);
  EXPECT_EQ(ev["apiVersion"], "v1");
  EXPECT_EQ(ev["kind"], "Event");
  EXPECT_EQ(ev["metadata"]["generateName"], "hermes.vramd-");
  EXPECT_EQ(ev["metadata"]["namespace"], "ml");
  EXPECT_EQ(ev["involvedObject"],
            json::parse(R"({"apiVersion":"v1","kind":"Pod","name":"hermes","namespace":"ml","uid":"uid-1"})"));
  EXPECT_EQ(ev["reason"], "VramReleased");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["message"].get<std::string>().size(), 1024u);
  EXPECT_EQ(ev["source"]["component"], "vramd");
  EXPECT_EQ(ev["count"], 1);
  const std::regex rfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  EXPECT_TRUE(std::regex_match(ev["firstTimestamp"].get<std::string>(), rfc3339)) << ev["firstTimestamp"];
  EXPECT_EQ(ev["firstTimestamp"], ev["lastTimestamp"]);

  EXPECT_EQ(client->PostPodEvent(pod, "Error", "X", "y").code(), Code::kInvalidArgument);
}

TEST_F(RestClientTest, PostNodeEventCreatesAnEventInTheDefaultNamespace) {
  server_->Post("/api/v1/namespaces/default/events", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    res.status = 201;
    res.set_content(req.body, "application/json");
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  NodeInfo node;
  node.name = "ness-linux3";
  node.uid = "node-uid-1";
  Status st = client->PostNodeEvent(node, "Warning", "VramdInvalidGpuCapacity", "annotation vramd.io/capacity: 1e30");
  ASSERT_TRUE(st.ok()) << st.ToString();
  json ev = json::parse(Last().body);
  EXPECT_EQ(ev["metadata"]["generateName"], "ness-linux3.vramd-");
  EXPECT_EQ(ev["metadata"]["namespace"], "default");
  EXPECT_EQ(ev["involvedObject"],
            json::parse(R"({"apiVersion":"v1","kind":"Node","name":"ness-linux3","uid":"node-uid-1"})"));
  EXPECT_EQ(ev["reason"], "VramdInvalidGpuCapacity");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["message"], "annotation vramd.io/capacity: 1e30");
  EXPECT_EQ(client->PostNodeEvent(node, "Error", "X", "y").code(), Code::kInvalidArgument);
}

// --- Evictions ---------------------------------------------------------------

// What kube-apiserver 1.20 answers a policy/v1 Eviction (it knows only v1beta1;
// the text as measured on 1.20.2).
std::string UnservedEvictionBody(const std::string& version) {
  return StatusBody(400, "BadRequest",
                    "Eviction in version \"" + version.substr(version.find('/') + 1) +
                        "\" cannot be handled as a Eviction: no kind \"Eviction\" is registered for version \"" +
                        version + "\" in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\"");
}

// A fake API server's eviction endpoint: accepts the versions in `served`
// (201), answers others as 1.20 does, and records each request's body.
class EvictionTest : public RestClientTest {
 protected:
  ~EvictionTest() override { server_.Shutdown(); }  // before the members its handler uses go away

  void Serve(std::function<void(const json& body, httplib::Response& res)> answer = nullptr) {
    server_->Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction)",
                  [this, answer](const httplib::Request& req, httplib::Response& res) {
                    Record(req);
                    json body = json::parse(req.body, nullptr, false);
                    {
                      std::lock_guard<std::mutex> lock(mu_);
                      bodies_.push_back(body);
                    }
                    const std::string version = body.value("apiVersion", "");
                    if (!Served().count(version)) {
                      res.status = 400;
                      res.set_content(UnservedEvictionBody(version), "application/json");
                      return;
                    }
                    if (answer) {
                      answer(body, res);
                      return;
                    }
                    res.status = 201;
                    res.set_content(R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"})",
                                    "application/json");
                  });
  }
  void SetServed(std::set<std::string> versions) {
    std::lock_guard<std::mutex> lock(mu_);
    served_ = std::move(versions);
  }
  std::set<std::string> Served() {
    std::lock_guard<std::mutex> lock(mu_);
    return served_;
  }
  // The apiVersion of every Eviction posted so far, then forgets them.
  std::vector<std::string> TakeVersions() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const json& b : bodies_) out.push_back(b.value("apiVersion", "?"));
    bodies_.clear();
    return out;
  }

  std::set<std::string> served_ = {"policy/v1", "policy/v1beta1"};
  std::vector<json> bodies_;
};

TEST_F(EvictionTest, PostsAPolicyV1EvictionWithTheUidPrecondition) {
  Serve();
  auto client = Client();
  ASSERT_NE(client, nullptr);
  std::string msg = "stale";
  Result<EvictOutcome> r = client->EvictPod("ml", "immich-ml", "uid-7", &msg);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, EvictOutcome::kEvicted);
  EXPECT_EQ(msg, "");

  httplib::Request req = Last();
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, "/api/v1/namespaces/ml/pods/immich-ml/eviction");
  EXPECT_EQ(req.get_header_value("Authorization"), "Bearer tok-1");
  EXPECT_EQ(req.get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(req.body), json::parse(R"({"apiVersion":"policy/v1","kind":"Eviction",
      "metadata":{"name":"immich-ml","namespace":"ml"},
      "deleteOptions":{"preconditions":{"uid":"uid-7"}}})"));
}

// Issue 32: the pre-check of an action of several pods.
TEST_F(EvictionTest, ADryRunEvictionSaysDryRunAllBesideThePrecondition) {
  Serve();
  auto client = Client();
  ASSERT_NE(client, nullptr);
  Result<EvictOutcome> r = client->EvictPod("ml", "immich-ml", "uid-7", nullptr, /*dry_run=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, EvictOutcome::kEvicted);
  EXPECT_EQ(json::parse(Last().body), json::parse(R"({"apiVersion":"policy/v1","kind":"Eviction",
      "metadata":{"name":"immich-ml","namespace":"ml"},
      "deleteOptions":{"preconditions":{"uid":"uid-7"},"dryRun":["All"]}})"));
}

TEST_F(EvictionTest, AnEmptyUidSendsNoPreconditionAnd200IsEvictedToo) {
  Serve([](const json&, httplib::Response& res) {
    res.status = 200;
    res.set_content("{}", "application/json");
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  Result<EvictOutcome> r = client->EvictPod("ml", "p", "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, EvictOutcome::kEvicted);
  EXPECT_EQ(json::parse(Last().body),
            json::parse(R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"ml"}})"));
}

TEST_F(EvictionTest, AServerWithoutPolicyV1IsAskedWithV1beta1OnceAndThatIsRemembered) {
  SetServed({"policy/v1beta1"});  // kube-apiserver 1.20
  Serve();
  auto client = Client();
  ASSERT_NE(client, nullptr);

  Result<EvictOutcome> first = client->EvictPod("ml", "a", "uid-a");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, EvictOutcome::kEvicted);
  EXPECT_EQ(TakeVersions(), (std::vector<std::string>{"policy/v1", "policy/v1beta1"}));
  json body = json::parse(Last().body);
  EXPECT_EQ(body["kind"], "Eviction");
  EXPECT_EQ(body["deleteOptions"]["preconditions"]["uid"], "uid-a");

  Result<EvictOutcome> second = client->EvictPod("ml", "b", "uid-b");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*second, EvictOutcome::kEvicted);
  EXPECT_EQ(TakeVersions(), (std::vector<std::string>{"policy/v1beta1"}));

  // The cluster is upgraded past policy/v1beta1: back to v1, remembered again.
  SetServed({"policy/v1"});
  Result<EvictOutcome> third = client->EvictPod("ml", "c", "uid-c");
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(*third, EvictOutcome::kEvicted);
  EXPECT_EQ(TakeVersions(), (std::vector<std::string>{"policy/v1beta1", "policy/v1"}));
  ASSERT_TRUE(client->EvictPod("ml", "d", "uid-d").ok());
  EXPECT_EQ(TakeVersions(), (std::vector<std::string>{"policy/v1"}));
}

TEST_F(EvictionTest, AServerThatTakesNeitherVersionIsAnErrorAndNothingIsRemembered) {
  SetServed({});
  Serve();
  auto client = Client();
  ASSERT_NE(client, nullptr);
  Result<EvictOutcome> r = client->EvictPod("ml", "a", "uid-a");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("evict pod ml/a (policy/v1beta1): HTTP 400"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(TakeVersions(), (std::vector<std::string>{"policy/v1", "policy/v1beta1"}));
  ASSERT_FALSE(client->EvictPod("ml", "a", "uid-a").ok());
  EXPECT_EQ(TakeVersions(), (std::vector<std::string>{"policy/v1", "policy/v1beta1"}));
}

TEST_F(EvictionTest, ABudgetThatRefusesIsBlockedAndItsMessageKept) {
  Serve([](const json&, httplib::Response& res) {
    res.status = 429;
    json st = json::parse(StatusBody(429, "TooManyRequests",
                                     "Cannot evict pod as it would violate the pod's disruption budget."));
    // 1.20.2 names the budget in a cause.
    st["details"] = {{"causes", {{{"reason", "DisruptionBudget"},
                                  {"message", "The disruption budget ml-pdb needs 1 healthy pods and has 1 currently"}}}}};
    res.set_content(st.dump(), "application/json");
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  std::string msg;
  Result<EvictOutcome> r = client->EvictPod("ml", "a", "uid-a", &msg);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, EvictOutcome::kBlocked);
  EXPECT_EQ(msg,
            "Cannot evict pod as it would violate the pod's disruption budget. "
            "(The disruption budget ml-pdb needs 1 healthy pods and has 1 currently)");
  // Without a message to fill, the outcome is the same.
  Result<EvictOutcome> again = client->EvictPod("ml", "a", "uid-a");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, EvictOutcome::kBlocked);
}

TEST_F(EvictionTest, AGonePodOrAnotherUidIsGone) {
  Serve([](const json& body, httplib::Response& res) {
    const std::string name = body["metadata"]["name"];
    if (name == "gone") {
      res.status = 404;
      res.set_content(StatusBody(404, "NotFound", "pods \"gone\" not found"), "application/json");
    } else if (name == "replaced") {  // the generic store's precondition check
      res.status = 409;
      res.set_content(StatusBody(409, "Conflict",
                                 "Operation cannot be fulfilled on pods \"replaced\": Precondition failed: UID in "
                                 "precondition: uid-old, UID in object meta: uid-new"),
                      "application/json");
    } else if (name == "replaced-later") {  // what kube-apiserver 1.20.2 answers
      res.status = 409;
      res.set_content(StatusBody(409, "Conflict",
                                 "Operation cannot be fulfilled on Pod \"replaced-later\": the UID in the precondition "
                                 "(uid-old) does not match the UID in record (uid-new). The object might have been "
                                 "deleted and then recreated"),
                      "application/json");
    } else {  // a conflict that is not about the UID is an error
      res.status = 409;
      res.set_content(StatusBody(409, "Conflict",
                                 "Operation cannot be fulfilled on pods \"busy\": the object has been modified"),
                      "application/json");
    }
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  for (const char* name : {"gone", "replaced", "replaced-later"}) {
    std::string msg;
    Result<EvictOutcome> r = client->EvictPod("ml", name, "uid-old", &msg);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(*r, EvictOutcome::kGone) << name;
    EXPECT_NE(msg.find(name), std::string::npos) << name << ": " << msg;
  }
  Result<EvictOutcome> busy = client->EvictPod("ml", "busy", "uid-old");
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), Code::kConflict);
  EXPECT_NE(busy.status().message().find("HTTP 409"), std::string::npos) << busy.status().message();
  EXPECT_NE(busy.status().message().find("the object has been modified"), std::string::npos);
}

TEST_F(EvictionTest, OtherAnswersAreErrorsLikeEveryCall) {
  Serve([](const json& body, httplib::Response& res) {
    const std::string name = body["metadata"]["name"];
    if (name == "denied") {
      res.status = 403;
      res.set_content(StatusBody(403, "Forbidden",
                                 "pods \"denied\" is forbidden: User \"system:serviceaccount:vramd:vramd\" cannot "
                                 "create resource \"pods/eviction\""),
                      "application/json");
    } else if (name == "multi-pdb") {
      res.status = 500;
      res.set_content(StatusBody(500, "InternalError",
                                 "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                                 "does not support."),
                      "application/json");
    } else {  // a 400 that is not about the version: no second try
      res.status = 400;
      res.set_content(StatusBody(400, "BadRequest", "name in URL does not match name in Eviction object"),
                      "application/json");
    }
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);

  std::string msg = "stale";
  Result<EvictOutcome> denied = client->EvictPod("ml", "denied", "u", &msg);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), Code::kInternal);
  EXPECT_NE(denied.status().message().find("RBAC"), std::string::npos) << denied.status().message();
  EXPECT_NE(denied.status().message().find("pods/eviction"), std::string::npos) << denied.status().message();
  EXPECT_EQ(msg, "");

  Result<EvictOutcome> multi = client->EvictPod("ml", "multi-pdb", "u");
  ASSERT_FALSE(multi.ok());
  EXPECT_EQ(multi.status().code(), Code::kUnavailable);
  EXPECT_NE(multi.status().message().find("more than one PodDisruptionBudget"), std::string::npos);
  TakeVersions();

  Result<EvictOutcome> bad = client->EvictPod("ml", "bad", "u");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(TakeVersions(), (std::vector<std::string>{"policy/v1"}));

  server_.Shutdown();
  Result<EvictOutcome> down = client->EvictPod("ml", "a", "u");
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), Code::kUnavailable);
}

// --- Lists -----------------------------------------------------------------

TEST_F(RestClientTest, ListPodsFollowsContinueTokens) {
  const std::string kToken = "page2/+=&x";  // needs escaping in a query
  server_->Get("/api/v1/pods", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    EXPECT_EQ(req.get_param_value("limit"), "500");
    EXPECT_EQ(req.get_param_value("fieldSelector"), "spec.nodeName!=,status.phase!=Succeeded");
    if (!req.has_param("continue")) {
      res.set_content(R"({"kind":"PodList","metadata":{"resourceVersion":"900","continue":")" + kToken +
                          R"("},"items":[)" + PodJson("a") + "," + PodJson("b") + "]}",
                      "application/json");
    } else {
      EXPECT_EQ(req.get_param_value("continue"), kToken);
      // The second page also carries an item that cannot be decoded: skipped.
      res.set_content(R"({"kind":"PodList","metadata":{"resourceVersion":"900"},"items":[)" + PodJson("c") +
                          R"(,{"metadata":{"name":["bad"]}}]})",
                      "application/json");
    }
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  Result<List<PodInfo>> list = client->ListPods("spec.nodeName!=,status.phase!=Succeeded");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->items.size(), 3u);
  EXPECT_EQ(list->items[0].name, "a");
  EXPECT_EQ(list->items[2].name, "c");
  EXPECT_EQ(list->items[2].spec.containers.at(0).limit, "8Gi");
  EXPECT_EQ(list->resource_version, "900");
  EXPECT_EQ(Authorizations().size(), 2u);
}

TEST_F(RestClientTest, ListNodesAndExpiredContinueToken) {
  auto gone = [](httplib::Response& res) {
    res.status = 410;
    res.set_content(StatusBody(410, "Expired", "The provided continue parameter is too old"), "application/json");
  };
  server_->Get("/api/v1/nodes", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.has_param("continue")) return gone(res);
    res.set_content(
        R"({"kind":"NodeList","metadata":{"resourceVersion":"31"},"items":[{"metadata":{"name":"n1","labels":{"nvidia.com/gpu.memory":"8192"}}}]})",
        "application/json");
  });
  server_->Get("/api/v1/pods", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.has_param("continue")) return gone(res);
    EXPECT_EQ(req.get_param_value("limit"), "1");
    res.set_content(R"({"metadata":{"resourceVersion":"1","continue":"c1"},"items":[]})", "application/json");
  });
  Options small;
  small.list_page_size = 1;
  auto client = Client(small);
  ASSERT_NE(client, nullptr);

  Result<List<NodeInfo>> nodes = client->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->items.size(), 1u);
  EXPECT_EQ(nodes->items[0].labels.at("nvidia.com/gpu.memory"), "8192");
  EXPECT_EQ(nodes->resource_version, "31");

  Result<List<PodInfo>> pods = client->ListPods();
  EXPECT_EQ(pods.status().code(), Code::kConflict);
  EXPECT_EQ(pods.status().message().rfind("410 Gone", 0), 0u) << pods.status().message();
}

// --- Watches ---------------------------------------------------------------

// Serves `stream` as a chunked body in pieces of `piece` bytes.
void ServeChunked(httplib::Response& res, std::string stream, size_t piece) {
  res.set_chunked_content_provider("application/json",
                                   [stream = std::move(stream), piece](size_t offset, httplib::DataSink& sink) {
                                     if (offset >= stream.size()) {
                                       sink.done();
                                       return true;
                                     }
                                     size_t n = std::min(piece, stream.size() - offset);
                                     return sink.write(stream.data() + offset, n);
                                   });
}

std::string Event(const std::string& type, const std::string& object) {
  return R"({"type":")" + type + R"(","object":)" + object + "}\n";
}

TEST_F(RestClientTest, WatchPodsJoinsEventsSplitAcrossChunks) {
  const std::string stream = Event("ADDED", PodJson("a")) +
                             Event("MODIFIED", PodJson("a", R"(,"deletionTimestamp":"2026-11-21T06:10:00Z")")) +
                             Event("BOOKMARK", R"({"kind":"Pod","metadata":{"resourceVersion":"77"}})") +
                             Event("DELETED", PodJson("a"));
  server_->Get("/api/v1/pods", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    ServeChunked(res, stream, 7);  // 7-byte chunks: every event spans several
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  std::vector<WatchEvent<PodInfo>> events;
  std::atomic<bool> stop{false};
  Status st = client->WatchPods("42", stop, [&](const WatchEvent<PodInfo>& e) { events.push_back(e); });
  ASSERT_TRUE(st.ok()) << st.ToString();

  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].type, WatchEventType::kAdded);
  EXPECT_EQ(events[0].object.name, "a");
  EXPECT_FALSE(events[0].object.deleting);
  EXPECT_EQ(events[1].type, WatchEventType::kModified);
  EXPECT_TRUE(events[1].object.deleting);
  EXPECT_EQ(events[2].type, WatchEventType::kBookmark);
  EXPECT_EQ(events[2].object.resource_version, "77");
  EXPECT_EQ(events[3].type, WatchEventType::kDeleted);
  EXPECT_EQ(events[3].object.spec.containers.at(0).limit, "8Gi");

  httplib::Request req = Last();
  EXPECT_EQ(req.get_param_value("watch"), "1");
  EXPECT_EQ(req.get_param_value("resourceVersion"), "42");
  EXPECT_EQ(req.get_param_value("allowWatchBookmarks"), "true");
  EXPECT_EQ(req.get_param_value("timeoutSeconds"), "300");
  EXPECT_EQ(req.get_header_value("Authorization"), "Bearer tok-1");
}

TEST_F(RestClientTest, WatchErrorEvent410IsConflict) {
  const std::string stream =
      Event("ADDED", PodJson("a")) +
      Event("ERROR", StatusBody(410, "Expired", "too old resource version: 42 (900)")) + Event("ADDED", PodJson("b"));
  server_->Get("/api/v1/pods", [&](const httplib::Request&, httplib::Response& res) { ServeChunked(res, stream, 5); });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  std::vector<std::string> names;
  std::atomic<bool> stop{false};
  Status st = client->WatchPods("42", stop, [&](const WatchEvent<PodInfo>& e) { names.push_back(e.object.name); });
  EXPECT_EQ(st.code(), Code::kConflict);
  EXPECT_EQ(st.message().rfind("410 Gone", 0), 0u) << st.message();
  EXPECT_NE(st.message().find("too old resource version"), std::string::npos) << st.message();
  EXPECT_EQ(names, std::vector<std::string>{"a"});  // nothing after the error
}

TEST_F(RestClientTest, WatchAnsweredWithHttpErrorMapsTheStatus) {
  server_->Get("/api/v1/nodes", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("resourceVersion") == "1") {
      res.status = 410;
      res.set_content(StatusBody(410, "Gone", "too old resource version: 1 (50)"), "application/json");
    } else {
      res.status = 403;
      res.set_content(StatusBody(403, "Forbidden", "nodes is forbidden"), "application/json");
    }
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  std::atomic<bool> stop{false};
  auto no_events = [](const WatchEvent<NodeInfo>&) { ADD_FAILURE() << "no event expected"; };
  Status gone = client->WatchNodes("1", stop, no_events);
  EXPECT_EQ(gone.code(), Code::kConflict);
  EXPECT_EQ(gone.message().rfind("410 Gone", 0), 0u) << gone.message();
  Status denied = client->WatchNodes("2", stop, no_events);
  EXPECT_EQ(denied.code(), Code::kInternal);
  EXPECT_NE(denied.message().find("nodes is forbidden"), std::string::npos) << denied.message();
}

TEST_F(RestClientTest, WatchNodesDeliversNodesUntilTheServerEndsTheStream) {
  const std::string stream = Event("ADDED", R"({"metadata":{"name":"n1","resourceVersion":"3"}})") +
                             Event("MODIFIED",
                                   R"({"metadata":{"name":"n1","resourceVersion":"4","annotations":{"vramd.io/capacity":"80Gi"}}})");
  server_->Get("/api/v1/nodes", [&](const httplib::Request&, httplib::Response& res) {
    ServeChunked(res, stream, 1000);
  });
  Options opts;
  opts.watch_timeout_s = 60;
  auto client = Client(opts);
  ASSERT_NE(client, nullptr);
  std::vector<WatchEvent<NodeInfo>> events;
  std::atomic<bool> stop{false};
  Status st = client->WatchNodes("", stop, [&](const WatchEvent<NodeInfo>& e) { events.push_back(e); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].object.resource_version, "4");
  EXPECT_EQ(events[1].object.annotations.at("vramd.io/capacity"), "80Gi");
}

TEST_F(RestClientTest, StopEndsASilentWatchPromptly) {
  server_->Get("/api/v1/pods", [&](const httplib::Request& req, httplib::Response& res) {
    EXPECT_FALSE(req.has_param("resourceVersion"));
    const std::string first = Event("ADDED", PodJson("a"));
    res.set_chunked_content_provider("application/json", [&, first](size_t offset, httplib::DataSink& sink) {
      if (offset == 0) return sink.write(first.data(), first.size());
      // Then silence, until the test is over.
      while (!server_.released()) std::this_thread::sleep_for(5ms);
      return false;
    });
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<bool> got_event{false};
  std::chrono::steady_clock::time_point stopped_at;
  std::thread stopper([&] {
    for (int i = 0; i < 1000 && !got_event; ++i) std::this_thread::sleep_for(5ms);
    stopped_at = std::chrono::steady_clock::now();
    stop = true;
  });
  Status st = client->WatchPods("", stop, [&](const WatchEvent<PodInfo>&) { got_event = true; });
  auto returned_at = std::chrono::steady_clock::now();
  stopper.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(got_event);
  EXPECT_LT(returned_at - stopped_at, 1s);
}

// --- VramQueues -------------------------------------------------------------

std::string QueueJson(const std::string& name, const std::string& spec = R"({"deserved":"16Gi"})") {
  return R"({"apiVersion":"vramd.io/v1alpha1","kind":"VramQueue","metadata":{"name":")" + name +
         R"(","uid":"uid-)" + name + R"(","resourceVersion":"9"},"spec":)" + spec +
         R"(,"status":{"allocated":"1Gi"}})";
}

TEST_F(RestClientTest, ListQueuesPagesKeepsBrokenObjectsWithANameAndSkipsNamelessOnes) {
  server_->Get("/apis/vramd.io/v1alpha1/vramqueues", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    EXPECT_EQ(req.get_param_value("limit"), "2");
    if (!req.has_param("continue")) {
      res.set_content(R"({"kind":"VramQueueList","metadata":{"resourceVersion":"40","continue":"p2"},"items":[)" +
                          QueueJson("b") + "," + QueueJson("a", R"({"deserved":"lots"})") + "]}",
                      "application/json");
    } else {
      res.set_content(R"({"kind":"VramQueueList","metadata":{"resourceVersion":"40"},"items":[)"
                      R"({"metadata":{"name":{"x":1}},"spec":{"deserved":1}},"not an object"]})",
                      "application/json");
    }
  });
  Options opts;
  opts.list_page_size = 2;
  auto client = Client(opts);
  ASSERT_NE(client, nullptr);
  Result<List<ledger::QueueSpec>> list = client->ListQueues();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->resource_version, "40");
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[0].name, "b");
  EXPECT_EQ(list->items[0].uid, "uid-b");
  EXPECT_EQ(list->items[0].deserved, int64_t{16} << 30);
  EXPECT_EQ(list->items[0].decode_error, "");
  EXPECT_EQ(list->items[1].name, "a");
  EXPECT_NE(list->items[1].decode_error.find("spec.deserved"), std::string::npos) << list->items[1].decode_error;
  EXPECT_EQ(Last().get_header_value("Authorization"), "Bearer tok-1");
}

TEST_F(RestClientTest, ListQueuesWithoutTheCrdIsNotFound) {
  server_->Get("/apis/vramd.io/v1alpha1/vramqueues", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(StatusBody(404, "NotFound", "the server could not find the requested resource"),
                    "application/json");
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  Result<List<ledger::QueueSpec>> list = client->ListQueues();
  EXPECT_EQ(list.status().code(), Code::kNotFound);
  EXPECT_NE(list.status().message().find("list vramqueues"), std::string::npos) << list.status().message();
}

TEST_F(RestClientTest, WatchQueuesDeliversEventsAndBookmarksAndSkipsNamelessObjects) {
  const std::string stream = Event("ADDED", QueueJson("a")) +
                             Event("MODIFIED", QueueJson("a", R"({"deserved":"8Gi","overQuotaWeight":-1})")) +
                             Event("MODIFIED", R"({"metadata":{},"spec":{"deserved":"1Gi"}})") +
                             Event("BOOKMARK", R"({"kind":"VramQueue","metadata":{"resourceVersion":"77"}})") +
                             Event("DELETED", QueueJson("a"));
  server_->Get("/apis/vramd.io/v1alpha1/vramqueues", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    ServeChunked(res, stream, 11);
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  std::vector<WatchEvent<ledger::QueueSpec>> events;
  std::atomic<bool> stop{false};
  Status st = client->WatchQueues("40", stop, [&](const WatchEvent<ledger::QueueSpec>& e) { events.push_back(e); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].type, WatchEventType::kAdded);
  EXPECT_EQ(events[0].object.deserved, int64_t{16} << 30);
  EXPECT_EQ(events[1].type, WatchEventType::kModified);
  EXPECT_EQ(events[1].object.deserved, int64_t{8} << 30);
  EXPECT_NE(events[1].object.decode_error.find("spec.overQuotaWeight"), std::string::npos);
  EXPECT_EQ(events[2].type, WatchEventType::kBookmark);
  EXPECT_EQ(events[2].object, ledger::QueueSpec{});
  EXPECT_EQ(events[3].type, WatchEventType::kDeleted);
  EXPECT_EQ(events[3].object.name, "a");
  httplib::Request req = Last();
  EXPECT_EQ(req.get_param_value("watch"), "1");
  EXPECT_EQ(req.get_param_value("resourceVersion"), "40");
}

TEST_F(RestClientTest, WatchQueuesErrorEvent410IsConflict) {
  server_->Get("/apis/vramd.io/v1alpha1/vramqueues", [&](const httplib::Request&, httplib::Response& res) {
    ServeChunked(res, Event("ERROR", StatusBody(410, "Expired", "too old resource version: 4 (90)")), 100);
  });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  std::atomic<bool> stop{false};
  Status st = client->WatchQueues("4", stop, [](const WatchEvent<ledger::QueueSpec>&) { ADD_FAILURE(); });
  EXPECT_EQ(st.code(), Code::kConflict);
  EXPECT_EQ(st.message().rfind("410 Gone", 0), 0u) << st.message();
}

TEST_F(RestClientTest, PatchQueueStatusSendsAMergePatchToTheStatusSubresource) {
  server_->Patch(R"(/apis/vramd.io/v1alpha1/vramqueues/([^/]+)/status)",
                 [&](const httplib::Request& req, httplib::Response& res) {
                   Record(req);
                   if (req.matches[1] == "gone") {
                     res.status = 404;
                     res.set_content(StatusBody(404, "NotFound", "vramqueues.vramd.io \"gone\" not found"),
                                     "application/json");
                     return;
                   }
                   res.set_content("{}", "application/json");
                 });
  auto client = Client();
  ASSERT_NE(client, nullptr);
  const std::string body = R"({"status":{"allocated":"1Gi"}})";
  Status st = client->PatchQueueStatus("team-a", body);
  ASSERT_TRUE(st.ok()) << st.ToString();
  httplib::Request req = Last();
  EXPECT_EQ(req.method, "PATCH");
  EXPECT_EQ(req.path, "/apis/vramd.io/v1alpha1/vramqueues/team-a/status");
  EXPECT_EQ(req.get_header_value("Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(req.body, body);

  Status gone = client->PatchQueueStatus("gone", body);
  EXPECT_EQ(gone.code(), Code::kNotFound);
  EXPECT_NE(gone.message().find("patch vramqueue gone status"), std::string::npos) << gone.message();
}

// --- Construction ------------------------------------------------------------

// --- Secrets (vramd ensure-secrets) -----------------------------------------

TEST_F(RestClientTest, CreateSecretPostsTheSecretAndAnExistingOneIsAConflict) {
  std::set<std::string> existing = {"taken"};
  server_->Post(R"(/api/v1/namespaces/([^/]+)/secrets)", [&](const httplib::Request& req, httplib::Response& res) {
    Record(req);
    json body = json::parse(req.body);
    std::string name = body["metadata"]["name"];
    if (req.matches[1] == "denied") {
      res.status = 403;
      res.set_content(StatusBody(403, "Forbidden", "secrets is forbidden: User \"x\" cannot create resource"),
                      "application/json");
    } else if (!existing.insert(name).second) {
      res.status = 409;
      res.set_content(StatusBody(409, "AlreadyExists", "secrets \"" + name + "\" already exists"), "application/json");
    } else {
      res.status = 201;
      res.set_content(req.body, "application/json");
    }
  });
  server_.Start();
  Options opts;
  opts.api_url = "http://127.0.0.1:" + std::to_string(server_.port());
  opts.token_file = token_file_;
  Result<std::unique_ptr<SecretClient>> client = NewSecretClient(opts);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  Secret s;
  s.ns = "gpu";
  s.name = "vramd-token";
  s.data = {{"token", "foobar"}};
  Status created = (*client)->CreateSecret(s);
  ASSERT_TRUE(created.ok()) << created.ToString();
  httplib::Request req = Last();
  EXPECT_EQ(req.path, "/api/v1/namespaces/gpu/secrets");
  EXPECT_EQ(req.get_header_value("Authorization"), "Bearer tok-1");
  EXPECT_EQ(req.get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(req.body), json::parse(SecretJson(s)));

  Status again = (*client)->CreateSecret(s);
  EXPECT_EQ(again.code(), Code::kConflict);
  EXPECT_NE(again.message().find("create secret gpu/vramd-token: HTTP 409"), std::string::npos) << again.message();

  s.ns = "denied";
  Status denied = (*client)->CreateSecret(s);
  EXPECT_EQ(denied.code(), Code::kInternal);
  EXPECT_NE(denied.message().find("HTTP 403"), std::string::npos) << denied.message();
}

TEST(NewRestClient, RejectsOptionsThatCannotWork) {
  TempDir dir;
  std::string not_pem = dir.Write("ca.crt", "hello");
  std::string token = dir.Write("token", "t");

  Options bad_scheme;
  bad_scheme.api_url = "ftp://127.0.0.1";
  EXPECT_EQ(NewRestClient(bad_scheme).status().code(), Code::kInvalidArgument);

  Options no_ca;
  no_ca.api_url = "https://127.0.0.1:6443";
  no_ca.ca_file = (dir.path() / "missing.crt").string();
  EXPECT_EQ(NewRestClient(no_ca).status().code(), Code::kInvalidArgument);

  Options junk_ca = no_ca;
  junk_ca.ca_file = not_pem;
  Result<std::unique_ptr<KubeClient>> r = NewRestClient(junk_ca);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no PEM certificate"), std::string::npos);

  Options no_token;
  no_token.api_url = "http://127.0.0.1:1";
  no_token.token_file = (dir.path() / "missing-token").string();
  EXPECT_EQ(NewRestClient(no_token).status().code(), Code::kInvalidArgument);

  Options zero_timeout;
  zero_timeout.api_url = "http://127.0.0.1:1";
  zero_timeout.timeout_ms = 0;
  EXPECT_EQ(NewRestClient(zero_timeout).status().code(), Code::kInvalidArgument);
}

TEST(NewRestClient, InClusterNeedsTheServiceEnvironment) {
  const char* saved = std::getenv("KUBERNETES_SERVICE_HOST");
  std::string saved_value = saved ? saved : "";
  unsetenv("KUBERNETES_SERVICE_HOST");
  Result<std::unique_ptr<KubeClient>> r = NewRestClient(Options{});
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);

  if (!fs::exists("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")) {
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    r = NewRestClient(Options{});
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("serviceaccount/ca.crt"), std::string::npos) << r.status().message();
  }
  if (saved) {
    setenv("KUBERNETES_SERVICE_HOST", saved_value.c_str(), 1);
  } else {
    unsetenv("KUBERNETES_SERVICE_HOST");
  }
}

// --- TLS -------------------------------------------------------------------

// A self-signed certificate for IP 127.0.0.1 (also its own CA), made in memory.
struct TestCert {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  explicit TestCert(long serial) {
    key = EVP_EC_gen("P-256");
    cert = X509_new();
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("vramd-test-apiserver"),
                               -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1"},
                              std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
      X509_add_ext(cert, ext, -1);
      X509_EXTENSION_free(ext);
    }
    X509_sign(cert, key, EVP_sha256());
  }
  ~TestCert() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  std::string Pem() const {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, cert);
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<size_t>(n));
    BIO_free(bio);
    return out;
  }
};

TEST(RestClientTls, VerifiesTheServerAgainstTheCaFile) {
  TestCert server_cert(1);
  TestCert other_ca(2);
  FakeApiServer server(std::make_unique<httplib::SSLServer>(server_cert.cert, server_cert.key));
  ASSERT_GT(server.port(), 0);
  server->Get(R"(/api/v1/namespaces/ml/pods/([^/]+))", [&](const httplib::Request& req, httplib::Response& res) {
    res.set_content(PodJson(req.matches[1]), "application/json");
  });
  server.Start();
  TempDir dir;

  Options good;
  good.api_url = "https://127.0.0.1:" + std::to_string(server.port());
  good.ca_file = dir.Write("ca.crt", server_cert.Pem());
  good.token_file = dir.Write("token", "tls-token");
  Result<std::unique_ptr<KubeClient>> client = NewRestClient(good);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Result<PodInfo> pod = (*client)->GetPod("ml", "secure");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->name, "secure");

  Options wrong = good;
  wrong.ca_file = dir.Write("other.crt", other_ca.Pem());
  Result<std::unique_ptr<KubeClient>> untrusting = NewRestClient(wrong);
  ASSERT_TRUE(untrusting.ok()) << untrusting.status().ToString();
  Result<PodInfo> refused = (*untrusting)->GetPod("ml", "secure");
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_NE(refused.status().message().find("SSLServerVerification"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace vramd::kube
