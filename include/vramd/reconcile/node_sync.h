// NodeSync keeps the ledger's node capacities equal to their sources: the
// config file's static nodes, then (with Kubernetes) each Node's
// vramd.io/capacity annotation or GPU Feature Discovery labels, minus the
// per-GPU reserve. Nodes that left the cluster (or lost their GPUs) leave
// the ledger. Runs every interval on a background thread it owns.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "vramd/config/config.h"
#include "vramd/kube/kube_client.h"
#include "vramd/metrics/registry.h"
#include "vramd/store/ledger_store.h"

namespace vramd::reconcile {

struct NodeSyncStats {
  int nodes_seen = 0;        // nodes with GPUs in the desired state
  int capacity_writes = 0;   // nodes whose capacity was (re)written
  int removed = 0;           // nodes removed from the ledger
  int invalid = 0;           // nodes skipped for malformed labels/annotations
  std::vector<std::string> shrunk_below_allocation;  // reported, not truncated
};

class NodeSync {
 public:
  NodeSync(const config::Config& cfg, store::LedgerStore* store, kube::KubeClient* kube,
           metrics::Registry* registry);
  ~NodeSync();

  // One pass. Errors leave the ledger unchanged.
  Result<NodeSyncStats> SyncOnce();

  // Runs SyncOnce now and then every interval until Stop().
  void Start();
  void Stop();
  // Asks the loop to run a pass now (e.g. after a node watch event).
  void Poke();
  // Where the nodes come from with Kubernetes: the node watcher's copy. When
  // unset, or when it answers nullopt (watch not synced), a pass lists them.
  using NodeSource = std::function<std::optional<std::vector<kube::NodeInfo>>()>;
  void SetNodeSource(NodeSource source) { node_source_ = std::move(source); }

 private:
  void Loop(std::stop_token st);

  const config::Config& cfg_;
  store::LedgerStore* store_;
  kube::KubeClient* kube_;
  NodeSource node_source_;
  metrics::Family<metrics::Counter>* passes_;
  metrics::Family<metrics::Counter>* lists_;
  metrics::Family<metrics::Gauge>* shrunk_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool poked_ = false;
  std::jthread thread_;
};

}  // namespace vramd::reconcile
