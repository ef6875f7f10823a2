// An in-memory KubeClient for unit tests: pods by ns/name, a log of calls,
// and injectable failures. The real client is tested against a real
// kube-apiserver in tests/e2e.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "vramd/kube/kube_client.h"

namespace vramd::testing {

// The identity the API server's TokenReview gives a ServiceAccount token
// (system:serviceaccount:NS:NAME), bound to a pod when `pod` is set; `node`
// as 1.30+ names it ("" as 1.20: the pod's node is looked up).
inline kube::TokenUser ServiceAccountUser(const std::string& ns, const std::string& name, const std::string& pod = "",
                                          const std::string& pod_uid = "", const std::string& node = "") {
  kube::TokenUser u;
  u.username = "system:serviceaccount:" + ns + ":" + name;
  u.sa_namespace = ns;
  u.sa_name = name;
  u.pod_name = pod;
  u.pod_uid = pod_uid;
  u.node_name = node;
  return u;
}

class FakeKubeClient : public kube::KubeClient {
 public:
  std::map<std::string, kube::PodInfo> pods;  // "ns/name"
  std::vector<kube::NodeInfo> nodes;
  std::vector<std::string> calls;             // "patch ns/name", "bind ns/name node", ...
  Status fail_patch, fail_bind, fail_list, fail_event;
  int list_pods_calls = 0;                    // ListPods calls (counted under the lock)
  bool bind_conflict_then_bound = false;      // Binding answers 409 but the pod is bound
  std::function<void()> on_bind;              // called as a Binding arrives
  // Evictions: fail_evict is returned when set; else a missing pod or another
  // UID is kGone, evict_blocked gives kBlocked with evict_blocked_message
  // (a PodDisruptionBudget), and an evicted pod is marked deleting.
  Status fail_evict;
  bool evict_blocked = false;
  std::set<std::string> evict_blocked_pods;  // "ns/name": blocked as evict_blocked, these only
  std::string evict_blocked_message = "Cannot evict pod as it would violate the pod's disruption budget.";
  std::function<void()> on_evicted;  // called after each eviction made (e.g. the caller "dies")
  struct PodEvent {
    std::string ns, name, uid, type, reason, message;
  };
  std::vector<PodEvent> events;               // every PostPodEvent, in order (also in calls)

  // Identities: the tokens the "API server" accepts (for any audience in
  // `audiences`), and who may get pods where ("username\nnamespace", or
  // "username\nnamespace/name" for one pod).
  std::map<std::string, kube::TokenUser> tokens;
  std::set<std::string> audiences{"vramd"};
  std::map<std::string, bool> access;
  Status fail_review;
  int token_reviews = 0, access_reviews = 0;

  Result<kube::TokenUser> ReviewToken(const std::string& token, const std::string& audience) override {
    std::lock_guard<std::mutex> l(mu_);
    ++token_reviews;
    if (!fail_review.ok()) return fail_review;
    auto it = tokens.find(token);
    if (it == tokens.end() || audiences.count(audience) == 0) {
      return Unauthenticated("the API server did not authenticate the token");
    }
    return it->second;
  }
  Result<bool> MayAccess(const kube::TokenUser& user, const std::string& verb, const std::string& resource,
                         const std::string& ns, const std::string& name) override {
    std::lock_guard<std::mutex> l(mu_);
    ++access_reviews;
    calls.push_back("access " + user.username + " " + verb + " " + resource + " " + ns + (name.empty() ? "" : "/" + name));
    if (!fail_review.ok()) return fail_review;
    auto it = access.find(user.username + "\n" + ns + (name.empty() ? "" : "/" + name));
    return it != access.end() && it->second;
  }

  Result<kube::PodInfo> GetPod(const std::string& ns, const std::string& name) override {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back("get " + ns + "/" + name);
    auto it = pods.find(ns + "/" + name);
    if (it == pods.end()) return NotFound("pods \"" + name + "\" not found");
    return it->second;
  }
  Status PatchPodAnnotations(const std::string& ns, const std::string& name,
                             const std::map<std::string, std::optional<std::string>>& ann) override {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back("patch " + ns + "/" + name);
    if (!fail_patch.ok()) return fail_patch;
    for (const auto& [k, v] : ann) {
      if (v) pods[ns + "/" + name].annotations[k] = *v;
      else pods[ns + "/" + name].annotations.erase(k);
    }
    return Status::Ok();
  }
  // Like the API server: the UID is a precondition, an assigned pod is not
  // assigned again, and the Binding's annotations land with the node name.
  Status Bind(const std::string& ns, const std::string& name, const std::string& uid, const std::string& node,
              const std::map<std::string, std::string>& annotations) override {
    if (on_bind) on_bind();
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back("bind " + ns + "/" + name + " " + node);
    if (bind_conflict_then_bound) {
      pods[ns + "/" + name].node_name = node;
      return Conflict("pod is already assigned to node");
    }
    if (!fail_bind.ok()) return fail_bind;
    auto it = pods.find(ns + "/" + name);
    if (it == pods.end()) return NotFound("pods \"" + name + "\" not found");
    if (it->second.uid != uid) return Conflict("Precondition failed: UID in precondition: " + uid);
    if (!it->second.node_name.empty()) return Conflict("pod " + name + " is already assigned to node");
    it->second.node_name = node;
    for (const auto& [k, v] : annotations) it->second.annotations[k] = v;
    return Status::Ok();
  }
  Result<kube::List<kube::NodeInfo>> ListNodes() override {
    std::lock_guard<std::mutex> l(mu_);
    if (!fail_list.ok()) return fail_list;
    return kube::List<kube::NodeInfo>{nodes, "1"};
  }
  Result<kube::List<kube::PodInfo>> ListPods(const std::string&) override {
    std::lock_guard<std::mutex> l(mu_);
    ++list_pods_calls;
    if (!fail_list.ok()) return fail_list;
    kube::List<kube::PodInfo> out;
    for (const auto& [k, p] : pods) out.items.push_back(p);
    out.resource_version = "1";
    return out;
  }
  Status PatchNodeAnnotations(const std::string& name,
                              const std::map<std::string, std::optional<std::string>>&) override {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back("patch-node " + name);
    return Status::Ok();
  }
  Status PatchNodeLabels(const std::string& name,
                         const std::map<std::string, std::optional<std::string>>&) override {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back("label-node " + name);
    return Status::Ok();
  }
  Status PostPodEvent(const kube::PodInfo& pod, const std::string& type, const std::string& reason,
                      const std::string& message) override {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back("event " + pod.ns + "/" + pod.name + " " + reason);
    events.push_back(PodEvent{pod.ns, pod.name, pod.uid, type, reason, message});
    return fail_event;
  }
  Result<kube::EvictOutcome> EvictPod(const std::string& ns, const std::string& name, const std::string& uid,
                                      std::string* api_message = nullptr, bool dry_run = false) override {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back((dry_run ? "dry-run-evict " : "evict ") + ns + "/" + name);
    if (api_message != nullptr) api_message->clear();
    if (!fail_evict.ok()) return fail_evict;
    auto it = pods.find(ns + "/" + name);
    if (it == pods.end() || (!uid.empty() && it->second.uid != uid)) {
      if (api_message != nullptr) *api_message = "pods \"" + name + "\" not found";
      return kube::EvictOutcome::kGone;
    }
    if (evict_blocked || evict_blocked_pods.count(ns + "/" + name) > 0) {
      if (api_message != nullptr) *api_message = evict_blocked_message;
      return kube::EvictOutcome::kBlocked;
    }
    if (dry_run) return kube::EvictOutcome::kEvicted;  // would be
    it->second.deleting = true;
    if (on_evicted) on_evicted();
    return kube::EvictOutcome::kEvicted;
  }
  Status PostNodeEvent(const kube::NodeInfo& node, const std::string&, const std::string& reason,
                       const std::string&) override {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back("node-event " + node.name + " " + reason);
    return fail_event;
  }
  Status WatchPods(const std::string&, const std::atomic<bool>&,
                   const std::function<void(const kube::WatchEvent<kube::PodInfo>&)>&) override {
    return Unavailable("fake: no watch");
  }
  Status WatchNodes(const std::string&, const std::atomic<bool>&,
                    const std::function<void(const kube::WatchEvent<kube::NodeInfo>&)>&) override {
    return Unavailable("fake: no watch");
  }

  // VramQueue objects. ListQueues answers `fail_list_queues` when set (e.g.
  // NotFound: the CRD is not installed), else every queue sorted by name at
  // `queues_resource_version`. WatchQueues calls `watch_queues` when set,
  // else answers Unavailable like the other watches. PatchQueueStatus records
  // (name, body) in `queue_status_patches` and answers `fail_patch_queue_status`.
  // Tests that change these while a watcher runs use the locked setters.
  std::map<std::string, ledger::QueueSpec> queues;  // by name
  Status fail_list_queues;
  std::string queues_resource_version = "1";
  std::function<Status(const std::string& resource_version, const std::atomic<bool>& stop,
                       const std::function<void(const kube::WatchEvent<ledger::QueueSpec>&)>& on_event)>
      watch_queues;
  std::vector<std::pair<std::string, std::string>> queue_status_patches;
  Status fail_patch_queue_status;

  Result<kube::List<ledger::QueueSpec>> ListQueues() override {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back("list-queues");
    if (!fail_list_queues.ok()) return fail_list_queues;
    kube::List<ledger::QueueSpec> out;
    for (const auto& [name, q] : queues) out.items.push_back(q);
    out.resource_version = queues_resource_version;
    return out;
  }
  Status WatchQueues(const std::string& resource_version, const std::atomic<bool>& stop,
                     const std::function<void(const kube::WatchEvent<ledger::QueueSpec>&)>& on_event) override {
    std::function<Status(const std::string&, const std::atomic<bool>&,
                         const std::function<void(const kube::WatchEvent<ledger::QueueSpec>&)>&)>
        watch;
    {
      std::lock_guard<std::mutex> l(mu_);
      calls.push_back("watch-queues " + resource_version);
      watch = watch_queues;
    }
    if (!watch) return Unavailable("fake: no watch");
    return watch(resource_version, stop, on_event);
  }
  Status PatchQueueStatus(const std::string& name, const std::string& patch_json) override {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back("patch-queue-status " + name);
    queue_status_patches.emplace_back(name, patch_json);
    return fail_patch_queue_status;
  }
  // Locked setters and readers for tests with a watcher running.
  void SetQueue(const ledger::QueueSpec& q) {
    std::lock_guard<std::mutex> l(mu_);
    queues[q.name] = q;
  }
  void SetQueuesResourceVersion(const std::string& rv) {
    std::lock_guard<std::mutex> l(mu_);
    queues_resource_version = rv;
  }
  void SetListQueuesFailure(const Status& s) {
    std::lock_guard<std::mutex> l(mu_);
    fail_list_queues = s;
  }
  size_t CallCount(const std::string& prefix) {
    std::lock_guard<std::mutex> l(mu_);
    size_t n = 0;
    for (const std::string& c : calls) n += c.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }

  // Removes a pod (as a delete with grace period 0); false when absent.
  bool DeletePod(const std::string& ns, const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    return pods.erase(ns + "/" + name) > 0;
  }
  // A copy of every pod, under the lock (tests that bind concurrently).
  std::vector<kube::PodInfo> PodsNow() {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<kube::PodInfo> out;
    for (const auto& [k, p] : pods) out.push_back(p);
    return out;
  }
  // Adds a pod under the lock (AddPod's shape, for concurrent tests).
  void AddPodLocked(const kube::PodInfo& p) {
    std::lock_guard<std::mutex> l(mu_);
    pods[p.ns + "/" + p.name] = p;
  }

  void AddPod(const std::string& ns, const std::string& name, const std::string& uid, const char* vram,
              const char* gpu_count = nullptr) {
    kube::PodInfo p;
    p.ns = ns;
    p.name = name;
    p.uid = uid;
    p.phase = "Pending";
    p.spec.ns = ns;
    p.spec.name = name;
    p.spec.uid = uid;
    if (vram) p.spec.containers.push_back(ledger::ContainerAmount{std::string(vram), std::string(vram), false});
    if (gpu_count) p.spec.gpu_count = gpu_count;
    pods[ns + "/" + name] = p;
  }

 private:
  std::mutex mu_;
};

}  // namespace vramd::testing
