#include "vramd/agent/options.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "vramd/parse.h"

namespace vramd::agent {

Result<int64_t> ParseInterval(const std::string& text) {
  std::string_view t = text;
  int64_t scale = 1000;
  if (t.ends_with("ms")) {
    scale = 1;
    t.remove_suffix(2);
  } else if (t.ends_with("s")) {
    t.remove_suffix(1);
  } else if (t.ends_with("m")) {
    scale = 60 * 1000;
    t.remove_suffix(1);
  }
  std::optional<uint64_t> n = ParseDigits(t, 3600 * 1000);
  if (!n || *n == 0 || static_cast<int64_t>(*n) * scale > 3600 * 1000) {
    return InvalidArgument("'" + text + "' is not a duration between 1ms and 1h (e.g. 5s, 500ms, 1m)");
  }
  return static_cast<int64_t>(*n) * scale;
}

Result<AgentOptions> ParseAgentArgs(const std::vector<std::string>& args, const Getenv& getenv) {
  AgentOptions o;
  if (const char* n = getenv("NODE_NAME")) o.node = n;
  const std::map<std::string, std::string*> strings = {
      {"--node", &o.node},           {"--server", &o.server},       {"--token-file", &o.token_file},
      {"--cacert", &o.cacert},       {"--proc-root", &o.proc_root}, {"--sys-root", &o.sys_root},
      {"--nvml-library", &o.nvml_library}, {"--source", &o.source}, {"--log-level", &o.log_level},
      {"--cgroup-root", &o.cgroup_root}, {"--enforce-orders", &o.enforce_orders},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> value;
    if (size_t eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    }
    if (flag == "--once" || flag == "--help" || flag == "-h" || flag == "--version") {
      if (value) return InvalidArgument(flag + " takes no value");
      if (flag == "--once") o.once = true;
      else if (flag == "--version") o.version = true;
      else o.help = true;
      continue;
    }
    auto s = strings.find(flag);
    bool is_duration = flag == "--interval" || flag == "--timeout";
    if (s == strings.end() && !is_duration) return InvalidArgument("unknown flag " + flag + " (see --help)");
    if (!value) {
      if (i + 1 >= args.size()) return InvalidArgument(flag + " needs a value");
      value = args[++i];
    }
    if (s != strings.end()) {
      *s->second = *value;
      continue;
    }
    Result<int64_t> ms = ParseInterval(*value);
    if (!ms.ok()) return InvalidArgument(flag + ": " + ms.status().message());
    (flag == "--interval" ? o.interval_ms : o.timeout_ms) = *ms;
  }
  if (o.help || o.version) return o;
  if (o.source != "auto" && o.source != "nvml" && o.source != "drm") {
    return InvalidArgument("--source must be auto, nvml or drm, not '" + o.source + "'");
  }
  static const char* const kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  if (std::find(std::begin(kLevels), std::end(kLevels), o.log_level) == std::end(kLevels)) {
    return InvalidArgument("--log-level must be trace, debug, info, warn, error, critical or off, not '" +
                           o.log_level + "'");
  }
  if (o.cgroup_root.empty()) o.cgroup_root = o.sys_root + "/fs/cgroup";
  if (o.proc_root.empty() || o.sys_root.empty() || o.nvml_library.empty()) {
    return InvalidArgument("--proc-root, --sys-root and --nvml-library must not be empty");
  }
  if (!o.enforce_orders.empty() && !o.once) {
    return InvalidArgument("--enforce-orders is for --once (pushing, the orders come in vramd's answers)");
  }
  if (!o.once) {
    if (o.node.empty()) return InvalidArgument("--node (or NODE_NAME) is required");
    if (o.server.empty()) return InvalidArgument("--server (vramd's URL) is required");
    if (!o.server.starts_with("http://") && !o.server.starts_with("https://")) {
      return InvalidArgument("--server must be an http:// or https:// URL, not '" + o.server + "'");
    }
  }
  return o;
}

std::string AgentUsage() {
  return R"(vramd-agent: measures VRAM per GPU and per pod on this node and pushes it to vramd
usage: vramd-agent --server URL --node NAME [flags]
  --server URL          vramd's base URL (http:// or https://)
  --node NAME           this node's name (default: $NODE_NAME)
  --token-file PATH     the API token (sent as a bearer token; re-read before each push)
  --cacert PATH         CA bundle that signs vramd's certificate (https)
  --interval D          time between reports (default 5s; 500ms, 1m, or seconds)
  --timeout D           one push's time limit (default 5s)
  --source S            auto (default: NVML, else DRM), nvml, drm
  --nvml-library PATH   NVML library to dlopen (default libnvidia-ml.so.1)
  --proc-root PATH      the host's /proc (default /proc; hostPID in a pod)
  --sys-root PATH       the host's /sys (default /sys)
  --cgroup-root PATH    the host's cgroup v2 mount, where VRAM limits are written
                        (default SYS-ROOT/fs/cgroup; vramd's enforce.mode decides)
  --once                print one report as JSON on stdout and exit (no push)
  --enforce-orders FILE with --once: apply this answer of vramd's first ({"enforce":
                        {"mode": "on", "limits": [...]}}; the GPU check's enforcement step)
  --log-level L         trace, debug, info (default), warn, error
  --version, --help
)";
}

}  // namespace vramd::agent
