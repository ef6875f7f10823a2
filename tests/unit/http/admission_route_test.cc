// POST /admission/* over HTTP (issue 34, part A): AdmissionReviews in the
// shape kube-apiserver sends (v1 and v1beta1), the answers it reads back
// (the same uid, allowed or the message, a JSON patch it can apply).
#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"

namespace vramd::http {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

std::string Unbase64(const std::string& in) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int bits = 0, n = 0;
  for (char c : in) {
    if (c == '=') break;
    size_t v = kAlphabet.find(c);
    if (v == std::string::npos) return "";
    bits = (bits << 6) | static_cast<int>(v);
    n += 6;
    if (n >= 8) {
      n -= 8;
      out.push_back(static_cast<char>((bits >> n) & 0xff));
    }
  }
  return out;
}

json PodObject(json annotations = json::object(), json env = nullptr, const char* vram = "4Gi") {
  json c = {{"name", "main"}, {"image", "x"}};
  if (vram) c["resources"] = {{"limits", {{"vramd.io/vram", vram}}}};
  if (!env.is_null()) c["env"] = env;
  json meta = {{"generateName", "infer-"}};
  if (!annotations.empty()) meta["annotations"] = annotations;
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", {{"containers", json::array({c})}}}};
}

json Review(const json& object, const char* op = "CREATE", const char* user = "alice",
            const char* api = "admission.k8s.io/v1", const json& old = nullptr) {
  json req = {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
              {"kind", {{"group", ""}, {"version", "v1"}, {"kind", object.value("kind", "Pod")}}},
              {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
              {"namespace", "team-a"},
              {"operation", op},
              {"userInfo", {{"username", user}, {"groups", {"system:authenticated"}}}},
              {"object", object}};
  if (!old.is_null()) req["oldObject"] = old;
  return {{"apiVersion", api}, {"kind", "AdmissionReview"}, {"request", req}};
}

class AdmissionRouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AdmissionServices svc;
    svc.policy.vramd_users = {"system:serviceaccount:vramd-system:vramd"};
    svc.policy.scheduler_name = "vramd-scheduler";
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    server_ = std::make_unique<Server>(so, &registry_);
    RegisterAdmissionRoutes(*server_, svc);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override { server_->Stop(); }
  std::pair<int, json> Post(const std::string& path, const json& body) {
    auto r = client_->Post(path, body.dump(), "application/json");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  metrics::Registry registry_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(AdmissionRouteTest, TheMutationIsAJsonPatchOfTheSchedulerAndTheEnvironment) {
  for (const char* api : {"admission.k8s.io/v1", "admission.k8s.io/v1beta1"}) {
    auto [status, body] = Post("/admission/mutate", Review(PodObject(), "CREATE", "alice", api));
    ASSERT_EQ(status, 200) << body.dump();
    EXPECT_EQ(body["apiVersion"], api);
    EXPECT_EQ(body["kind"], "AdmissionReview");
    const json& resp = body["response"];
    EXPECT_EQ(resp["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_TRUE(resp["allowed"].get<bool>());
    ASSERT_EQ(resp["patchType"], "JSONPatch");
    json patch = json::parse(Unbase64(resp["patch"].get<std::string>()));
    json pod = PodObject();
    json patched = pod.patch(patch);  // nlohmann applies RFC 6902 as the API server does
    EXPECT_EQ(patched["spec"]["schedulerName"], "vramd-scheduler");
    const json& env = patched["spec"]["containers"][0]["env"];
    ASSERT_EQ(env.size(), 4u) << env.dump();
    EXPECT_EQ(env[0]["name"], "NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(env[0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.annotations['vramd.io/gpu-uuids']");
    EXPECT_EQ(env[1], (json{{"name", "CUDA_DEVICE_ORDER"}, {"value", "PCI_BUS_ID"}}));
    EXPECT_THAT(patched["metadata"]["annotations"]["vramd.io/admission-added"].get<std::string>(),
                HasSubstr("schedulerName,env:main/NVIDIA_VISIBLE_DEVICES"));
  }
}

TEST_F(AdmissionRouteTest, WhatTheUserSetIsKept) {
  json env = json::array({{{"name", "CUDA_DEVICE_ORDER"}, {"value", "FASTEST_FIRST"}}});
  json pod = PodObject({{"team", "a"}}, env);
  auto [status, body] = Post("/admission/mutate", Review(pod));
  ASSERT_EQ(status, 200);
  json patched = pod.patch(json::parse(Unbase64(body["response"]["patch"].get<std::string>())));
  const json& got = patched["spec"]["containers"][0]["env"];
  ASSERT_EQ(got.size(), 4u) << got.dump();
  EXPECT_EQ(got[0]["value"], "FASTEST_FIRST");
  EXPECT_EQ(patched["metadata"]["annotations"]["team"], "a");
  // A pod without VRAM is left as it is.
  auto [s2, plain] = Post("/admission/mutate", Review(PodObject(json::object(), nullptr, nullptr)));
  ASSERT_EQ(s2, 200);
  EXPECT_TRUE(plain["response"]["allowed"].get<bool>());
  EXPECT_FALSE(plain["response"].contains("patch"));
}

TEST_F(AdmissionRouteTest, ValidationRefusesWithFiltersMessage) {
  struct Case {
    const char* name;
    json review;
    const char* path;
    bool allowed;
    const char* says;
  } cases[] = {
      {"a good pod", Review(PodObject()), "/admission/validate", true, ""},
      {"a malformed quantity", Review(PodObject(json::object(), nullptr, "4Gx")), "/admission/validate", false,
       "invalid VRAM request"},
      {"a user's vramd.io/gpus", Review(PodObject({{"vramd.io/gpus", "0"}})), "/admission/validate", false,
       "written by vramd"},
      {"vramd's own", Review(PodObject({{"vramd.io/gpus", "0"}}), "CREATE", "system:serviceaccount:vramd-system:vramd"),
       "/admission/validate", true, ""},
      {"nodeName with VRAM", Review([] {
         json p = PodObject();
         p["spec"]["nodeName"] = "gpu-1";
         return p;
       }()),
       "/admission/validate", false, "bypasses vramd"},
      {"nodeName where the namespace opted out", Review([] {
         json p = PodObject();
         p["spec"]["nodeName"] = "gpu-1";
         return p;
       }()),
       "/admission/validate-direct-bind", true, ""},
      {"a bad VramQueue", Review(json{{"apiVersion", "vramd.io/v1alpha1"},
                                      {"kind", "VramQueue"},
                                      {"metadata", {{"name", "team-a"}}},
                                      {"spec", {{"deserved", "80Gi"}, {"limit", "40Gi"}, {"namespaces", {"team-a"}}}}}),
       "/admission/validate", false, "VramQueue team-a: Invalid"},
      {"a good VramQueue", Review(json{{"apiVersion", "vramd.io/v1alpha1"},
                                       {"kind", "VramQueue"},
                                       {"metadata", {{"name", "team-a"}}},
                                       {"spec", {{"deserved", "40Gi"}, {"namespaces", {"team-a"}}}}}),
       "/admission/validate", true, ""},
  };
  for (const Case& c : cases) {
    auto [status, body] = Post(c.path, c.review);
    ASSERT_EQ(status, 200) << c.name << ": " << body.dump();
    const json& resp = body["response"];
    EXPECT_EQ(resp["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002") << c.name;
    EXPECT_EQ(resp["allowed"].get<bool>(), c.allowed) << c.name << ": " << resp.dump();
    if (!c.allowed) {
      EXPECT_EQ(resp["status"]["code"], 403) << c.name;
      EXPECT_THAT(resp["status"]["message"].get<std::string>(), HasSubstr(c.says)) << c.name;
    }
  }
}

TEST_F(AdmissionRouteTest, ABodyThatIsNoAdmissionReviewIs400) {
  for (const char* body : {"", "[]", R"({"kind":"AdmissionReview"})",
                           R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})",
                           R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}})"}) {
    auto r = client_->Post("/admission/validate", body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body;
  }
}

}  // namespace
}  // namespace vramd::http
