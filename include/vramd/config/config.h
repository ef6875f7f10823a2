// vramd's configuration: a JSON file (--config), overridden by VRAMD_*
// environment variables, overridden by command-line flags. Every key, its
// flag, its variable and its default are listed in docs/configuration.md
// (generated from the same table: `vramd --help-config`).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vramd/ledger/placement.h"
#include "vramd/status.h"

namespace vramd::config {

struct StaticGpu {
  int64_t capacity = 0;  // physical bytes, before the reserve
  std::string uuid;
};

struct StaticNode {
  std::string name;
  std::vector<StaticGpu> gpus;
};

struct Config {
  // Serving.
  std::string listen = "127.0.0.1:8080";     // host:port
  // host:port of a second listener without the extender verbs and without
  // client certificates (probes, /metrics, /v1); empty: none.
  std::string api_listen;
  int http_threads = 8;                      // idle worker threads kept per listener
  int http_max_connections = 256;            // per listener (http::ServerOptions::max_connections)
  int http_admission_wait_ms = 1000;         // http::ServerOptions::admission_wait_ms
  int64_t max_body_bytes = 4 << 20;          // larger bodies are answered 413
  int read_timeout_ms = 5000;                // slow clients are cut off
  int http_request_timeout_ms = 10000;       // a whole request, however slowly it trickles in
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;            // verify client certificates when set
  std::string tls_client_names;              // comma-separated: the client certificate must name one (CN or DNS SAN)
  std::string api_token_file;                // bearer token for mutating /v1 calls
  // The admission webhook (issue 34): on admission.listen when set, else on
  // api_listen (or listen without it).
  bool admission_enabled = false;            // admission.enabled
  std::string admission_listen;              // admission.listen: host:port of a listener serving only /admission/*
  std::string admission_scheduler_name;      // admission.scheduler_name: set on VRAM pods left to the default
  std::string admission_runtime_class;       // admission.runtime_class: set on VRAM pods without one
  std::string admission_vramd_users;         // admission.vramd_users: who may write placement annotations
  // Enforcement (issue 34 part B): what node agents do with pods' limits.
  std::string enforce_mode = "dry-run";      // enforce.mode: off | dry-run | on
  std::string enforce_node_modes;            // enforce.node_modes: KEY=VALUE:MODE per node pool
  // Identities (issue 33): Kubernetes tokens checked by TokenReview.
  bool auth_identities = false;              // auth.identities
  std::string auth_audience = "vramd";       // auth.audience
  std::string auth_agent_service_account;    // auth.agent_service_account: NAMESPACE/NAME

  // Valkey.
  std::string valkey_url = "redis://127.0.0.1:6379";
  std::string valkey_username;
  std::string valkey_password_file;          // never on the command line
  std::string key_prefix = "vramd";
  int valkey_pool_size = 8;
  int valkey_timeout_ms = 1000;
  std::string valkey_sentinel_password_file;  // the sentinels' requirepass; never on the command line
  int valkey_min_replicas_ack = 0;           // WAIT for this many replicas after a reservation
  int valkey_wait_timeout_ms = 500;
  bool valkey_epoch_watch = true;            // filter/prioritize skip the epoch read while subscribed

  // Scheduling.
  std::string resource_name = "vramd.io/vram";
  ledger::ScorePolicy score_policy = ledger::ScorePolicy::kHeadroom;
  double reserve_percent = 0;                // per-GPU reserve: max(percent × physical, min)
  int64_t reserve_min_bytes = 0;
  int64_t usage_max_age_ms = 60'000;         // older usage reports fall back to allocation
  double burst_max_peak_ratio = 1.5;         // burst.max_peak_ratio: peak demand ceiling, 1..10 x capacity
  std::vector<std::string> burst_victim_classes{"vramd-disposable"};  // burst.victim_classes
  std::vector<StaticNode> nodes;             // static capacities (first source that wins)

  // Kubernetes.
  bool kube_enabled = true;                  // --no-kube: standalone on `nodes`
  std::string kube_api;                      // empty: in-cluster
  std::string kube_token_file;
  std::string kube_ca_file;
  int kube_timeout_ms = 4000;
  int kube_max_connections = 8;  // kube::Options::max_connections
  int node_sync_interval_ms = 5000;
  // node_sync.agent_capacity_labels: KEY=VALUE labels, any of which marks a
  // node whose agent's reported GPUs may become its capacity (issue 33).
  std::string node_sync_agent_capacity_labels =
      "node-restriction.kubernetes.io/vramd-gpu-node=true,nvidia.com/gpu.present=true,"
      "feature.node.kubernetes.io/amd-gpu=true";

  // Background work.
  int reconcile_interval_ms = 5000;
  int reconcile_min_gap_ms = 250;  // watch events wait this long after the last pass
  int reservation_grace_ms = 60'000;
  int leader_lease_ms = 10'000;
  // After the store lost data the leader rebuilds the ledger from the
  // cluster and seals it no earlier than this after the rebuild began: a bind
  // granted before the loss may still create its Binding meanwhile. -1: as
  // long as a bind is marked in flight (BindInFlightMs).
  int rebuild_quiet_ms = -1;
  // extender::Options::bound_mark_window_ms: bound marks written in batches
  // of this many ms after the binds answered (0: each bind writes its own).
  int bind_mark_window_ms = 20;

  // Runtime protection (issue 15), leader only: the pressure watchdog and
  // idle eviction. Modes: "off", "dry-run" (an Event, a log line and a count;
  // nothing evicted) or "enforce" (the Eviction API).
  std::string watchdog_mode = "dry-run";
  std::string watchdog_floor = "1.5Gi";       // a quantity, or a percent of the GPU's physical VRAM ("10%")
  std::string watchdog_protected_classes;     // comma-separated priority classes never evicted
  std::string watchdog_system_namespaces = "kube-system";  // where the system classes protect (issue 33)
                                              // (system-cluster-critical, system-node-critical always)
  int watchdog_interval_ms = 10'000;          // least time between two protection passes
  int watchdog_cooldown_ms = 300'000;         // at most one action per GPU (watchdog) or pod (idle) per this
  int watchdog_max_actions_per_minute = 10;   // over all GPUs and pods
  int64_t watchdog_min_over_budget_bytes = 512LL << 20;  // a pod is over budget only by more than this
  int watchdog_pressure_reports = 3;          // act only on pressure seen in this many consecutive reports
  int eviction_hold_ms = 180'000;             // room an eviction made for a pending pod is held for it (0: no holds)
  std::string idle_mode = "dry-run";
  std::string idle_policy = "on-demand";      // on-demand | always
  int64_t idle_usage_change_bytes = 256LL << 20;  // a usage change above this is activity
  int idle_pending_max_age_ms = 120'000;      // a filter refusal counts this long as a pod waiting for VRAM

  // Tenants (issue 16): VRAM queues from VramQueue objects (docs/multi-tenant.md).
  bool queues_enabled = true;                 // watch VramQueue objects (needs the chart's CRD)
  std::string queues_default_queue = "default";  // serves namespaces no queue names
  int queues_preemptible_below_priority = 100;   // priority below this: preemptible
  std::string queues_preemptible_classes;     // comma-separated classes that are always preemptible
  int queues_min_runtime_ms = 300'000;        // a preemptible pod younger than this is never a victim
  bool queues_reclaim_unqueued = false;       // pods of namespaces no VramQueue names may be victims
  std::string queues_reclaim_mode = "dry-run";  // off | dry-run | enforce (leader)
  int queues_interval_ms = 5'000;             // least time between two queue passes (status, reclaim)
  int queues_reclaim_cooldown_ms = 30'000;    // at most one reclaim per pending pod within this
  int queues_max_reclaims_per_minute = 30;    // evictions by reclaim and priority preemption, cluster-wide

  // Logging.
  std::string log_level = "info";            // trace debug info warn error
  bool log_json = false;

  // Not a setting: what Load tolerated but the operator should see (an unknown
  // VRAMD_* variable, naming the closest known one), one line each, for main
  // to log once logging is set up.
  std::vector<std::string> warnings;
};

// One configurable key: how it is spelled in each source.
struct KeyInfo {
  std::string json_key;  // in the config file
  std::string flag;      // --flag
  std::string env;       // VRAMD_*
  std::string default_value;
  std::string help;
};
const std::vector<KeyInfo>& Keys();

// Loads the configuration from argv (and the file it names) and `env`
// (the process environment when null). Errors name the offending key or flag.
// VRAMD_* variables are classified by ClassifyEnv (env_names.h): a key's
// variable is applied, a kubelet service-link variable is ignored, any other
// unknown one adds a warning (an error when it is within kNearKeyDistance of a
// key's variable and its value is invalid for that key).
// `--help`/`--version` are not handled here.
Result<Config> Load(int argc, const char* const* argv, const char* const* env = nullptr);

// Parses a config file's text (JSON) onto `cfg`.
Status ApplyJson(const std::string& text, Config* cfg);

// The watchdog's floor as parsed from watchdog_floor: exactly one of the two
// is non-zero (bytes, or a percent above 0 and below 100).
struct Floor {
  int64_t bytes = 0;
  double percent = 0;
};
Result<Floor> ParseFloor(const std::string& v);
// The names of a comma-separated list of priority classes (spaces trimmed);
// an empty name (",,") or one that is not a DNS subdomain is an error.
Result<std::vector<std::string>> ParseClassList(const std::string& v);
// tls.client_names: comma-separated certificate names (a CN such as
// "system:kube-scheduler", or a DNS name), printable ASCII without spaces.
Result<std::vector<std::string>> ParseCertNameList(const std::string& v);
// admission.vramd_users: comma-separated Kubernetes usernames
// (system:serviceaccount:NS:NAME), printable ASCII without spaces.
Result<std::vector<std::string>> ParseUserList(const std::string& v);

// node_sync.agent_capacity_labels: comma-separated KEY=VALUE pairs (keys
// and values as Kubernetes labels allow); empty: no node takes capacity
// from its agent's report.
Result<std::vector<std::pair<std::string, std::string>>> ParseLabelPairs(const std::string& v);
// Whether `labels` hold one of the pairs.
bool HasAnyLabel(const std::map<std::string, std::string>& labels,
                 const std::vector<std::pair<std::string, std::string>>& pairs);
// auth.agent_service_account: NAMESPACE/NAME.
Result<std::pair<std::string, std::string>> ParseServiceAccount(const std::string& v);

// Per-GPU capacity after the reserve: physical − max(percent × physical, min), ≥ 0.
int64_t ApplyReserve(const Config& cfg, int64_t physical);

// How long a bind is marked in flight: longer than its three API calls take
// (3 x kube.timeout_ms + 2 s).
int64_t BindInFlightMs(const Config& cfg);
// rebuild_quiet_ms, with -1 resolved to BindInFlightMs.
int64_t RebuildQuietMs(const Config& cfg);

}  // namespace vramd::config
