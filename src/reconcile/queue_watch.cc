#include "vramd/reconcile/queue_watch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "vramd/metrics/thread_guard.h"

namespace vramd::reconcile {

QueueWatcher::QueueWatcher(kube::KubeClient* kube, std::function<void()> on_change, metrics::Registry* registry,
                           QueueWatchOptions opts)
    : kube_(kube), on_change_(std::move(on_change)), opts_(opts), backoff_ms_(opts.backoff_initial_ms) {
  events_ = &registry->AddCounter("vramd_queue_watch_events_total",
                                  "VramQueue watch events, lists and errors by type.", {"type"});
}

QueueWatcher::~QueueWatcher() { Stop(); }

void QueueWatcher::Start() {
  stop_flag_ = false;
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void QueueWatcher::Stop() {
  if (!thread_.joinable()) return;
  stop_flag_ = true;
  thread_.request_stop();
  cv_.NotifyAll();
  thread_.join();
}

std::vector<ledger::QueueSpec> QueueWatcher::Specs() const {
  MutexLock lock(&mu_);
  std::vector<ledger::QueueSpec> out;
  out.reserve(specs_.size());
  for (const auto& [name, q] : specs_) out.push_back(q);  // a std::map: sorted by name
  return out;
}

void QueueWatcher::Pause(std::stop_token st, int64_t ms) {
  Mutex m;
  MutexLock lock(&m);
  cv_.WaitFor(&lock, st, std::chrono::milliseconds(ms));
}

void QueueWatcher::Changed() {
  if (on_change_) on_change_();
}

bool QueueWatcher::Apply(const kube::WatchEvent<ledger::QueueSpec>& ev) {
  const ledger::QueueSpec& q = ev.object;
  metrics::WorkingOn working_on("vramqueue watch event for " + q.name);
  MutexLock lock(&mu_);
  switch (ev.type) {
    case kube::WatchEventType::kAdded:
    case kube::WatchEventType::kModified: {
      events_->With({ev.type == kube::WatchEventType::kAdded ? "added" : "modified"}).Inc();
      auto it = specs_.find(q.name);
      if (it != specs_.end() && it->second == q) return false;  // a status-only update
      specs_[q.name] = q;
      return true;
    }
    case kube::WatchEventType::kDeleted:
      events_->With({"deleted"}).Inc();
      return specs_.erase(q.name) > 0;
    case kube::WatchEventType::kBookmark:
      events_->With({"bookmark"}).Inc();
      return false;
  }
  return false;
}

void QueueWatcher::Step(std::stop_token st) {
  Result<kube::List<ledger::QueueSpec>> list = kube_->ListQueues();
  if (!list.ok()) {
    synced_ = false;
    if (list.status().code() == Code::kNotFound) {
      events_->With({"not_installed"}).Inc();
      bool changed = false;
      {
        MutexLock lock(&mu_);  // emptied before Installed() turns false: no reader sees both
        changed = !specs_.empty();
        specs_.clear();
      }
      if (installed_.exchange(false)) {
        spdlog::warn("VramQueue objects are not served by the API server ({}): the vramqueues.vramd.io CRD is "
                     "not installed, queues are off; checking again every {} ms",
                     list.status().message(), opts_.not_installed_retry_ms);
        changed = true;
      }
      if (changed) Changed();
      last_error_.clear();
      backoff_ms_ = opts_.backoff_initial_ms;
      Pause(st, opts_.not_installed_retry_ms);
      return;
    }
    events_->With({"error"}).Inc();
    if (list.status().message() != last_error_) {
      spdlog::warn("listing vramqueues failed: {} (retrying with a backoff up to {} ms)", list.status().message(),
                   opts_.backoff_max_ms);
      last_error_ = list.status().message();
    } else {
      spdlog::debug("listing vramqueues failed again: {}", last_error_);
    }
    Pause(st, backoff_ms_);
    backoff_ms_ = std::min(backoff_ms_ * 2, opts_.backoff_max_ms);
    return;
  }

  bool changed = false;
  {
    metrics::WorkingOn working_on("vramqueue list of " + std::to_string(list->items.size()) + " objects");
    std::map<std::string, ledger::QueueSpec> fresh;
    for (ledger::QueueSpec& q : list->items) {
      std::string name = q.name;
      fresh.emplace(std::move(name), std::move(q));  // a repeated name (never from a real server): the first
    }
    MutexLock lock(&mu_);  // filled before Installed() and Synced() turn true
    changed = fresh != specs_;
    specs_ = std::move(fresh);
  }
  if (!installed_.exchange(true)) {
    spdlog::info("VramQueue objects are served by the API server now: the vramqueues.vramd.io CRD is installed");
    changed = true;
  }
  lists_.fetch_add(1);
  events_->With({"relist"}).Inc();
  const bool was_synced = synced_.exchange(true);
  if (!last_error_.empty()) spdlog::info("listing vramqueues works again");
  last_error_.clear();
  if (changed || !was_synced) Changed();

  Status s = kube_->WatchQueues(list->resource_version, stop_flag_, [this](const auto& ev) {
    if (Apply(ev)) Changed();
  });
  if (st.stop_requested()) return;
  if (s.ok() || s.code() == Code::kConflict) {  // the server ended the stream, or 410 Gone: list again
    if (!s.ok()) spdlog::info("vramqueue watch expired ({}): listing again", s.message());
    backoff_ms_ = opts_.backoff_initial_ms;
    return;
  }
  synced_ = false;
  events_->With({"error"}).Inc();
  spdlog::warn("vramqueue watch broke: {} (listing again in {} ms)", s.message(), backoff_ms_);
  Pause(st, backoff_ms_);
  backoff_ms_ = std::min(backoff_ms_ * 2, opts_.backoff_max_ms);
}

void QueueWatcher::Loop(std::stop_token st) {
  while (!st.stop_requested()) {
    // An exception that escapes a step is counted and logged by the guard;
    // the next step lists afresh.
    if (!metrics::GuardedStep(metrics::kThreadQueueWatch, [&] { Step(st); })) {
      synced_ = false;
      metrics::PauseAfterError(st);
    }
  }
}

}  // namespace vramd::reconcile
