// TokenReview and SubjectAccessReview: the bodies vramd sends and how it
// reads the API server's answers (issue 33). Answers in the shapes real API
// servers give (1.20: pod name and UID in extra; 1.30+: the node too).
#include "vramd/kube/token_review.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace vramd::kube {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

json Answer(bool authenticated, json user, json audiences = json::array({"vramd"})) {
  json status = {{"authenticated", authenticated}};
  if (!user.is_null()) status["user"] = std::move(user);
  if (!audiences.is_null()) status["audiences"] = std::move(audiences);
  return json{{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenReview"}, {"status", status}};
}

json AgentUser(json extra) {
  return json{{"username", "system:serviceaccount:vramd:vramd-agent"},
              {"uid", "5f0c-sa"},
              {"groups", {"system:serviceaccounts", "system:serviceaccounts:vramd", "system:authenticated"}},
              {"extra", std::move(extra)}};
}

TEST(TokenReview, TheRequestAsksForTheAudience) {
  json body = json::parse(TokenReviewBody("abc.def", "vramd"));
  EXPECT_EQ(body["apiVersion"], "authentication.k8s.io/v1");
  EXPECT_EQ(body["kind"], "TokenReview");
  EXPECT_EQ(body["spec"]["token"], "abc.def");
  EXPECT_EQ(body["spec"]["audiences"], json::array({"vramd"}));
}

TEST(TokenReview, APodsTokenOn120NamesThePodNotTheNode) {
  json extra = {{"authentication.kubernetes.io/pod-name", {"vramd-agent-x7k2p"}},
                {"authentication.kubernetes.io/pod-uid", {"0b1f7a56-1111-2222-3333-444455556666"}}};
  Result<TokenUser> u = DecodeTokenReview(Answer(true, AgentUser(extra)).dump(), "vramd");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->sa_namespace, "vramd");
  EXPECT_EQ(u->sa_name, "vramd-agent");
  EXPECT_EQ(u->pod_name, "vramd-agent-x7k2p");
  EXPECT_EQ(u->pod_uid, "0b1f7a56-1111-2222-3333-444455556666");
  EXPECT_EQ(u->node_name, "");
  EXPECT_EQ(u->groups.size(), 3u);
  EXPECT_EQ(u->uid, "5f0c-sa");
}

TEST(TokenReview, A130TokenAlsoNamesTheNode) {
  json extra = {{"authentication.kubernetes.io/pod-name", {"p"}},
                {"authentication.kubernetes.io/pod-uid", {"u"}},
                {"authentication.kubernetes.io/node-name", {"gpu-7"}},
                {"authentication.kubernetes.io/credential-id", {"JTI=abc"}}};
  Result<TokenUser> u = DecodeTokenReview(Answer(true, AgentUser(extra)).dump(), "vramd");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->node_name, "gpu-7");
  EXPECT_EQ(u->extra.at("authentication.kubernetes.io/credential-id").at(0), "JTI=abc");
}

TEST(TokenReview, AUserIsNoServiceAccount) {
  Result<TokenUser> u =
      DecodeTokenReview(Answer(true, json{{"username", "alice@example.com"}, {"groups", {"team-a"}}}).dump(), "vramd");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->username, "alice@example.com");
  EXPECT_EQ(u->sa_namespace, "");
  EXPECT_EQ(u->pod_uid, "");
}

struct Refusal {
  const char* name;
  std::string body;
  Code code;
  const char* says;
};

TEST(TokenReview, RefusalsAndMalformedAnswers) {
  json pod_only = {{"authentication.kubernetes.io/pod-name", {"p"}}};
  json two_pods = {{"authentication.kubernetes.io/pod-name", {"p", "q"}},
                   {"authentication.kubernetes.io/pod-uid", {"u", "v"}}};
  json not_authenticated = Answer(false, nullptr);
  not_authenticated["status"]["error"] = "[invalid bearer token, token lookup failed]";
  const Refusal cases[] = {
      {"not authenticated", not_authenticated.dump(), Code::kUnauthenticated, "invalid bearer token"},
      {"audience not confirmed (an authenticator that ignores audiences)",
       Answer(true, AgentUser(json::object()), json::array({"https://kubernetes.default.svc"})).dump(),
       Code::kUnauthenticated, "audience"},
      {"no audiences at all", Answer(true, AgentUser(json::object()), nullptr).dump(), Code::kUnauthenticated,
       "audience"},
      {"not JSON", "<html>", Code::kInternal, "not a JSON object"},
      {"no status", R"({"kind":"TokenReview"})", Code::kInternal, "no status"},
      {"no user", Answer(true, nullptr).dump(), Code::kInternal, "no user"},
      {"no username", Answer(true, json{{"groups", json::array()}}).dump(), Code::kInternal, "no username"},
      {"groups not a list", Answer(true, json{{"username", "x"}, {"groups", "a"}}).dump(), Code::kInternal, "groups"},
      {"extra not lists", Answer(true, json{{"username", "x"}, {"extra", {{"k", "v"}}}}).dump(), Code::kInternal,
       "extra"},
      {"malformed ServiceAccount name",
       Answer(true, json{{"username", "system:serviceaccount:only-namespace"}}).dump(), Code::kInvalidArgument,
       "malformed"},
      {"extra colon", Answer(true, json{{"username", "system:serviceaccount:a:b:c"}}).dump(), Code::kInvalidArgument,
       "malformed"},
      {"pod without UID", Answer(true, AgentUser(pod_only)).dump(), Code::kInvalidArgument, "without"},
      {"two pods", Answer(true, AgentUser(two_pods)).dump(), Code::kInvalidArgument, "several"},
  };
  for (const Refusal& c : cases) {
    Result<TokenUser> u = DecodeTokenReview(c.body, "vramd");
    ASSERT_FALSE(u.ok()) << c.name;
    EXPECT_EQ(u.status().code(), c.code) << c.name << ": " << u.status().message();
    EXPECT_THAT(u.status().message(), HasSubstr(c.says)) << c.name;
  }
}

TEST(SubjectAccessReview, TheRequestCarriesTheWholeIdentity) {
  TokenUser u;
  u.username = "system:serviceaccount:team-a:trainer";
  u.uid = "sa-uid";
  u.groups = {"system:serviceaccounts", "system:authenticated"};
  u.extra["authentication.kubernetes.io/pod-name"] = {"trainer-0"};
  json body = json::parse(SubjectAccessReviewBody(u, "get", "pods", "team-b", ""));
  EXPECT_EQ(body["apiVersion"], "authorization.k8s.io/v1");
  EXPECT_EQ(body["kind"], "SubjectAccessReview");
  EXPECT_EQ(body["spec"]["user"], u.username);
  EXPECT_EQ(body["spec"]["uid"], "sa-uid");
  EXPECT_EQ(body["spec"]["groups"].size(), 2u);
  EXPECT_EQ(body["spec"]["extra"]["authentication.kubernetes.io/pod-name"][0], "trainer-0");
  EXPECT_EQ(body["spec"]["resourceAttributes"],
            (json{{"verb", "get"}, {"group", ""}, {"resource", "pods"}, {"namespace", "team-b"}}));
  json one = json::parse(SubjectAccessReviewBody(u, "get", "pods", "team-b", "web-0"));
  EXPECT_EQ(one["spec"]["resourceAttributes"]["name"], "web-0");
}

TEST(SubjectAccessReview, OnlyAnExplicitAllowIsYes) {
  struct Case {
    const char* body;
    bool allowed;
  } cases[] = {
      {R"({"status":{"allowed":true}})", true},
      {R"({"status":{"allowed":false,"reason":"no RBAC policy matched"}})", false},
      {R"({"status":{"allowed":true,"denied":true}})", false},
      {R"({"status":{}})", false},
      {R"({"status":{"allowed":"true"}})", false},
      {R"({})", false},
  };
  for (const Case& c : cases) {
    Result<bool> r = DecodeSubjectAccessReview(c.body);
    ASSERT_TRUE(r.ok()) << c.body;
    EXPECT_EQ(*r, c.allowed) << c.body;
  }
  EXPECT_FALSE(DecodeSubjectAccessReview("[1]").ok());
}

}  // namespace
}  // namespace vramd::kube
