#include "vramd/extender/refusal_recorder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace vramd::extender {

RefusalRecorder::RefusalRecorder(store::LedgerStore* store, const Clock* clock, RefusalRecorderOptions opts)
    : store_(store), clock_(clock), opts_(opts), thread_([this](std::stop_token st) { Run(st); }) {}

RefusalRecorder::~RefusalRecorder() { Stop(); }

bool RefusalRecorder::Record(store::Refusal r) {
  if (r.uid.empty()) return false;
  const int64_t now = clock_->NowMs();
  MutexLock l(&mu_);
  if (stopped_ || queue_.size() >= opts_.max_queued) return false;
  auto it = last_queued_.find(r.uid);
  if (it != last_queued_.end() && now - it->second < opts_.per_uid_interval_ms && now >= it->second) return false;
  if (it == last_queued_.end() && last_queued_.size() >= opts_.max_tracked_uids) {
    std::erase_if(last_queued_, [&](const auto& kv) { return now - kv.second >= opts_.per_uid_interval_ms; });
    if (last_queued_.size() >= opts_.max_tracked_uids) return false;
  }
  last_queued_[r.uid] = now;
  if (r.nodes.size() > store::kMaxRefusalNodes) r.nodes.resize(store::kMaxRefusalNodes);
  queue_.push_back(std::move(r));
  WakeLocked();
  return true;
}

bool RefusalRecorder::Forget(const std::string& uid) {
  MutexLock l(&mu_);
  if (stopped_ || forget_.size() >= opts_.max_queued) return false;
  std::erase_if(queue_, [&](const store::Refusal& r) { return r.uid == uid; });
  last_queued_.erase(uid);
  forget_.push_back(uid);
  WakeLocked();
  return true;
}

// The thread waits for a first item, then for the batch window or half a
// queue: it is woken for those, not for every item (a wake per bind).
void RefusalRecorder::WakeLocked() {
  const size_t n = queue_.size() + forget_.size();
  if (n == 1 || queue_.size() == Enough() || forget_.size() == Enough() || opts_.batch_window_ms <= 0) {
    wake_.NotifyOne();
  }
}

size_t RefusalRecorder::Enough() const { return std::max<size_t>(1, opts_.max_queued / 2); }

void RefusalRecorder::Stop() {
  MutexLock l(&stop_mu_);
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void RefusalRecorder::Run(std::stop_token st) {
  for (;;) {
    std::vector<store::Refusal> batch;
    std::vector<std::string> forget;
    bool last = false;
    {
      MutexLock l(&mu_);
      wake_.WaitFor(&l, st, std::chrono::hours(1),
                    [this]() EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || !forget_.empty(); });
      if (opts_.batch_window_ms > 0) {  // more of the same burst join this batch
        const size_t enough = Enough();
        wake_.WaitFor(&l, st, std::chrono::milliseconds(opts_.batch_window_ms),
                      [this, enough]() EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                        return queue_.size() >= enough || forget_.size() >= enough;
                      });
      }
      last = st.stop_requested();
      if (last) stopped_ = true;  // nothing more is queued: this is the final batch
      batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
      queue_.clear();
      forget.swap(forget_);
    }
    // Forgets first: a refusal queued after a pod's forget is newer.
    if (!forget.empty()) {
      if (Status s = store_->ForgetRefusals(forget); !s.ok()) {
        spdlog::warn("forgetting {} filter refusal(s) failed: {}", forget.size(), s.message());
      }
    }
    if (!batch.empty()) {
      if (Status s = store_->RecordRefusals(batch); !s.ok()) {
        spdlog::warn("recording {} filter refusal(s) failed: {}", batch.size(), s.message());
      }
    }
    if (last) return;
  }
}

}  // namespace vramd::extender
