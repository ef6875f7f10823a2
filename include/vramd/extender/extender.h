// The extender verbs: filter, prioritize, bind, preempt. Each takes the raw
// request body and produces the HTTP status and response body. Decisions are
// made by the pure placement logic over a ledger snapshot; bind reserves
// atomically in the store, writes the pod annotations and creates the Binding.
// Thread-safe.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "vramd/clock.h"
#include "vramd/extender/bound_marker.h"
#include "vramd/extender/refusal_recorder.h"
#include "vramd/kube/kube_client.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/queues.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/store/ledger_store.h"

namespace vramd::extender {

// Annotations vramd writes at bind (DESIGN.md §2).
inline constexpr const char* kAnnotationGpus = "vramd.io/gpus";
inline constexpr const char* kAnnotationGpuUuids = "vramd.io/gpu-uuids";
inline constexpr const char* kAnnotationVramPerGpu = "vramd.io/vram-per-gpu";

// Tenancy in the verbs (issue 16, docs/multi-tenant.md). Both functions are
// called on request threads and must be thread-safe; unset: queues are off.
struct TenancyHooks {
  // The current queue set (never null when set; empty: no VramQueue objects).
  std::function<ledger::QueueSetPtr()> queues;
  // The queues' fair shares now (the preempt verb's check); nullopt when
  // they cannot be computed (the preempt check then keeps what it kept).
  std::function<std::optional<ledger::TenancyView>()> view;
  ledger::TenancyPolicy policy;
};

struct Options {
  std::string resource_name = "vramd.io/vram";
  ledger::Policy policy;
  TenancyHooks tenancy;
  int bind_attempts = 3;  // reserve retries when a concurrent bind took the chosen GPU
  // How long a bind is marked in flight (the reconcile loop never frees its
  // reservation meanwhile); longer than a bind can take: its three API calls.
  int64_t bind_in_flight_ttl_ms = 30'000;
  // The rebuild's quiet period (config::RebuildQuietMs), named in the
  // refusals while the ledger is rebuilt; 0: not named.
  int64_t rebuild_quiet_ms = 0;
  // > 0 (with Kubernetes): a bound pod's entry is marked bound after the bind
  // is answered, by a BoundMarker that writes the marks of this many ms in
  // one call (bind_mark_window_ms); 0, or standalone: each bind marks its pod
  // before answering.
  int64_t bound_mark_window_ms = 0;
};

struct Response {
  int status = 200;
  std::string body;
};

// What bind asks the store to reserve for pod ns/name (uid) on `node` once
// DecideNode chose `choice`: the entry (its demand recorded from `req`) and
// the policy's fit parameters, the in-flight mark's TTL (0: none) and whether
// the ledger must be sealed (with Kubernetes). One place, so that a bench of
// the bind path (bench/usage_bench.cc) reserves exactly what bind does.
store::ReserveRequest BindReserveRequest(const std::string& node, const std::string& ns, const std::string& name,
                                         const std::string& uid, const ledger::GpuChoice& choice,
                                         const ledger::VramRequest& req, const ledger::Policy& policy,
                                         int64_t in_flight_ttl_ms, bool require_sealed);

// Filter also records, off its path (RefusalRecorder), each VRAM pod that no
// node fits while some node failed for room now (not unresolvable); a bound
// pod's refusal is forgotten. The recorder's thread stops with the Extender.
class Extender {
 public:
  // `kube` may be null (standalone): bind then only reserves, using the pod's
  // request as seen by an earlier filter call on this replica.
  Extender(Options opts, store::LedgerStore* store, kube::KubeClient* kube, const Clock* clock,
           metrics::Registry* registry);

  Response Filter(std::string_view body);
  Response Prioritize(std::string_view body);
  Response Bind(std::string_view body);
  Response Preempt(std::string_view body);

 private:
  struct Cached {
    std::string ns, name;
    ledger::VramRequest req;
  };
  // With Kubernetes nothing is granted from an unsealed ledger (it is being
  // rebuilt from the cluster); standalone mode has nothing to rebuild from.
  bool Rebuilding(const ledger::Snapshot& s) const { return kube_ != nullptr && !s.sealed; }
  // The snapshot filter, prioritize and preempt decide on: the watched one,
  // read afresh when it shows the ledger unsealed (it may lag the seal).
  // kUnavailable with the text for kube-scheduler when the ledger cannot be
  // read or is being rebuilt.
  Result<ledger::SnapshotPtr> DecisionSnapshot();
  void Remember(const std::string& uid, const std::string& ns, const std::string& name,
                const ledger::VramRequest& req);
  bool Recall(const std::string& uid, Cached* out);

  // How a bind ended: the label of vramd_bind_total and, unless the pod is
  // bound, why not. kRejected: the pod or the node refuses it (replaced,
  // bound elsewhere, an invalid request, no room); kFailed: a dependency
  // (Valkey, the API server) failed, and kube-scheduler retries.
  enum class BindResult { kBound, kAlreadyBound, kRejected, kFailed };
  struct BindOutcome {
    BindResult result = BindResult::kBound;
    std::string error;  // empty unless rejected or failed
    static BindOutcome Rejected(std::string why) { return {BindResult::kRejected, std::move(why)}; }
    static BindOutcome Failed(std::string why) { return {BindResult::kFailed, std::move(why)}; }
  };
  struct BindTarget {
    const std::string& ns;
    const std::string& name;
    const std::string& uid;
    const std::string& node;
    std::string Ref() const { return ns + "/" + name; }
  };
  // Clears the bind's in-flight mark (store::LedgerStore::BeginBind) when it
  // goes out of scope while still active.
  struct InFlightMark {
    store::LedgerStore* store;
    const std::string& uid;
    bool active = false;
    ~InFlightMark() {
      if (active) (void)store->EndBind(uid);
    }
  };
  struct Reserved {
    std::vector<int> gpus;
    std::vector<std::string> uuids;  // of `gpus`, where the ledger knows them
  };

  // The three steps of a bind (BindPod): the pod's request (from this
  // replica's filter, else the API server), the VRAM reservation in the
  // ledger, the Binding. Each returns the outcome when the bind ends there.
  BindOutcome BindPod(const BindTarget& t);
  std::optional<BindOutcome> ResolveRequest(const BindTarget& t, ledger::VramRequest* req);
  std::optional<BindOutcome> ReserveVram(const BindTarget& t, const ledger::VramRequest& req,
                                         InFlightMark* in_flight, Reserved* out);
  BindOutcome CreateBinding(const BindTarget& t, const ledger::VramRequest& req, const Reserved& r,
                            InFlightMark* in_flight);

  // Queues the pod's refusal when no node fits and some failed for room
  // (`r` null: its queue refused it, no node named).
  // Records the refusal with the nodes that failed for room (`r`), or, when
  // the pod's queue refused it, the nodes kube-scheduler offered (`offered`):
  // reclaim plans, and nudges kube-scheduler, only for nodes the pod may use.
  void NoteRefusal(const ledger::PodSpecView& pod, const ledger::VramRequest& req, const ledger::FilterResult* r,
                   const std::vector<std::string_view>* offered = nullptr);

  // Whether the pod's queue admits its demand on `snap` (ledger::AdmitToQueue;
  // always when queues are off or no VramQueue object exists). `own_bytes`:
  // what the pod already holds in `snap`.
  ledger::Admission AdmitToQueue(const ledger::SnapshotPtr& snap, const ledger::VramRequest& req,
                                 int64_t own_bytes);
  // The queues' usage on `snap`, computed once per snapshot and queue set.
  std::shared_ptr<const std::vector<ledger::QueueUsage>> QueueUsage(const ledger::SnapshotPtr& snap,
                                                                    const ledger::QueueSetPtr& set);
  // Bind's queue check, on a fresh read of the ledger, for pods their queue
  // could refuse (ledger::AdmissionNeedsUsage); queue_bind_mu_ is held across
  // it and the reservation so this replica's binds cannot together take a
  // queue past a limit or its deserved quota.
  std::optional<BindOutcome> CheckQueue(const BindTarget& t, const ledger::VramRequest& req);

  Options opts_;
  store::LedgerStore* store_;
  kube::KubeClient* kube_;
  const Clock* clock_;
  metrics::Family<metrics::Counter>* bind_results_;

  // Recent pods seen by filter (standalone bind needs their request).
  Mutex cache_mu_;
  std::list<std::string> lru_ GUARDED_BY(cache_mu_);
  std::unordered_map<std::string, std::pair<Cached, std::list<std::string>::iterator>> cache_
      GUARDED_BY(cache_mu_);

  // QueueUsage's cache: the usage of one snapshot under one queue set.
  Mutex usage_mu_;
  ledger::SnapshotPtr usage_snap_ GUARDED_BY(usage_mu_);
  ledger::QueueSetPtr usage_set_ GUARDED_BY(usage_mu_);
  std::shared_ptr<const std::vector<ledger::QueueUsage>> usage_ GUARDED_BY(usage_mu_);
  // Serializes queue-checked binds of this replica (CheckQueue + reserve).
  Mutex queue_bind_mu_;

  std::unique_ptr<BoundMarker> marker_;  // with bound_mark_window_ms > 0 and Kubernetes
  RefusalRecorder refusals_;  // last: its thread stops before anything else goes
};

}  // namespace vramd::extender
