// `vramd ensure-secrets` (src/daemon/ensure_secrets.cc): its flags, the
// Secrets it builds, and what it does with each answer of the API server
// (a fake SecretClient here; the REST client in tests/unit/kube, the binary
// against a local API stub in tests/integration/ensure_secrets_test.cc).
#include "daemon/ensure_secrets.h"

#include <gtest/gtest.h>

#include <deque>
#include <sstream>

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
