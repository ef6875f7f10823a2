// Time as a dependency: production uses the system clock, tests a fake.
#pragma once

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

}  // namespace vramd
