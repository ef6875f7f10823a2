// PodWatcher keeps an in-memory copy of the cluster's pods that request VRAM:
// list, then watch from the list's resourceVersion; a 410 Gone relists; a
// broken connection reconnects with backoff (and relists). Calls `on_change`
// after every event that can change a reconcile plan (PodChangeMatters), so
// the reconciler can react at once; kubelet status updates of a pod and the
// pods that want no VRAM do not wake it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vramd/kube/kube_client.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"

namespace vramd::reconcile {

class PodWatcher {
 public:
  PodWatcher(kube::KubeClient* kube, std::function<void()> on_change, metrics::Registry* registry);
  ~PodWatcher();

  // Set before Start: whether the ledger already accounts a pod whose event
  // is only its bind (reconcile::OnlyBound); such an event then does not call
  // `on_change` (a burst of vramd's own binds brings no reconcile pass; the
  // periodic pass still looks at every pod). Unset: every event that matters
  // calls it.
  void SetBindAccounted(std::function<bool(const kube::PodInfo&)> accounted) { accounted_ = std::move(accounted); }

  void Start();
  void Stop();

  // True once a list succeeded and the watch since then has not broken.
  bool Synced() const { return synced_.load(); }
  // The VRAM pods (any phase), copied.
  std::vector<kube::PodInfo> Pods() const;
  // UIDs of pods (any pod) this watcher saw deleted, kept for 15 minutes: the
  // proof that a pod is gone, even when its ledger entry is younger than the
  // grace period, and that a GPU lock's holder no longer exists.
  std::set<std::string> RecentlyDeleted() const;
  // The VRAM pods being deleted whose deletionTimestamp is known: uid ->
  // PodInfo::deletion_ms (the watchdog counts their usage as relief on its
  // way until then, plus a margin).
  std::unordered_map<std::string, int64_t> DeletionTimes() const;
  // Number of relists done (after 410 Gone or errors).
  uint64_t relists() const { return relists_.load(); }

 private:
  void Loop(std::stop_token st);
  void Apply(const kube::WatchEvent<kube::PodInfo>& ev);

  kube::KubeClient* kube_;
  std::function<void()> on_change_;
  std::function<bool(const kube::PodInfo&)> accounted_;
  metrics::Family<metrics::Counter>* events_;
  metrics::Family<metrics::Counter>* binds_accounted_;
  mutable Mutex mu_;
  std::unordered_map<std::string, kube::PodInfo> pods_ GUARDED_BY(mu_);  // VRAM pods by uid
  std::set<std::string> all_uids_ GUARDED_BY(mu_);                       // every pod, VRAM or not
  std::map<std::string, int64_t> deleted_ GUARDED_BY(mu_);               // uid -> when seen deleted (steady ms)
  std::string resource_version_ GUARDED_BY(mu_);
  std::atomic<bool> synced_{false};
  std::atomic<bool> stop_flag_{false};
  std::atomic<uint64_t> relists_{0};
  CondVar cv_;
  std::jthread thread_;
};

// NodeWatcher keeps an in-memory copy of the cluster's nodes: list, then
// watch from the list's resourceVersion (410 relists, errors reconnect with
// backoff). NodeSync reads its capacities from this copy, so a reconcile pass
// does not list the nodes again. `on_change` is called when a node comes,
// goes, or changes its labels or annotations (NodeChangeMatters) — not for the
// status heartbeats kubelets send.
class NodeWatcher {
 public:
  NodeWatcher(kube::KubeClient* kube, std::function<void()> on_change);
  ~NodeWatcher();
  void Start();
  void Stop();
  // The nodes as last listed and watched; nullopt until a list succeeded and
  // whenever the watch is broken (callers then list themselves).
  std::optional<std::vector<kube::NodeInfo>> Nodes() const;
  // Whether the copy holds a node of this name (for which `also`, when
  // set, is true); nullopt when Nodes() would be.
  std::optional<bool> Has(const std::string& name,
                          const std::function<bool(const kube::NodeInfo&)>& also = nullptr) const;

 private:
  void Loop(std::stop_token st);
  kube::KubeClient* kube_;
  std::function<void()> on_change_;
  mutable Mutex mu_;
  std::map<std::string, kube::NodeInfo> nodes_ GUARDED_BY(mu_);  // by name
  bool synced_ GUARDED_BY(mu_) = false;
  std::atomic<bool> stop_flag_{false};
  CondVar cv_;
  std::jthread thread_;
};

// True when the pod asks for VRAM (or its request is invalid: it still matters).
bool RequestsVram(const kube::PodInfo& pod);

// Whether a watch event for `after` can change what reconcile decides, given
// the copy held before it (nullptr: none). Pure; table-tested.
//  - a pod that wants no VRAM and was not held: no;
//  - a held pod whose node, phase, deletion mark, annotations and request are
//    unchanged (a kubelet status update): no;
//  - anything else: yes.
bool PodChangeMatters(const kube::PodInfo* before, const kube::PodInfo& after);

// Whether a node event can change the ledger's capacities: a new node, or a
// label or annotation other than vramd's own scheduler nudge changed. Pure.
bool NodeChangeMatters(const kube::NodeInfo* before, const kube::NodeInfo& after);

}  // namespace vramd::reconcile
