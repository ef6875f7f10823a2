#include "daemon/cli.h"

#include <cstdio>
#include <iostream>
#include <string>

#include "vramd/config/config.h"

namespace vramd::daemon {
namespace {

const char* kUsage = R"(vramd - GPU memory (VRAM) as a schedulable resource for kube-scheduler

Usage: vramd [--config FILE] [flags]
       vramd ensure-secrets --namespace NS [--tls-secret NAME --dns-names a,b,...]
                            [--token-secret NAME] [--valkey-secret NAME]
                            create the chart's Secrets when absent (see ensure-secrets --help)

Common flags (every config key has a flag and a VRAMD_* variable; see --help-config):
  --listen HOST:PORT        serve the extender, /v1 API, /metrics (default 127.0.0.1:8080)
  --api-listen HOST:PORT    also serve /healthz, /readyz, /metrics and /v1 here, but not the
                            extender verbs, never asking for a client certificate (default: off)
  --tls-cert-file FILE      serve HTTPS (with --tls-key-file) on both listeners
  --tls-client-ca-file FILE on --listen, require client certificates signed by this CA
  --valkey URL              the ledger's Valkey: redis://host:port[/db] (default redis://127.0.0.1:6379)
                            or through Sentinel (docs/valkey-ha.md):
                            redis+sentinel://host1:26379,host2:26379[,...]/MASTER[/db]
  --kube-api URL            Kubernetes API server (default: in-cluster service account)
  --kube-token-file FILE    bearer token for the API server
  --kube-ca-file FILE       CA bundle of the API server
  --no-kube                 standalone: static `nodes` from the config; bind only reserves
  --policy headroom|binpack node scoring policy
  --log-level LEVEL         trace, debug, info, warn, error
  --help-config             list every config key, flag, variable and default
  --version                 print the version
)";

}  // namespace

std::optional<int> HandleInfoFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--version") {
      std::cout << "vramd " << VRAMD_VERSION << "\n";
      return 0;
    }
    if (a == "--help-config") {
      std::printf("%-24s %-26s %-30s %-14s %s\n", "KEY", "FLAG", "VARIABLE", "DEFAULT", "MEANING");
      for (const auto& k : config::Keys()) {
        std::printf("%-24s %-26s %-30s %-14s %s\n", k.json_key.c_str(), k.flag.empty() ? (k.json_key == "kube.enabled" ? "--no-kube" : "-") : k.flag.c_str(),
                    k.env.c_str(), k.default_value.empty() ? "\"\"" : k.default_value.c_str(), k.help.c_str());
      }
      return 0;
    }
  }
  return std::nullopt;
}

}  // namespace vramd::daemon
