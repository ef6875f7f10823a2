// The /v1/locks endpoints over HTTP, against a real Redis-protocol server.
// Needs VRAMD_TEST_VALKEY_URL; fails without it.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "unit/fakes/fake_clock.h"
#include "unit/fakes/fake_kube_client.h"
#include "vramd/gpulock/locks.h"
#include "vramd/http/auth.h"
#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"

namespace vramd::gpulock {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using http::RegisterLockRoutes;  // src/http/routes/locks.cc

constexpr const char* kToken = "s3cret-token";

std::string RandomSuffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return std::to_string(rng() % 1'000'000'000'000ULL);
}

class LockRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("VRAMD_TEST_VALKEY_URL");
    if (url == nullptr || *url == '\0') {
      GTEST_FAIL() << "VRAMD_TEST_VALKEY_URL is not set (see scripts/test.sh)";
    }
    store::ValkeyOptions opts;
    opts.url = url;
    opts.key_prefix = "vramdtest-" + RandomSuffix();
    client_ = store::NewValkeyClient(opts);
    Start(client_);
  }

  void Start(std::shared_ptr<store::ValkeyClient> client, http::LockTargetCheck known = nullptr,
             std::shared_ptr<http::Authenticator> auth = nullptr) {
    locks_ = std::make_unique<LockService>(store::NewValkeyLockStore(client), &registry_);
    http::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    server_ = std::make_unique<http::Server>(so, &registry_);
    if (auth) RegisterLockRoutes(*server_, locks_.get(), std::move(auth), std::move(known));
    else RegisterLockRoutes(*server_, locks_.get(), kToken, std::move(known));
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    http_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    http_->set_read_timeout(std::chrono::seconds(40));
    // Serving before the test goes on (http::Server::Stop right after Start
    // can miss the listener thread's start).
    for (int i = 0; i < 200 && !http_->Get("/v1/locks"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  void TearDown() override {
    if (server_) server_->Stop();
    if (!client_) return;
    auto r = client_->Command({"KEYS", client_->prefix() + ":*"});
    if (r.ok()) {
      std::vector<std::string> del{"DEL"};
      for (const auto& k : r->elements) del.push_back(k.str);
      if (del.size() > 1) (void)client_->Command(del);
    }
  }

  httplib::Result Post(const std::string& path, const std::string& body, const std::string& token = kToken) {
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return http_->Post(path.c_str(), h, body, "application/json");
  }

  size_t KeyCount() {
    auto r = client_->Command({"KEYS", client_->prefix() + ":*"});
    return r.ok() ? r->elements.size() : 999;
  }

  metrics::Registry registry_;
  std::shared_ptr<store::ValkeyClient> client_;
  std::unique_ptr<LockService> locks_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<httplib::Client> http_;
};

TEST_F(LockRoutesTest, AMissingOrWrongTokenIs401WithoutSideEffects) {
  for (const std::string& tok : {std::string(), std::string("wrong")}) {
    for (const char* op : {"acquire", "heartbeat", "release"}) {
      auto r = Post(std::string("/v1/locks/n1/0/") + op, R"({"owner":"pod-a/x"})", tok);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 401) << op;
    }
  }
  EXPECT_EQ(KeyCount(), 0u);
}

// Issue 33 (attack): with identities on, a lock belongs to the calling pod.
// A tenant's pod cannot take, renew or release a lock in another pod's name
// (nor stamp lock activity for it), the shared token takes none, and the
// listing shows owners to callers with a credential only. Nothing refused
// writes a key.
TEST_F(LockRoutesTest, WithIdentitiesALockIsOwnedByTheCallingPodOnly) {
  constexpr const char* kMine = "7c2e9d10-aaaa-bbbb-cccc-ddddeeeeffff";
  constexpr const char* kVictim = "0b1f7a56-1111-2222-3333-444455556666";
  server_->Stop();
  testing::FakeKubeClient kube;
  testing::FakeClock clock;
  kube.tokens["trainer-token"] = testing::ServiceAccountUser("team-a", "trainer", "trainer-0", kMine, "n1");
  http::AuthOptions o = http::SharedTokenOnly(kToken);
  o.identities = true;
  o.agent_namespace = "vramd";
  o.agent_service_account = "vramd-agent";
  Start(client_, nullptr, std::make_shared<http::Authenticator>(o, &kube, &clock));

  // The victim's lock, taken as it would be (through a service that trusts its caller).
  ASSERT_TRUE(locks_->Acquire("n1", 0, std::string(kVictim) + "/w", 30'000, 0).ok());
  const size_t before = KeyCount();
  const std::string victim = std::string(R"({"owner":")") + kVictim + R"(/w"})";
  for (const char* op : {"acquire", "heartbeat", "release"}) {
    auto r = Post(std::string("/v1/locks/n1/0/") + op, victim, "trainer-token");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << op << ": " << r->body;
    EXPECT_THAT(r->body, HasSubstr("caller's own pod")) << op;
    r = Post(std::string("/v1/locks/n1/1/") + op, victim, kToken);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << op << ": " << r->body;
    EXPECT_THAT(r->body, HasSubstr("shared API token")) << op;
  }
  EXPECT_EQ(KeyCount(), before);
  Result<std::vector<LockInfo>> held = locks_->List();
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ((*held)[0].holder, std::string(kVictim) + "/w");  // still the victim's

  // Its own lock, on another GPU: granted.
  auto mine = Post("/v1/locks/n1/1/acquire", std::string(R"({"owner":")") + kMine + R"(/w"})", "trainer-token");
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->status, 200) << mine->body;
  EXPECT_TRUE(json::parse(mine->body)["granted"].get<bool>());

  auto anonymous = http_->Get("/v1/locks");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  auto listed = http_->Get("/v1/locks", httplib::Headers{{"Authorization", "Bearer trainer-token"}});
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->status, 200);
  EXPECT_THAT(listed->body, HasSubstr(kVictim));
}

// Identities off, a token configured: the listing shows who holds a lock
// only to a caller with the token.
TEST_F(LockRoutesTest, OwnersAreListedOnlyToCallersWithTheToken) {
  ASSERT_TRUE(locks_->Acquire("n1", 0, "pod-a/x", 30'000, 0).ok());
  auto anonymous = http_->Get("/v1/locks");
  ASSERT_TRUE(anonymous);
  ASSERT_EQ(anonymous->status, 200);
  json a = json::parse(anonymous->body)["locks"][0];
  EXPECT_TRUE(a["held"].get<bool>());
  EXPECT_TRUE(a["holder"].is_null()) << a.dump();
  EXPECT_TRUE(a["token"].is_null()) << a.dump();
  auto with = http_->Get("/v1/locks", httplib::Headers{{"Authorization", std::string("Bearer ") + kToken}});
  ASSERT_TRUE(with);
  EXPECT_EQ(json::parse(with->body)["locks"][0]["holder"], "pod-a/x");
}

// Issue 33 (attack): lock calls for a node or GPU vramd does not know would
// each create keys that never expire (fence counters). With the ledger's
// check, as the daemon registers the routes: 404 naming the target, and not
// one key written; a GPU the ledger has is served.
TEST_F(LockRoutesTest, LocksForNodesAndGpusTheLedgerLacksAre404AndWriteNothing) {
  server_->Stop();
  std::unique_ptr<store::LedgerStore> ledger = store::NewValkeyLedgerStore(client_);
  ASSERT_TRUE(ledger->SetCapacity("n1", {{0, int64_t{16} << 30, ""}}).ok());
  Start(client_, http::LedgerLockTargets(ledger.get()));
  const size_t before = KeyCount();
  for (const char* path : {"/v1/locks/made-up-node/0/", "/v1/locks/n1/7/"}) {
    for (const char* op : {"acquire", "heartbeat", "release"}) {
      auto r = Post(std::string(path) + op, R"({"owner":"pod-a/x"})");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 404) << path << op << " " << r->body;
      EXPECT_THAT(r->body, ::testing::HasSubstr(std::string(path).find("n1") != std::string::npos
                                                    ? "node n1 has no GPU 7 in the ledger"
                                                    : "node made-up-node is not in the ledger"));
    }
  }
  EXPECT_EQ(KeyCount(), before) << "a refused call wrote keys";
  auto r = Post("/v1/locks/n1/0/acquire", R"({"owner":"pod-a/x"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(LockRoutesTest, BadInputIs400) {
  struct Case {
    const char* name;
    std::string path, body;
    const char* says;
  };
  std::vector<Case> cases = {
      {"malformed JSON", "/v1/locks/n1/0/acquire", "{owner:", "not valid JSON"},
      {"not an object", "/v1/locks/n1/0/acquire", "[1]", "JSON object"},
      {"missing owner", "/v1/locks/n1/0/acquire", "{}", "owner is required"},
      {"owner not a string", "/v1/locks/n1/0/acquire", R"({"owner":5})", "owner must be a string"},
      {"owner with a space", "/v1/locks/n1/0/acquire", R"({"owner":"pod/a b"})", "instance part"},
      {"owner without slash", "/v1/locks/n1/0/acquire", R"({"owner":"pod"})", "POD_UID/INSTANCE"},
      {"zero ttl", "/v1/locks/n1/0/acquire", R"({"owner":"p/a","ttl_seconds":0})", "ttl_seconds"},
      {"absurd ttl", "/v1/locks/n1/0/acquire", R"({"owner":"p/a","ttl_seconds":1e12})", "ttl_seconds"},
      {"ttl as a string", "/v1/locks/n1/0/acquire", R"({"owner":"p/a","ttl_seconds":"60"})", "number"},
      {"negative wait", "/v1/locks/n1/0/acquire", R"({"owner":"p/a","wait_seconds":-1})", "wait_seconds"},
      {"unknown field", "/v1/locks/n1/0/acquire", R"({"owner":"p/a","ttl":60})", "unknown field"},
      {"wait on release", "/v1/locks/n1/0/release", R"({"owner":"p/a","wait_seconds":1})", "unknown field"},
      {"gpu not an integer", "/v1/locks/n1/x/acquire", R"({"owner":"p/a"})", "not a whole number"},
      {"gpu out of range", "/v1/locks/n1/5000/acquire", R"({"owner":"p/a"})", "GPU index"},
      {"bad node", "/v1/locks/n%7B1%7D/0/acquire", R"({"owner":"p/a"})", "node name"},
  };
  for (const Case& c : cases) {
    auto r = Post(c.path, c.body);
    ASSERT_TRUE(r) << c.name;
    EXPECT_EQ(r->status, 400) << c.name << ": " << r->body;
    EXPECT_THAT(r->body, HasSubstr(c.says)) << c.name;
  }
  EXPECT_EQ(KeyCount(), 0u);
}

TEST_F(LockRoutesTest, AcquireHeartbeatReleaseAndList) {
  auto a = Post("/v1/locks/n1/0/acquire", R"({"owner":"pod-a/x","ttl_seconds":30})");
  ASSERT_TRUE(a);
  ASSERT_EQ(a->status, 200) << a->body;
  json ja = json::parse(a->body);
  EXPECT_TRUE(ja["granted"].get<bool>());
  EXPECT_EQ(ja["token"], 1);
  EXPECT_EQ(ja["ttl_seconds"], 30.0);

  auto b = Post("/v1/locks/n1/0/acquire", R"({"owner":"pod-b/y","wait_seconds":0.2})");
  ASSERT_EQ(b->status, 200) << b->body;
  json jb = json::parse(b->body);
  EXPECT_FALSE(jb["granted"].get<bool>());
  EXPECT_EQ(jb["position"], 1);

  auto hb_other = Post("/v1/locks/n1/0/heartbeat", R"({"owner":"pod-b/y"})");
  EXPECT_EQ(hb_other->status, 409);
  EXPECT_THAT(hb_other->body, HasSubstr("not the owner"));
  auto hb = Post("/v1/locks/n1/0/heartbeat", R"({"owner":"pod-a/x"})");
  ASSERT_EQ(hb->status, 200) << hb->body;
  EXPECT_EQ(json::parse(hb->body)["ttl_seconds"], 30.0);

  auto list = http_->Get("/v1/locks", httplib::Headers{{"Authorization", std::string("Bearer ") + kToken}});
  ASSERT_EQ(list->status, 200);
  json jl = json::parse(list->body)["locks"];
  ASSERT_EQ(jl.size(), 1u);
  EXPECT_EQ(jl[0]["holder"], "pod-a/x");
  EXPECT_EQ(jl[0]["waiters"][0]["owner"], "pod-b/y");

  EXPECT_EQ(Post("/v1/locks/n1/0/release", R"({"owner":"pod-b/z"})")->status, 409);
  auto rel = Post("/v1/locks/n1/0/release", R"({"owner":"pod-a/x"})");
  ASSERT_EQ(rel->status, 200);
  EXPECT_TRUE(json::parse(rel->body)["released"].get<bool>());

  auto b2 = Post("/v1/locks/n1/0/acquire", R"({"owner":"pod-b/y","wait_seconds":2})");
  ASSERT_EQ(b2->status, 200);
  json jb2 = json::parse(b2->body);
  EXPECT_TRUE(jb2["granted"].get<bool>());
  EXPECT_EQ(jb2["token"], 2);
  EXPECT_EQ(jb2["ttl_seconds"], 60.0) << "the default TTL";
}

TEST_F(LockRoutesTest, ValkeyDownIs503) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  store::ValkeyOptions opts;
  opts.url = "redis://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  metrics::Registry reg;
  LockService down(store::NewValkeyLockStore(store::NewValkeyClient(opts)), &reg);
  http::ServerOptions so;
  so.port = 0;
  http::Server srv(so, &reg);
  RegisterLockRoutes(srv, &down, kToken);
  ASSERT_TRUE(srv.Start().ok());
  httplib::Client c("127.0.0.1", srv.port());
  c.set_connection_timeout(5, 0);
  httplib::Headers h{{"Authorization", std::string("Bearer ") + kToken}};
  auto r = c.Post("/v1/locks/n1/0/acquire", h, R"({"owner":"pod-a/x"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(r->body, HasSubstr("unavailable"));
  auto l = c.Get("/v1/locks");
  EXPECT_EQ(l->status, 503);
  srv.Stop();
}

}  // namespace
}  // namespace vramd::gpulock
