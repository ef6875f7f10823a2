#include "vramd/reconcile/node_sync.h"

#include <spdlog/spdlog.h>

#include <map>
#include <set>

#include "vramd/ledger/capacity.h"
#include "vramd/ledger/quantity.h"
#include "vramd/metrics/thread_guard.h"

namespace vramd::reconcile {

std::vector<std::pair<std::string, std::string>> AgentLabels(const config::Config& cfg) {
  Result<std::vector<std::pair<std::string, std::string>>> pairs =
      config::ParseLabelPairs(cfg.node_sync_agent_capacity_labels);
  return pairs.ok() ? *pairs : std::vector<std::pair<std::string, std::string>>{};
}

NodeSync::NodeSync(const config::Config& cfg, store::LedgerStore* store, kube::KubeClient* kube,
                   metrics::Registry* registry)
    : cfg_(cfg), agent_labels_(AgentLabels(cfg)), store_(store), kube_(kube) {
  passes_ = &registry->AddCounter("vramd_node_sync_passes_total", "Node capacity sync passes by result.", {"result"});
  passes_->With({"ok"});
  passes_->With({"error"});
  lists_ = &registry->AddCounter("vramd_node_sync_lists_total",
                                 "Node lists made by capacity sync itself (when the node watch had no copy).");
  lists_->With({});
  skipped_ = &registry->AddCounter("vramd_node_sync_skipped_total",
                                   "Reconcile passes that did not sync node capacities: no Node changed and the last "
                                   "sync is younger than node_sync_interval_ms.");
  skipped_->With({});
  shrunk_ = &registry->AddGauge("vramd_node_capacity_below_allocation",
                                "1 when a node's capacity shrank below what is allocated on it (not truncated).",
                                {"node"});
  malformed_ = &registry->AddGauge(kMalformedObjectsGauge, kMalformedObjectsHelp, {"kind"});
  malformed_->With({"node"});
  malformed_reports_ = &registry->AddCounter(kMalformedReportsCounter, kMalformedReportsHelp, {"kind"});
  malformed_reports_->With({"node"});
}

NodeSync::~NodeSync() { Stop(); }

bool NodeSyncDue(bool force, bool nodes_changed, std::optional<int64_t> last_ok_ms, int64_t now_ms,
                 int interval_ms) {
  if (force || nodes_changed || !last_ok_ms) return true;
  return now_ms < *last_ok_ms || now_ms - *last_ok_ms >= interval_ms;
}

std::optional<Result<NodeSyncStats>> NodeSync::SyncIfDue(int64_t now_ms, bool force) {
  if (!NodeSyncDue(force, nodes_changed_.load(), last_ok_ms_, now_ms, cfg_.node_sync_interval_ms)) {
    skipped_->With({}).Inc();
    return std::nullopt;
  }
  // Cleared before the pass reads the nodes: a change it may miss marks them again.
  nodes_changed_.store(false);
  Result<NodeSyncStats> r = SyncOnce();
  if (r.ok()) {
    last_ok_ms_ = now_ms;
  } else {
    nodes_changed_.store(true);
  }
  return r;
}

Result<NodeSyncStats> NodeSync::SyncOnce() {
  NodeSyncStats stats;
  std::map<std::string, std::vector<store::GpuCapacity>> desired;
  for (const config::StaticNode& n : cfg_.nodes) {
    std::vector<store::GpuCapacity> gpus;
    for (size_t i = 0; i < n.gpus.size(); ++i) {
      gpus.push_back({static_cast<int>(i), config::ApplyReserve(cfg_, n.gpus[i].capacity), n.gpus[i].uuid});
    }
    desired[n.name] = std::move(gpus);
  }
  std::set<std::string> unreadable;  // malformed nodes: skipped, never removed
  std::set<std::string> in_cluster;
  // The last source: GPUs the node agents reported (physical totals), for
  // nodes with no config entry, annotation or GFD labels.
  std::map<std::string, std::vector<store::ReportedGpu>> reported;
  if (kube_ != nullptr) {
    Result<std::map<std::string, std::vector<store::ReportedGpu>>> r = store_->ReportedGpus();
    if (!r.ok()) {
      passes_->With({"error"}).Inc();
      return Status(r.status().code(), "reading the node agents' reported GPUs: " + r.status().message());
    }
    reported = std::move(*r);
  }
  if (kube_ != nullptr) {
    // The node watcher's copy when it has one; a list of our own otherwise.
    std::optional<std::vector<kube::NodeInfo>> items = node_source_ ? node_source_() : std::nullopt;
    if (!items) {
      Result<kube::List<kube::NodeInfo>> nodes = kube_->ListNodes();
      if (!nodes.ok()) {
        passes_->With({"error"}).Inc();
        return Status(nodes.status().code(), "listing nodes: " + nodes.status().message());
      }
      items = std::move(nodes->items);
      lists_->With({}).Inc();
    }
    for (const kube::NodeInfo& n : *items) {
      in_cluster.insert(n.name);
      if (desired.count(n.name)) continue;  // the config file wins
      metrics::WorkingOn working_on("node " + n.name);
      Result<ledger::PhysicalGpus> phys = ledger::GpusFromNodeMetadata(n.labels, n.annotations);
      if (!phys.ok()) {
        // Skipped: its ledger entry (if any) stays as it is; the other nodes are synced.
        ++stats.invalid;
        stats.malformed.push_back({n.name, n.uid, phys.status().message()});
        unreadable.insert(n.name);
        continue;
      }
      if (phys->bytes.empty()) {
        auto agent = reported.find(n.name);
        if (agent == reported.end() || agent->second.empty()) continue;
        // A report is the node's word about itself: it becomes capacity
        // only on a node an admin marked as a GPU node (issue 33).
        if (!config::HasAnyLabel(n.labels, agent_labels_)) {
          ++stats.unmarked_reporters;
          continue;
        }
        std::vector<store::GpuCapacity> gpus;
        for (const store::ReportedGpu& g : agent->second) {
          gpus.push_back({g.index, config::ApplyReserve(cfg_, g.total), ""});
        }
        desired[n.name] = std::move(gpus);
        continue;
      }
      std::vector<store::GpuCapacity> gpus;
      for (size_t i = 0; i < phys->bytes.size(); ++i) {
        gpus.push_back({static_cast<int>(i), config::ApplyReserve(cfg_, phys->bytes[i]), ""});
      }
      desired[n.name] = std::move(gpus);
    }
    ReportMalformed(stats.malformed);
  }
  Result<ledger::SnapshotPtr> snap = store_->Snapshot();
  if (!snap.ok()) {
    passes_->With({"error"}).Inc();
    return snap.status();
  }
  stats.nodes_seen = static_cast<int>(desired.size());
  for (const auto& [name, gpus] : desired) {
    const ledger::Node* have = (*snap)->Find(name);
    bool same = have != nullptr && have->gpus.size() == gpus.size();
    for (size_t i = 0; same && i < gpus.size(); ++i) {
      same = have->gpus[i].index == gpus[i].index && have->gpus[i].capacity == gpus[i].capacity &&
             have->gpus[i].uuid == gpus[i].uuid;
    }
    if (!same) {
      if (Status s = store_->SetCapacity(name, gpus); !s.ok()) {
        passes_->With({"error"}).Inc();
        return s;
      }
      ++stats.capacity_writes;
      spdlog::info("node {}: {} GPU(s), capacity {} each (after reserve)", name, gpus.size(),
                   gpus.empty() ? "0" : ledger::FormatBytes(gpus[0].capacity));
    }
    // A node whose capacity shrank below its allocation is reported, not truncated.
    if (have != nullptr) {
      std::vector<int64_t> alloc = ledger::AllocatedPerGpu(*have);
      bool below = false;
      for (size_t i = 0; i < alloc.size(); ++i) {
        int64_t cap = 0;
        for (const auto& g : gpus) {
          if (g.index == have->gpus[i].index) cap = g.capacity;
        }
        if (alloc[i] > cap) below = true;
      }
      shrunk_->With({name}).Set(below ? 1 : 0);
      if (below) {
        stats.shrunk_below_allocation.push_back(name);
        spdlog::warn("node {}: capacity is below the VRAM already allocated on it", name);
      }
    }
  }
  // Nodes that left the cluster (or lost their GPUs) leave the ledger.
  for (const auto& [name, node] : (*snap)->nodes) {
    if (desired.count(name) || unreadable.count(name)) continue;
    if (Status s = store_->RemoveNode(name); !s.ok()) {
      passes_->With({"error"}).Inc();
      return s;
    }
    shrunk_->Remove({name});
    ++stats.removed;
    spdlog::info("node {} left the cluster (or lost its GPUs): removed from the ledger", name);
  }

  // Reports of nodes that are neither in the cluster nor in the ledger (the
  // node left before its agent stopped) are forgotten.
  for (const auto& [name, gpus] : reported) {
    if (in_cluster.count(name) || desired.count(name) || (*snap)->Find(name) != nullptr) continue;
    if (Status s = store_->RemoveNode(name); !s.ok()) {
      passes_->With({"error"}).Inc();
      return s;
    }
  }

  passes_->With({"ok"}).Inc();
  return stats;
}

void NodeSync::Start() {
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void NodeSync::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    cv_.NotifyAll();
    thread_.join();
  }
}

void NodeSync::Poke() {
  {
    MutexLock lock(&mu_);
    poked_ = true;
  }
  cv_.NotifyAll();
}

void NodeSync::ReportMalformed(const std::vector<MalformedNode>& now) {
  MutexLock lock(&report_mu_);
  std::map<std::string, bool> still;  // name + reason -> Event posted
  for (const MalformedNode& m : now) {
    const std::string key = m.name + '\n' + m.reason;
    auto it = reported_.find(key);
    bool posted = it != reported_.end() && it->second;
    if (it == reported_.end()) {
      spdlog::warn("node {} (uid {}): {}; vramd skips it and keeps its ledger entry as it is", m.name, m.uid,
                   m.reason);
      malformed_reports_->With({"node"}).Inc();
    }
    if (!posted && kube_ != nullptr) {
      kube::NodeInfo node;
      node.name = m.name;
      node.uid = m.uid;
      Status s = kube_->PostNodeEvent(node, "Warning", kMalformedNodeEventReason,
                                      "vramd cannot read this node's GPU capacity: " + m.reason +
                                          ". vramd skips the node and keeps its ledger entry as it is.");
      // Retried next pass only when the API server was unreachable.
      posted = s.ok() || s.code() != Code::kUnavailable;
      if (!s.ok()) {
        spdlog::warn("node {}: posting the {} event failed: {}", m.name, kMalformedNodeEventReason, s.message());
      }
    }
    still[key] = posted;
  }
  reported_ = std::move(still);
  malformed_->With({"node"}).Set(static_cast<double>(now.size()));
}

void NodeSync::Loop(std::stop_token st) {
  while (!st.stop_requested()) {
    bool ok = metrics::GuardedStep(metrics::kThreadNodeSync, [&] {
      metrics::WorkingOn ctx("node capacity sync");
      Result<NodeSyncStats> r = SyncOnce();
      if (!r.ok()) spdlog::warn("node capacity sync failed: {}", r.status().message());
    });
    if (!ok) metrics::PauseAfterError(st);
    MutexLock lock(&mu_);
    cv_.WaitFor(&lock, st, std::chrono::milliseconds(cfg_.node_sync_interval_ms),
                [this]() EXCLUSIVE_LOCKS_REQUIRED(mu_) { return poked_; });
    poked_ = false;
  }
}

}  // namespace vramd::reconcile
