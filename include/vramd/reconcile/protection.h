// Runtime protection (issue 15), leader only: the pressure watchdog and idle
// eviction. Each pass reads the ledger snapshot (with the node agents' usage),
// the pods waiting for VRAM (filter's refusals, checked against the pod
// watch) and the GPU-lock activity, asks the pure core (ledger/protection.h)
// what to do, and acts through the Evictor (dry-run: an Event and a count;
// enforce: the Eviction API), within a cooldown per GPU or pod and a global
// rate limit. The idle tracker lives in the leader's memory: a new leader
// starts observing afresh, so no pod is found idle before a whole TTL has
// passed under it (never sooner than under the old one).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vramd/clock.h"
#include "vramd/config/config.h"
#include "vramd/ledger/protection.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/reconcile/evictor.h"
#include "vramd/reconcile/pod_watch.h"
#include "vramd/store/ledger_store.h"

namespace vramd::reconcile {

// Pod UID → last GPU-lock activity (ms) for the pods on these nodes.
using LockActivityFn = std::function<Result<std::map<std::string, int64_t>>(const std::vector<std::string>& nodes)>;

// What one pass saw and did.
struct ProtectionStats {
  int gpus_under_pressure = 0;
  int watchdog_actions = 0;  // recorded (dry-run) or evicted
  int idle_candidates = 0;   // idle evictions the plan proposed
  int idle_actions = 0;
  int waiting_pods = 0;      // pods refused for VRAM and still pending
  int gated = 0;             // actions held back by a cooldown or the rate limit
  int persisting = 0;        // GPUs with a victim whose pressure has not yet persisted pressure_reports reports
  int holds = 0;             // holds written for the pods idle eviction made room for
  int blocked = 0;           // idle actions of several pods dropped whole: one would be refused (Precheck)
};

// The pure parts of the configuration, parsed once (config.h validated them).
struct ProtectionSettings {
  std::optional<ActionMode> watchdog;  // nullopt: off
  std::optional<ActionMode> idle;
  ledger::IdleMode idle_policy = ledger::IdleMode::kOnDemand;
  ledger::WatchdogPolicy watchdog_policy;
  ledger::Policy placement;  // the fit and peak rules idle's simulation uses
  int64_t usage_change_bytes = 0;
  int64_t interval_ms = 10'000;
  int64_t cooldown_ms = 300'000;
  int max_per_minute = 10;
  int64_t pending_max_age_ms = 120'000;
  int pressure_reports = 3;  // the watchdog acts once pressure persisted this many reports (PressureStreaks)
  int64_t hold_ms = 180'000;  // eviction.hold_ms: room idle eviction made is held for its pod (HoldRoom)
  std::string leader_identity;  // the budget's fence (EvictionBudget): "" none
};
ProtectionSettings ProtectionSettingsFrom(const config::Config& cfg, const ledger::Policy& placement);

// The Event texts' detail (EvictionAction::detail), pure:
//  "uses 10.7Gi, declared 3Gi; GPU 0 of node-1 has 800Mi free, floor 1.5Gi"
//  "designated victim (priority class vramd-disposable) uses 2Gi; GPU 0 of ..."
//  (a victim of several evicted together adds "; one of N pods evicted together to free it")
std::string WatchdogDetail(const ledger::GpuPressure& p, const ledger::WatchdogVictim* v);
//  "idle for 12m (idle-ttl 10m); makes room for ml/llama-70b on node-1"
std::string IdleDetail(const ledger::IdleEviction& e, int64_t ttl_ms);

// The pods waiting for VRAM among `refusals` (the filter-refusal log): with
// `pods` (the pod watch's copy), only those still pending, unbound and not
// being deleted; the UIDs of the others go to `gone` (to be forgotten).
// Without `pods`, all of them. The demand's total is per_gpu x gpu_count.
std::vector<ledger::PendingPod> WaitingPods(std::vector<store::Refusal> refusals,
                                            const std::vector<kube::PodInfo>* pods, std::vector<std::string>* gone);

class Protection {
 public:
  // Every pointer must outlive this object. `lock_activity` may be null (no
  // lock signal: only usage changes count as activity).
  Protection(ProtectionSettings settings, store::LedgerStore* store, PodWatcher* watcher, Evictor* evictor,
             LockActivityFn lock_activity, const Clock* clock, metrics::Registry* registry);

  // Runs a pass when the last one is at least interval_ms old (the
  // reconciler calls this after each of its passes); returns it, or nullopt.
  std::optional<Result<ProtectionStats>> MaybeRun();
  // One pass now.
  Result<ProtectionStats> RunOnce();

 private:
  ProtectionSettings s_;
  store::LedgerStore* store_;
  PodWatcher* watcher_;
  Evictor* evictor_;
  LockActivityFn lock_activity_;
  const Clock* clock_;
  metrics::Family<metrics::Gauge>* pressure_;      // vramd_gpu_under_pressure{node,gpu}
  metrics::Family<metrics::Gauge>* waiting_;       // vramd_pods_waiting_for_vram
  metrics::Family<metrics::Gauge>* idle_pods_;     // vramd_idle_pods (past their TTL)
  metrics::Family<metrics::Gauge>* persisting_;    // vramd_watchdog_pressure_persisting
  Mutex mu_;
  int64_t last_run_ms_ GUARDED_BY(mu_) = 0;
  ledger::IdleTracker tracker_ GUARDED_BY(mu_);
  // One gate for both: keys "gpu:NODE/IDX" (watchdog) and "pod:UID" (idle),
  // so the global rate limit counts every action.
  EvictionBudget watchdog_budget_ GUARDED_BY(mu_);  // keys "gpu:<node>/<gpu>"
  EvictionBudget idle_budget_ GUARDED_BY(mu_);      // keys "idle:<pod uid>"
  ledger::PressureStreaks streaks_ GUARDED_BY(mu_);
  std::map<std::string, bool> pressure_series_ GUARDED_BY(mu_);  // "node\ngpu" series set last pass
};

}  // namespace vramd::reconcile
