#include "vramd/reconcile/pod_watch.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "vramd/ledger/pod_request.h"
#include "vramd/metrics/thread_guard.h"
#include "vramd/reconcile/plan.h"
#include "vramd/reconcile/reconciler.h"

namespace vramd::reconcile {
namespace {

constexpr int64_t kDeletedMemoryMs = 15 * 60 * 1000;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool RequestsVram(const kube::PodInfo& pod) {
  Result<ledger::VramRequest> r = ledger::ComputeVramRequest(pod.spec);
  return !r.ok() || r->wants_vram();
}

bool PodChangeMatters(const kube::PodInfo* before, const kube::PodInfo& after) {
  if (before == nullptr) return RequestsVram(after);
  return before->node_name != after.node_name || before->phase != after.phase || before->deleting != after.deleting ||
         before->annotations != after.annotations || before->spec != after.spec ||
         before->scheduler_name != after.scheduler_name;
}

bool NodeChangeMatters(const kube::NodeInfo* before, const kube::NodeInfo& after) {
  if (before == nullptr) return true;
  auto without_nudge = [](const std::map<std::string, std::string>& labels) {
    std::map<std::string, std::string> out = labels;
    out.erase(kFreedLabel);
    return out;
  };
  return before->annotations != after.annotations || without_nudge(before->labels) != without_nudge(after.labels);
}

PodWatcher::PodWatcher(kube::KubeClient* kube, std::function<void()> on_change, metrics::Registry* registry)
    : kube_(kube), on_change_(std::move(on_change)) {
  events_ = &registry->AddCounter("vramd_watch_events_total", "Pod watch events and relists by type.", {"type"});
  binds_accounted_ = &registry->AddCounter("vramd_watch_binds_accounted_total",
                                           "Pod watch events that were only a bind the ledger already accounts: they "
                                           "asked for no reconcile pass.");
  binds_accounted_->With({});
}

PodWatcher::~PodWatcher() { Stop(); }

void PodWatcher::Start() {
  stop_flag_ = false;
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void PodWatcher::Stop() {
  if (!thread_.joinable()) return;
  stop_flag_ = true;
  thread_.request_stop();
  cv_.NotifyAll();
  thread_.join();
}

std::vector<kube::PodInfo> PodWatcher::Pods() const {
  MutexLock lock(&mu_);
  std::vector<kube::PodInfo> out;
  out.reserve(pods_.size());
  for (const auto& [uid, p] : pods_) out.push_back(p);
  return out;
}

std::unordered_map<std::string, int64_t> PodWatcher::DeletionTimes() const {
  MutexLock lock(&mu_);
  std::unordered_map<std::string, int64_t> out;
  for (const auto& [uid, p] : pods_) {
    if (p.deleting && p.deletion_ms > 0) out.emplace(uid, p.deletion_ms);
  }
  return out;
}

std::set<std::string> PodWatcher::RecentlyDeleted() const {
  MutexLock lock(&mu_);
  std::set<std::string> out;
  for (const auto& [uid, t] : deleted_) out.insert(uid);
  return out;
}

void PodWatcher::Apply(const kube::WatchEvent<kube::PodInfo>& ev) {
  metrics::WorkingOn working_on("pod watch event for " + ev.object.ns + "/" + ev.object.name + " (uid " +
                                ev.object.uid + ")");
  bool matters = true;
  bool bind_only = false;
  {
    MutexLock lock(&mu_);
    if (!ev.object.resource_version.empty()) resource_version_ = ev.object.resource_version;
    switch (ev.type) {
      case kube::WatchEventType::kAdded:
      case kube::WatchEventType::kModified: {
        all_uids_.insert(ev.object.uid);
        auto it = pods_.find(ev.object.uid);
        matters = PodChangeMatters(it == pods_.end() ? nullptr : &it->second, ev.object);
        bind_only = it != pods_.end() && OnlyBound(it->second, ev.object);
        if (RequestsVram(ev.object)) {
          pods_[ev.object.uid] = ev.object;
        } else if (it != pods_.end()) {
          pods_.erase(it);
        }
        events_->With({"modified"}).Inc();
        break;
      }
      case kube::WatchEventType::kDeleted:
        // Always: a GPU lock may be held by a pod that asked for no VRAM.
        pods_.erase(ev.object.uid);
        all_uids_.erase(ev.object.uid);
        deleted_[ev.object.uid] = SteadyMs();
        events_->With({"deleted"}).Inc();
        break;
      case kube::WatchEventType::kBookmark:
        events_->With({"bookmark"}).Inc();
        return;  // nothing changed
    }
  }
  if (matters && bind_only && accounted_ && accounted_(ev.object)) {
    binds_accounted_->With({}).Inc();
    return;
  }
  if (matters && on_change_) on_change_();
}

void PodWatcher::Loop(std::stop_token st) {
  int backoff_ms = 200;
  bool need_list = true;
  auto pause = [&] {
    Mutex m;
    MutexLock lock(&m);
    cv_.WaitFor(&lock, st, std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, 5000);
  };
  // One list (when needed) and one watch; an exception that escapes it is
  // counted and logged by the guard, and the cache is listed afresh.
  auto step = [&] {
    if (need_list) {
      Result<kube::List<kube::PodInfo>> list = kube_->ListPods();
      if (!list.ok()) {
        synced_ = false;
        events_->With({"error"}).Inc();
        spdlog::warn("listing pods failed: {} (retrying in {} ms)", list.status().message(), backoff_ms);
        pause();
        return;
      }
      {
        metrics::WorkingOn working_on("pod list of " + std::to_string(list->items.size()) + " pods");
        MutexLock lock(&mu_);
        std::unordered_map<std::string, kube::PodInfo> fresh;
        std::set<std::string> uids;
        for (kube::PodInfo& p : list->items) {
          uids.insert(p.uid);
          if (RequestsVram(p)) fresh.emplace(p.uid, std::move(p));
        }
        // Pods that vanished while we were not watching are gone too.
        int64_t now = SteadyMs();
        for (const std::string& uid : all_uids_) {
          if (!uids.count(uid)) deleted_[uid] = now;
        }
        pods_ = std::move(fresh);
        all_uids_ = std::move(uids);
        for (auto it = deleted_.begin(); it != deleted_.end();) {
          it = now - it->second > kDeletedMemoryMs ? deleted_.erase(it) : std::next(it);
        }
        resource_version_ = list->resource_version;
      }
      relists_.fetch_add(1);
      events_->With({"relist"}).Inc();
      synced_ = true;
      need_list = false;
      backoff_ms = 200;
      if (on_change_) on_change_();
    }
    std::string rv;
    {
      MutexLock lock(&mu_);
      rv = resource_version_;
    }
    Status s = kube_->WatchPods(rv, stop_flag_, [this](const kube::WatchEvent<kube::PodInfo>& ev) { Apply(ev); });
    if (st.stop_requested()) return;
    if (s.ok()) return;  // the server ended the stream: watch again from the last version
    if (s.code() == Code::kConflict) {
      spdlog::info("pod watch expired ({}): relisting", s.message());
    } else {
      synced_ = false;
      events_->With({"error"}).Inc();
      spdlog::warn("pod watch broke: {} (relisting in {} ms)", s.message(), backoff_ms);
      pause();
    }
    need_list = true;
  };
  while (!st.stop_requested()) {
    if (!metrics::GuardedStep(metrics::kThreadPodWatch, step)) {
      synced_ = false;  // an event may have been lost: list again
      need_list = true;
      metrics::PauseAfterError(st);
    }
  }
}

NodeWatcher::NodeWatcher(kube::KubeClient* kube, std::function<void()> on_change)
    : kube_(kube), on_change_(std::move(on_change)) {}

NodeWatcher::~NodeWatcher() { Stop(); }

void NodeWatcher::Start() {
  stop_flag_ = false;
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void NodeWatcher::Stop() {
  if (!thread_.joinable()) return;
  stop_flag_ = true;
  thread_.request_stop();
  cv_.NotifyAll();
  thread_.join();
}

std::optional<std::vector<kube::NodeInfo>> NodeWatcher::Nodes() const {
  MutexLock lock(&mu_);
  if (!synced_) return std::nullopt;
  std::vector<kube::NodeInfo> out;
  out.reserve(nodes_.size());
  for (const auto& [name, n] : nodes_) out.push_back(n);
  return out;
}

std::optional<bool> NodeWatcher::Has(const std::string& name,
                                     const std::function<bool(const kube::NodeInfo&)>& also) const {
  MutexLock lock(&mu_);
  if (!synced_) return std::nullopt;
  auto it = nodes_.find(name);
  return it != nodes_.end() && (!also || also(it->second));
}

void NodeWatcher::Loop(std::stop_token st) {
  int backoff_ms = 200;
  std::string rv;
  auto pause = [&] {
    Mutex m;
    MutexLock lock(&m);
    cv_.WaitFor(&lock, st, std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, 5000);
  };
  auto unsynced = [&] {
    MutexLock lock(&mu_);
    synced_ = false;
  };
  // One list (when needed) and one watch; see PodWatcher::Loop.
  auto step = [&] {
    if (rv.empty()) {
      Result<kube::List<kube::NodeInfo>> list = kube_->ListNodes();
      if (!list.ok()) {
        spdlog::warn("listing nodes failed: {} (retrying in {} ms)", list.status().message(), backoff_ms);
        pause();
        return;
      }
      {
        MutexLock lock(&mu_);
        nodes_.clear();
        for (kube::NodeInfo& n : list->items) {
          std::string name = n.name;
          nodes_.emplace(std::move(name), std::move(n));
        }
        synced_ = true;
      }
      rv = list->resource_version;
      backoff_ms = 200;
      if (on_change_) on_change_();
    }
    Status s = kube_->WatchNodes(rv, stop_flag_, [&](const kube::WatchEvent<kube::NodeInfo>& ev) {
      metrics::WorkingOn working_on("node watch event for " + ev.object.name);
      if (!ev.object.resource_version.empty()) rv = ev.object.resource_version;
      bool matters = false;
      {
        MutexLock lock(&mu_);
        switch (ev.type) {
          case kube::WatchEventType::kAdded:
          case kube::WatchEventType::kModified: {
            auto it = nodes_.find(ev.object.name);
            matters = NodeChangeMatters(it == nodes_.end() ? nullptr : &it->second, ev.object);
            nodes_[ev.object.name] = ev.object;
            break;
          }
          case kube::WatchEventType::kDeleted:
            matters = nodes_.erase(ev.object.name) > 0;
            break;
          case kube::WatchEventType::kBookmark:
            break;
        }
      }
      if (matters && on_change_) on_change_();
    });
    if (st.stop_requested()) return;
    if (s.ok()) return;
    unsynced();
    if (s.code() != Code::kConflict) {
      spdlog::warn("node watch broke: {} (relisting in {} ms)", s.message(), backoff_ms);
      pause();
    }
    rv.clear();  // relist
  };
  while (!st.stop_requested()) {
    if (!metrics::GuardedStep(metrics::kThreadNodeWatch, step)) {
      unsynced();
      rv.clear();  // an event may have been lost: list again
      metrics::PauseAfterError(st);
    }
  }
}

}  // namespace vramd::reconcile
