// vramd: the daemon. The only place that knows every concrete class; it owns
// the components in dependency order and stops them in reverse on SIGTERM.
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "vramd/app/api.h"
#include "vramd/app/logging.h"
#include "vramd/clock.h"
#include "vramd/config/config.h"
#include "vramd/extender/extender.h"
#include "vramd/gpulock/lock_routes.h"
#include "vramd/gpulock/locks.h"
#include "vramd/http/server.h"
#include "vramd/kube/kube_client.h"
#include "vramd/metrics/registry.h"
#include "vramd/metrics/thread_guard.h"
#include "vramd/reconcile/leader.h"
#include "vramd/reconcile/node_sync.h"
#include "vramd/reconcile/pod_watch.h"
#include "vramd/reconcile/reconciler.h"
#include "vramd/store/valkey_client.h"

namespace {

const char* kUsage = R"(vramd - GPU memory (VRAM) as a schedulable resource for kube-scheduler

Usage: vramd [--config FILE] [flags]

Common flags (every config key has a flag and a VRAMD_* variable; see --help-config):
  --listen HOST:PORT        serve the extender, /v1 API, /metrics (default 127.0.0.1:8080)
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

std::string ReadSecretFile(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read " + path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}


}  // namespace

int main(int argc, char** argv) {
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
      for (const auto& k : vramd::config::Keys()) {
        std::printf("%-24s %-26s %-30s %-14s %s\n", k.json_key.c_str(), k.flag.empty() ? (k.json_key == "kube.enabled" ? "--no-kube" : "-") : k.flag.c_str(),
                    k.env.c_str(), k.default_value.empty() ? "\"\"" : k.default_value.c_str(), k.help.c_str());
      }
      return 0;
    }
  }
  vramd::Result<vramd::config::Config> loaded = vramd::config::Load(argc, argv);
  if (!loaded.ok()) {
    std::fprintf(stderr, "vramd: %s\n", loaded.status().message().c_str());
    return 2;
  }
  const vramd::config::Config cfg = std::move(loaded).value();
  vramd::app::SetupLogging(cfg.log_level, cfg.log_json);
  for (const std::string& w : cfg.warnings) spdlog::warn("{}", w);

  // Signals are taken synchronously by the main thread only.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  vramd::store::ValkeyOptions vopts;
  vopts.url = cfg.valkey_url;
  vopts.username = cfg.valkey_username;
  vopts.key_prefix = cfg.key_prefix;
  vopts.pool_size = cfg.valkey_pool_size;
  vopts.connect_timeout = std::chrono::milliseconds(std::min(cfg.valkey_timeout_ms, 1000));
  vopts.command_timeout = std::chrono::milliseconds(cfg.valkey_timeout_ms);
  if (!cfg.valkey_password_file.empty()) {
    std::string err;
    vopts.password = ReadSecretFile(cfg.valkey_password_file, &err);
    if (!err.empty()) {
      spdlog::critical("valkey.password_file: {}", err);
      return 2;
    }
  } else if (const char* pw = std::getenv("VRAMD_VALKEY_PASSWORD")) {
    vopts.password = pw;  // from a Secret via the environment; never from a flag
  }
  vopts.min_replicas_ack = cfg.valkey_min_replicas_ack;
  vopts.wait_timeout = std::chrono::milliseconds(cfg.valkey_wait_timeout_ms);
  if (!cfg.valkey_sentinel_password_file.empty()) {
    std::string err;
    vopts.sentinel_password = ReadSecretFile(cfg.valkey_sentinel_password_file, &err);
    if (!err.empty()) {
      spdlog::critical("valkey.sentinel_password_file: {}", err);
      return 2;
    }
  } else if (const char* pw = std::getenv("VRAMD_VALKEY_SENTINEL_PASSWORD")) {
    vopts.sentinel_password = pw;
  }
  std::string api_token;
  if (!cfg.api_token_file.empty()) {
    std::string err;
    api_token = ReadSecretFile(cfg.api_token_file, &err);
    if (!err.empty() || api_token.empty()) {
      spdlog::critical("api_token_file: {}", err.empty() ? "the file is empty" : err);
      return 2;
    }
  }

  vramd::SystemClock clock;
  vramd::metrics::Registry registry;
  vramd::metrics::ExportThreadErrors(&registry);  // vramd_thread_errors_total{thread}
  registry.AddGauge("vramd_build_info", "Build information (value 1).", {"version"}).With({VRAMD_VERSION}).Set(1);

  std::shared_ptr<vramd::store::ValkeyClient> valkey = vramd::store::NewValkeyClient(vopts);
  std::unique_ptr<vramd::store::LedgerStore> store = vramd::store::NewValkeyLedgerStore(valkey);
  if (cfg.valkey_epoch_watch) store->StartEpochWatch();

  std::unique_ptr<vramd::kube::KubeClient> kube;
  if (cfg.kube_enabled) {
    vramd::kube::Options kopts;
    kopts.api_url = cfg.kube_api;
    kopts.token_file = cfg.kube_token_file;
    kopts.ca_file = cfg.kube_ca_file;
    kopts.resource_name = cfg.resource_name;
    kopts.timeout_ms = cfg.kube_timeout_ms;
    auto k = vramd::kube::NewRestClient(kopts);
    if (!k.ok()) {
      spdlog::critical("Kubernetes client: {} (use --no-kube to run standalone)", k.status().message());
      return 2;
    }
    kube = std::move(k).value();
  }

  vramd::extender::Options eopts;
  eopts.resource_name = cfg.resource_name;
  eopts.policy.score = cfg.score_policy;
  eopts.policy.usage_max_age_ms = cfg.usage_max_age_ms;
  eopts.bind_in_flight_ttl_ms = vramd::config::BindInFlightMs(cfg);
  vramd::extender::Extender extender(eopts, store.get(), kube.get(), &clock, &registry);

  vramd::http::ServerOptions sopts;
  if (vramd::Status s = vramd::http::ParseListen(cfg.listen, &sopts.host, &sopts.port); !s.ok()) {
    spdlog::critical("{}", s.message());
    return 2;
  }
  sopts.threads = cfg.http_threads;
  sopts.max_body_bytes = static_cast<size_t>(cfg.max_body_bytes);
  sopts.read_timeout_ms = cfg.read_timeout_ms;
  sopts.tls_cert_file = cfg.tls_cert_file;
  sopts.tls_key_file = cfg.tls_key_file;
  sopts.tls_client_ca_file = cfg.tls_client_ca_file;
  vramd::http::Server server(sopts, &registry);

  vramd::reconcile::NodeSync node_sync(cfg, store.get(), kube.get(), &registry);

  vramd::gpulock::LockOptions lock_opts;
  lock_opts.max_waiting_calls = (cfg.http_threads - 1) / 2;  // long polls leave workers for filter/bind
  vramd::gpulock::LockService locks(valkey, &registry, lock_opts);

  // With Kubernetes: replicas elect a leader in Valkey; the leader watches
  // pods and reconciles (node capacities included). Standalone: node
  // capacities from the config only.
  const int64_t started_ms = clock.NowMs();
  std::unique_ptr<vramd::reconcile::LeaderElector> leader;
  std::unique_ptr<vramd::reconcile::PodWatcher> watcher;
  std::unique_ptr<vramd::reconcile::NodeWatcher> node_watcher;
  std::unique_ptr<vramd::reconcile::Reconciler> reconciler;
  vramd::reconcile::Reconciler* rec_ptr = nullptr;  // outlives the watcher's callback
  if (kube) {
    leader = std::make_unique<vramd::reconcile::LeaderElector>(vramd::store::NewValkeyLease(valkey, "leader"),
                                                               vramd::reconcile::MakeReplicaIdentity(),
                                                               cfg.leader_lease_ms, &registry);
    watcher = std::make_unique<vramd::reconcile::PodWatcher>(
        kube.get(), [&rec_ptr] { if (rec_ptr) rec_ptr->Poke(); }, &registry);
    reconciler = std::make_unique<vramd::reconcile::Reconciler>(
        cfg, store.get(), kube.get(), leader.get(), watcher.get(), &node_sync, &clock, &registry,
        [&locks](const std::function<bool(const std::string&)>& exists) { (void)locks.ReapLocksOfMissingPods(exists); });
    rec_ptr = reconciler.get();
    node_watcher = std::make_unique<vramd::reconcile::NodeWatcher>(kube.get(), [&rec_ptr] {
      if (rec_ptr) rec_ptr->Poke();
    });
    node_sync.SetNodeSource([w = node_watcher.get()] { return w->Nodes(); });
  }
  registry.AddCollector([&valkey](vramd::metrics::TextWriter& w) {
    w.Header("vramd_valkey_errors_total", "Valkey transport failures (unreachable, timeouts) seen by callers.",
             "counter");
    w.Sample("vramd_valkey_errors_total", {}, static_cast<double>(valkey->TransportErrors()));
  });
  registry.AddCollector([store_ptr = store.get()](vramd::metrics::TextWriter& w) {
    w.Header("vramd_ledger_epoch_watch_up",
             "1 while vramd follows the ledger's change notifications (filter and prioritize then skip the "
             "epoch read), else 0.",
             "gauge");
    w.Sample("vramd_ledger_epoch_watch_up", {}, store_ptr->EpochWatchLive() ? 1.0 : 0.0);
    w.Header("vramd_ledger_epoch_reads_total", "Epoch reads (one Valkey round trip each) made for snapshots.",
             "counter");
    w.Sample("vramd_ledger_epoch_reads_total", {}, static_cast<double>(store_ptr->EpochChecks()));
    const vramd::store::LedgerStore::ReloadCounts r = store_ptr->SnapshotReloads();
    w.Header("vramd_ledger_snapshot_refreshes_total",
             "Snapshot refreshes by kind: full (the whole ledger read) or incremental (changed nodes only).",
             "counter");
    w.Sample("vramd_ledger_snapshot_refreshes_total", {{"kind", "full"}}, static_cast<double>(r.full));
    w.Sample("vramd_ledger_snapshot_refreshes_total", {{"kind", "incremental"}}, static_cast<double>(r.incremental));
  });

  vramd::app::ApiServices api;
  api.extender = &extender;
  api.store = store.get();
  api.registry = &registry;
  api.clock = &clock;
  api.usage_max_age_ms = cfg.usage_max_age_ms;
  api.api_token = api_token;
  api.kube = kube.get();
  api.resource_name = cfg.resource_name;
  api.policy = eopts.policy;
  vramd::reconcile::LeaderElector* leader_ptr = leader.get();
  vramd::reconcile::Reconciler* reconciler_ptr = reconciler.get();
  vramd::reconcile::PodWatcher* watcher_ptr = watcher.get();
  vramd::store::LedgerStore* store_ptr = store.get();
  api.readiness = [=](nlohmann::json& details, bool* ready) {
    if (leader_ptr == nullptr) return;  // standalone: Valkey is all it needs
    details["replica"] = leader_ptr->identity();
    details["leader"] = leader_ptr->CurrentLeader();
    details["is_leader"] = leader_ptr->IsLeader();
    details["pod_watch_synced"] = watcher_ptr->Synced();
    // Ready after the first full reconcile since this process started (by
    // this replica as leader, or by the leader that serves the ledger).
    vramd::Result<int64_t> last = store_ptr->LastReconciled();
    int64_t last_ms = last.ok() ? *last : 0;
    details["last_reconcile_ms"] = last_ms;
    bool reconciled = reconciler_ptr->FirstPassDone() || last_ms >= started_ms;
    details["reconciled_since_start"] = reconciled;
    if (!reconciled) *ready = false;
    // Not a condition of readiness: while the leader rebuilds the ledger the
    // verbs answer why nothing is granted, which an unready endpoint cannot.
    vramd::Result<vramd::ledger::SnapshotPtr> snap = store_ptr->WatchedSnapshot();
    if (snap.ok()) details["ledger_sealed"] = (*snap)->sealed;
  };
  vramd::app::RegisterRoutes(server, api);
  vramd::gpulock::RegisterLockRoutes(server, &locks, api_token);

  if (vramd::Status s = server.Start(); !s.ok()) {
    spdlog::critical("{}", s.message());
    return 1;
  }
  if (kube) {
    leader->Start();
    watcher->Start();
    node_watcher->Start();
    reconciler->Start();
  } else {
    node_sync.Start();
  }
  spdlog::info("vramd {} listening on {}://{}:{} (valkey {}, {}, policy {})", VRAMD_VERSION,
               cfg.tls_cert_file.empty() ? "http" : "https", sopts.host, server.port(),
               vramd::store::RedactValkeyUrl(cfg.valkey_url),
               kube ? "kubernetes" : "standalone", vramd::ledger::ScorePolicyName(cfg.score_policy));

  for (;;) {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (sig == SIGHUP) {
      vramd::Status s = server.ReloadTls();
      if (s.ok()) spdlog::info("SIGHUP: TLS certificate reloaded");
      else spdlog::error("SIGHUP: {}", s.message());
      continue;
    }
    spdlog::info("signal {}: stopping", sig);
    break;
  }
  locks.Stop();      // waiting lock acquires answer now
  server.Stop();     // stop accepting, finish in-flight requests
  if (kube) {        // then the loops
    reconciler->Stop();
    node_watcher->Stop();
    watcher->Stop();
    leader->Stop();  // gives the lease up: a standby takes over at once
  }
  node_sync.Stop();
  spdlog::info("stopped");
  return 0;
}
