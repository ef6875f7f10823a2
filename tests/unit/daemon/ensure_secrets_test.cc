// `vramd ensure-secrets` (src/daemon/ensure_secrets.cc): its flags, the
// Secrets it builds, and what it does with each answer of the API server
// (a fake SecretClient here; the REST client in tests/unit/kube, the binary
// against a local API stub in tests/integration/ensure_secrets_test.cc).
#include "daemon/ensure_secrets.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

namespace vramd::daemon {
namespace {

struct ParseCase {
  const char* name;
  std::vector<std::string> args;
  const char* error_part;  // null: accepted
};

class ParsesEnsureSecretsArgs : public ::testing::TestWithParam<ParseCase> {};

TEST_P(ParsesEnsureSecretsArgs, OrNamesTheProblem) {
  const ParseCase& c = GetParam();
  Result<EnsureSecretsOptions> o = ParseEnsureSecretsArgs(c.args);
  if (c.error_part == nullptr) {
    EXPECT_TRUE(o.ok()) << o.status().ToString();
  } else {
    ASSERT_FALSE(o.ok());
    EXPECT_EQ(o.status().code(), Code::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.error_part), std::string::npos) << o.status().message();
  }
}

using V = std::vector<std::string>;
INSTANTIATE_TEST_SUITE_P(
    EnsureSecrets, ParsesEnsureSecretsArgs,
    ::testing::Values(
        ParseCase{"AllThree", V{"--namespace", "gpu", "--tls-secret", "vramd-tls", "--dns-names", "a.gpu.svc,b",
                                "--token-secret", "vramd-token", "--valkey-secret", "vramd-valkey"},
                  nullptr},
        ParseCase{"EqualsForm", V{"--namespace=gpu", "--token-secret=t"}, nullptr},
        ParseCase{"KubeFlags", V{"--namespace", "gpu", "--valkey-secret", "v", "--kube-api", "https://h:6443",
                                 "--kube-token-file", "/t", "--kube-ca-file", "/ca", "--kube-timeout-ms", "2000"},
                  nullptr},
        ParseCase{"Labels", V{"--namespace", "gpu", "--token-secret", "t", "--label", "app.kubernetes.io/instance=v1",
                              "--label", "team="},
                  nullptr},
        ParseCase{"NoNamespace", V{"--token-secret", "t"}, "--namespace: is required"},
        ParseCase{"NothingToDo", V{"--namespace", "gpu"}, "nothing to do"},
        ParseCase{"CaBundle", V{"--namespace", "gpu", "--ca-bundle-secret", "vramd-tls", "--mutating-webhook",
                                "vramd-gpu", "--validating-webhook=vramd-gpu"},
                  nullptr},
        ParseCase{"CaBundleWithoutWebhooks", V{"--namespace", "gpu", "--ca-bundle-secret", "vramd-tls"},
                  "--ca-bundle-secret: needs --mutating-webhook or --validating-webhook"},
        ParseCase{"WebhookWithoutCaBundle", V{"--namespace", "gpu", "--validating-webhook", "v"},
                  "--validating-webhook: needs --ca-bundle-secret"},
        ParseCase{"BadWebhookName", V{"--namespace", "gpu", "--ca-bundle-secret", "t", "--mutating-webhook", "V_1"},
                  "--mutating-webhook: \"V_1\" is not a valid configuration name"},
        ParseCase{"BadCaBundleSecret", V{"--namespace", "gpu", "--ca-bundle-secret", "-t", "--mutating-webhook", "m"},
                  "--ca-bundle-secret: \"-t\" is not a valid Secret name"},
        ParseCase{"TlsWithoutNames", V{"--namespace", "gpu", "--tls-secret", "t"}, "--tls-secret: needs --dns-names"},
        ParseCase{"NamesWithoutTls", V{"--namespace", "gpu", "--token-secret", "t", "--dns-names", "a"},
                  "--dns-names: needs --tls-secret"},
        ParseCase{"EmptyDnsName", V{"--namespace", "gpu", "--tls-secret", "t", "--dns-names", "a,,b"},
                  "an empty name"},
        ParseCase{"UpperCaseSecretName", V{"--namespace", "gpu", "--token-secret", "Token"},
                  "--token-secret: \"Token\" is not a valid Secret name"},
        ParseCase{"BadNamespace", V{"--namespace", "gpu.ns", "--token-secret", "t"}, "not a namespace name"},
        ParseCase{"SameSecretTwice", V{"--namespace", "gpu", "--token-secret", "s", "--valkey-secret", "s"},
                  "--token-secret and --valkey-secret name the same Secret"},
        ParseCase{"LabelWithoutValue", V{"--namespace", "gpu", "--token-secret", "t", "--label", "team"},
                  "is not KEY=VALUE"},
        ParseCase{"BadLabelValue", V{"--namespace", "gpu", "--token-secret", "t", "--label", "team=a b"},
                  "not a valid label value"},
        ParseCase{"UnknownFlag", V{"--namespace", "gpu", "--token-secret", "t", "--force"}, "unknown flag --force"},
        ParseCase{"MissingValue", V{"--namespace", "gpu", "--token-secret"}, "--token-secret: needs a value"},
        ParseCase{"Positional", V{"gpu"}, "unexpected argument"},
        ParseCase{"BadTimeout", V{"--namespace", "gpu", "--token-secret", "t", "--kube-timeout-ms", "5"},
                  "--kube-timeout-ms"}),
    [](const auto& info) { return info.param.name; });

TEST(EnsureSecrets, ParsesEveryValue) {
  Result<EnsureSecretsOptions> o = ParseEnsureSecretsArgs(
      {"--namespace", "gpu", "--tls-secret", "vramd-tls", "--dns-names", "vramd.gpu.svc,vramd-api.gpu.svc",
       "--token-secret=vramd-token", "--valkey-secret", "vramd-valkey", "--label", "app.kubernetes.io/instance=v",
       "--kube-api", "https://10.0.0.1:6443", "--kube-token-file", "/t", "--kube-ca-file", "/ca"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->help);
  EXPECT_EQ(o->ns, "gpu");
  EXPECT_EQ(o->tls_secret, "vramd-tls");
  EXPECT_EQ(o->dns_names, (std::vector<std::string>{"vramd.gpu.svc", "vramd-api.gpu.svc"}));
  EXPECT_EQ(o->token_secret, "vramd-token");
  EXPECT_EQ(o->valkey_secret, "vramd-valkey");
  EXPECT_EQ(o->labels, (std::map<std::string, std::string>{{"app.kubernetes.io/instance", "v"}}));
  EXPECT_EQ(o->kube.api_url, "https://10.0.0.1:6443");
  EXPECT_EQ(o->kube.token_file, "/t");
  EXPECT_EQ(o->kube.ca_file, "/ca");
  EXPECT_TRUE(ParseEnsureSecretsArgs({"--help"})->help);
  EXPECT_TRUE(ParseEnsureSecretsArgs({"--namespace", "x", "-h"})->help);
}

EnsureSecretsOptions AllThree() {
  Result<EnsureSecretsOptions> o =
      ParseEnsureSecretsArgs({"--namespace", "gpu", "--tls-secret", "vramd-tls", "--dns-names", "vramd.gpu.svc",
                              "--token-secret", "vramd-token", "--valkey-secret", "vramd-valkey"});
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return o.ok() ? *o : EnsureSecretsOptions{};
}

TEST(EnsureSecrets, BuildsTheSecretsOfTheContract) {
  SecretMaterial m;
  m.tls = {"CA", "CRT", "KEY", "CCRT", "CKEY"};
  m.token = "tok";
  m.valkey_password = "pw";
  EnsureSecretsOptions opts = AllThree();
  opts.labels = {{"app.kubernetes.io/instance", "v"}};
  std::vector<kube::Secret> s = SecretsToCreate(opts, m);
  ASSERT_EQ(s.size(), 3u);
  const std::map<std::string, std::string> labels = {{"app.kubernetes.io/instance", "v"},
                                                     {"app.kubernetes.io/managed-by", "vramd-ensure-secrets"}};
  EXPECT_EQ(s[0].ns, "gpu");
  EXPECT_EQ(s[0].name, "vramd-tls");
  EXPECT_EQ(s[0].type, "kubernetes.io/tls");
  EXPECT_EQ(s[0].data, (std::map<std::string, std::string>{
                           {"ca.crt", "CA"}, {"tls.crt", "CRT"}, {"tls.key", "KEY"}, {"client.crt", "CCRT"},
                           {"client.key", "CKEY"}}));
  EXPECT_EQ(s[0].labels, labels);
  EXPECT_EQ(s[1].name, "vramd-token");
  EXPECT_EQ(s[1].type, "Opaque");
  EXPECT_EQ(s[1].data, (std::map<std::string, std::string>{{"token", "tok"}}));
  EXPECT_EQ(s[2].name, "vramd-valkey");
  EXPECT_EQ(s[2].data, (std::map<std::string, std::string>{{"password", "pw"}}));
  EXPECT_EQ(s[2].labels, labels);

  EnsureSecretsOptions only_token = opts;
  only_token.tls_secret.clear();
  only_token.valkey_secret.clear();
  std::vector<kube::Secret> one = SecretsToCreate(only_token, m);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "vramd-token");
}

TEST(EnsureSecrets, GeneratesOnlyWhatIsAskedForAndDifferentValues) {
  EnsureSecretsOptions opts = AllThree();
  Result<SecretMaterial> m = GenerateMaterial(opts);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->token.size(), 64u);
  EXPECT_EQ(m->valkey_password.size(), 64u);
  EXPECT_NE(m->token, m->valkey_password);
  EXPECT_NE(m->tls.tls_crt.find("BEGIN CERTIFICATE"), std::string::npos);

  opts.tls_secret.clear();
  opts.valkey_secret.clear();
  Result<SecretMaterial> token_only = GenerateMaterial(opts);
  ASSERT_TRUE(token_only.ok());
  EXPECT_TRUE(token_only->tls.ca_crt.empty());
  EXPECT_TRUE(token_only->valkey_password.empty());
  EXPECT_EQ(token_only->token.size(), 64u);
}

// Answers each CreateSecret from a script of statuses per Secret name
// (empty: created), and each GetSecret with the Secret in `existing` (none:
// 404), after the statuses scripted in `get_answers`.
class ScriptedSecretClient : public kube::SecretClient, public kube::SecretReader {
 public:
  std::map<std::string, std::deque<Status>> answers;
  std::vector<std::string> calls;
  std::map<std::string, kube::Secret> existing;
  std::map<std::string, std::deque<Status>> get_answers;
  std::vector<std::string> gets;

  Result<kube::Secret> GetSecret(const std::string& ns, const std::string& name) override {
    gets.push_back(name);
    std::deque<Status>& q = get_answers[name];
    if (!q.empty()) {
      Status st = q.front();
      q.pop_front();
      return st;
    }
    auto it = existing.find(name);
    if (it == existing.end()) return NotFound("get secret " + ns + "/" + name + ": HTTP 404");
    return it->second;
  }

  Status CreateSecret(const kube::Secret& s) override {
    calls.push_back(s.name);
    std::deque<Status>& q = answers[s.name];
    if (q.empty()) return Status::Ok();
    Status st = q.front();
    q.pop_front();
    return st;
  }
};

std::vector<kube::Secret> Named(std::vector<std::string> names) {
  std::vector<kube::Secret> out;
  for (const std::string& n : names) {
    out.push_back(kube::Secret{"gpu", n, "Opaque", {{"k", "v"}}, {{kManagedByLabel, kManagedByValue}}});
  }
  return out;
}

TEST(EnsureSecrets, CreatesOrLeavesEachSecretAndSaysWhich) {
  ScriptedSecretClient client;
  client.answers["old"] = {Conflict("create secret gpu/old: HTTP 409: secrets \"old\" already exists")};
  client.existing["old"] = Named({"old"})[0];
  client.existing["old"].data["k"] = "the value made earlier";
  client.existing["old"].labels["helm.sh/chart"] = "vramd-1.0.0";  // more labels and keys are fine
  client.existing["old"].data["extra"] = "x";
  std::ostringstream out, err;
  EXPECT_EQ(EnsureSecrets(client, client, Named({"new", "old"}), out, err, 5, std::chrono::milliseconds(0)), 0);
  EXPECT_EQ(out.str(), "secret gpu/new: created (Opaque: k)\nsecret gpu/old: exists, checked (Opaque: extra, k)\n");
  EXPECT_EQ(client.gets, (std::vector<std::string>{"old"}));
  EXPECT_EQ(err.str(), "");
  EXPECT_EQ(client.calls, (std::vector<std::string>{"new", "old"}));
}

TEST(EnsureSecrets, AnApiErrorFailsTheRunButEverySecretIsTried) {
  ScriptedSecretClient client;
  client.answers["a"] = {Internal("create secret gpu/a: HTTP 403 (forbidden: check vramd's RBAC role): no")};
  std::ostringstream out, err;
  EXPECT_EQ(EnsureSecrets(client, client, Named({"a", "b"}), out, err, 5, std::chrono::milliseconds(0)), 1);
  EXPECT_EQ(out.str(), "secret gpu/b: created (Opaque: k)\n");
  EXPECT_NE(err.str().find("HTTP 403"), std::string::npos) << err.str();
  EXPECT_EQ(client.calls, (std::vector<std::string>{"a", "b"})) << "a 403 is not tried again";
}

TEST(EnsureSecrets, UnavailableIsTriedAgainUpToTheAttempts) {
  ScriptedSecretClient client;
  client.answers["a"] = {Unavailable("transport error"), Unavailable("HTTP 503"), Status::Ok()};
  client.answers["b"] = {Unavailable("x"), Unavailable("x"), Unavailable("x")};
  std::ostringstream out, err;
  EXPECT_EQ(EnsureSecrets(client, client, Named({"a", "b"}), out, err, 3, std::chrono::milliseconds(0)), 1);
  EXPECT_EQ(out.str(), "secret gpu/a: created (Opaque: k)\n");
  EXPECT_EQ(client.calls, (std::vector<std::string>{"a", "a", "a", "b", "b", "b"}));
  EXPECT_NE(err.str().find("attempt 2 of 3"), std::string::npos) << err.str();
}

TEST(EnsureSecrets, ALostAnswerThenConflictCountsAsExisting) {
  ScriptedSecretClient client;  // the first POST created it but its answer was lost
  client.answers["a"] = {Unavailable("read timeout"), Conflict("already exists")};
  client.existing["a"] = Named({"a"})[0];
  std::ostringstream out, err;
  EXPECT_EQ(EnsureSecrets(client, client, Named({"a"}), out, err, 5, std::chrono::milliseconds(0)), 0);
  EXPECT_EQ(out.str(), "secret gpu/a: exists, checked (Opaque: k)\n");
}

// Issue 33 item 6: someone with `create` on Secrets in the namespace plants one
// of the expected name before the chart is installed (their own password, CA or
// token). ensure-secrets must refuse it, naming it, and never say it exists.
TEST(EnsureSecrets, APlantedSecretWithoutTheLabelsOrKeysIsRefused) {
  ScriptedSecretClient client;
  for (const char* n : {"tls", "token", "valkey"}) client.answers[n] = {Conflict("already exists")};
  kube::Secret planted = Named({"valkey"})[0];
  planted.labels.clear();  // the attacker's own: no managed-by label
  planted.data = {{"k", "attacker-known-password"}};
  client.existing["valkey"] = planted;
  kube::Secret no_key = Named({"token"})[0];  // the label copied, a key missing
  no_key.data = {{"other", "x"}};
  client.existing["token"] = no_key;
  client.existing["tls"] = Named({"tls"})[0];  // the real one
  std::ostringstream out, err;
  EXPECT_EQ(EnsureSecrets(client, client, Named({"tls", "token", "valkey"}), out, err, 5, std::chrono::milliseconds(0)),
            1);
  EXPECT_EQ(out.str(), "secret gpu/tls: exists, checked (Opaque: k)\n") << "only the genuine one is accepted";
  EXPECT_NE(err.str().find("secret gpu/token exists but is not one vramd ensure-secrets made (no key k)"),
            std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("secret gpu/valkey exists but is not one vramd ensure-secrets made (no label "
                           "app.kubernetes.io/managed-by=vramd-ensure-secrets)"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(client.gets, (std::vector<std::string>{"tls", "token", "valkey"}));
}

TEST(EnsureSecrets, AGetErrorAfterAConflictFailsTheRunAndUnavailableIsTriedAgain) {
  ScriptedSecretClient client;
  client.answers["a"] = {Conflict("already exists")};
  client.answers["b"] = {Conflict("already exists")};
  client.existing["a"] = Named({"a"})[0];
  client.get_answers["a"] = {Unavailable("HTTP 503")};
  client.get_answers["b"] = {Internal("get secret gpu/b: HTTP 403 (forbidden)")};
  std::ostringstream out, err;
  EXPECT_EQ(EnsureSecrets(client, client, Named({"a", "b"}), out, err, 3, std::chrono::milliseconds(0)), 1);
  EXPECT_EQ(out.str(), "secret gpu/a: exists, checked (Opaque: k)\n");
  EXPECT_NE(err.str().find("HTTP 403"), std::string::npos) << err.str();
  EXPECT_EQ(client.gets, (std::vector<std::string>{"a", "a", "b"}));
}

TEST(EnsureSecrets, ParsesTheCaBundleFormKeepingEachConfigurationOnce) {
  Result<EnsureSecretsOptions> o =
      ParseEnsureSecretsArgs({"--namespace", "gpu", "--ca-bundle-secret", "vramd-tls", "--mutating-webhook", "m",
                              "--validating-webhook", "v", "--mutating-webhook", "m", "--validating-webhook", "m"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->ca_bundle_secret, "vramd-tls");
  using kube::WebhookKind;
  EXPECT_EQ(o->webhooks, (std::vector<std::pair<WebhookKind, std::string>>{
                             {WebhookKind::kMutating, "m"}, {WebhookKind::kValidating, "v"},
                             {WebhookKind::kValidating, "m"}}));
  EXPECT_TRUE(o->tls_secret.empty() && o->token_secret.empty() && o->valkey_secret.empty())
      << "the post-install form creates no Secret";
}

constexpr const char* kCaPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

// Webhook configurations kept as JSON; a PATCH applies the caBundle ops of
// the patch (after checking each `test`), or answers from `patch_answers`.
class FakeWebhooks : public kube::WebhookClient {
 public:
  std::map<std::string, nlohmann::json> configs;  // "m/NAME" or "v/NAME"
  std::map<std::string, std::deque<Status>> get_answers, patch_answers;
  std::vector<std::string> calls;
  std::function<void()> before_patch;  // e.g. someone reorders the webhooks meanwhile

  static std::string Key(kube::WebhookKind k, const std::string& n) {
    return (k == kube::WebhookKind::kMutating ? "m/" : "v/") + n;
  }
  Result<std::string> GetWebhookConfiguration(kube::WebhookKind kind, const std::string& name) override {
    const std::string key = Key(kind, name);
    calls.push_back("get " + key);
    if (auto& q = get_answers[key]; !q.empty()) {
      Status st = q.front();
      q.pop_front();
      return st;
    }
    auto it = configs.find(key);
    if (it == configs.end()) return NotFound("get " + key + ": HTTP 404");
    return it->second.dump();
  }
  Status PatchWebhookConfiguration(kube::WebhookKind kind, const std::string& name,
                                   const std::string& json_patch) override {
    const std::string key = Key(kind, name);
    calls.push_back("patch " + key);
    if (before_patch) std::exchange(before_patch, nullptr)();
    if (auto& q = patch_answers[key]; !q.empty()) {
      Status st = q.front();
      q.pop_front();
      return st;
    }
    nlohmann::json& c = configs.at(key);
    for (const nlohmann::json& op : nlohmann::json::parse(json_patch)) {
      const nlohmann::json::json_pointer at(op["path"].get<std::string>());
      if (op["op"] == "test" && c.at(at) != op["value"]) return InvalidArgument(key + ": HTTP 422: test failed");
    }
    for (const nlohmann::json& op : nlohmann::json::parse(json_patch)) {
      if (op["op"] == "add") c[nlohmann::json::json_pointer(op["path"].get<std::string>())] = op["value"];
    }
    return Status::Ok();
  }
};

nlohmann::json Config(const char* kind, std::vector<std::string> names) {
  nlohmann::json hooks = nlohmann::json::array();
  for (const std::string& n : names) {
    hooks.push_back({{"name", n}, {"clientConfig", {{"service", {{"name", "vramd"}, {"namespace", "gpu"}}}}}});
  }
  return {{"apiVersion", "admissionregistration.k8s.io/v1"}, {"kind", kind}, {"metadata", {{"name", "vramd"}}},
          {"webhooks", hooks}};
}

std::string BundleOf(const nlohmann::json& c, size_t i) {
  return c["webhooks"][i]["clientConfig"].value("caBundle", "");
}

struct CaBundleRun {
  ScriptedSecretClient secrets;
  FakeWebhooks hooks;
  std::ostringstream out, err;
  CaBundleRun() {
    secrets.existing["vramd-tls"] = kube::Secret{"gpu", "vramd-tls", "kubernetes.io/tls",
                                                 {{"ca.crt", kCaPem}, {"tls.crt", "x"}, {"tls.key", "y"}}, {}};
    hooks.configs["m/vramd"] = Config("MutatingWebhookConfiguration", {"mutate.vramd.io"});
    hooks.configs["v/vramd"] = Config("ValidatingWebhookConfiguration",
                                      {"validate.vramd.io", "validate-direct-bind.vramd.io", "queues.vramd.io"});
  }
  int Run(int attempts = 3) {
    return SetWebhookCaBundles(hooks, secrets, "gpu", "vramd-tls",
                               {{kube::WebhookKind::kMutating, "vramd"}, {kube::WebhookKind::kValidating, "vramd"}},
                               out, err, attempts, std::chrono::milliseconds(0));
  }
};

TEST(SetWebhookCaBundles, PutsTheCaIntoEveryWebhookOfEachConfigurationThenFindsItThere) {
  CaBundleRun r;
  ASSERT_EQ(r.Run(), 0) << r.err.str();
  EXPECT_EQ(r.out.str(),
            "mutatingwebhookconfigurations/vramd: caBundle set (CA from secret gpu/vramd-tls)\n"
            "validatingwebhookconfigurations/vramd: caBundle set (CA from secret gpu/vramd-tls)\n");
  EXPECT_EQ(BundleOf(r.hooks.configs["m/vramd"], 0), kube::Base64(kCaPem));
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(BundleOf(r.hooks.configs["v/vramd"], i), kube::Base64(kCaPem)) << i;
  EXPECT_EQ(r.secrets.gets, (std::vector<std::string>{"vramd-tls"}));

  // An upgrade's hook: nothing to change, nothing patched.
  CaBundleRun again;
  again.hooks.configs = r.hooks.configs;
  ASSERT_EQ(again.Run(), 0) << again.err.str();
  EXPECT_EQ(again.out.str(),
            "mutatingwebhookconfigurations/vramd: caBundle already set (CA from secret gpu/vramd-tls)\n"
            "validatingwebhookconfigurations/vramd: caBundle already set (CA from secret gpu/vramd-tls)\n");
  EXPECT_EQ(again.hooks.calls, (std::vector<std::string>{"get m/vramd", "get v/vramd"}));
}

TEST(SetWebhookCaBundles, AStaleCaIsReplaced) {
  CaBundleRun r;
  r.hooks.configs["m/vramd"]["webhooks"][0]["clientConfig"]["caBundle"] = kube::Base64("an old CA");
  ASSERT_EQ(r.Run(), 0) << r.err.str();
  EXPECT_EQ(BundleOf(r.hooks.configs["m/vramd"], 0), kube::Base64(kCaPem));
}

TEST(SetWebhookCaBundles, WebhooksReorderedBetweenGetAndPatchAreReadAgainNeverPatchedAtTheWrongPlace) {
  CaBundleRun r;
  bool swapped = false;
  r.hooks.before_patch = [&] {  // an upgrade or an admin swaps two webhooks meanwhile (once)
    auto& w = r.hooks.configs["v/vramd"]["webhooks"];
    w[0]["clientConfig"]["caBundle"] = "c3RhbGU=";  // and one of them carries another CA
    std::swap(w[0], w[1]);
    swapped = true;
  };
  int rc = SetWebhookCaBundles(r.hooks, r.secrets, "gpu", "vramd-tls", {{kube::WebhookKind::kValidating, "vramd"}},
                               r.out, r.err, 3, std::chrono::milliseconds(0));
  ASSERT_EQ(rc, 0) << r.err.str();
  EXPECT_TRUE(swapped);
  EXPECT_EQ(r.hooks.calls, (std::vector<std::string>{"get v/vramd", "patch v/vramd", "get v/vramd", "patch v/vramd"}))
      << "the PATCH refused by its `test` is followed by a new GET";
  EXPECT_NE(r.err.str().find("test failed (round 1 of 3; reading the configuration again)"), std::string::npos)
      << r.err.str();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(BundleOf(r.hooks.configs["v/vramd"], i), kube::Base64(kCaPem)) << i;
}

TEST(SetWebhookCaBundles, RefusesASecretWithoutACaAndNamesWhatFailed) {
  CaBundleRun r;
  r.secrets.existing["vramd-tls"].data.erase("ca.crt");
  EXPECT_EQ(r.Run(), 1);
  EXPECT_NE(r.err.str().find("secret gpu/vramd-tls has no PEM certificate under ca.crt"), std::string::npos)
      << r.err.str();
  EXPECT_TRUE(r.hooks.calls.empty()) << "no configuration is touched without a CA";

  CaBundleRun junk;
  junk.secrets.existing["vramd-tls"].data["ca.crt"] = "not a certificate";
  EXPECT_EQ(junk.Run(), 1);
  EXPECT_TRUE(junk.hooks.calls.empty());

  CaBundleRun missing;
  missing.secrets.existing.clear();
  EXPECT_EQ(missing.Run(), 1);
  EXPECT_NE(missing.err.str().find("HTTP 404"), std::string::npos) << missing.err.str();
}

TEST(SetWebhookCaBundles, AMissingConfigurationFailsTheRunButTheOtherIsStillPatched) {
  CaBundleRun r;
  r.hooks.configs.erase("m/vramd");
  r.hooks.get_answers["v/vramd"] = {Unavailable("HTTP 503")};
  r.hooks.patch_answers["v/vramd"] = {Unavailable("transport error")};
  EXPECT_EQ(r.Run(), 1);
  EXPECT_NE(r.err.str().find("get m/vramd: HTTP 404"), std::string::npos) << r.err.str();
  EXPECT_EQ(r.out.str(), "validatingwebhookconfigurations/vramd: caBundle set (CA from secret gpu/vramd-tls)\n");
  EXPECT_EQ(r.hooks.calls, (std::vector<std::string>{"get m/vramd", "get v/vramd", "get v/vramd", "patch v/vramd",
                                                      "patch v/vramd"}))
      << "kUnavailable is tried again, on the GET and on the PATCH";
}

TEST(SetWebhookCaBundles, ForbiddenIsNotTriedAgain) {
  CaBundleRun r;
  r.hooks.patch_answers["m/vramd"] = {Internal("patch m/vramd: HTTP 403 (forbidden)")};
  EXPECT_EQ(r.Run(), 1);
  EXPECT_EQ(r.hooks.calls,
            (std::vector<std::string>{"get m/vramd", "patch m/vramd", "get v/vramd", "patch v/vramd"}));
  EXPECT_NE(r.err.str().find("HTTP 403"), std::string::npos);
}

TEST(CheckExistingSecret, SaysEverythingThatDiffers) {
  kube::Secret want{"ns", "s", "kubernetes.io/tls", {{"ca.crt", "a"}, {"tls.key", "b"}},
                    {{kManagedByLabel, kManagedByValue}, {"team", "gpu"}}};
  EXPECT_TRUE(CheckExistingSecret(want, want).ok());
  kube::Secret got = want;
  got.type = "Opaque";
  got.labels[kManagedByLabel] = "helm";
  got.labels.erase("team");
  got.data["tls.key"] = "";
  got.data.erase("ca.crt");
  Status st = CheckExistingSecret(want, got);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "secret ns/s exists but is not one vramd ensure-secrets made (label app.kubernetes.io/managed-by=helm, "
            "expected vramd-ensure-secrets; no label team=gpu; type Opaque, expected kubernetes.io/tls; no key "
            "ca.crt; key tls.key is empty); refusing to use it. Delete it to have a new one made, or give your own "
            "Secret to the chart as existingSecret");
  // Each difference alone is enough.
  for (int i = 0; i < 5; ++i) {
    kube::Secret one = want;
    if (i == 0) one.labels.erase(kManagedByLabel);
    if (i == 1) one.labels["team"] = "other";
    if (i == 2) one.type = "Opaque";
    if (i == 3) one.data.erase("ca.crt");
    if (i == 4) one.data["ca.crt"] = "";
    EXPECT_FALSE(CheckExistingSecret(want, one).ok()) << i;
  }
}

}  // namespace
}  // namespace vramd::daemon
