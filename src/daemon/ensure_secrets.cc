#include "daemon/ensure_secrets.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

#include "daemon/logging.h"
#include "vramd/parse.h"

namespace vramd::daemon {
namespace {

constexpr int kRandomBytes = 32;
constexpr std::string_view kFlags[] = {"--namespace",        "--tls-secret",       "--dns-names",
                                       "--token-secret",     "--valkey-secret",    "--label",
                                       "--kube-api",         "--kube-token-file",  "--kube-ca-file",
                                       "--kube-timeout-ms",  "--ca-bundle-secret", "--mutating-webhook",
                                       "--validating-webhook"};

const char* kUsage = R"(Usage: vramd ensure-secrets --namespace NS [--tls-secret NAME --dns-names a,b,...]
                            [--token-secret NAME] [--valkey-secret NAME] [--label KEY=VALUE]...
                            [--kube-api URL] [--kube-token-file FILE] [--kube-ca-file FILE]
                            [--kube-timeout-ms MS]
       vramd ensure-secrets --namespace NS --ca-bundle-secret NAME
                            [--mutating-webhook NAME]... [--validating-webhook NAME]...

Creates each named Secret in NS when it does not exist; never changes one that does
(rotation: delete the Secret, then restart the pods that use it). An existing Secret is
used only when it carries the labels below, its type and every key listed: anything else
is an error (exit 1), never trusted. Run as a Job before vramd starts (the Helm chart).
  --tls-secret NAME    type kubernetes.io/tls: ca.crt, tls.crt, tls.key (server certificate for
                       --dns-names: DNS names or IP addresses), client.crt, client.key (client
                       certificate CN=vramd-scheduler); one CA (EC P-256, 10 years) signs both
                       (5 years); the CA key is discarded
  --token-secret NAME  key `token`: the /v1 API bearer token (32 random bytes, hex)
  --valkey-secret NAME key `password`: the Valkey password (32 random bytes, hex)
  --label KEY=VALUE    a label on each Secret created (repeatable), beside
                       app.kubernetes.io/managed-by=vramd-ensure-secrets
  --ca-bundle-secret NAME  after the webhook configurations exist (a post-install hook): set
                       ca.crt of the TLS Secret NAME as clientConfig.caBundle of every webhook of
                       each --mutating-webhook / --validating-webhook configuration (only where it
                       differs; needs `get` on that Secret and `get`, `patch` on those configurations)
The API server: in-cluster service account by default (it needs `create` on secrets in NS
and `get` on the named ones), or --kube-api with --kube-token-file and --kube-ca-file.
Exit status: 0 every Secret exists and is ensure-secrets', 1 an API error or a Secret
ensure-secrets did not make, 2 bad arguments.
)";

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// RFC 1123 label (a namespace): lower-case letters, digits and '-', at most
// 63, starting and ending with a letter or digit.
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

// RFC 1123 subdomain (a Secret's name): labels joined by '.', at most 253.
bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// A label value, or the name part of a label key: at most 63 of
// [A-Za-z0-9._-], beginning and ending with a letter or digit.
bool IsLabelName(const std::string& s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool IsLabelKey(const std::string& k) {
  size_t slash = k.rfind('/');
  if (slash == std::string::npos) return IsLabelName(k);
  return IsDnsSubdomain(k.substr(0, slash)) && IsLabelName(k.substr(slash + 1));
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

Status BadFlag(const std::string& flag, const std::string& why) { return InvalidArgument(flag + ": " + why); }

// Runs `call` until it answers something other than kUnavailable, `attempts` times at most.
template <typename Call>
auto Retried(Call call, int attempts, std::chrono::milliseconds pause, std::ostream& err) {
  for (int attempt = 1;; ++attempt) {
    auto r = call();
    Status st;
    if constexpr (std::is_same_v<decltype(r), Status>) {
      st = r;
    } else {
      st = r.status();
    }
    if (st.code() != Code::kUnavailable || attempt >= attempts) return r;
    err << "vramd ensure-secrets: " << st.message() << " (attempt " << attempt << " of " << attempts
        << "; trying again)\n";
    std::this_thread::sleep_for(pause);
  }
}

std::string Describe(const kube::Secret& s) {
  std::string keys;
  for (const auto& [k, v] : s.data) keys += (keys.empty() ? "" : ", ") + k;
  return s.type + ": " + keys;
}

}  // namespace

Result<EnsureSecretsOptions> ParseEnsureSecretsArgs(const std::vector<std::string>& args) {
  EnsureSecretsOptions o;
  std::string dns_names;
  bool dns_names_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    if (flag == "--help" || flag == "-h") {
      o.help = true;
      return o;
    }
    if (flag.rfind("--", 0) != 0) return InvalidArgument("unexpected argument \"" + flag + "\" (see --help)");
    const size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    }
    if (std::find(std::begin(kFlags), std::end(kFlags), flag) == std::end(kFlags)) {
      return InvalidArgument("unknown flag " + flag + " (see vramd ensure-secrets --help)");
    }
    if (eq == std::string::npos) {
      if (i + 1 >= args.size()) return BadFlag(flag, "needs a value");
      value = args[++i];
    }
    if (flag == "--namespace") {
      if (!IsDnsLabel(value)) return BadFlag(flag, "\"" + value + "\" is not a namespace name");
      o.ns = value;
    } else if (flag == "--tls-secret" || flag == "--token-secret" || flag == "--valkey-secret") {
      if (!IsDnsSubdomain(value)) return BadFlag(flag, "\"" + value + "\" is not a valid Secret name");
      (flag == "--tls-secret" ? o.tls_secret : flag == "--token-secret" ? o.token_secret : o.valkey_secret) = value;
    } else if (flag == "--ca-bundle-secret") {
      if (!IsDnsSubdomain(value)) return BadFlag(flag, "\"" + value + "\" is not a valid Secret name");
      o.ca_bundle_secret = value;
    } else if (flag == "--mutating-webhook" || flag == "--validating-webhook") {
      if (!IsDnsSubdomain(value)) return BadFlag(flag, "\"" + value + "\" is not a valid configuration name");
      const kube::WebhookKind kind =
          flag == "--mutating-webhook" ? kube::WebhookKind::kMutating : kube::WebhookKind::kValidating;
      if (std::find(o.webhooks.begin(), o.webhooks.end(), std::pair{kind, value}) == o.webhooks.end()) {
        o.webhooks.emplace_back(kind, value);
      }
    } else if (flag == "--dns-names") {
      dns_names = value;
      dns_names_given = true;
    } else if (flag == "--label") {
      size_t eq = value.find('=');
      if (eq == std::string::npos) return BadFlag(flag, "\"" + value + "\" is not KEY=VALUE");
      std::string k = value.substr(0, eq), v = value.substr(eq + 1);
      if (!IsLabelKey(k)) return BadFlag(flag, "\"" + k + "\" is not a valid label key");
      if (!v.empty() && !IsLabelName(v)) return BadFlag(flag, "\"" + v + "\" is not a valid label value");
      o.labels[k] = v;
    } else if (flag == "--kube-api") {
      o.kube.api_url = value;
    } else if (flag == "--kube-token-file") {
      o.kube.token_file = value;
    } else if (flag == "--kube-ca-file") {
      o.kube.ca_file = value;
    } else if (flag == "--kube-timeout-ms") {
      std::optional<int> ms = ParseSmallInt(value, 60'000);
      if (!ms || *ms < 100) return BadFlag(flag, "expected milliseconds from 100 to 60000");
      o.kube.timeout_ms = *ms;
    }
  }
  if (o.ns.empty()) return BadFlag("--namespace", "is required");
  if (o.tls_secret.empty() && o.token_secret.empty() && o.valkey_secret.empty() && o.ca_bundle_secret.empty() &&
      o.webhooks.empty()) {
    return InvalidArgument("nothing to do: name at least one of --tls-secret, --token-secret, --valkey-secret, "
                           "--ca-bundle-secret");
  }
  if (!o.ca_bundle_secret.empty() && o.webhooks.empty()) {
    return BadFlag("--ca-bundle-secret", "needs --mutating-webhook or --validating-webhook");
  }
  if (o.ca_bundle_secret.empty() && !o.webhooks.empty()) {
    return BadFlag(o.webhooks.front().first == kube::WebhookKind::kMutating ? "--mutating-webhook"
                                                                             : "--validating-webhook",
                   "needs --ca-bundle-secret");
  }
  if (!o.tls_secret.empty() && !dns_names_given) return BadFlag("--tls-secret", "needs --dns-names");
  if (o.tls_secret.empty() && dns_names_given) return BadFlag("--dns-names", "needs --tls-secret");
  if (dns_names_given) {
    for (const std::string& n : SplitComma(dns_names)) {
      if (n.empty()) return BadFlag("--dns-names", "an empty name in \"" + dns_names + "\"");
      o.dns_names.push_back(n);
    }
  }
  const std::vector<std::pair<const char*, const std::string*>> named = {
      {"--tls-secret", &o.tls_secret}, {"--token-secret", &o.token_secret}, {"--valkey-secret", &o.valkey_secret}};
  for (size_t a = 0; a < named.size(); ++a) {
    for (size_t b = a + 1; b < named.size(); ++b) {
      if (!named[a].second->empty() && *named[a].second == *named[b].second) {
        return InvalidArgument(std::string(named[a].first) + " and " + named[b].first + " name the same Secret \"" +
                               *named[a].second + "\"");
      }
    }
  }
  return o;
}

Result<SecretMaterial> GenerateMaterial(const EnsureSecretsOptions& opts) {
  SecretMaterial m;
  if (!opts.tls_secret.empty()) {
    TlsBundleOptions t;
    t.dns_names = opts.dns_names;
    Result<TlsBundle> b = GenerateTlsBundle(t);
    if (!b.ok()) return Status(b.status().code(), "--dns-names: " + b.status().message());
    m.tls = std::move(b).value();
  }
  for (auto [name, out] : {std::pair{&opts.token_secret, &m.token}, {&opts.valkey_secret, &m.valkey_password}}) {
    if (name->empty()) continue;
    Result<std::string> hex = RandomHex(kRandomBytes);
    if (!hex.ok()) return hex.status();
    *out = std::move(hex).value();
  }
  return m;
}

std::vector<kube::Secret> SecretsToCreate(const EnsureSecretsOptions& opts, const SecretMaterial& m) {
  std::vector<kube::Secret> out;
  auto add = [&](const std::string& name, const char* type, std::map<std::string, std::string> data) {
    if (name.empty()) return;
    kube::Secret s;
    s.ns = opts.ns;
    s.name = name;
    s.type = type;
    s.data = std::move(data);
    s.labels = opts.labels;
    s.labels.emplace(kManagedByLabel, kManagedByValue);  // a --label of the same key wins
    out.push_back(std::move(s));
  };
  add(opts.tls_secret, "kubernetes.io/tls",
      {{"ca.crt", m.tls.ca_crt},
       {"tls.crt", m.tls.tls_crt},
       {"tls.key", m.tls.tls_key},
       {"client.crt", m.tls.client_crt},
       {"client.key", m.tls.client_key}});
  add(opts.token_secret, "Opaque", {{"token", m.token}});
  add(opts.valkey_secret, "Opaque", {{"password", m.valkey_password}});
  return out;
}

Status CheckExistingSecret(const kube::Secret& want, const kube::Secret& got) {
  std::vector<std::string> wrong;
  for (const auto& [k, v] : want.labels) {
    auto it = got.labels.find(k);
    if (it == got.labels.end()) {
      wrong.push_back("no label " + k + "=" + v);
    } else if (it->second != v) {
      wrong.push_back("label " + k + "=" + it->second + ", expected " + v);
    }
  }
  if (got.type != want.type) wrong.push_back("type " + got.type + ", expected " + want.type);
  for (const auto& [k, v] : want.data) {
    auto it = got.data.find(k);
    if (it == got.data.end()) {
      wrong.push_back("no key " + k);
    } else if (it->second.empty()) {
      wrong.push_back("key " + k + " is empty");
    }
  }
  if (wrong.empty()) return Status::Ok();
  std::string why;
  for (const std::string& w : wrong) why += (why.empty() ? "" : "; ") + w;
  return InvalidArgument("secret " + want.ns + "/" + want.name +
                            " exists but is not one vramd ensure-secrets made (" + why +
                            "); refusing to use it. Delete it to have a new one made, or give your own Secret "
                            "to the chart as existingSecret");
}

int EnsureSecrets(kube::SecretClient& client, kube::SecretReader& reader, const std::vector<kube::Secret>& secrets,
                  std::ostream& out, std::ostream& err, int attempts, std::chrono::milliseconds pause) {
  auto retried = [&](auto call) { return Retried(call, attempts, pause, err); };
  int rc = 0;
  for (const kube::Secret& s : secrets) {
    const std::string ref = "secret " + s.ns + "/" + s.name;
    Status st = retried([&] { return client.CreateSecret(s); });
    if (st.ok()) {
      out << ref << ": created (" << Describe(s) << ")\n";
      continue;
    }
    if (st.code() == Code::kConflict) {
      Result<kube::Secret> got = retried([&] { return reader.GetSecret(s.ns, s.name); });
      st = got.ok() ? CheckExistingSecret(s, *got) : got.status();
      if (st.ok()) {
        out << ref << ": exists, checked (" << Describe(*got) << ")\n";
        continue;
      }
    }
    err << "vramd ensure-secrets: " << st.message() << "\n";
    rc = 1;
  }
  return rc;
}

int SetWebhookCaBundles(kube::WebhookClient& client, kube::SecretReader& reader, const std::string& ns,
                        const std::string& ca_secret,
                        const std::vector<std::pair<kube::WebhookKind, std::string>>& webhooks, std::ostream& out,
                        std::ostream& err, int attempts, std::chrono::milliseconds pause) {
  auto retried = [&](auto call) { return Retried(call, attempts, pause, err); };
  const std::string from = "secret " + ns + "/" + ca_secret;
  Result<kube::Secret> secret = retried([&] { return reader.GetSecret(ns, ca_secret); });
  if (!secret.ok()) {
    err << "vramd ensure-secrets: " << secret.status().message() << "\n";
    return 1;
  }
  auto ca = secret->data.find("ca.crt");
  if (ca == secret->data.end() || ca->second.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    err << "vramd ensure-secrets: " << from
        << " has no PEM certificate under ca.crt: the webhooks' caBundle is the CA that signed vramd's "
           "serving certificate\n";
    return 1;
  }
  int rc = 0;
  for (const auto& webhook : webhooks) {
    // Named copies: lambdas below capture them (clang 14, which builds the
    // fuzz targets, cannot capture structured bindings).
    const auto& kind = webhook.first;
    const auto& name = webhook.second;
    const std::string ref = std::string(kube::WebhookResource(kind)) + "/" + name;
    Status st;
    // A PATCH whose `test` fails (the configuration changed after the GET) starts again from the GET.
    for (int round = 1; round <= attempts; ++round) {
      Result<std::string> body = retried([&] { return client.GetWebhookConfiguration(kind, name); });
      if (!body.ok()) {
        st = body.status();
        break;
      }
      Result<std::optional<std::string>> patch = kube::CaBundlePatch(kind, *body, ca->second);
      if (!patch.ok()) {
        st = Status(patch.status().code(), ref + ": " + patch.status().message());
        break;
      }
      if (!*patch) {
        out << ref << ": caBundle already set (CA from " << from << ")\n";
        st = Status::Ok();
        break;
      }
      st = retried([&] { return client.PatchWebhookConfiguration(kind, name, **patch); });
      if (st.ok()) {
        out << ref << ": caBundle set (CA from " << from << ")\n";
        break;
      }
      if (st.code() != Code::kInvalidArgument) break;
      err << "vramd ensure-secrets: " << st.message() << " (round " << round << " of " << attempts
          << "; reading the configuration again)\n";
    }
    if (!st.ok()) {
      err << "vramd ensure-secrets: " << st.message() << "\n";
      rc = 1;
    }
  }
  return rc;
}

int EnsureSecretsMain(int argc, char** argv) {
  Result<EnsureSecretsOptions> opts = ParseEnsureSecretsArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!opts.ok()) {
    std::cerr << "vramd ensure-secrets: " << opts.status().message() << "\n";
    return 2;
  }
  if (opts->help) {
    std::cout << kUsage;
    return 0;
  }
  SetupLogging("info", false);
  Result<std::unique_ptr<kube::SecretClient>> client = kube::NewSecretClient(opts->kube);
  if (!client.ok()) {
    std::cerr << "vramd ensure-secrets: " << client.status().message() << "\n";
    return 2;
  }
  Result<std::unique_ptr<kube::SecretReader>> reader = kube::NewSecretReader(opts->kube);
  if (!reader.ok()) {
    std::cerr << "vramd ensure-secrets: " << reader.status().message() << "\n";
    return 2;
  }
  Result<SecretMaterial> material = GenerateMaterial(*opts);
  if (!material.ok()) {
    std::cerr << "vramd ensure-secrets: " << material.status().message() << "\n";
    return 2;
  }
  int rc = EnsureSecrets(**client, **reader, SecretsToCreate(*opts, *material), std::cout, std::cerr);
  if (!opts->ca_bundle_secret.empty()) {
    Result<std::unique_ptr<kube::WebhookClient>> webhooks = kube::NewWebhookClient(opts->kube);
    if (!webhooks.ok()) {
      std::cerr << "vramd ensure-secrets: " << webhooks.status().message() << "\n";
      return 2;
    }
    rc |= SetWebhookCaBundles(**webhooks, **reader, opts->ns, opts->ca_bundle_secret, opts->webhooks, std::cout,
                              std::cerr);
  }
  return rc;
}

}  // namespace vramd::daemon
