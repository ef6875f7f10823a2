// Records filter refusals (store::Refusal) in the ledger store off the
// filter's path: Record and Forget only queue (a short lock, no I/O), and one
// background thread writes the queue in batches. The leader's idle eviction
// reads the refusals back as the pods waiting for VRAM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vramd/clock.h"
#include "vramd/mutex.h"
#include "vramd/store/ledger_store.h"

namespace vramd::extender {

struct RefusalRecorderOptions {
  size_t max_queued = 256;             // refusals (and, apart, forgets) waiting to be written; more are dropped
  int64_t per_uid_interval_ms = 5000;  // at most one refusal of a pod queued per interval
  size_t max_tracked_uids = 4096;      // pods remembered for the interval; beyond, new pods are dropped
  // After the first refusal or forget, the thread waits this long for more
  // (or until half of max_queued wait) and writes them in one batch: every
  // bind forgets its pod, and one round trip per bind (and a wake of this
  // thread) was a few percent of vramd's CPU per scheduled pod.
  int64_t batch_window_ms = 20;
};

// Thread-safe. The thread starts in the constructor and stops in Stop or the
// destructor; `store` and `clock` must outlive the recorder. Store errors are
// logged and the batch is lost (a pod still waiting is refused again).
class RefusalRecorder {
 public:
  RefusalRecorder(store::LedgerStore* store, const Clock* clock, RefusalRecorderOptions opts = {});
  ~RefusalRecorder();
  RefusalRecorder(const RefusalRecorder&) = delete;
  RefusalRecorder& operator=(const RefusalRecorder&) = delete;

  // Queues `r` (r.uid non-empty). False when it is dropped: the pod had a
  // refusal queued within per_uid_interval_ms, the queue is full, too many
  // pods are tracked, or the recorder stopped.
  bool Record(store::Refusal r);
  // Queues forgetting the pod's refusal (its bind succeeded) and drops a
  // refusal of it still queued. False when the forget queue is full or the
  // recorder stopped.
  bool Forget(const std::string& uid);
  // Writes what is queued (one attempt) and stops the thread. Idempotent.
  void Stop();

 private:
  void Run(std::stop_token st);
  void WakeLocked() EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t Enough() const;

  store::LedgerStore* const store_;
  const Clock* const clock_;
  const RefusalRecorderOptions opts_;
  Mutex stop_mu_;  // one Stop joins the thread
  Mutex mu_;
  CondVar wake_;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::deque<store::Refusal> queue_ GUARDED_BY(mu_);
  std::vector<std::string> forget_ GUARDED_BY(mu_);
  std::unordered_map<std::string, int64_t> last_queued_ GUARDED_BY(mu_);  // uid -> clock ms
  std::jthread thread_;  // last: started once every field above exists
};

}  // namespace vramd::extender
