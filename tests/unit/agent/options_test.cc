#include "vramd/agent/options.h"

#include <gtest/gtest.h>

#include <map>

namespace vramd::agent {
namespace {

Getenv Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(AgentOptions, DefaultsAndNodeFromTheEnvironment) {
  Result<AgentOptions> o = ParseAgentArgs({"--server", "https://vramd.kube-system:8443"}, Env({{"NODE_NAME", "gpu-1"}}));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->node, "gpu-1");
  EXPECT_EQ(o->interval_ms, 5000);
  EXPECT_EQ(o->proc_root, "/proc");
  EXPECT_EQ(o->sys_root, "/sys");
  EXPECT_EQ(o->nvml_library, "libnvidia-ml.so.1");
  EXPECT_EQ(o->source, "auto");
  EXPECT_FALSE(o->once);
}

TEST(AgentOptions, EveryFlagInBothForms) {
  Result<AgentOptions> o = ParseAgentArgs(
      {"--node=n1", "--server", "http://127.0.0.1:1", "--token-file=/t", "--cacert", "/ca", "--proc-root=/host/proc",
       "--sys-root", "/host/sys", "--nvml-library=/driver/libnvidia-ml.so.1", "--source", "drm", "--interval=500ms",
       "--timeout", "2s", "--log-level=debug"},
      Env({{"NODE_NAME", "ignored"}}));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->node, "n1");
  EXPECT_EQ(o->token_file, "/t");
  EXPECT_EQ(o->cacert, "/ca");
  EXPECT_EQ(o->proc_root, "/host/proc");
  EXPECT_EQ(o->sys_root, "/host/sys");
  EXPECT_EQ(o->nvml_library, "/driver/libnvidia-ml.so.1");
  EXPECT_EQ(o->source, "drm");
  EXPECT_EQ(o->interval_ms, 500);
  EXPECT_EQ(o->timeout_ms, 2000);
  EXPECT_EQ(o->log_level, "debug");
}

TEST(AgentOptions, OnceNeedsNoServerOrNode) {
  Result<AgentOptions> o = ParseAgentArgs({"--once"}, Env({}));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->once);
}

TEST(AgentOptions, RefusalsNameTheFlag) {
  struct Case {
    const char* name;
    std::vector<std::string> args;
    const char* want;
  } cases[] = {
      {"no_node", {"--server", "http://x"}, "--node (or NODE_NAME) is required"},
      {"no_server", {"--node", "n"}, "--server"},
      {"server_not_a_url", {"--node", "n", "--server", "vramd:8080"}, "http:// or https://"},
      {"unknown_flag", {"--once", "--frobnicate"}, "unknown flag --frobnicate"},
      {"missing_value", {"--once", "--interval"}, "--interval needs a value"},
      {"bad_interval", {"--once", "--interval", "soon"}, "--interval: 'soon' is not a duration"},
      {"zero_interval", {"--once", "--interval", "0s"}, "--interval"},
      {"interval_above_an_hour", {"--once", "--interval", "61m"}, "--interval"},
      {"bad_source", {"--once", "--source", "rocm"}, "--source must be auto, nvml or drm"},
      {"value_on_a_switch", {"--once=yes"}, "--once takes no value"},
      {"empty_root", {"--once", "--proc-root="}, "must not be empty"},
      {"bad_log_level", {"--once", "--log-level", "loud"}, "--log-level must be trace"},
      {"orders_without_once", {"--node", "n", "--server", "http://x", "--enforce-orders", "o.json"},
       "--enforce-orders is for --once"},
  };
  for (const Case& c : cases) {
    Result<AgentOptions> o = ParseAgentArgs(c.args, Env({}));
    ASSERT_FALSE(o.ok()) << c.name;
    EXPECT_NE(o.status().message().find(c.want), std::string::npos) << c.name << ": " << o.status().message();
  }
}

TEST(AgentOptions, TheCgroupRootDefaultsUnderTheSysRoot) {
  Result<AgentOptions> o = ParseAgentArgs({"--once", "--sys-root", "/host/sys"}, Env({}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->cgroup_root, "/host/sys/fs/cgroup");
  o = ParseAgentArgs({"--once", "--cgroup-root", "/host/cgroup", "--enforce-orders", "o.json"}, Env({}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->cgroup_root, "/host/cgroup");
  EXPECT_EQ(o->enforce_orders, "o.json");
}

TEST(AgentOptions, Intervals) {
  EXPECT_EQ(ParseInterval("5s").value(), 5000);
  EXPECT_EQ(ParseInterval("7").value(), 7000);
  EXPECT_EQ(ParseInterval("250ms").value(), 250);
  EXPECT_EQ(ParseInterval("1m").value(), 60000);
  EXPECT_EQ(ParseInterval("60m").value(), 3600000);
  EXPECT_FALSE(ParseInterval("").ok());
  EXPECT_FALSE(ParseInterval("-5s").ok());
  EXPECT_FALSE(ParseInterval("1.5s").ok());
  EXPECT_FALSE(ParseInterval("5h").ok());
}

}  // namespace
}  // namespace vramd::agent
