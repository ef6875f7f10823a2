// QueueWatcher keeps an in-memory copy of the cluster's VramQueue objects
// (issue 16): list, then watch from the list's resourceVersion; when a watch
// ends — the server's timeout, 410 Gone, an error — it lists again (the
// queues are few, and a QueueSpec carries no resourceVersion to resume
// from). Runs on every replica: filter and bind admit pods against the queues.
//
// The CRD may be missing: a list answered kNotFound means the API server does
// not serve vramqueues.vramd.io. Installed() then turns false, the copy is
// emptied, one warning is logged (not one per retry) and the list is tried
// again every `not_installed_retry_ms` (30 s); once a list succeeds, the CRD
// is installed again (logged). Other errors retry with a backoff of 200 ms
// doubling to 5 s (reset by a watch that ends normally), logging a warning
// when the error changes.
//
// `on_change` is called, on the watcher's thread, after a list or an event
// that changed the copy — an object added or deleted, or its decoded spec
// changed (a status-only update, such as the leader's own status patch,
// does not call it) — when Installed() flips, and when Synced() turns true.
// It must not block long.
//
// Thread-safe: the accessors may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "vramd/kube/kube_client.h"
#include "vramd/ledger/queues.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"

namespace vramd::reconcile {

struct QueueWatchOptions {
  int64_t not_installed_retry_ms = 30000;  // list again this often while the CRD is missing
  int64_t backoff_initial_ms = 200;        // after another error, doubling...
  int64_t backoff_max_ms = 5000;           // ...up to this
};

class QueueWatcher {
 public:
  // Registers vramd_queue_watch_events_total{type} in `registry`: type is
  // added, modified, deleted, bookmark, relist, error or not_installed.
  QueueWatcher(kube::KubeClient* kube, std::function<void()> on_change, metrics::Registry* registry,
               QueueWatchOptions opts = {});
  ~QueueWatcher();  // Stop()

  void Start();
  // Ends the watch and joins the thread (promptly, also during a retry wait).
  void Stop();

  // True once a list succeeded and no error broke the watch since (a watch
  // that the server ended, or a 410, keeps it true while listing again).
  // False while the CRD is not installed.
  bool Synced() const { return synced_.load(); }
  // False after a list answered kNotFound (the CRD is not installed), until
  // a list succeeds; true before the first list.
  bool Installed() const { return installed_.load(); }
  // The queue objects with a readable name (decode_error may be set), sorted
  // by name; empty while the CRD is not installed.
  std::vector<ledger::QueueSpec> Specs() const;
  // Lists done successfully.
  uint64_t lists() const { return lists_.load(); }

 private:
  void Loop(std::stop_token st);
  // One list and one watch; see Loop.
  void Step(std::stop_token st);
  // Applies one watch event; true when the copy changed.
  bool Apply(const kube::WatchEvent<ledger::QueueSpec>& ev);
  void Pause(std::stop_token st, int64_t ms);
  void Changed();

  kube::KubeClient* kube_;
  std::function<void()> on_change_;
  const QueueWatchOptions opts_;
  metrics::Family<metrics::Counter>* events_;
  mutable Mutex mu_;
  std::map<std::string, ledger::QueueSpec> specs_ GUARDED_BY(mu_);  // by name
  std::atomic<bool> synced_{false};
  std::atomic<bool> installed_{true};
  std::atomic<bool> stop_flag_{false};
  std::atomic<uint64_t> lists_{0};
  // Only the watcher's thread touches these.
  int64_t backoff_ms_ = 0;
  std::string last_error_;  // the last error logged (logged again only when it changes)
  CondVar cv_;
  std::jthread thread_;
};

}  // namespace vramd::reconcile
