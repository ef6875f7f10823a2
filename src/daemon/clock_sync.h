// Keeps the process's OffsetClock on the store's time (issue 32).
#pragma once

#include <cstdint>
#include <stop_token>
#include <thread>

#include "vramd/clock.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/status.h"
#include "vramd/store/valkey_client.h"

namespace vramd::daemon {

// Above this offset between this process's clock and the store's, a warning
// says so (decisions are right either way: they use the store's time).
inline constexpr int64_t kClockOffsetWarnMs = 2000;

class ClockSync {
 public:
  // `valkey`, `clock` and `registry` must outlive it. Registers
  // vramd_store_clock_offset_seconds (the store's clock minus this
  // process's: what OffsetClock adds).
  ClockSync(store::ValkeyClient* valkey, OffsetClock* clock, metrics::Registry* registry, int64_t interval_ms);
  ~ClockSync();

  // One sample: the server's TIME read between two base-clock readings
  // (OffsetClock::Observe). An error or a malformed reply changes nothing.
  Status SampleOnce();
  // The store's memory (INFO memory: used_memory, maxmemory) into
  // vramd_store_used_memory_bytes and vramd_store_maxmemory_bytes (issue 33:
  // the alert VramdStoreMemoryHigh fires before a noeviction store refuses
  // writes). An error or a malformed reply changes nothing.
  Status SampleMemory();
  // SampleOnce and SampleMemory now and every interval_ms on a thread of its own, until Stop.
  void Start();
  void Stop();

 private:
  void Loop(std::stop_token st);

  store::ValkeyClient* valkey_;
  OffsetClock* clock_;
  metrics::Family<metrics::Gauge>* offset_;
  metrics::Family<metrics::Gauge>* used_memory_;
  metrics::Family<metrics::Gauge>* max_memory_;
  const int64_t interval_ms_;
  bool warned_ = false;  // only SampleOnce's caller thread touches it
  Mutex mu_;
  CondVar cv_;
  std::jthread thread_;
};

}  // namespace vramd::daemon
