#include "vramd/config/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

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
        BadConfig{"UnknownFlag", {"--frobnicate"}, {}, nullptr, "unknown flag --frobnicate"},
        BadConfig{"FlagWithoutValue", {"--listen"}, {}, nullptr, "needs a value"},
        BadConfig{"UnknownEnv", {}, {"VRAMD_LISTN=x:1"}, nullptr, "unknown environment variable VRAMD_LISTN"},
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
        BadConfig{"MissingFile", {"--config", "/nonexistent/vramd.json"}, {}, nullptr, "cannot read config file"}),
    [](const auto& info) { return info.param.name; });

TEST(Config, ReserveIsPercentOrMinimumWhicheverIsLarger) {
  Config c;
  c.reserve_percent = 5;
  c.reserve_min_bytes = 1 * kGi;
  EXPECT_EQ(ApplyReserve(c, 80 * kGi), 76 * kGi);  // 5% = 4Gi > 1Gi
  EXPECT_EQ(ApplyReserve(c, 8 * kGi), 7 * kGi);    // 5% = 0.4Gi < 1Gi
  EXPECT_EQ(ApplyReserve(c, kGi / 2), 0);          // never negative
}

TEST(Config, EveryKeyHasAFlagOrVariableAndHelp) {
  for (const KeyInfo& k : Keys()) {
    EXPECT_FALSE(k.env.empty()) << k.json_key;
    EXPECT_FALSE(k.help.empty()) << k.json_key;
  }
}

}  // namespace
}  // namespace vramd::config
