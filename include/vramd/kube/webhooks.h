// Putting a CA into admission webhook configurations: what `vramd
// ensure-secrets --ca-bundle-secret` does after the chart installed its
// webhook configurations (a post-install/post-upgrade hook), so that the API
// server trusts vramd's serving certificate (issued by ensure-secrets' CA).
// Apart from KubeClient: the daemon never touches a webhook configuration.
// The REST client implements it (same connection set-up: Options).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "vramd/kube/kube_client.h"
#include "vramd/status.h"

namespace vramd::kube {

enum class WebhookKind { kMutating, kValidating };

// "mutatingwebhookconfigurations" / "validatingwebhookconfigurations".
const char* WebhookResource(WebhookKind kind);
// "MutatingWebhookConfiguration" / "ValidatingWebhookConfiguration".
const char* WebhookKindName(WebhookKind kind);

// The JSON patch (RFC 6902) that sets clientConfig.caBundle of every webhook
// of `config_json` (a configuration of `kind` as the API server returns it)
// to base64(ca_pem), only where it differs. Each set is preceded by a `test`
// of that webhook's name, so a configuration whose webhooks were reordered or
// replaced between the GET and the PATCH is refused as a whole instead of
// patched at the wrong place. nullopt: every webhook has it already.
// kInvalidArgument: the body is not a configuration of `kind`, has no
// webhooks, or a webhook has no name or no clientConfig. Pure.
Result<std::optional<std::string>> CaBundlePatch(WebhookKind kind, std::string_view config_json,
                                                 const std::string& ca_pem);

class WebhookClient {
 public:
  virtual ~WebhookClient() = default;

  // GET /apis/admissionregistration.k8s.io/v1/<resource>/<name>: the body.
  // Errors map as KubeClient's (404 kNotFound, 403 kInternal naming RBAC, 5xx
  // and transport kUnavailable).
  virtual Result<std::string> GetWebhookConfiguration(WebhookKind kind, const std::string& name) = 0;
  // PATCH of the same with `json_patch` (application/json-patch+json). A
  // failed `test` is the API server's 422 (kInvalidArgument).
  virtual Status PatchWebhookConfiguration(WebhookKind kind, const std::string& name,
                                           const std::string& json_patch) = 0;
};

// The REST client (NewRestClient's options and errors).
Result<std::unique_ptr<WebhookClient>> NewWebhookClient(const Options& opts);

}  // namespace vramd::kube
