#include "vramd/extender/bound_marker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace vramd::extender {

namespace {

metrics::Family<metrics::Counter>& Marks(metrics::Registry* registry) {
  return registry->AddCounter("vramd_bound_marks_total",
                              "Bound pods' ledger entries marked bound after their bind was answered, in batches "
                              "(bind_mark_window_ms), by result: written, gone (the entry was released "
                              "meanwhile), failed (left to reconcile).",
                              {"result"});
}

}  // namespace

BoundMarker::BoundMarker(store::LedgerStore* store, metrics::Registry* registry, BoundMarkerOptions opts)
    : store_(store),
      opts_(opts),
      written_(&Marks(registry).With({"written"})),
      gone_(&Marks(registry).With({"gone"})),
      failed_(&Marks(registry).With({"failed"})),
      batches_(&registry->AddCounter("vramd_bound_mark_batches_total",
                                     "Batches of bound marks written, one store call each (bind_mark_window_ms).", {})
                    .With({})),
      thread_([this](std::stop_token st) { Run(st); }) {}

BoundMarker::~BoundMarker() { Stop(); }

bool BoundMarker::Mark(std::string node, std::string uid) {
  MutexLock l(&mu_);
  if (stopped_ || queue_.size() >= opts_.max_queued) return false;
  queue_.push_back({std::move(node), std::move(uid)});
  // Woken for the first mark (it then waits out the window) and for a full
  // batch, not for every mark.
  if (queue_.size() == 1 || queue_.size() == opts_.max_batch || opts_.batch_window_ms <= 0) wake_.NotifyOne();
  return true;
}

void BoundMarker::Stop() {
  MutexLock l(&stop_mu_);
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void BoundMarker::Run(std::stop_token st) {
  for (;;) {
    std::vector<store::LedgerStore::BoundMark> batch;
    bool last = false;
    {
      MutexLock l(&mu_);
      wake_.WaitFor(&l, st, std::chrono::hours(1), [this]() EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); });
      if (opts_.batch_window_ms > 0) {  // the binds answered meanwhile join this batch
        const size_t enough = std::max<size_t>(1, opts_.max_batch);
        wake_.WaitFor(&l, st, std::chrono::milliseconds(opts_.batch_window_ms),
                      [this, enough]() EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.size() >= enough; });
      }
      last = st.stop_requested();
      if (last) stopped_ = true;  // nothing more is queued: what is left goes now
      batch.swap(queue_);
    }
    const size_t step = std::max<size_t>(1, opts_.max_batch);
    for (size_t i = 0; i < batch.size(); i += step) {
      const auto end = batch.begin() + static_cast<std::ptrdiff_t>(std::min(batch.size(), i + step));
      Write(std::vector<store::LedgerStore::BoundMark>(batch.begin() + static_cast<std::ptrdiff_t>(i), end));
    }
    if (last) return;
  }
}

void BoundMarker::Write(const std::vector<store::LedgerStore::BoundMark>& batch) {
  if (batch.empty()) return;
  std::vector<Status> results;
  batches_->Inc();
  if (Status s = store_->FinishBinds(batch, &results); !s.ok()) {
    failed_->Inc(static_cast<double>(batch.size()));
    spdlog::warn("marking {} bound pod(s) bound in the ledger failed: {} (their in-flight marks expire and "
                 "reconcile marks them bound)",
                 batch.size(), s.message());
    return;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const Status& r = i < results.size() ? results[i] : Status::Ok();
    if (r.ok()) {
      written_->Inc();
    } else if (r.code() == Code::kNotFound) {
      // Released meanwhile (the pod went away): nothing to mark.
      gone_->Inc();
      spdlog::debug("bound mark of pod {} on {}: {}", batch[i].pod_uid, batch[i].node, r.message());
    } else {
      failed_->Inc();
      spdlog::warn("marking pod {} bound on node {} failed: {} (reconcile marks it bound)", batch[i].pod_uid,
                   batch[i].node, r.message());
    }
  }
}

}  // namespace vramd::extender
