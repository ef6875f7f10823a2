// `vramd ensure-secrets`: creates the chart's Secrets when they are absent,
// run as an init container before vramd (and Valkey) start, so that the
// chart renders no secret material (GitOps- and `helm template`-safe) and
// every replica and restart uses the same values.
//
//   vramd ensure-secrets --namespace NS [--tls-secret NAME --dns-names a,b,...]
//                        [--token-secret NAME] [--valkey-secret NAME]
//                        [--label KEY=VALUE]... [--kube-api URL --kube-token-file F --kube-ca-file F]
//   vramd ensure-secrets --namespace NS --ca-bundle-secret NAME
//                        [--mutating-webhook NAME]... [--validating-webhook NAME]...
//
// The second form (the chart's post-install/post-upgrade hook, once its
// webhook configurations exist) reads ca.crt of the TLS Secret NAME and sets
// it as clientConfig.caBundle of every webhook of the named configurations
// (SetWebhookCaBundles): the chart renders no caBundle, so Helm's three-way
// merge on upgrade leaves the patched value alone.
//
// Each named Secret is created with one POST (the API server creates it
// atomically); when it already exists (409: made earlier, or by a run starting
// at the same time) it is read back and used only when it is one ensure-secrets
// made: every label ensure-secrets puts on it (managed-by and the --label ones),
// its type, and every key with a value (CheckExistingSecret). Anything else is
// an error naming the Secret: whoever may create Secrets in the namespace must
// not be able to plant one (a known password, their own CA) that vramd then
// trusts. Nothing is ever updated or deleted: rotation is deleting the Secret
// and restarting.
//   TLS Secret (type kubernetes.io/tls): ca.crt, tls.crt, tls.key (server,
//     valid for the DNS names), client.crt, client.key (CN vramd-scheduler,
//     for kube-scheduler); one CA signs both, its key is discarded
//     (tls_bundle.h).
//   Token Secret (Opaque): token; Valkey Secret (Opaque): password; each 32
//     random bytes as 64 hex characters.
// Every Secret carries the label app.kubernetes.io/managed-by=vramd-ensure-secrets
// and the --label ones. The API server is reached like vramd's (in-cluster
// service account, or the --kube-* flags); the service account needs
// `create` on secrets in NS and `get` on the named Secrets, nothing else.
#pragma once

#include <chrono>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "daemon/tls_bundle.h"
#include "vramd/kube/kube_client.h"
#include "vramd/kube/secret_reader.h"
#include "vramd/kube/secrets.h"
#include "vramd/kube/webhooks.h"
#include "vramd/status.h"

namespace vramd::daemon {

inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kManagedByValue = "vramd-ensure-secrets";

struct EnsureSecretsOptions {
  bool help = false;  // --help / -h: print the usage, do nothing else
  std::string ns;
  std::string tls_secret;              // "" = no TLS Secret
  std::vector<std::string> dns_names;  // with tls_secret
  std::string token_secret;
  std::string valkey_secret;
  std::map<std::string, std::string> labels;  // --label, beside the managed-by one
  std::string ca_bundle_secret;               // --ca-bundle-secret: the TLS Secret whose ca.crt goes into webhooks
  std::vector<std::pair<kube::WebhookKind, std::string>> webhooks;  // --mutating-webhook, --validating-webhook
  kube::Options kube;                         // api_url, token_file, ca_file, timeout_ms
};

// Parses the arguments after "ensure-secrets" (`--flag value` or
// `--flag=value`). kInvalidArgument naming the flag: an unknown flag, a
// missing value, no --namespace, nothing to do (no Secret, no CA bundle),
// --tls-secret without --dns-names or the reverse, --ca-bundle-secret without
// a webhook configuration or the reverse, a name that is not a valid
// Kubernetes name, two flags naming the same Secret, a label not KEY=VALUE. Pure.
Result<EnsureSecretsOptions> ParseEnsureSecretsArgs(const std::vector<std::string>& args);

// The generated values; only those of the Secrets asked for are set.
struct SecretMaterial {
  TlsBundle tls;
  std::string token;
  std::string valkey_password;
};

// Makes the values of the Secrets `opts` names (certificates, random hex).
Result<SecretMaterial> GenerateMaterial(const EnsureSecretsOptions& opts);

// The Secrets to create, in the order TLS, token, Valkey, only those named. Pure.
std::vector<kube::Secret> SecretsToCreate(const EnsureSecretsOptions& opts, const SecretMaterial& material);

// Whether `got`, a Secret found under the name of `want` (one of
// SecretsToCreate), is one ensure-secrets made: every label of `want` with the
// same value, the same type, and every key of `want` present with a non-empty
// value (further labels and keys are allowed). kInvalidArgument naming the
// Secret, what differs, and what to do. Pure.
Status CheckExistingSecret(const kube::Secret& want, const kube::Secret& got);

// Creates each Secret. Writes one line per Secret to `out`
// ("secret NS/NAME: created (...)" or "secret NS/NAME: exists, checked
// (...)") and each error to `err`. On a 409 the existing Secret is read with
// `reader` and must pass CheckExistingSecret, or the run fails. A transport
// error or 5xx (kUnavailable) is tried again up to `attempts` times in all,
// `pause` apart (safe: a POST whose answer was lost finds its Secret on the
// next try, 409). Returns the exit status: 0 when every Secret exists now and
// is ensure-secrets', 1 otherwise (every Secret is still tried).
int EnsureSecrets(kube::SecretClient& client, kube::SecretReader& reader, const std::vector<kube::Secret>& secrets,
                  std::ostream& out, std::ostream& err, int attempts = 5,
                  std::chrono::milliseconds pause = std::chrono::seconds(1));

// Sets ca.crt of the Secret NS/`ca_secret` as the caBundle of every webhook
// of each configuration in `webhooks` (GET, CaBundlePatch, PATCH only what
// differs). Writes one line per configuration to `out` ("mutatingwebhook
// configurations/NAME: caBundle set on 2 webhooks (CA from secret NS/S)" or
// "...: caBundle already set") and each error to `err`. The Secret must hold
// a PEM certificate under ca.crt; a configuration that does not exist is an
// error (the hook runs after the chart created them). kUnavailable is tried
// again as EnsureSecrets does; a PATCH refused by its `test` (the
// configuration changed meanwhile) is tried again from the GET. Returns 0 when
// every configuration carries the CA now, 1 otherwise (each is still tried).
int SetWebhookCaBundles(kube::WebhookClient& client, kube::SecretReader& reader, const std::string& ns,
                        const std::string& ca_secret,
                        const std::vector<std::pair<kube::WebhookKind, std::string>>& webhooks, std::ostream& out,
                        std::ostream& err, int attempts = 5, std::chrono::milliseconds pause = std::chrono::seconds(1));

// The subcommand: argv[0] is "ensure-secrets". Exit status 0 done, 1 an
// API error, 2 bad arguments or no API server to talk to.
int EnsureSecretsMain(int argc, char** argv);

}  // namespace vramd::daemon
