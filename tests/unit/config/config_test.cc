#include "vramd/config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <tuple>

#include "vramd/config/env_names.h"

namespace vramd::config {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

Result<Config> LoadArgs(std::vector<const char*> args, std::vector<const char*> env = {}) {
  args.insert(args.begin(), "vramd");
  env.push_back(nullptr);
  return Load(static_cast<int>(args.size()), args.data(), env.data());
}

std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/vramd-config-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  ::write(fd, text.data(), text.size());
  ::close(fd);
  return path;
}

TEST(Config, DefaultsAreUsable) {
  Result<Config> c = LoadArgs({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->listen, "127.0.0.1:8080");
  EXPECT_EQ(c->resource_name, "vramd.io/vram");
  EXPECT_TRUE(c->kube_enabled);
  EXPECT_EQ(c->score_policy, ledger::ScorePolicy::kHeadroom);
}

TEST(Config, FileThenEnvThenFlagsOverride) {
  std::string f = WriteTemp(R"({"listen":"127.0.0.1:1000","policy":"binpack","valkey":{"url":"redis://a:1"},
    "kube":{"enabled":false},"reserve":{"percent":5,"min_bytes":"512Mi"},
    "nodes":[{"name":"n1","gpus":["96Gi",{"capacity":"8Gi","uuid":"GPU-x"}]}]})");
  Result<Config> c = LoadArgs({"--config", f.c_str(), "--listen", "127.0.0.1:3000"},
                              {"VRAMD_LISTEN=127.0.0.1:2000", "VRAMD_VALKEY=redis://b:2"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->listen, "127.0.0.1:3000");
  EXPECT_EQ(c->valkey_url, "redis://b:2");
  EXPECT_EQ(c->score_policy, ledger::ScorePolicy::kBinpack);
  EXPECT_FALSE(c->kube_enabled);
  EXPECT_DOUBLE_EQ(c->reserve_percent, 5);
  EXPECT_EQ(c->reserve_min_bytes, 512ll << 20);
  ASSERT_EQ(c->nodes.size(), 1u);
  EXPECT_EQ(c->nodes[0].gpus[0].capacity, 96 * kGi);
  EXPECT_EQ(c->nodes[0].gpus[1].uuid, "GPU-x");
  std::remove(f.c_str());
}

TEST(Config, FlagsWithEqualsAndNoKube) {
  Result<Config> c = LoadArgs({"--listen=0.0.0.0:9", "--no-kube", "--log-json"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->listen, "0.0.0.0:9");
  EXPECT_FALSE(c->kube_enabled);
  EXPECT_TRUE(c->log_json);
}

TEST(Config, ApiListenIsOffByDefaultAndSetLikeListen) {
  Result<Config> c = LoadArgs({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->api_listen, "") << "off unless asked for";
  std::string f = WriteTemp(R"({"api_listen":"127.0.0.1:1001"})");
  for (auto [args, env, want] : {
           std::tuple<std::vector<const char*>, std::vector<const char*>, const char*>{
               {"--config", f.c_str()}, {}, "127.0.0.1:1001"},
           {{"--config", f.c_str()}, {"VRAMD_API_LISTEN=0.0.0.0:8081"}, "0.0.0.0:8081"},
           {{"--config", f.c_str(), "--api-listen", "[::1]:8082"}, {"VRAMD_API_LISTEN=0.0.0.0:8081"}, "[::1]:8082"},
           {{"--api-listen="}, {}, ""},
       }) {
    Result<Config> got = LoadArgs(args, env);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->api_listen, want);
  }
  std::remove(f.c_str());
}

TEST(Config, AdmissionListenIsOffByDefaultAndSetWithTheWebhookAndTls) {
  Result<Config> c = LoadArgs({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->admission_listen, "") << "off unless asked for: the webhook then shares api_listen";
  std::string f = WriteTemp(R"({"admission":{"enabled":true,"listen":"0.0.0.0:8445"},
                               "tls":{"cert_file":"/c","key_file":"/k"}})");
  for (auto [args, env, want] : {
           std::tuple<std::vector<const char*>, std::vector<const char*>, const char*>{
               {"--config", f.c_str()}, {}, "0.0.0.0:8445"},
           {{"--config", f.c_str()}, {"VRAMD_ADMISSION_LISTEN=[::]:9443"}, "[::]:9443"},
           {{"--config", f.c_str(), "--admission-listen", "127.0.0.1:0"}, {}, "127.0.0.1:0"},
           {{"--config", f.c_str(), "--admission-listen="}, {}, ""},
       }) {
    Result<Config> got = LoadArgs(args, env);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->admission_listen, want);
  }
  // Port 0 (tests: any free port) may be given to several listeners.
  Result<Config> zeros = LoadArgs({"--config", f.c_str(), "--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0",
                                   "--admission-listen", "127.0.0.1:0"});
  EXPECT_TRUE(zeros.ok()) << zeros.status().ToString();
  std::remove(f.c_str());
}

struct BadConfig {
  const char* name;
  std::vector<const char*> args;
  std::vector<const char*> env;
  const char* json;  // config file text, or null
  const char* message_part;
};

class ConfigRejects : public ::testing::TestWithParam<BadConfig> {};

TEST_P(ConfigRejects, NamingTheKey) {
  BadConfig b = GetParam();
  std::string f;
  if (b.json) {
    f = WriteTemp(b.json);
    b.args.insert(b.args.begin(), {"--config", f.c_str()});
  }
  Result<Config> c = LoadArgs(b.args, b.env);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(b.message_part), std::string::npos) << c.status().message();
  if (!f.empty()) std::remove(f.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Config, ConfigRejects,
    ::testing::Values(
        BadConfig{"UnknownKey", {}, {}, R"({"lisen":"x:1"})", "unknown config key: lisen"},
        BadConfig{"UnknownNestedKey", {}, {}, R"({"valkey":{"ur":"x"}})", "unknown config key: valkey.ur"},
        BadConfig{"BadPolicy", {}, {}, R"({"policy":"random"})", "config key policy"},
        BadConfig{"BadListen", {"--listen", "nohost"}, {}, nullptr, "listen"},
        BadConfig{"BadPort", {"--listen", "a:99999"}, {}, nullptr, "listen"},
        BadConfig{"BadApiListen", {"--api-listen", "nohost"}, {}, nullptr, "config key api_listen"},
        BadConfig{"BadApiListenPort", {}, {"VRAMD_API_LISTEN=a:99999"}, nullptr, "VRAMD_API_LISTEN"},
        BadConfig{"ApiListenSameAsListen", {"--listen", "127.0.0.1:9", "--api-listen", "127.0.0.1:9"}, {}, nullptr,
                  "api_listen must differ from listen"},
        BadConfig{"BadAdmissionListen", {"--admission-enabled", "--tls-cert-file", "c", "--tls-key-file", "k",
                                         "--admission-listen", "nohost"},
                  {}, nullptr, "config key admission.listen"},
        BadConfig{"AdmissionListenWithoutTheWebhook",
                  {"--tls-cert-file", "c", "--tls-key-file", "k", "--admission-listen", "0.0.0.0:8445"}, {}, nullptr,
                  "admission.listen needs admission.enabled"},
        BadConfig{"AdmissionListenWithoutTls", {"--admission-enabled", "--admission-listen", "0.0.0.0:8445"}, {},
                  nullptr, "admission.listen needs tls.cert_file and tls.key_file"},
        BadConfig{"AdmissionListenSameAsListen",
                  {"--listen", "0.0.0.0:8443", "--admission-enabled", "--tls-cert-file", "c", "--tls-key-file", "k",
                   "--admission-listen", "0.0.0.0:8443"},
                  {}, nullptr, "admission.listen must differ from listen (both are 0.0.0.0:8443)"},
        BadConfig{"AdmissionListenSameAsApiListen", {}, {}, R"({"api_listen":"0.0.0.0:8081","admission":{
                    "enabled":true,"listen":"0.0.0.0:8081"},"tls":{"cert_file":"c","key_file":"k"}})",
                  "admission.listen must differ from api_listen (both are 0.0.0.0:8081)"},
        BadConfig{"UnknownFlag", {"--frobnicate"}, {}, nullptr, "unknown flag --frobnicate"},
        BadConfig{"FlagWithoutValue", {"--listen"}, {}, nullptr, "needs a value"},
        BadConfig{"MisspeltEnvWithValueInvalidForTheKey", {}, {"VRAMD_LISTN=nohost"}, nullptr,
                  "unknown environment variable VRAMD_LISTN (did you mean VRAMD_LISTEN?)"},
        BadConfig{"TransposedEnvWithValueInvalidForTheKey", {}, {"VRAMD_RESERVE_PERCNET=150"}, nullptr,
                  "reserve.percent: invalid value \"150\""},
        BadConfig{"BadEnvValue", {}, {"VRAMD_HTTP_THREADS=lots"}, nullptr, "VRAMD_HTTP_THREADS"},
        BadConfig{"NotJson", {}, {}, "{nope", "not valid JSON"},
        BadConfig{"WrongType", {}, {}, R"({"http_threads":[1]})", "http_threads"},
        BadConfig{"ThreadsOutOfRange", {}, {}, R"({"http_threads":0})", "between 1 and 256"},
        BadConfig{"BadReservePercent", {}, {}, R"({"reserve":{"percent":150}})", "reserve.percent"},
        BadConfig{"BadNodeQuantity", {}, {}, R"({"nodes":[{"name":"n","gpus":["lots"]}]})", "nodes[0].gpus[0]"},
        BadConfig{"NodeWithoutName", {}, {}, R"({"nodes":[{"gpus":["8Gi"]}]})", "name is required"},
        BadConfig{"NodeListedTwice", {}, {},
                  R"({"nodes":[{"name":"n","gpus":["8Gi"]},{"name":"n","gpus":["16Gi"]}]})",
                  "nodes[1]: node n is listed twice"},
        BadConfig{"BadValkeyUrl", {"--valkey", "http://x"}, {}, nullptr, "valkey.url"},
        BadConfig{"TlsHalf", {"--tls-cert-file", "c.pem"}, {}, nullptr, "must be set together"},
        BadConfig{"MissingFile", {"--config", "/nonexistent/vramd.json"}, {}, nullptr, "cannot read config file"},
        BadConfig{"WatchdogModeUnknown", {"--watchdog-mode", "on"}, {}, nullptr,
                  "config key watchdog.mode: invalid value \"on\": expected off, dry-run or enforce"},
        BadConfig{"IdleModeUnknown", {}, {"VRAMD_IDLE_MODE=yes"}, nullptr, "config key idle.mode"},
        BadConfig{"IdlePolicyUnknown", {}, {}, R"({"idle":{"policy":"sometimes"}})",
                  "expected on-demand or always"},
        BadConfig{"FloorNegative", {"--watchdog-floor", "-1Gi"}, {}, nullptr, "config key watchdog.floor"},
        BadConfig{"FloorZero", {"--watchdog-floor", "0"}, {}, nullptr, "the floor must be above 0"},
        BadConfig{"FloorPercentTooHigh", {"--watchdog-floor", "100%"}, {}, nullptr, "above 0 and below 100"},
        BadConfig{"FloorPercentText", {"--watchdog-floor", "ten%"}, {}, nullptr, "above 0 and below 100"},
        BadConfig{"FloorWords", {"--watchdog-floor", "lots"}, {}, nullptr, "expected a quantity (1.5Gi) or a percent"},
        BadConfig{"ProtectedClassEmptyName", {"--watchdog-protected-classes", "critical,,other"}, {}, nullptr,
                  "an empty priority class name in the list"},
        BadConfig{"ProtectedClassNotAName", {}, {}, R"({"watchdog":{"protected_classes":["Critical Pods"]}})",
                  "\"Critical Pods\" is not a priority class name"},
        BadConfig{"ProtectedClassesNotStrings", {}, {}, R"({"watchdog":{"protected_classes":[1]}})",
                  "expected a list of strings"},
        BadConfig{"IdleTtlChangeBad", {"--idle-usage-change", "some"}, {}, nullptr, "idle.usage_change_bytes"},
        BadConfig{"CooldownNegative", {"--watchdog-cooldown-ms", "-5"}, {}, nullptr, "watchdog.cooldown_ms"}),
    [](const auto& info) { return info.param.name; });

TEST(Config, RuntimeProtectionDefaultsToDryRun) {
  Result<Config> c = LoadArgs({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->watchdog_mode, "dry-run");
  EXPECT_EQ(c->idle_mode, "dry-run");
  EXPECT_EQ(c->idle_policy, "on-demand");
  Result<Floor> f = ParseFloor(c->watchdog_floor);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->bytes, 1536ll << 20);
  EXPECT_EQ(f->percent, 0);
}

TEST(Config, FloorIsAQuantityOrAPercent) {
  Result<Floor> f = ParseFloor("12.5%");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->bytes, 0);
  EXPECT_DOUBLE_EQ(f->percent, 12.5);
  f = ParseFloor("2Gi");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->bytes, 2 * kGi);
  EXPECT_FALSE(ParseFloor("").ok());
  EXPECT_FALSE(ParseFloor("%").ok());
  EXPECT_FALSE(ParseFloor("0%").ok());
}

TEST(Config, ProtectedClassesFromAFileArrayOrACommaList) {
  std::string f = WriteTemp(R"({"watchdog":{"protected_classes":["homelab-critical","gpu-workload"]}})");
  Result<Config> c = LoadArgs({"--config", f.c_str()});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Result<std::vector<std::string>> list = ParseClassList(c->watchdog_protected_classes);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<std::string>{"homelab-critical", "gpu-workload"}));
  c = LoadArgs({"--watchdog-protected-classes", " a , b.c "});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*ParseClassList(c->watchdog_protected_classes), (std::vector<std::string>{"a", "b.c"}));
  EXPECT_TRUE(ParseClassList("")->empty());
  std::remove(f.c_str());
}

// Issue 33: the identity keys and the GPU-node labels.
TEST(Config, IdentitiesNeedKubernetesAndTheAgentsServiceAccount) {
  Result<Config> c = LoadArgs({"--auth-identities", "--auth-agent-service-account", "vramd-system/vramd-agent"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->auth_identities);
  EXPECT_EQ(c->auth_audience, "vramd");
  Result<std::pair<std::string, std::string>> sa = ParseServiceAccount(c->auth_agent_service_account);
  ASSERT_TRUE(sa.ok());
  EXPECT_EQ(sa->first, "vramd-system");
  EXPECT_EQ(sa->second, "vramd-agent");
  struct Bad {
    std::vector<const char*> args;
    const char* says;
  } bad[] = {
      {{"--auth-identities"}, "needs auth.agent_service_account"},
      {{"--auth-identities", "--auth-agent-service-account", "a/b", "--no-kube"}, "needs Kubernetes"},
      {{"--auth-agent-service-account", "vramd-agent"}, "NAMESPACE/NAME"},
      {{"--auth-agent-service-account", "a/b/c"}, "NAMESPACE/NAME"},
      {{"--auth-agent-service-account", "Bad_NS/x"}, "not a namespace name"},
      {{"--auth-audience", ""}, "auth"},
  };
  for (const Bad& b : bad) {
    Result<Config> r = LoadArgs(b.args);
    ASSERT_FALSE(r.ok()) << b.says;
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr(b.says));
  }
}

TEST(Config, AdmissionUsersAreAListOfUsernames) {
  Result<Config> c = LoadArgs({"--admission-vramd-users", "system:serviceaccount:vramd-system:vramd, vramd"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*ParseUserList(c->admission_vramd_users),
            (std::vector<std::string>{"system:serviceaccount:vramd-system:vramd", "vramd"}));
  Result<Config> bad = LoadArgs({"--admission-vramd-users", "a,,b"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("an empty username"));
}

TEST(Config, AgentCapacityLabelsAreKeyValuePairs) {
  Result<std::vector<std::pair<std::string, std::string>>> def = ParseLabelPairs(Config{}.node_sync_agent_capacity_labels);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(def->size(), 3u);
  EXPECT_TRUE(HasAnyLabel({{"nvidia.com/gpu.present", "true"}}, *def));
  EXPECT_FALSE(HasAnyLabel({{"nvidia.com/gpu.present", "false"}}, *def));
  EXPECT_FALSE(HasAnyLabel({}, *def));
  Result<std::vector<std::pair<std::string, std::string>>> one = ParseLabelPairs(" example.com/gpu=yes ,plain= ");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, (std::vector<std::pair<std::string, std::string>>{{"example.com/gpu", "yes"}, {"plain", ""}}));
  EXPECT_TRUE(ParseLabelPairs("")->empty());
  for (const char* bad : {"novalue", "=x", "UPPER_/x=y", "a/=y", "k=v v", ",", "k=" "0123456789012345678901234567890123456789012345678901234567890123"}) {
    EXPECT_FALSE(ParseLabelPairs(bad).ok()) << bad;
  }
  std::string f = WriteTemp(R"({"node_sync":{"agent_capacity_labels":["a.io/gpu=true","b=1"]}})");
  Result<Config> c = LoadArgs({"--config", f.c_str()});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->node_sync_agent_capacity_labels, "a.io/gpu=true,b=1");
  std::remove(f.c_str());
}

TEST(Config, ReserveIsPercentOrMinimumWhicheverIsLarger) {
  Config c;
  c.reserve_percent = 5;
  c.reserve_min_bytes = 1 * kGi;
  EXPECT_EQ(ApplyReserve(c, 80 * kGi), 76 * kGi);  // 5% = 4Gi > 1Gi
  EXPECT_EQ(ApplyReserve(c, 8 * kGi), 7 * kGi);    // 5% = 0.4Gi < 1Gi
  EXPECT_EQ(ApplyReserve(c, kGi / 2), 0);          // never negative
}

// --- VRAMD_* variables that are not a key's (env_names.h) ---------------------

struct EnvCase {
  const char* name;
  const char* var;
  const char* value;
  EnvKind kind;
  const char* closest;  // kNearKey, kUnknown; "": not checked
};

void PrintTo(const EnvCase& c, std::ostream* os) { *os << c.var << "=" << c.value; }

class ClassifiesEnv : public ::testing::TestWithParam<EnvCase> {};

TEST_P(ClassifiesEnv, ByNameAndShape) {
  const EnvCase& c = GetParam();
  EnvClass got = ClassifyEnv(c.var, c.value);
  EXPECT_EQ(got.kind, c.kind) << c.var << "=" << c.value;
  if (*c.closest != '\0') {
    EXPECT_EQ(got.closest, c.closest) << c.var;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Config, ClassifiesEnv,
    ::testing::Values(
        EnvCase{"KeyVariable", "VRAMD_RESERVE_PERCENT", "5", EnvKind::kKey, ""},
        EnvCase{"KeyVariableWithABadValueIsStillAKey", "VRAMD_HTTP_THREADS", "lots", EnvKind::kKey, ""},
        EnvCase{"NotOurPrefix", "HOME", "/root", EnvKind::kIgnored, ""},
        EnvCase{"ConfigFile", "VRAMD_CONFIG", "/etc/vramd/config.json", EnvKind::kIgnored, ""},
        EnvCase{"SecretReadByMain", "VRAMD_VALKEY_PASSWORD", "x", EnvKind::kIgnored, ""},
        EnvCase{"TestHarness", "VRAMD_TEST_VALKEY_URL", "redis://127.0.0.1:1", EnvKind::kIgnored, ""},
        EnvCase{"Scripts", "VRAMD_BIN_DIR", "/x", EnvKind::kIgnored, ""},
        // What the kubelet injects for the chart's Services vramd (http 8080) and vramd-valkey (6379).
        EnvCase{"ServiceHost", "VRAMD_SERVICE_HOST", "10.96.0.10", EnvKind::kServiceLink, ""},
        EnvCase{"ServicePort", "VRAMD_SERVICE_PORT", "8080", EnvKind::kServiceLink, ""},
        EnvCase{"ServicePortNamed", "VRAMD_SERVICE_PORT_HTTP", "8080", EnvKind::kServiceLink, ""},
        EnvCase{"DockerLink", "VRAMD_PORT", "tcp://10.96.0.10:8080", EnvKind::kServiceLink, ""},
        EnvCase{"DockerLinkPort", "VRAMD_PORT_8080_TCP", "tcp://10.96.0.10:8080", EnvKind::kServiceLink, ""},
        EnvCase{"DockerLinkProto", "VRAMD_PORT_8080_TCP_PROTO", "tcp", EnvKind::kServiceLink, ""},
        EnvCase{"DockerLinkPortNumber", "VRAMD_PORT_8080_TCP_PORT", "8080", EnvKind::kServiceLink, ""},
        EnvCase{"DockerLinkAddr", "VRAMD_PORT_8080_TCP_ADDR", "10.96.0.10", EnvKind::kServiceLink, ""},
        EnvCase{"ValkeyServiceHost", "VRAMD_VALKEY_SERVICE_HOST", "10.96.0.11", EnvKind::kServiceLink, ""},
        EnvCase{"ValkeyServicePortNamed", "VRAMD_VALKEY_SERVICE_PORT_VALKEY", "6379", EnvKind::kServiceLink, ""},
        EnvCase{"ValkeyLink", "VRAMD_VALKEY_PORT", "tcp://10.96.0.11:6379", EnvKind::kServiceLink, ""},
        EnvCase{"ValkeyLinkAddr", "VRAMD_VALKEY_PORT_6379_TCP_ADDR", "10.96.0.11", EnvKind::kServiceLink, ""},
        EnvCase{"Ipv6Link", "VRAMD_PORT_8443_TCP", "tcp://[fd00::a]:8443", EnvKind::kServiceLink, ""},
        EnvCase{"UdpAndSctp", "VRAMD_DNS_PORT_53_UDP_PROTO", "udp", EnvKind::kServiceLink, ""},
        EnvCase{"PortNameWithDash", "VRAMD_SERVICE_PORT_GRPC_WEB", "9090", EnvKind::kServiceLink, ""},
        EnvCase{"OtherReleaseName", "VRAMD_PROD_SERVICE_HOST", "10.96.0.12", EnvKind::kServiceLink, ""},
        // The shape needs the value too: a plain port in VRAMD_PORT is somebody's setting.
        EnvCase{"PortWithoutLinkValue", "VRAMD_PORT", "8080", EnvKind::kUnknown, "VRAMD_POLICY"},
        EnvCase{"ServicePortNotANumber", "VRAMD_SERVICE_PORT", "http", EnvKind::kUnknown, ""},
        EnvCase{"LinkPortMismatch", "VRAMD_PORT_8080_TCP_PORT", "9090", EnvKind::kUnknown, ""},
        // Misspelt keys: within 2 edits (a transposition is one).
        EnvCase{"DroppedLetter", "VRAMD_RESERVE_PERCNT", "5", EnvKind::kNearKey, "VRAMD_RESERVE_PERCENT"},
        EnvCase{"Transposed", "VRAMD_RESERVE_PERCNET", "5", EnvKind::kNearKey, "VRAMD_RESERVE_PERCENT"},
        EnvCase{"TwoEdits", "VRAMD_LSTN", "x:1", EnvKind::kNearKey, "VRAMD_LISTEN"},
        EnvCase{"NearASecret", "VRAMD_VALKEY_PASWORD", "x", EnvKind::kNearKey, "VRAMD_VALKEY_PASSWORD"},
        EnvCase{"Stray", "VRAMD_BIN", "/x", EnvKind::kUnknown, "VRAMD_LISTEN"},
        EnvCase{"ThreeEditsIsFar", "VRAMD_LSTNX", "x:1", EnvKind::kUnknown, "VRAMD_LISTEN"}),
    [](const auto& info) { return info.param.name; });

TEST(Config, NoKeyVariableHasAServiceLinkShape) {
  for (const KeyInfo& k : Keys()) {
    for (const char* v : {"tcp://10.0.0.1:1", "1", "tcp", "10.0.0.1"}) {
      EXPECT_FALSE(IsServiceLinkVariable(k.env, v)) << k.env << "=" << v;
    }
  }
}

TEST(Config, EditDistanceCountsOneForEachEditAndTransposition) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("abc", ""), 3);
  EXPECT_EQ(EditDistance("abc", "abc"), 0);
  EXPECT_EQ(EditDistance("PERCNT", "PERCENT"), 1);
  EXPECT_EQ(EditDistance("PERCNET", "PERCENT"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

struct EnvLoad {
  const char* name;
  std::vector<const char*> env;
  std::vector<std::string> warnings;  // exactly these, in order
};

void PrintTo(const EnvLoad& c, std::ostream* os) { *os << c.name; }

class LoadsWithEnv : public ::testing::TestWithParam<EnvLoad> {};

TEST_P(LoadsWithEnv, WarningOnlyForUnknownNames) {
  const EnvLoad& c = GetParam();
  Result<Config> got = LoadArgs({}, c.env);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->warnings, c.warnings);
}

INSTANTIATE_TEST_SUITE_P(
    Config, LoadsWithEnv,
    ::testing::Values(
        EnvLoad{"KubeletServiceLinksAreQuiet",
                {"VRAMD_SERVICE_HOST=10.96.0.10", "VRAMD_SERVICE_PORT=8080", "VRAMD_SERVICE_PORT_HTTP=8080",
                 "VRAMD_PORT=tcp://10.96.0.10:8080", "VRAMD_PORT_8080_TCP=tcp://10.96.0.10:8080",
                 "VRAMD_PORT_8080_TCP_PROTO=tcp", "VRAMD_PORT_8080_TCP_PORT=8080",
                 "VRAMD_PORT_8080_TCP_ADDR=10.96.0.10", "VRAMD_VALKEY_SERVICE_HOST=10.96.0.11",
                 "VRAMD_VALKEY_SERVICE_PORT=6379", "VRAMD_VALKEY_SERVICE_PORT_VALKEY=6379",
                 "VRAMD_VALKEY_PORT=tcp://10.96.0.11:6379", "VRAMD_VALKEY_PORT_6379_TCP=tcp://10.96.0.11:6379",
                 "VRAMD_VALKEY_PORT_6379_TCP_PROTO=tcp", "VRAMD_VALKEY_PORT_6379_TCP_PORT=6379",
                 "VRAMD_VALKEY_PORT_6379_TCP_ADDR=10.96.0.11"},
                {}},
        EnvLoad{"MisspeltKeyWithAValidValueWarnsWithTheClosestKey",
                {"VRAMD_RESERVE_PERCNT=5"},
                {"unknown environment variable VRAMD_RESERVE_PERCNT (did you mean VRAMD_RESERVE_PERCENT?); "
                 "ignored"}},
        EnvLoad{"StrayVariableWarnsNamingTheClosest",
                {"VRAMD_BIN=/x"},
                {"unknown environment variable VRAMD_BIN (ignored; the closest known is VRAMD_LISTEN)"}},
        EnvLoad{"NearASecretWarnsOnly", {"VRAMD_VALKEY_PASWORD=hunter2"},
                {"unknown environment variable VRAMD_VALKEY_PASWORD (did you mean VRAMD_VALKEY_PASSWORD?); "
                 "ignored"}},
        EnvLoad{"ToolingIsQuiet", {"VRAMD_TEST_VALKEY_URL=redis://x:1", "VRAMD_CACHE=/c", "VRAMD_SERVER=http://x"},
                {}},
        EnvLoad{"VramctlsTlsVariablesAreQuiet",
                {"VRAMD_CACERT=/ca.crt", "VRAMD_CERT=/c.crt", "VRAMD_KEY=/c.key", "VRAMD_TLS_SERVER_NAME=vramd.svc",
                 "VRAMD_INSECURE_SKIP_TLS_VERIFY=true", "VRAMD_TOKEN_FILE=/t"},
                {}}),
    [](const auto& info) { return info.param.name; });

TEST(Config, MisspeltVariableIsNotApplied) {
  Result<Config> c = LoadArgs({}, {"VRAMD_RESERVE_PERCNT=5"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->reserve_percent, 0);
}

TEST(Config, EveryKeyHasAFlagOrVariableAndHelp) {
  for (const KeyInfo& k : Keys()) {
    EXPECT_FALSE(k.env.empty()) << k.json_key;
    EXPECT_FALSE(k.help.empty()) << k.json_key;
  }
}

}  // namespace
}  // namespace vramd::config
