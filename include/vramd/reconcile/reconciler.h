// The reconcile loop (DESIGN.md §4), leader only: on every relevant pod watch
// event and every interval it refreshes node capacities, computes the plan
// (plan.h) and applies it — re-adding orphans, marking terminating entries
// (phantom rule), freeing entries of pods that are gone, terminal or never
// bound — and exports the drift. When it frees VRAM it nudges kube-scheduler
// by changing a label on the node, so pods parked as unschedulable are
// retried at once instead of after minutes.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "vramd/clock.h"
#include "vramd/config/config.h"
#include "vramd/kube/kube_client.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/reconcile/leader.h"
#include "vramd/reconcile/node_sync.h"
#include "vramd/reconcile/plan.h"
#include "vramd/reconcile/pod_watch.h"
#include "vramd/store/ledger_store.h"

namespace vramd::reconcile {

// The node label vramd changes to make kube-scheduler retry unschedulable pods.
inline constexpr const char* kFreedLabel = "vramd.io/vram-freed";
// The reason of the Warning Event vramd posts on a bound pod whose VRAM
// metadata it cannot read (plan.h MalformedPod), once per pod UID and reason.
inline constexpr const char* kMalformedPodEventReason = "VramdInvalidVramMetadata";

struct PassStats {
  int actions = 0;
  int orphans = 0;
  int stale = 0;
  int gone = 0;
  int terminal = 0;
  int nudged_nodes = 0;
};

class Reconciler {
 public:
  // `reap_locks`, when set, is called each pass with a predicate telling
  // whether a pod UID still exists (the GPU lock reaper).
  Reconciler(const config::Config& cfg, store::LedgerStore* store, kube::KubeClient* kube, LeaderElector* leader,
             PodWatcher* watcher, NodeSync* node_sync, const Clock* clock, metrics::Registry* registry,
             std::function<void(const std::function<bool(const std::string&)>&)> reap_locks = nullptr);
  ~Reconciler();

  void Start();
  void Stop();
  // Runs a pass soon: at once when the last pass is at least
  // reconcile_min_gap_ms old, else when it is (pokes in between coalesce).
  void Poke();

  // Called (on the reconcile thread, as leader) after every pass that
  // succeeded: the runtime protection's pass (protection.h). Set before Start.
  void SetAfterPass(std::function<void()> fn) { after_pass_ = std::move(fn); }

  // One full pass; requires a synced watch. Does not check leadership.
  Result<PassStats> RunOnce();

  // True once this process completed a full pass (as leader).
  bool FirstPassDone() const { return first_pass_done_.load(); }

 private:
  void Loop(std::stop_token st);
  // Logs, counts and posts a Warning Event for each malformed pod the plan
  // found that was not reported yet with the same reason; sets the gauge.
  void ReportMalformed(const std::vector<MalformedPod>& now);

  const config::Config& cfg_;
  store::LedgerStore* store_;
  kube::KubeClient* kube_;
  LeaderElector* leader_;
  PodWatcher* watcher_;
  NodeSync* node_sync_;
  const Clock* clock_;
  std::function<void(const std::function<bool(const std::string&)>&)> reap_locks_;
  std::function<void()> after_pass_;

  metrics::Family<metrics::Counter>* passes_;
  metrics::Family<metrics::Counter>* orphans_;
  metrics::Family<metrics::Counter>* stale_;
  metrics::Family<metrics::Counter>* released_;
  metrics::Family<metrics::Counter>* errors_;
  metrics::Family<metrics::Counter>* nudges_;
  metrics::Family<metrics::Gauge>* phantom_;
  metrics::Family<metrics::Histogram>* duration_;
  metrics::Family<metrics::Gauge>* malformed_;
  metrics::Family<metrics::Counter>* malformed_reports_;
  metrics::Family<metrics::Gauge>* overridden_;  // vramd_reconcile_placement_annotations_overridden
  Mutex report_mu_;
  std::map<std::string, bool> reported_ GUARDED_BY(report_mu_);  // "uid\nreason" -> Event posted (or given up)

  metrics::Family<metrics::Gauge>* rebuilding_;
  metrics::Family<metrics::Counter>* rebuilds_;
  std::atomic<bool> rebuilding_now_{false};
  std::atomic<bool> first_pass_done_{false};
  Mutex mu_;
  CondVar cv_;
  bool poked_ GUARDED_BY(mu_) = false;
  std::jthread thread_;
};

}  // namespace vramd::reconcile
