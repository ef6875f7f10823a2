// A Clock that moves only when a test moves it.
#pragma once

#include <atomic>
#include <cstdint>

#include "vramd/clock.h"

namespace vramd::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t now_ms = 1'700'000'000'000) : now_ms_(now_ms) {}
  int64_t NowMs() const override { return now_ms_.load(); }
  void Advance(int64_t ms) { now_ms_.fetch_add(ms); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace vramd::testing
