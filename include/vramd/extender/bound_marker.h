// Marks bound pods' entries kBound in the ledger off the bind's path (issue
// 36): Mark only queues (a short lock, no I/O), and one background thread
// writes the queue in batches (store::LedgerStore::FinishBinds: one round
// trip per batch instead of one per bind). Until its batch is written, a
// pod's entry stays kReserved and its bind stays marked in flight, which
// count the same as kBound for every decision (the VRAM is held; reconcile
// never frees an entry whose bind is in flight, and the pod watch takes a
// reserved entry of a bound pod as its bind's); a batch that fails leaves
// them to expire and reconcile marks those entries bound (as when a bind's
// own mark failed before).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/store/ledger_store.h"

namespace vramd::extender {

struct BoundMarkerOptions {
  // After the first mark, the thread waits this long for more (or until
  // max_batch wait) and writes them in one call.
  int64_t batch_window_ms = 20;
  size_t max_batch = 64;
  // Marks waiting to be written; beyond, Mark refuses (the caller marks the
  // pod itself).
  size_t max_queued = 4096;
};

// Thread-safe. The thread starts in the constructor and stops in Stop or the
// destructor, writing what is queued first; `store` must outlive it.
class BoundMarker {
 public:
  BoundMarker(store::LedgerStore* store, metrics::Registry* registry, BoundMarkerOptions opts = {});
  ~BoundMarker();
  BoundMarker(const BoundMarker&) = delete;
  BoundMarker& operator=(const BoundMarker&) = delete;

  // Queues marking pod `uid`'s entry on `node` bound (and clearing its
  // in-flight mark). False when the queue is full or the marker stopped.
  bool Mark(std::string node, std::string uid);
  // Writes what is queued (one attempt) and stops the thread. Idempotent.
  void Stop();

 private:
  void Run(std::stop_token st);
  void Write(const std::vector<store::LedgerStore::BoundMark>& batch);

  store::LedgerStore* const store_;
  const BoundMarkerOptions opts_;
  metrics::Counter* const written_;
  metrics::Counter* const gone_;
  metrics::Counter* const failed_;
  metrics::Counter* const batches_;
  Mutex stop_mu_;  // one Stop joins the thread
  Mutex mu_;
  CondVar wake_;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::vector<store::LedgerStore::BoundMark> queue_ GUARDED_BY(mu_);
  std::jthread thread_;  // last: started once every field above exists
};

}  // namespace vramd::extender
