// With Kubernetes, replicas elect a leader in Valkey; the leader watches pods
// and nodes and reconciles the ledger (node capacities included). LeaderLoops
// owns those four loops, wires the watchers to wake the reconciler, and
// answers the replica's part of /readyz. Standalone daemons have none of it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "vramd/clock.h"
#include "vramd/config/config.h"
#include "vramd/gpulock/locks.h"
#include "vramd/http/routes.h"
#include "vramd/kube/kube_client.h"
#include "vramd/metrics/registry.h"
#include "vramd/reconcile/leader.h"
#include "vramd/reconcile/node_sync.h"
#include "vramd/reconcile/evictor.h"
#include "vramd/reconcile/pod_watch.h"
#include "vramd/reconcile/protection.h"
#include "vramd/reconcile/queue_watch.h"
#include "vramd/reconcile/tenancy.h"
#include "vramd/reconcile/reconciler.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/lease.h"

namespace vramd::daemon {

class LeaderLoops {
 public:
  // Builds the loops (none runs before Start). Every pointer must outlive
  // this object; node_sync reads its nodes from the node watcher from now on,
  // each reconcile pass reaps the GPU locks of pods that are gone, and after
  // each pass the runtime protection (watchdog, idle eviction) runs when its
  // interval has passed, reading GPU-lock activity with `lock_activity`.
  LeaderLoops(const config::Config& cfg, std::shared_ptr<store::Lease> lease, store::LedgerStore* store,
              kube::KubeClient* kube, reconcile::NodeSync* node_sync, gpulock::LockService* locks,
              reconcile::LockActivityFn lock_activity, const Clock* clock, metrics::Registry* registry);
  ~LeaderLoops();  // Stop(): no watcher outlives the reconciler it pokes
  LeaderLoops(const LeaderLoops&) = delete;
  LeaderLoops& operator=(const LeaderLoops&) = delete;

  void Start();
  // Stops the reconciler, the watchers, then gives the lease up (a standby
  // takes over at once).
  void Stop();  // idempotent

  // Ready after the first full reconcile since this object was built (by
  // this replica as leader, or by the leader that serves the ledger).
  http::ReplicaReadiness Readiness();

  // Whether the node watch (every replica runs it) knows the node and it is
  // marked as a GPU node (node_sync.agent_capacity_labels); nullopt until its
  // copy is synced. For usage reports of nodes not in the ledger: only such a
  // node may be added from its agent's report (issue 33).
  std::optional<bool> NodeInCluster(const std::string& name) const {
    return node_watcher_.Has(name, [this](const kube::NodeInfo& n) { return config::HasAnyLabel(n.labels, agent_labels_); });
  }

  // The labels of a node as the node watch has it; nullopt when it does not
  // know the node or its copy is not synced.
  std::optional<std::map<std::string, std::string>> NodeLabels(const std::string& name) const {
    std::map<std::string, std::string> labels;
    std::optional<bool> has = node_watcher_.Has(name, [&labels](const kube::NodeInfo& n) {
      labels = n.labels;
      return true;
    });
    if (!has || !*has) return std::nullopt;
    return labels;
  }

  // Tenancy (issue 16): the queue set every replica keeps from the VramQueue
  // watch, and the queues' view; the leader's queue pass runs after its
  // reconcile passes.
  reconcile::Tenancy* tenancy() { return &tenancy_; }

 private:
  store::LedgerStore* store_;
  const int64_t started_ms_;
  const std::vector<std::pair<std::string, std::string>> agent_labels_;  // node_sync.agent_capacity_labels
  // In construction order: the watchers' callbacks poke reconciler_, which
  // is built last but only called once Start() has run.
  reconcile::LeaderElector leader_;
  reconcile::PodWatcher pod_watcher_;
  reconcile::NodeWatcher node_watcher_;
  reconcile::Reconciler reconciler_;
  reconcile::Evictor evictor_;
  reconcile::Protection protection_;
  const bool queues_enabled_;
  reconcile::QueueWatcher queue_watcher_;  // pokes tenancy_ (built after it, called after Start)
  reconcile::Tenancy tenancy_;
};

}  // namespace vramd::daemon
