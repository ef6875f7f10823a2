// The caBundle patch of webhook configurations (src/kube/webhooks.cc), as a
// table; the GET and PATCH against a real kube-apiserver run in
// tests/e2e/ensure_secrets_test.py, the retries in
// tests/unit/daemon/ensure_secrets_test.cc.
#include "vramd/kube/webhooks.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "vramd/kube/secrets.h"

namespace vramd::kube {
namespace {

using nlohmann::json;

constexpr const char* kCa = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

struct PatchCase {
  const char* name;
  WebhookKind kind;
  const char* body;
  const char* want;        // the patch as JSON; "" = nothing to patch (nullopt); null = an error
  const char* error_part;  // with want == null
};

class CaBundlePatchTable : public ::testing::TestWithParam<PatchCase> {};

TEST_P(CaBundlePatchTable, SetsOnlyWhatDiffersAfterTestingEachName) {
  const PatchCase& c = GetParam();
  std::string body = c.body;
  const std::string b64 = Base64(kCa);
  for (size_t at; (at = body.find("$CA")) != std::string::npos;) body.replace(at, 3, b64);
  Result<std::optional<std::string>> got = CaBundlePatch(c.kind, body, kCa);
  if (c.want == nullptr) {
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), Code::kInvalidArgument);
    EXPECT_NE(got.status().message().find(c.error_part), std::string::npos) << got.status().message();
    return;
  }
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  if (*c.want == '\0') {
    EXPECT_FALSE(got->has_value()) << **got;
    return;
  }
  ASSERT_TRUE(got->has_value());
  std::string want = c.want;
  for (size_t at; (at = want.find("$CA")) != std::string::npos;) want.replace(at, 3, b64);
  EXPECT_EQ(json::parse(**got), json::parse(want));
}

INSTANTIATE_TEST_SUITE_P(
    Webhooks, CaBundlePatchTable,
    ::testing::Values(
        PatchCase{"OneMutatingWebhookWithoutABundle", WebhookKind::kMutating,
                  R"({"kind":"MutatingWebhookConfiguration","webhooks":[{"name":"mutate.vramd.io",
                      "clientConfig":{"service":{"name":"vramd","namespace":"ns","port":9443}}}]})",
                  R"([{"op":"test","path":"/webhooks/0/name","value":"mutate.vramd.io"},
                      {"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"$CA"}])",
                  nullptr},
        PatchCase{"OnlyTheWebhooksWhoseBundleDiffers", WebhookKind::kValidating,
                  R"({"kind":"ValidatingWebhookConfiguration","webhooks":[
                      {"name":"a","clientConfig":{"caBundle":"$CA"}},
                      {"name":"b","clientConfig":{"caBundle":"b2xk"}},
                      {"name":"c","clientConfig":{}}]})",
                  R"([{"op":"test","path":"/webhooks/1/name","value":"b"},
                      {"op":"add","path":"/webhooks/1/clientConfig/caBundle","value":"$CA"},
                      {"op":"test","path":"/webhooks/2/name","value":"c"},
                      {"op":"add","path":"/webhooks/2/clientConfig/caBundle","value":"$CA"}])",
                  nullptr},
        PatchCase{"EveryBundleSetAlready", WebhookKind::kValidating,
                  R"({"kind":"ValidatingWebhookConfiguration","webhooks":[{"name":"a","clientConfig":{"caBundle":"$CA"}},
                      {"name":"b","clientConfig":{"url":"https://x","caBundle":"$CA"}}]})",
                  "", nullptr},
        PatchCase{"WrongKind", WebhookKind::kMutating,
                  R"({"kind":"ValidatingWebhookConfiguration","webhooks":[{"name":"a","clientConfig":{}}]})", nullptr,
                  "the answer is not a MutatingWebhookConfiguration"},
        PatchCase{"NoWebhooks", WebhookKind::kValidating, R"({"kind":"ValidatingWebhookConfiguration"})", nullptr,
                  "ValidatingWebhookConfiguration has no webhooks"},
        PatchCase{"EmptyWebhooks", WebhookKind::kValidating,
                  R"({"kind":"ValidatingWebhookConfiguration","webhooks":[]})", nullptr, "has no webhooks"},
        PatchCase{"WebhookWithoutName", WebhookKind::kValidating,
                  R"({"kind":"ValidatingWebhookConfiguration","webhooks":[{"clientConfig":{}}]})", nullptr,
                  "webhook 0 has no name"},
        PatchCase{"WebhookWithoutClientConfig", WebhookKind::kValidating,
                  R"({"kind":"ValidatingWebhookConfiguration","webhooks":[{"name":"a"}]})", nullptr,
                  "webhook a has no clientConfig"},
        PatchCase{"NotJson", WebhookKind::kMutating, "<html>", nullptr, "not a JSON object"}),
    [](const auto& info) { return info.param.name; });

TEST(Webhooks, ResourceAndKindNames) {
  EXPECT_STREQ(WebhookResource(WebhookKind::kMutating), "mutatingwebhookconfigurations");
  EXPECT_STREQ(WebhookResource(WebhookKind::kValidating), "validatingwebhookconfigurations");
  EXPECT_STREQ(WebhookKindName(WebhookKind::kMutating), "MutatingWebhookConfiguration");
  EXPECT_STREQ(WebhookKindName(WebhookKind::kValidating), "ValidatingWebhookConfiguration");
}

}  // namespace
}  // namespace vramd::kube
