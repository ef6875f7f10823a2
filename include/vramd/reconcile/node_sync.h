// NodeSync keeps the ledger's node capacities equal to their sources: the
// config file's static nodes, then (with Kubernetes) each Node's
// vramd.io/capacity annotation or GPU Feature Discovery labels, and last the
// physical totals its node agent reported (store::LedgerStore::ReportedGpus,
// kept by the store even for a node not yet in the ledger), minus the
// per-GPU reserve. Nodes that left the cluster (or lost their GPUs) leave
// the ledger. Runs every interval on a background thread it owns, or (the
// leader, with Kubernetes) inside reconcile passes when due (SyncIfDue).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vramd/config/config.h"
#include "vramd/kube/kube_client.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/store/ledger_store.h"

namespace vramd::reconcile {

// A node whose GPU capacity metadata cannot be read (vramd.io/capacity or the
// GPU Feature Discovery labels): skipped, its ledger entry left as it is.
struct MalformedNode {
  std::string name;
  std::string uid;
  std::string reason;
};

// The reason of the Warning Event vramd posts on such a node (once per node and reason).
inline constexpr const char* kMalformedNodeEventReason = "VramdInvalidGpuCapacity";

// Malformed objects, shared by NodeSync (kind="node") and the Reconciler
// (kind="pod"): how many the last pass found, and how many were reported
// (logged + Event), once per object and reason.
inline constexpr const char* kMalformedObjectsGauge = "vramd_reconcile_malformed_objects";
inline constexpr const char* kMalformedObjectsHelp =
    "Objects whose VRAM metadata vramd cannot read, as of the last pass, by kind: pod (a bound pod with an invalid "
    "VRAM request or malformed vramd.io/gpus / vramd.io/vram-per-gpu annotations) or node (a malformed "
    "vramd.io/capacity annotation or GPU Feature Discovery labels). They are skipped, not fatal.";
inline constexpr const char* kMalformedReportsCounter = "vramd_reconcile_malformed_reports_total";
inline constexpr const char* kMalformedReportsHelp =
    "Malformed objects reported with a warning and a Warning Event, once per object and reason, by kind.";

struct NodeSyncStats {
  int nodes_seen = 0;        // nodes with GPUs in the desired state
  int capacity_writes = 0;   // nodes whose capacity was (re)written
  int removed = 0;           // nodes removed from the ledger
  int invalid = 0;           // nodes skipped for malformed labels/annotations
  std::vector<MalformedNode> malformed;  // those nodes, with the reason
  std::vector<std::string> shrunk_below_allocation;  // reported, not truncated
  int unmarked_reporters = 0;  // nodes whose agent reported GPUs, not marked as GPU nodes: no capacity from it
};

// node_sync.agent_capacity_labels, parsed (the config was validated).
std::vector<std::pair<std::string, std::string>> AgentLabels(const config::Config& cfg);

// Whether a reconcile pass should also sync node capacities. Reconcile
// passes follow pod watch events (up to one per reconcile_min_gap_ms while
// pods churn), but capacities change only with the Nodes, with the agents'
// reports and with the ledger itself: a pass syncs when `force` (the ledger
// is being rebuilt, so its capacities may be gone), when the node watch saw
// a change since the last pass that succeeded (`nodes_changed`), when no pass
// succeeded yet, and otherwise once `interval_ms` has passed since the last
// one that did (the agents' reports, repairs of the ledger). A clock that went
// back counts as due.
bool NodeSyncDue(bool force, bool nodes_changed, std::optional<int64_t> last_ok_ms, int64_t now_ms,
                 int interval_ms);

class NodeSync {
 public:
  NodeSync(const config::Config& cfg, store::LedgerStore* store, kube::KubeClient* kube,
           metrics::Registry* registry);
  ~NodeSync();

  // One pass. Errors leave the ledger unchanged. A malformed node is skipped
  // (the others are synced): a warning is logged and a Warning Event posted
  // on the Node once per node and reason, and vramd_malformed_objects{kind="node"}
  // counts the malformed nodes of the last pass that read the nodes.
  Result<NodeSyncStats> SyncOnce();

  // SyncOnce when NodeSyncDue says so (its interval: node_sync_interval_ms),
  // nullopt otherwise. For the reconcile passes (one thread).
  std::optional<Result<NodeSyncStats>> SyncIfDue(int64_t now_ms, bool force);
  // A Node was added, changed or deleted (the node watch's callback): the
  // next SyncIfDue runs a pass.
  void NodesChanged() { nodes_changed_.store(true); }

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
  void ReportMalformed(const std::vector<MalformedNode>& now);

  const config::Config& cfg_;
  const std::vector<std::pair<std::string, std::string>> agent_labels_;
  store::LedgerStore* store_;
  kube::KubeClient* kube_;
  NodeSource node_source_;
  metrics::Family<metrics::Counter>* passes_;
  metrics::Family<metrics::Counter>* lists_;
  metrics::Family<metrics::Gauge>* shrunk_;
  metrics::Family<metrics::Gauge>* malformed_;
  metrics::Family<metrics::Counter>* malformed_reports_;
  Mutex report_mu_;
  std::map<std::string, bool> reported_ GUARDED_BY(report_mu_);  // "name\nreason" -> Event posted (or given up)
  Mutex mu_;
  CondVar cv_;
  bool poked_ GUARDED_BY(mu_) = false;
  std::atomic<bool> nodes_changed_{true};
  std::optional<int64_t> last_ok_ms_;  // SyncIfDue's last pass that succeeded (its caller's one thread)
  metrics::Family<metrics::Counter>* skipped_;
  std::jthread thread_;
};

}  // namespace vramd::reconcile
