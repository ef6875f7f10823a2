#include "kube/api_url.h"

#include <gtest/gtest.h>

#include "kube/api_status.h"

namespace vramd::kube {
namespace {

TEST(ParseApiUrl, HttpsWithPortAndPrefix) {
  Result<ApiEndpoint> ep = ParseApiUrl("https://10.0.0.1:6443/k8s/clusters/c-1/");
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  EXPECT_TRUE(ep->tls);
  EXPECT_EQ(ep->host, "10.0.0.1");
  EXPECT_EQ(ep->port, 6443);
  EXPECT_EQ(ep->base_path, "/k8s/clusters/c-1");
  EXPECT_EQ(ep->Origin(), "https://10.0.0.1:6443");
}

TEST(ParseApiUrl, DefaultPortsAndIpv6) {
  Result<ApiEndpoint> a = ParseApiUrl("https://kubernetes.default.svc");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port, 443);
  Result<ApiEndpoint> b = ParseApiUrl("http://127.0.0.1");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->tls);
  EXPECT_EQ(b->port, 80);
  Result<ApiEndpoint> c = ParseApiUrl("https://[fd00::1]:443");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->host, "fd00::1");
  EXPECT_EQ(c->Origin(), "https://[fd00::1]:443");
}

TEST(ParseApiUrl, RejectsWhatCannotWork) {
  for (const char* bad : {"", "ftp://x", "10.0.0.1:6443", "https://", "https://:6443", "https://h:0",
                          "https://h:70000", "https://h:6x", "https://u:p@h", "https://h/?a=b", "https://[::1"}) {
    EXPECT_EQ(ParseApiUrl(bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(QueryString, PercentEncodesValues) {
  EXPECT_EQ(QueryString({}), "");
  EXPECT_EQ(QueryString({{"fieldSelector", "spec.nodeName!=,status.phase=Running"}, {"limit", "500"}}),
            "?fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%3DRunning&limit=500");
  EXPECT_EQ(PercentEncode("a b/c~d_e.f-g"), "a%20b%2Fc~d_e.f-g");
}

TEST(StatusFromHttp, MapsCodes) {
  EXPECT_EQ(StatusFromHttp(404, "x", "m").code(), Code::kNotFound);
  EXPECT_EQ(StatusFromHttp(409, "x", "m").code(), Code::kConflict);
  EXPECT_EQ(StatusFromHttp(410, "x", "m").code(), Code::kConflict);
  EXPECT_EQ(StatusFromHttp(410, "x", "m").message().rfind("410 Gone", 0), 0u);
  EXPECT_EQ(StatusFromHttp(422, "x", "m").code(), Code::kInvalidArgument);
  EXPECT_EQ(StatusFromHttp(401, "x", "m").code(), Code::kInternal);
  EXPECT_NE(StatusFromHttp(403, "x", "m").message().find("RBAC"), std::string::npos);
  EXPECT_EQ(StatusFromHttp(429, "x", "m").code(), Code::kUnavailable);
  EXPECT_EQ(StatusFromHttp(503, "x", "m").code(), Code::kUnavailable);
  EXPECT_EQ(StatusFromHttp(302, "x", "m").code(), Code::kInternal);
}

TEST(ApiMessage, TakesTheStatusMessageOrAnExcerpt) {
  EXPECT_EQ(ApiMessage(R"({"kind":"Status","message":"pods \"p\" not found","code":404})"), "pods \"p\" not found");
  EXPECT_EQ(ApiMessage("upstream\nconnect error"), "upstream connect error");
  EXPECT_EQ(ApiMessage(""), "");
  EXPECT_EQ(ApiMessage(std::string(1000, 'x')).size(), 303u);
}

}  // namespace
}  // namespace vramd::kube
