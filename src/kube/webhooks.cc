// The caBundle patch of admission webhook configurations (webhooks.h); the
// GET and PATCH themselves are the REST client's (rest_client.cc).
#include "vramd/kube/webhooks.h"

#include <nlohmann/json.hpp>

#include "vramd/kube/secrets.h"

namespace vramd::kube {

const char* WebhookResource(WebhookKind kind) {
  return kind == WebhookKind::kMutating ? "mutatingwebhookconfigurations" : "validatingwebhookconfigurations";
}

const char* WebhookKindName(WebhookKind kind) {
  return kind == WebhookKind::kMutating ? "MutatingWebhookConfiguration" : "ValidatingWebhookConfiguration";
}

Result<std::optional<std::string>> CaBundlePatch(WebhookKind kind, std::string_view config_json,
                                                 const std::string& ca_pem) {
  using nlohmann::json;
  json j = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("the answer is not a JSON object");
  const std::string want_kind = WebhookKindName(kind);
  if (j.value("kind", "") != want_kind) return InvalidArgument("the answer is not a " + want_kind);
  auto hooks = j.find("webhooks");
  if (hooks == j.end() || !hooks->is_array() || hooks->empty()) {
    return InvalidArgument(want_kind + " has no webhooks");
  }
  const std::string bundle = Base64(ca_pem);
  json patch = json::array();
  for (size_t i = 0; i < hooks->size(); ++i) {
    const json& h = (*hooks)[i];
    const std::string at = "/webhooks/" + std::to_string(i);
    auto name = h.is_object() ? h.find("name") : h.end();
    if (!h.is_object() || name == h.end() || !name->is_string()) {
      return InvalidArgument("webhook " + std::to_string(i) + " has no name");
    }
    auto cc = h.find("clientConfig");
    if (cc == h.end() || !cc->is_object()) {
      return InvalidArgument("webhook " + name->get<std::string>() + " has no clientConfig");
    }
    auto have = cc->find("caBundle");
    if (have != cc->end() && have->is_string() && have->get<std::string>() == bundle) continue;
    patch.push_back({{"op", "test"}, {"path", at + "/name"}, {"value", *name}});
    // "add" sets a member whether or not it exists (RFC 6902 4.1).
    patch.push_back({{"op", "add"}, {"path", at + "/clientConfig/caBundle"}, {"value", bundle}});
  }
  if (patch.empty()) return std::optional<std::string>();
  return std::optional<std::string>(patch.dump());
}

}  // namespace vramd::kube
