// Tenants (issue 16, docs/multi-tenant.md). Every replica keeps the current
// queue set (rebuilt from the VramQueue watch with ledger::BuildQueueSet) for
// filter and bind, and computes the queues' view (usage, fair shares) for
// /v1/queues and the preempt verb. The leader, after its reconcile passes,
// writes each VramQueue's status (when it changed), exports the per-queue
// gauges, and reclaims: it asks the pure core (ledger::PlanReclaim) for room
// for the pods waiting for VRAM and acts through the Evictor (dry-run: an
// Event and a count; enforce: the Eviction API), at most once per pending pod
// per cooldown and within a cluster-wide rate.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "vramd/clock.h"
#include "vramd/config/config.h"
#include "vramd/kube/kube_client.h"
#include "vramd/ledger/protection.h"
#include "vramd/ledger/queues.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/reconcile/evictor.h"
#include "vramd/reconcile/pod_watch.h"
#include "vramd/store/ledger_store.h"

namespace vramd::reconcile {

struct TenancySettings {
  bool enabled = true;
  ledger::TenancyPolicy policy;
  std::optional<ActionMode> reclaim = ActionMode::kEnforce;  // nullopt: off
  ledger::FitPolicy fit;
  ledger::Policy placement;  // the nudge's check that a pod fits as things are
  int64_t interval_ms = 5'000;
  int64_t cooldown_ms = 30'000;
  int max_per_minute = 30;
  int64_t pending_max_age_ms = 120'000;  // idle.pending_max_age_ms: how long a refusal means "waiting"
  size_t max_plans_per_pass = 16;
  int64_t hold_ms = 180'000;  // eviction.hold_ms: room a reclaim made is held for its pod (HoldRoom)
  std::string leader_identity;  // the budget's fence (EvictionBudget): "" none
};
TenancySettings TenancySettingsFrom(const config::Config& cfg, const ledger::Policy& placement);

// What one leader pass saw and did.
struct TenancyStats {
  int queues = 0;            // VramQueue objects
  int invalid = 0;           // of which invalid
  int pending_pods = 0;      // pods waiting for VRAM
  int plans = 0;             // reclaim / priority plans the core proposed
  int evictions = 0;         // victims recorded (dry-run) or evicted
  int gated = 0;             // plans held back by the cooldown or the rate
  int holds = 0;             // holds written for the pods plans made room for
  int blocked = 0;           // plans of several victims dropped whole: one would be refused (Precheck)
  int status_patches = 0;    // VramQueue status subresources written
  int status_errors = 0;
  int nudges = 0;            // node label changes asking kube-scheduler to retry parked pods
};

// "evicted for a pending pod of queue team-a (entitled: 8Gi allocated + 8Gi
// requested <= fair share 20Gi); queue team-b holds 30Gi over its fair share 16Gi"
std::string ReclaimDetail(const ledger::ReclaimPlan& plan, const ledger::ReclaimVictim& v,
                          const ledger::TenancyView& view);

class Tenancy {
 public:
  // `specs` returns the VramQueue objects as the watch sees them now; `kube`,
  // `pods` and `evictor` may be null on a replica that never leads (then
  // MaybeRun does nothing but the view). Every pointer must outlive this.
  Tenancy(TenancySettings settings, std::function<std::vector<ledger::QueueSpec>()> specs,
          store::LedgerStore* store, kube::KubeClient* kube, PodWatcher* pods, Evictor* evictor, const Clock* clock,
          metrics::Registry* registry);

  // Rebuilds the queue set from `specs` (the queue watch calls it on change).
  void Refresh();
  // The current set; empty until the first Refresh, and while tenancy is off.
  ledger::QueueSetPtr Queues() const;
  const ledger::TenancyPolicy& policy() const { return s_.policy; }

  // The queues now, from the cached ledger snapshot and the recent filter
  // refusals (every replica; /v1/queues, the preempt verb). nullopt when the
  // ledger or the refusals cannot be read.
  std::optional<ledger::TenancyView> View();

  // The leader's pass when interval_ms has passed since the last (the
  // reconciler calls it after each of its passes), or nullopt.
  std::optional<Result<TenancyStats>> MaybeRun();
  Result<TenancyStats> RunOnce();

 private:
  // Pods refused for VRAM that are still pending (checked against the pod
  // watch when there is one); refusals of pods no longer pending are forgotten.
  Result<std::vector<ledger::PendingPod>> Pending(bool check_watch);
  void Export(const ledger::TenancyView& view) EXCLUSIVE_LOCKS_REQUIRED(run_mu_);
  void WriteStatus(const ledger::TenancyView& view, TenancyStats* stats) EXCLUSIVE_LOCKS_REQUIRED(run_mu_);
  void Reclaim(const ledger::TenancyView& view, const ledger::Snapshot& snap,
               const std::vector<ledger::PendingPod>& pending, TenancyStats* stats) EXCLUSIVE_LOCKS_REQUIRED(run_mu_);
  void Nudge(const ledger::Snapshot& snap, const std::vector<ledger::PendingPod>& pending,
             const std::unordered_map<std::string, std::string>& fits_on, TenancyStats* stats) EXCLUSIVE_LOCKS_REQUIRED(run_mu_);

  // A pending pod that fits is nudged for once it waited this long since its
  // last refusal, and not again for this long.
  static constexpr int64_t kNudgeAfterMs = 2'000;
  static constexpr int64_t kNudgeSpacingMs = 15'000;

  TenancySettings s_;
  std::function<std::vector<ledger::QueueSpec>()> specs_;
  store::LedgerStore* store_;
  kube::KubeClient* kube_;
  PodWatcher* pods_;
  Evictor* evictor_;
  const Clock* clock_;

  mutable Mutex mu_;
  ledger::QueueSetPtr set_ GUARDED_BY(mu_);

  // The leader pass's own state.
  Mutex run_mu_;
  int64_t last_run_ms_ GUARDED_BY(run_mu_) = 0;
  EvictionBudget budget_ GUARDED_BY(run_mu_);  // keys "reclaim:<pending pod uid>"
  std::map<std::string, ledger::QueueStatus> written_ GUARDED_BY(run_mu_);  // queue -> status last written
  std::map<std::string, std::string> transition_ GUARDED_BY(run_mu_);       // queue -> (valid, since) of its condition
  std::set<std::string> exported_ GUARDED_BY(run_mu_);                      // queues with gauges
  std::map<std::string, int64_t> nudged_ GUARDED_BY(run_mu_);               // pod uid -> last nudge for it
  std::set<std::string> status_failing_ GUARDED_BY(run_mu_);                // queues whose last status write failed

  metrics::Family<metrics::Gauge>* deserved_;
  metrics::Family<metrics::Gauge>* limit_;
  metrics::Family<metrics::Gauge>* allocated_;
  metrics::Family<metrics::Gauge>* fair_share_;
  metrics::Family<metrics::Gauge>* pending_;
  metrics::Family<metrics::Gauge>* valid_;
  metrics::Family<metrics::Counter>* reclaims_;
  metrics::Family<metrics::Counter>* reclaim_passes_;
  metrics::Family<metrics::Gauge>* without_plan_;
};

}  // namespace vramd::reconcile
