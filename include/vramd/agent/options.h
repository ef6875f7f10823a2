// vramd-agent's command line. Pure: the arguments and an environment lookup
// in, the options (or a message naming the bad flag) out.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vramd/status.h"

namespace vramd::agent {

struct AgentOptions {
  std::string node;                              // --node, default $NODE_NAME
  std::string server;                            // --server: vramd's base URL
  std::string token_file;                        // --token-file: the API token (re-read each push)
  std::string cacert;                            // --cacert: CA bundle for an https server
  std::string proc_root = "/proc";               // --proc-root
  std::string sys_root = "/sys";                 // --sys-root
  std::string cgroup_root;                       // --cgroup-root (default <sys_root>/fs/cgroup)
  std::string nvml_library = "libnvidia-ml.so.1";  // --nvml-library
  std::string source = "auto";                   // --source auto|nvml|drm
  int64_t interval_ms = 5000;                    // --interval (5s, 500ms, 1m, or seconds)
  int64_t timeout_ms = 5000;                     // --timeout: one push
  std::string log_level = "info";                // --log-level
  bool once = false;                             // --once: one report to stdout, no push
  std::string enforce_orders;                    // --enforce-orders FILE: with --once, vramd's answer to apply
  bool help = false;
  bool version = false;
};

// An environment lookup (nullptr when unset); std::getenv in main.
using Getenv = std::function<const char*(const char*)>;

// Flags as `--name value` or `--name=value`. Without --once, --node (or
// NODE_NAME) and --server are required.
Result<AgentOptions> ParseAgentArgs(const std::vector<std::string>& args, const Getenv& getenv);

// "5s" → 5000, "500ms", "2m", "7" (seconds); 0 < d ≤ 1 hour; nullopt otherwise.
Result<int64_t> ParseInterval(const std::string& text);

std::string AgentUsage();

}  // namespace vramd::agent
