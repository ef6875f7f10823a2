// The burst keys (burst.max_peak_ratio, burst.victim_classes): defaults, the
// three sources, and every way a value is rejected.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

#include "vramd/config/config.h"

namespace vramd::config {
namespace {

Result<Config> LoadArgs(std::vector<const char*> args, std::vector<const char*> env = {}) {
  args.insert(args.begin(), "vramd");
  env.push_back(nullptr);
  return Load(static_cast<int>(args.size()), args.data(), env.data());
}

std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/vramd-burst-config-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  return path;
}

TEST(BurstConfig, DefaultsAreRatioOneAndAHalfAndTheDisposableClass) {
  Result<Config> c = LoadArgs({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->burst_max_peak_ratio, 1.5);
  EXPECT_EQ(c->burst_victim_classes, std::vector<std::string>{"vramd-disposable"});
}

struct GoodBurst {
  const char* name;
  std::vector<const char*> args;
  std::vector<const char*> env;
  const char* json;  // config file text, or null
  double ratio;
  std::vector<std::string> classes;
};

class BurstConfigAccepts : public ::testing::TestWithParam<GoodBurst> {};

TEST_P(BurstConfigAccepts, FromEverySource) {
  GoodBurst g = GetParam();
  std::string f;
  if (g.json) {
    f = WriteTemp(g.json);
    g.args.insert(g.args.begin(), {"--config", f.c_str()});
  }
  Result<Config> c = LoadArgs(g.args, g.env);
  if (!f.empty()) std::remove(f.c_str());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->burst_max_peak_ratio, g.ratio);
  EXPECT_EQ(c->burst_victim_classes, g.classes);
}

INSTANTIATE_TEST_SUITE_P(
    Config, BurstConfigAccepts,
    ::testing::Values(
        GoodBurst{"FileList", {}, {}, R"({"burst":{"max_peak_ratio":2,"victim_classes":["a","b.c"]}})", 2,
                  {"a", "b.c"}},
        GoodBurst{"FileCommaText", {}, {}, R"({"burst":{"victim_classes":"a, b"}})", 1.5, {"a", "b"}},
        GoodBurst{"RatioOneIsTheLowest", {"--burst-max-peak-ratio", "1"}, {}, nullptr, 1, {"vramd-disposable"}},
        GoodBurst{"RatioTenIsTheHighest", {}, {"VRAMD_BURST_MAX_PEAK_RATIO=10"}, nullptr, 10, {"vramd-disposable"}},
        GoodBurst{"FlagBeatsEnv", {"--burst-victim-classes=x-1"}, {"VRAMD_BURST_VICTIM_CLASSES=y"}, nullptr, 1.5,
                  {"x-1"}},
        GoodBurst{"EnvList", {}, {"VRAMD_BURST_VICTIM_CLASSES=homelab-disposable,vramd-disposable"}, nullptr, 1.5,
                  {"homelab-disposable", "vramd-disposable"}}),
    [](const auto& info) { return info.param.name; });

struct BadBurst {
  const char* name;
  std::vector<const char*> args;
  const char* json;  // config file text, or null
  const char* message_part;
};

class BurstConfigRejects : public ::testing::TestWithParam<BadBurst> {};

TEST_P(BurstConfigRejects, NamingTheKey) {
  BadBurst b = GetParam();
  std::string f;
  if (b.json) {
    f = WriteTemp(b.json);
    b.args.insert(b.args.begin(), {"--config", f.c_str()});
  }
  Result<Config> c = LoadArgs(b.args);
  if (!f.empty()) std::remove(f.c_str());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(b.message_part), std::string::npos) << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Config, BurstConfigRejects,
    ::testing::Values(
        BadBurst{"RatioBelowOne", {"--burst-max-peak-ratio", "0.9"}, nullptr,
                 "burst.max_peak_ratio: invalid value \"0.9\": expected a number from 1 to 10"},
        BadBurst{"RatioAboveTen", {}, R"({"burst":{"max_peak_ratio":10.5}})", "burst.max_peak_ratio"},
        BadBurst{"RatioNotANumber", {"--burst-max-peak-ratio=lots"}, nullptr, "burst.max_peak_ratio"},
        BadBurst{"RatioNan", {"--burst-max-peak-ratio=nan"}, nullptr, "burst.max_peak_ratio"},
        BadBurst{"EmptyList", {}, R"({"burst":{"victim_classes":[]}})", "burst.victim_classes names nothing"},
        BadBurst{"EmptyText", {"--burst-victim-classes="}, nullptr, "burst.victim_classes names nothing"},
        BadBurst{"EmptyNameInText", {"--burst-victim-classes=a,,b"}, nullptr, "burst.victim_classes names nothing"},
        BadBurst{"EmptyNameInList", {}, R"({"burst":{"victim_classes":["a",""]}})",
                 "burst.victim_classes names nothing"},
        BadBurst{"UpperCase", {"--burst-victim-classes", "Disposable"}, nullptr,
                 "burst.victim_classes names nothing: \"Disposable\" is not a priority class name"},
        BadBurst{"Underscore", {}, R"({"burst":{"victim_classes":["my_class"]}})",
                 "burst.victim_classes names nothing"},
        BadBurst{"LeadingDash", {"--burst-victim-classes=-x"}, nullptr, "burst.victim_classes names nothing"},
        BadBurst{"EmptyLabel", {"--burst-victim-classes=a..b"}, nullptr, "burst.victim_classes names nothing"},
        BadBurst{"NotAString", {}, R"({"burst":{"victim_classes":[1]}})", "expected a list of strings"}),
    [](const auto& info) { return info.param.name; });

TEST(BurstConfig, ANameOfTwoHundredFiftyFourCharactersIsTooLong) {
  const std::string ok(253, 'a');
  const std::string too_long(254, 'a');
  const std::string ok_flag = "--burst-victim-classes=" + ok;
  const std::string long_flag = "--burst-victim-classes=" + too_long;
  Result<Config> c = LoadArgs({ok_flag.c_str()});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->burst_victim_classes, std::vector<std::string>{ok});
  EXPECT_FALSE(LoadArgs({long_flag.c_str()}).ok());
}

TEST(BurstConfig, TheKeysAreListedWithTheirDefaults) {
  bool ratio = false, classes = false;
  for (const KeyInfo& k : Keys()) {
    if (k.json_key == "burst.max_peak_ratio") ratio = k.default_value == "1.5";
    if (k.json_key == "burst.victim_classes") classes = k.default_value == "vramd-disposable";
  }
  EXPECT_TRUE(ratio);
  EXPECT_TRUE(classes);
}

}  // namespace
}  // namespace vramd::config
