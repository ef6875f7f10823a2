// The routes of vramd's HTTP listeners, grouped by resource (src/http/routes/):
//   extender.cc  POST /scheduler/{filter,prioritize,bind,preempt}
//   ledger.cc    GET /v1/nodes[/{node}], GET|POST /v1/explain, GET /v1/queues,
//                PUT /v1/nodes/{node}/usage
//   locks.cc     /v1/locks (docs/locks.md)
//   health.cc    GET /healthz, /readyz, /metrics
// Thin adapters: decode, call a component, encode. The JSON they write and
// read stays inside src/http (json_views.h); nothing here exposes it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "vramd/clock.h"
#include "vramd/extender/extender.h"
#include "vramd/gpulock/locks.h"
#include "vramd/http/auth.h"
#include "vramd/http/server.h"
#include "vramd/kube/kube_client.h"
#include "vramd/ledger/admission.h"
#include "vramd/ledger/enforcement.h"
#include "vramd/ledger/model.h"
#include "vramd/ledger/queues.h"
#include "vramd/ledger/usage.h"
#include "vramd/metrics/registry.h"
#include "vramd/status.h"
#include "vramd/store/ledger_store.h"

namespace vramd::http {

// What a replica that runs with Kubernetes adds to GET /readyz (standalone
// replicas add nothing: Valkey is all they need).
struct ReplicaReadiness {
  std::string replica;
  std::string leader;
  bool is_leader = false;
  bool pod_watch_synced = false;
  int64_t last_reconcile_ms = 0;
  // The condition of readiness: a full reconcile since this process started.
  bool reconciled_since_start = false;
  // Shown, not a condition (absent when the ledger could not be read).
  std::optional<bool> ledger_sealed;
};

struct ApiServices {
  extender::Extender* extender = nullptr;
  store::LedgerStore* store = nullptr;
  metrics::Registry* registry = nullptr;
  const Clock* clock = nullptr;
  int64_t usage_max_age_ms = 60'000;
  std::string api_token;  // required on mutating /v1 calls when non-empty (when auth is unset)
  // Who calls and what they may do (vramd/http/auth.h); unset: the shared
  // api_token alone, identities off.
  std::shared_ptr<Authenticator> auth;
  kube::KubeClient* kube = nullptr;  // for GET /v1/explain?namespace=&pod= (null: standalone)
  std::string resource_name = "vramd.io/vram";
  ledger::Policy policy;
  // With Kubernetes: whether the node watch knows a node of this name (nullopt
  // while its copy is not synced). A usage report for a node not in the
  // ledger is kept only for a node the cluster has. Unset: standalone.
  std::function<std::optional<bool>(const std::string&)> node_in_cluster;
  // Issue 34: the enforce.mode of a node (enforce.node_modes by its labels);
  // the answer to its agent's report carries it and the node's limits.
  // Unset: no enforcement section (the agent then writes nothing).
  std::function<ledger::EnforceMode(const std::string&)> enforce_mode;
  // Readiness beyond Valkey (leader, first reconcile); unset or nullopt: none.
  std::function<std::optional<ReplicaReadiness>()> readiness;
  // Tenancy (issue 16): the queues as this replica sees them now (computed
  // from the cached snapshot and the filter-refusal log). Unset: queues are
  // off (GET /v1/queues answers 404 saying so); nullopt: the state cannot be
  // read now (503).
  std::function<std::optional<ledger::TenancyView>()> tenancy;
};

// All of the routes below but the locks' (RegisterLockRoutes).
void RegisterRoutes(Server& server, const ApiServices& services);
// The same without the extender verbs, for the api_listen listener (probes,
// Prometheus, node agents, vramctl): health and ledger routes, and
// POST /scheduler/{verb} answered 403 with a message saying where the verbs
// are served. services.extender may be null.
void RegisterApiListenerRoutes(Server& server, const ApiServices& services);

void RegisterExtenderRoutes(Server& server, const ApiServices& services);
void RegisterLedgerRoutes(Server& server, const ApiServices& services);
void RegisterHealthRoutes(Server& server, const ApiServices& services);

// Decodes the body of PUT /v1/nodes/{node}/usage (docs/configuration.md,
// "Usage reports"): the agent's report, {"version": 2, "gpus": [{"index",
// "total_bytes", "used_bytes", "uuid"?, "outside_pods_bytes"?, "pods"?:
// [{"uid", "used_bytes"}]}, ...]} (unknown keys ignored, integers only), or
// the old report {"gpus": {"<index>": bytes or quantity string, ...}}
// (version 1). The GPUs come back sorted by index, and the report passes
// ledger::CheckUsageReport. kInvalidArgument with a message that names the
// offending part. Pure; no knowledge of the ledger (CheckReportAgainstNode).
Result<ledger::UsageReport> DecodeUsageReport(std::string_view body);

// The admission webhook (issue 34, part A; docs/admission.md):
//   POST /admission/mutate                  Pods: schedulerName, runtime class, the GPU environment (a JSON patch)
//   POST /admission/validate                Pods: the VRAM request and vramd.io/* annotations, placement
//                                           annotations from vramd only, no spec.nodeName with VRAM;
//                                           VramQueues: the leader's validation
//   POST /admission/validate-direct-bind    the same, spec.nodeName allowed (namespaces an admin opted out:
//                                           the chart's second webhook, selected by the namespace label)
// Each answers an AdmissionReview (v1 or v1beta1) with the request's uid.
struct AdmissionServices {
  std::string resource_name = "vramd.io/vram";
  ledger::AdmissionPolicy policy;
  // The current VramQueue set (the queue watch's); unset: queues are checked alone.
  std::function<ledger::QueueSetPtr()> queues;
  ledger::TenancyPolicy tenancy_policy;
};
void RegisterAdmissionRoutes(Server& server, AdmissionServices services);

// The GPU-lock endpoints of the /v1 API (docs/locks.md):
//   POST /v1/locks/{node}/{gpu}/acquire    {"owner", "ttl_seconds"?, "wait_seconds"?}
//   POST /v1/locks/{node}/{gpu}/heartbeat  {"owner", "ttl_seconds"?}
//   POST /v1/locks/{node}/{gpu}/release    {"owner"}
//   GET  /v1/locks
// The POSTs need the bearer token when one is configured (401 before
// anything is read or written). Bad input is 400, not the owner 409, a full
// queue 429, Valkey unreachable 503.
enum class LockOp { kAcquire, kHeartbeat, kRelease };

// A decoded POST body. ttl_ms is 0 when the body has no ttl_seconds.
struct LockCall {
  std::string owner;
  int64_t ttl_ms = 0;
  int64_t wait_ms = 0;
};

// Decodes and validates the body of `op`: a JSON object with a valid owner,
// ttl_seconds a number from 0.1 to 86400, wait_seconds (acquire only) a
// number from 0 to 3600 (the service waits at most kMaxWaitMs); any other key
// is an error (a misspelt ttl must not silently become the default).
Result<LockCall> DecodeLockCall(LockOp op, const std::string& body);

// Whether a lock may exist for GPU `gpu` of `node` (issue 33: locks only
// for GPUs vramd knows, so that made-up names create no keys): Ok, kNotFound
// (answered 404 with its message) or kUnavailable (503).
using LockTargetCheck = std::function<Status(const std::string& node, int gpu)>;
// The check against the ledger: the node is in it and has that GPU index.
LockTargetCheck LedgerLockTargets(store::LedgerStore* store);

// `known` (unset: none) is asked before every mutating call.
// Who may call them: MayCallLock (identities on: the owner is the caller's
// pod); GET /v1/locks shows owners to callers with a credential only.
void RegisterLockRoutes(Server& server, gpulock::LockService* locks, std::shared_ptr<Authenticator> auth,
                        LockTargetCheck known = nullptr);
// With the shared token alone (identities off).
void RegisterLockRoutes(Server& server, gpulock::LockService* locks, const std::string& api_token,
                        LockTargetCheck known = nullptr);

}  // namespace vramd::http
