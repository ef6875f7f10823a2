#include "daemon/leader_loops.h"

#include <spdlog/spdlog.h>

#include <functional>
#include <string>
#include <utility>

#include "daemon/options.h"

namespace vramd::daemon {

LeaderLoops::LeaderLoops(const config::Config& cfg, std::shared_ptr<store::Lease> lease,
                         store::LedgerStore* store, kube::KubeClient* kube, reconcile::NodeSync* node_sync,
                         gpulock::LockService* locks, reconcile::LockActivityFn lock_activity, const Clock* clock,
                         metrics::Registry* registry)
    : store_(store),
      started_ms_(clock->NowMs()),
      agent_labels_(reconcile::AgentLabels(cfg)),
      leader_(std::move(lease), reconcile::MakeReplicaIdentity(), cfg.leader_lease_ms, registry),
      pod_watcher_(kube, [this] { reconciler_.Poke(); }, registry),
      node_watcher_(kube,
                    [this, node_sync] {
                      node_sync->NodesChanged();
                      reconciler_.Poke();
                    }),
      reconciler_(cfg, store, kube, &leader_, &pod_watcher_, node_sync, clock, registry,
                  [locks](const std::function<bool(const std::string&)>& exists) {
                    (void)locks->ReapLocksOfMissingPods(exists);
                  }),
      evictor_(kube, registry, [this] { return leader_.IsLeader(); }),
      protection_(
          [&] {
            reconcile::ProtectionSettings s = reconcile::ProtectionSettingsFrom(cfg, ExtenderOptionsFrom(cfg).policy);
            s.leader_identity = leader_.identity();  // the budget's fence in the store
            return s;
          }(),
          store, &pod_watcher_, &evictor_, std::move(lock_activity), clock, registry),
      queues_enabled_(cfg.queues_enabled),
      queue_watcher_(kube, [this] { tenancy_.Refresh(); }, registry),
      tenancy_(
          [&] {
            reconcile::TenancySettings s = reconcile::TenancySettingsFrom(cfg, ExtenderOptionsFrom(cfg).policy);
            s.leader_identity = leader_.identity();
            return s;
          }(),
               [w = &queue_watcher_] { return w->Specs(); }, store, kube, &pod_watcher_, &evictor_, clock,
               registry) {
  node_sync->SetNodeSource([w = &node_watcher_] { return w->Nodes(); });
  // vramd's own binds need no reconcile pass: the cached ledger shows their
  // entries already (a pod bound past vramd still brings one at once). The
  // cache as it is, no I/O on the watch's thread: a copy that lags only
  // brings a pass that was not needed.
  pod_watcher_.SetBindAccounted([this, victims = cfg.burst_victim_classes](const kube::PodInfo& pod) {
    if (!leader_.IsLeader()) return false;
    ledger::SnapshotPtr snap = store_->CachedSnapshot();
    return snap != nullptr && reconcile::BindAccounted(*snap, pod, &victims);
  });
  reconciler_.SetAfterPass([this] {
    std::optional<Result<reconcile::ProtectionStats>> r = protection_.MaybeRun();
    if (r && !r->ok()) spdlog::warn("runtime protection pass failed: {}", r->status().message());
    std::optional<Result<reconcile::TenancyStats>> t = tenancy_.MaybeRun();
    if (t && !t->ok()) spdlog::warn("queue pass failed: {}", t->status().message());
  });
}

LeaderLoops::~LeaderLoops() { Stop(); }

void LeaderLoops::Start() {
  leader_.Start();
  pod_watcher_.Start();
  node_watcher_.Start();
  if (queues_enabled_) queue_watcher_.Start();
  reconciler_.Start();
}

void LeaderLoops::Stop() {
  reconciler_.Stop();
  queue_watcher_.Stop();
  node_watcher_.Stop();
  pod_watcher_.Stop();
  leader_.Stop();
}

http::ReplicaReadiness LeaderLoops::Readiness() {
  http::ReplicaReadiness r;
  r.replica = leader_.identity();
  r.leader = leader_.CurrentLeader();
  r.is_leader = leader_.IsLeader();
  r.pod_watch_synced = pod_watcher_.Synced();
  Result<int64_t> last = store_->LastReconciled();
  r.last_reconcile_ms = last.ok() ? *last : 0;
  r.reconciled_since_start = reconciler_.FirstPassDone() || r.last_reconcile_ms >= started_ms_;
  // Not a condition of readiness: while the leader rebuilds the ledger the
  // verbs answer why nothing is granted, which an unready endpoint cannot.
  Result<ledger::SnapshotPtr> snap = store_->WatchedSnapshot();
  if (snap.ok()) r.ledger_sealed = (*snap)->sealed;
  return r;
}

}  // namespace vramd::daemon
