// Who may report usage, take GPU locks and read (issue 33): the decisions as
// tables, and the Authenticator (TokenReview, the pod's node, caching)
// against the fake API server.
#include "vramd/http/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "fakes/fake_kube_client.h"

namespace vramd::http {
namespace {

using ::testing::HasSubstr;

constexpr const char* kAgentPodUid = "0b1f7a56-1111-2222-3333-444455556666";
constexpr const char* kTrainerUid = "7c2e9d10-aaaa-bbbb-cccc-ddddeeeeffff";

AuthOptions IdentitiesOn() {
  AuthOptions o = SharedTokenOnly("shared-secret");
  o.identities = true;
  o.agent_namespace = "vramd";
  o.agent_service_account = "vramd-agent";
  return o;
}

kube::TokenUser Agent(const std::string& node) {
  return testing::ServiceAccountUser("vramd", "vramd-agent", "vramd-agent-x7k2p", kAgentPodUid, node);
}

kube::TokenUser Trainer() { return testing::ServiceAccountUser("team-a", "trainer", "trainer-0", kTrainerUid, "gpu-1"); }

Caller Anonymous() { return Caller{}; }
Caller Shared() { return Caller{Caller::Kind::kShared, {}}; }
Caller Identity(kube::TokenUser u) { return Caller{Caller::Kind::kIdentity, std::move(u)}; }

struct Row {
  const char* name;
  AuthOptions opts;
  Caller caller;
  std::string target;  // node (usage) or owner (locks)
  int status;          // 0: allowed
  const char* says = "";
};

void Check(const Row& r, const Verdict& v) {
  EXPECT_EQ(v.status, r.status) << r.name << ": " << v.message;
  if (r.status != 0) EXPECT_THAT(v.message, HasSubstr(r.says)) << r.name;
}

TEST(MayReportUsage, Table) {
  kube::TokenUser agent_sa_no_pod = Agent("gpu-1");
  agent_sa_no_pod.pod_name.clear();
  agent_sa_no_pod.pod_uid.clear();
  kube::TokenUser other_ns_agent = Agent("gpu-1");
  other_ns_agent.sa_namespace = "team-a";  // a tenant names its own ServiceAccount vramd-agent
  const Row rows[] = {
      {"off, no token configured: anyone", AuthOptions{}, Anonymous(), "gpu-1", 0},
      {"off, shared token", SharedTokenOnly("s"), Shared(), "gpu-1", 0},
      {"off, no token", SharedTokenOnly("s"), Anonymous(), "gpu-1", 401, "bearer token"},
      {"on, the agent on its node", IdentitiesOn(), Identity(Agent("gpu-1")), "gpu-1", 0},
      {"on, the agent for another node", IdentitiesOn(), Identity(Agent("gpu-1")), "gpu-2", 403,
       "reports for that node only"},
      {"on, the agent's pod not scheduled", IdentitiesOn(), Identity(Agent("")), "gpu-1", 403, "(none)"},
      {"on, the agent's ServiceAccount without a pod", IdentitiesOn(), Identity(agent_sa_no_pod), "gpu-1", 403,
       "not bound to a pod"},
      {"on, a look-alike ServiceAccount in another namespace", IdentitiesOn(), Identity(other_ns_agent), "gpu-1", 403,
       "not the node agent"},
      {"on, a workload", IdentitiesOn(), Identity(Trainer()), "gpu-1", 403, "not the node agent"},
      {"on, the shared token", IdentitiesOn(), Shared(), "gpu-1", 403, "shared API token"},
      {"on, nothing", IdentitiesOn(), Anonymous(), "gpu-1", 401, "agent's ServiceAccount token"},
  };
  for (const Row& r : rows) Check(r, MayReportUsage(r.opts, r.caller, r.target));
}

TEST(MayCallLock, Table) {
  const std::string own = std::string(kTrainerUid) + "/worker-0";
  const std::string others = std::string(kAgentPodUid) + "/worker-0";
  kube::TokenUser user;  // a person's token: no pod
  user.username = "alice";
  const Row rows[] = {
      {"off, shared token, any owner", SharedTokenOnly("s"), Shared(), others, 0},
      {"off, no token", SharedTokenOnly("s"), Anonymous(), own, 401, "bearer token"},
      {"on, the pod's own lock", IdentitiesOn(), Identity(Trainer()), own, 0},
      {"on, another pod's lock", IdentitiesOn(), Identity(Trainer()), others, 403, "caller's own pod"},
      {"on, an owner without a slash is still another pod", IdentitiesOn(), Identity(Trainer()), "x", 403,
       "caller's own pod"},
      {"on, a token of no pod", IdentitiesOn(), Identity(user), own, 403, "not bound to a pod"},
      {"on, the shared token", IdentitiesOn(), Shared(), own, 403, "shared API token"},
      {"on, nothing", IdentitiesOn(), Anonymous(), own, 401, "ServiceAccount token"},
  };
  for (const Row& r : rows) Check(r, MayCallLock(r.opts, r.caller, r.target));
}

TEST(MayRead, Table) {
  const Row rows[] = {
      {"off: anyone reads", SharedTokenOnly("s"), Anonymous(), "", 0},
      {"on, an identity", IdentitiesOn(), Identity(Trainer()), "", 0},
      {"on, the shared token", IdentitiesOn(), Shared(), "", 0},
      {"on, nothing", IdentitiesOn(), Anonymous(), "", 401, "needs a bearer token"},
  };
  for (const Row& r : rows) Check(r, MayRead(r.opts, r.caller));
}

class AuthenticatorTest : public ::testing::Test {
 protected:
  AuthenticatorTest() {
    kube::TokenUser a = Agent("");  // a 1.20 token: no node
    kube_.tokens["agent-token"] = a;
    kube::PodInfo pod;
    pod.ns = "vramd";
    pod.name = a.pod_name;
    pod.uid = a.pod_uid;
    pod.node_name = "gpu-3";
    kube_.pods["vramd/" + a.pod_name] = pod;
    kube_.tokens["trainer-token"] = Trainer();
  }
  testing::FakeKubeClient kube_;
  testing::FakeClock clock_;
  Authenticator auth_{IdentitiesOn(), &kube_, &clock_};
};

TEST_F(AuthenticatorTest, TheAgentsNodeComesFromItsPod) {
  Result<Caller> c = auth_.Identify("Bearer agent-token");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->kind, Caller::Kind::kIdentity);
  EXPECT_EQ(c->user.node_name, "gpu-3");
  EXPECT_TRUE(MayReportUsage(auth_.options(), *c, "gpu-3").allowed());
  EXPECT_FALSE(MayReportUsage(auth_.options(), *c, "gpu-4").allowed());
}

TEST_F(AuthenticatorTest, AnAcceptedTokenIsReviewedOncePerCachePeriod) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(auth_.Identify("Bearer agent-token").ok());
  EXPECT_EQ(kube_.token_reviews, 1);
  clock_.Advance(auth_.options().cache_ms + 1);
  ASSERT_TRUE(auth_.Identify("Bearer agent-token").ok());
  EXPECT_EQ(kube_.token_reviews, 2);
}

TEST_F(AuthenticatorTest, ARefusedTokenIsRefusedWithoutAskingAgainForAWhile) {
  for (int i = 0; i < 3; ++i) {
    Result<Caller> c = auth_.Identify("Bearer forged");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), Code::kUnauthenticated);
  }
  EXPECT_EQ(kube_.token_reviews, 1);
  clock_.Advance(auth_.options().refused_cache_ms + 1);
  EXPECT_FALSE(auth_.Identify("Bearer forged").ok());
  EXPECT_EQ(kube_.token_reviews, 2);
}

TEST_F(AuthenticatorTest, AnApiServerThatCannotAnswerIs503AndNotRemembered) {
  kube_.fail_review = Unavailable("connection refused");
  Result<Caller> c = auth_.Identify("Bearer agent-token");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_EQ(AuthErrorReply(c.status()).status, 503);
  kube_.fail_review = Status::Ok();
  EXPECT_TRUE(auth_.Identify("Bearer agent-token").ok());
}

TEST_F(AuthenticatorTest, AnApiServerThatRefusesVramdTheReviewIs503NotTheCallersFault) {
  kube_.fail_review = Internal("TokenReview: HTTP 403 (check vramd's RBAC): forbidden");
  Result<Caller> c = auth_.Identify("Bearer agent-token");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_THAT(c.status().message(), HasSubstr("RBAC"));
  kube_.fail_review = Status::Ok();
  EXPECT_TRUE(auth_.Identify("Bearer agent-token").ok()) << "not remembered as a refusal";
}

TEST_F(AuthenticatorTest, APodReplacedUnderTheSameNameIsNotTheTokensPod) {
  kube_.pods["vramd/vramd-agent-x7k2p"].uid = "ffffffff-0000-0000-0000-000000000000";
  Result<Caller> c = auth_.Identify("Bearer agent-token");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnauthenticated);
  EXPECT_THAT(c.status().message(), HasSubstr("replaced"));
  kube_.pods.erase("vramd/vramd-agent-x7k2p");
  clock_.Advance(auth_.options().refused_cache_ms + 1);
  c = auth_.Identify("Bearer agent-token");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("gone"));
}

TEST_F(AuthenticatorTest, TheSharedTokenAndNoTokenNeedNoReview) {
  Result<Caller> s = auth_.Identify("Bearer shared-secret");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, Caller::Kind::kShared);
  Result<Caller> a = auth_.Identify("");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, Caller::Kind::kAnonymous);
  EXPECT_FALSE(auth_.Identify("Basic dXNlcjpwYXNz").ok());
  EXPECT_EQ(kube_.token_reviews, 0);
}

TEST_F(AuthenticatorTest, WithIdentitiesOffNoTokenIsSentToTheApiServer) {
  Authenticator off(SharedTokenOnly("shared-secret"), &kube_, &clock_);
  Result<Caller> c = off.Identify("Bearer agent-token");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnauthenticated);
  EXPECT_EQ(kube_.token_reviews, 0);
}

TEST_F(AuthenticatorTest, WithoutAnyCredentialConfiguredEveryCallerIsAnonymous) {
  Authenticator open(AuthOptions{}, &kube_, &clock_);
  for (const char* header : {"Bearer whatever", "Basic dXNlcjpwYXNz", ""}) {
    Result<Caller> c = open.Identify(header);
    ASSERT_TRUE(c.ok()) << header;
    EXPECT_EQ(c->kind, Caller::Kind::kAnonymous) << header;
  }
  EXPECT_EQ(kube_.token_reviews, 0);
}

TEST_F(AuthenticatorTest, PodsAreVisibleWhereTheCallerMayGetThem) {
  kube_.access["system:serviceaccount:team-a:trainer\nteam-a"] = true;
  Caller trainer = Identity(Trainer());
  EXPECT_TRUE(auth_.PodsVisible(trainer, "team-a"));
  EXPECT_FALSE(auth_.PodsVisible(trainer, "team-b"));
  EXPECT_FALSE(auth_.PodsVisible(trainer, ""));  // not cluster-wide
  EXPECT_TRUE(auth_.PodsVisible(trainer, "team-a"));
  EXPECT_EQ(kube_.access_reviews, 3);  // the repeat was cached
  EXPECT_TRUE(auth_.PodsVisible(Shared(), "team-b"));
  EXPECT_FALSE(auth_.PodsVisible(Anonymous(), "team-a"));
  kube_.fail_review = Unavailable("down");
  EXPECT_FALSE(auth_.PodsVisible(trainer, "team-c"));  // cannot ask: no
}

}  // namespace
}  // namespace vramd::http
