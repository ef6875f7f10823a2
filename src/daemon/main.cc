// vramd: the daemon. Wiring only: the one place that knows every concrete
// class. It owns the components in dependency order and, on SIGTERM, stops
// the lock waiters, then HTTP, then the loops. `vramd ensure-secrets ...` is a
// subcommand of its own (ensure_secrets.h).
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "daemon/cli.h"
#include "daemon/clock_sync.h"
#include "daemon/collectors.h"
#include "daemon/ensure_secrets.h"
#include "daemon/leader_loops.h"
#include "daemon/listeners.h"
#include "daemon/logging.h"
#include "daemon/options.h"
#include "daemon/secrets.h"
#include "daemon/signals.h"
#include "vramd/ledger/enforcement.h"

using namespace vramd;

int main(int argc, char** argv) {
  // Each HTTP connection has a thread of its own (issue 30), and glibc gives
  // threads up to 8 malloc arenas per core, each keeping what its threads
  // freed: 4 keep freed memory reusable across threads (16 decoded 512 KiB
  // /v1/explain bodies: a peak RSS of 32 MiB instead of 68). MALLOC_ARENA_MAX wins.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 4);
  if (argc > 1 && std::string_view(argv[1]) == "ensure-secrets") return daemon::EnsureSecretsMain(argc - 1, argv + 1);
  if (std::optional<int> rc = daemon::HandleInfoFlags(argc, argv)) return *rc;
  Result<config::Config> loaded = config::Load(argc, argv);
  if (!loaded.ok()) {
    std::fprintf(stderr, "vramd: %s\n", loaded.status().message().c_str());
    return 2;
  }
  const config::Config cfg = std::move(loaded).value();
  daemon::SetupLogging(cfg.log_level, cfg.log_json);
  for (const std::string& w : cfg.warnings) spdlog::warn("{}", w);
  const sigset_t sigs = daemon::BlockSignals();
  Result<daemon::Secrets> secrets = daemon::ReadSecrets(cfg);
  if (!secrets.ok()) {
    spdlog::critical("{}", secrets.status().message());
    return 2;
  }

  // Every decision compares times the store stamped: with the store's clock
  // (issue 32), measured at start and every 10 s.
  SystemClock system_clock;
  OffsetClock clock(&system_clock);
  metrics::Registry registry;
  daemon::ExportProcessMetrics(&registry);
  std::shared_ptr<store::ValkeyClient> valkey = store::NewValkeyClient(daemon::ValkeyOptionsFrom(cfg, *secrets));
  daemon::ClockSync clock_sync(valkey.get(), &clock, &registry, /*interval_ms=*/10'000);
  clock_sync.Start();  // its first sample at once; this replica's own clock counts until then
  std::unique_ptr<store::LedgerStore> store = store::NewValkeyLedgerStore(valkey);
  if (cfg.valkey_epoch_watch) store->StartEpochWatch();
  std::unique_ptr<kube::KubeClient> kube;
  if (cfg.kube_enabled) {
    Result<std::unique_ptr<kube::KubeClient>> k = kube::NewRestClient(daemon::KubeOptionsFrom(cfg));
    if (!k.ok()) {
      spdlog::critical("Kubernetes client: {} (use --no-kube to run standalone)", k.status().message());
      return 2;
    }
    kube = std::move(k).value();
  }
  Result<std::unique_ptr<daemon::Listeners>> made = daemon::Listeners::Create(cfg, &registry);
  if (!made.ok()) {
    spdlog::critical("{}", made.status().message());
    return 2;
  }
  daemon::Listeners& listeners = **made;  // listen, and api_listen when set
  reconcile::NodeSync node_sync(cfg, store.get(), kube.get(), &registry);
  std::shared_ptr<store::LockStore> lock_store = store::NewValkeyLockStore(valkey);
  gpulock::LockService locks(lock_store, &registry, daemon::LockOptionsFrom(cfg));
  std::unique_ptr<daemon::LeaderLoops> loops;  // with Kubernetes only
  if (kube) {
    loops = std::make_unique<daemon::LeaderLoops>(cfg, store::NewValkeyLease(valkey, store::kLeaderLeaseName), store.get(),
                                                  kube.get(), &node_sync, &locks,
                                                  [lock_store](const std::vector<std::string>& nodes) {
                                                    return lock_store->ReadActivity(nodes);
                                                  },
                                                  &clock, &registry);
  }
  extender::Options extender_options = daemon::ExtenderOptionsFrom(cfg);
  if (loops) {
    reconcile::Tenancy* tenancy = loops->tenancy();
    extender_options.tenancy.queues = [tenancy] { return tenancy->Queues(); };
    extender_options.tenancy.view = [tenancy] { return tenancy->View(); };
    extender_options.tenancy.policy = tenancy->policy();
  }
  extender::Extender extender(std::move(extender_options), store.get(), kube.get(), &clock, &registry);
  daemon::AddCollectors(&registry, valkey.get(), store.get(), &clock, cfg.usage_max_age_ms,
                        cfg.burst_max_peak_ratio);

  http::ApiServices api = daemon::ApiSettingsFrom(cfg, *secrets);
  api.extender = &extender;
  api.store = store.get();
  api.registry = &registry;
  api.clock = &clock;
  api.kube = kube.get();
  if (loops) api.readiness = [l = loops.get()] { return std::optional(l->Readiness()); };
  if (loops && cfg.queues_enabled) {
    api.tenancy = [t = loops->tenancy()] { return t->View(); };
  }
  if (loops) api.node_in_cluster = [l = loops.get()](const std::string& n) { return l->NodeInCluster(n); };
  {
    // Issue 34: each node's enforce.mode (enforce.node_modes by its labels;
    // a node the watch does not know gets enforce.mode). Validated at load.
    ledger::EnforceMode fallback = ledger::EnforceMode::kDryRun;
    ledger::ParseEnforceMode(cfg.enforce_mode, &fallback);
    Result<ledger::NodeModeRules> parsed_rules = ledger::ParseNodeModeRules(cfg.enforce_node_modes);
    ledger::NodeModeRules rules = parsed_rules.ok() ? *parsed_rules : ledger::NodeModeRules{};
    api.enforce_mode = [l = loops.get(), rules, fallback](const std::string& node) {
      if (l == nullptr || rules.empty()) return fallback;
      std::optional<std::map<std::string, std::string>> labels = l->NodeLabels(node);
      return labels ? ledger::ModeForNode(*labels, rules, fallback) : fallback;
    };
  }
  api.auth = std::make_shared<http::Authenticator>(daemon::AuthOptionsFrom(cfg, *secrets), kube.get(), &clock);
  listeners.Register(api, &locks);
  if (cfg.admission_enabled) {
    http::AdmissionServices admission = daemon::AdmissionOptionsFrom(cfg);
    if (loops && cfg.queues_enabled) {
      reconcile::Tenancy* tenancy = loops->tenancy();
      admission.queues = [tenancy] { return tenancy->Queues(); };
      admission.tenancy_policy = tenancy->policy();
    }
    listeners.RegisterAdmission(std::move(admission));
  }

  // Standalone, the configured nodes are written before the first request is
  // answered: a filter or a lock right after start found no node (404, "no
  // GPU capacity known") while the sync loop's first pass was still to run.
  // A store that is down is retried by the loop as usual.
  if (!loops) {
    try {
      Result<reconcile::NodeSyncStats> first = node_sync.SyncOnce();
      if (!first.ok()) spdlog::warn("node capacity sync failed: {}", first.status().message());
    } catch (const std::exception& e) {  // the loop's guard would catch it there
      spdlog::warn("node capacity sync failed: {}", e.what());
    }
  }
  if (Status s = listeners.Start(); !s.ok()) {
    spdlog::critical("{}", s.message());
    return 1;
  }
  if (loops) loops->Start();
  else node_sync.Start();
  spdlog::info("vramd {} listening on {} (valkey {}, {}, policy {})", VRAMD_VERSION, listeners.Describe(),
               store::RedactValkeyUrl(cfg.valkey_url), kube ? "kubernetes" : "standalone",
               ledger::ScorePolicyName(cfg.score_policy));

  daemon::WaitForStop(sigs, listeners);
  locks.Stop();   // waiting lock acquires answer now
  listeners.Stop();  // stop accepting, finish in-flight requests
  if (loops) loops->Stop();  // then the loops; the leader gives its lease up
  node_sync.Stop();
  clock_sync.Stop();
  spdlog::info("stopped");
  return 0;
}
