// The Secret body of `vramd ensure-secrets` (src/kube/secret_json.cc).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "vramd/kube/secrets.h"

namespace vramd::kube {
namespace {

TEST(Base64, Rfc4648TestVectors) {
  for (auto [in, want] : std::vector<std::pair<std::string, std::string>>{
           {"", ""},
           {"f", "Zg=="},
           {"fo", "Zm8="},
           {"foo", "Zm9v"},
           {"foob", "Zm9vYg=="},
           {"fooba", "Zm9vYmE="},
           {"foobar", "Zm9vYmFy"},
           {std::string("\x00\xff\xfe", 3), "AP/+"},
       }) {
    EXPECT_EQ(Base64(in), want) << in;
  }
}

TEST(SecretJson, HasTheShapeOfACoreV1SecretWithBase64Data) {
  Secret s;
  s.ns = "gpu";
  s.name = "vramd-tls";
  s.type = "kubernetes.io/tls";
  s.data = {{"tls.crt", "CRT"}, {"tls.key", "foobar"}};
  s.labels = {{"app.kubernetes.io/managed-by", "vramd-ensure-secrets"}};
  EXPECT_EQ(nlohmann::json::parse(SecretJson(s)), nlohmann::json::parse(R"({
      "apiVersion": "v1", "kind": "Secret",
      "metadata": {"name": "vramd-tls", "namespace": "gpu",
                   "labels": {"app.kubernetes.io/managed-by": "vramd-ensure-secrets"}},
      "type": "kubernetes.io/tls",
      "data": {"tls.crt": "Q1JU", "tls.key": "Zm9vYmFy"}})"));

  Secret bare;
  bare.ns = "gpu";
  bare.name = "t";
  EXPECT_EQ(nlohmann::json::parse(SecretJson(bare)), nlohmann::json::parse(R"({
      "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t", "namespace": "gpu"},
      "type": "Opaque", "data": {}})"))
      << "no labels key when there are none";
}

}  // namespace
}  // namespace vramd::kube
