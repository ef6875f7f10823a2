// Time as a dependency: production uses the system clock, tests a fake.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace vramd {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;  // wall clock, ms since the epoch
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// The store's clock, as seen from this process (issue 32): `base` plus the
// offset last measured against the store's server (Observe; daemon::
// ClockSync takes a sample every few seconds). The times vramd decides on
// (reservation and usage-report stamps, GPU-lock activity, the eviction
// budget) are the store's; every freshness, runtime and activity decision
// compares them with this clock, so a replica whose own clock is off decides
// as the store's time says. Thread-safe.
class OffsetClock final : public Clock {
 public:
  // A sample whose round trip took longer than this says too little about
  // when the server read its clock: ignored.
  static constexpr int64_t kMaxRoundTripMs = 1000;

  explicit OffsetClock(const Clock* base) : base_(base) {}
  int64_t NowMs() const override { return base_->NowMs() + offset_.load(std::memory_order_relaxed); }
  const Clock* base() const { return base_; }

  // One sample: the server's time `server_ms`, read between this process's
  // base times `before_ms` and `after_ms`. The offset becomes server_ms
  // minus the round trip's midpoint. Returns false (nothing changes) for a
  // round trip below 0 or above kMaxRoundTripMs.
  bool Observe(int64_t server_ms, int64_t before_ms, int64_t after_ms) {
    const int64_t rtt = after_ms - before_ms;
    if (rtt < 0 || rtt > kMaxRoundTripMs) return false;
    offset_.store(server_ms - (before_ms + rtt / 2), std::memory_order_relaxed);
    return true;
  }
  int64_t offset_ms() const { return offset_.load(std::memory_order_relaxed); }

 private:
  const Clock* base_;
  std::atomic<int64_t> offset_{0};
};

}  // namespace vramd
