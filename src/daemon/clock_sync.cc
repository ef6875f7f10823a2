#include "daemon/clock_sync.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdlib>
#include <string>

#include "vramd/metrics/thread_guard.h"

namespace vramd::daemon {
namespace {

// A TIME reply: ["<seconds>", "<microseconds>"] -> ms.
bool ParseTime(const store::Reply& r, int64_t* ms) {
  if (r.type != store::Reply::Type::kArray || r.elements.size() != 2) return false;
  int64_t v[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const std::string& s = r.elements[static_cast<size_t>(i)].str;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v[i]);
    if (ec != std::errc() || p != s.data() + s.size() || v[i] < 0) return false;
  }
  if (v[0] > 1'000'000'000'000LL || v[1] >= 1'000'000) return false;
  *ms = v[0] * 1000 + v[1] / 1000;
  return true;
}

}  // namespace

ClockSync::ClockSync(store::ValkeyClient* valkey, OffsetClock* clock, metrics::Registry* registry, int64_t interval_ms)
    : valkey_(valkey), clock_(clock), interval_ms_(interval_ms) {
  offset_ = &registry->AddGauge("vramd_store_clock_offset_seconds",
                                "The store's clock minus this replica's, as last measured (TIME, every few "
                                "seconds); vramd decides on the store's time, so this only says how far off the "
                                "replica's own clock is.");
  offset_->With({});
  used_memory_ = &registry->AddGauge("vramd_store_used_memory_bytes",
                                     "The store's used_memory (INFO memory), as last read (every few seconds).");
  max_memory_ = &registry->AddGauge("vramd_store_maxmemory_bytes",
                                    "The store's maxmemory (INFO memory; 0: no limit). With the noeviction policy "
                                    "the ledger needs, writes are refused once used_memory reaches it.");
}

Status ClockSync::SampleMemory() {
  Result<store::Reply> r = valkey_->Command({"INFO", "memory"});
  if (!r.ok()) return r.status();
  if (r->is_error()) return Unavailable("INFO memory: " + r->str);
  const std::string& text = r->str;
  auto field = [&](std::string_view key, int64_t* out) {
    const std::string needle = "\n" + std::string(key) + ":";
    size_t at = ("\n" + text).find(needle);
    if (at == std::string::npos) return false;
    at += needle.size() - 1;  // in `text`
    size_t end = text.find_first_of("\r\n", at);
    std::string_view v(text.data() + at, (end == std::string::npos ? text.size() : end) - at);
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
    return ec == std::errc() && p == v.data() + v.size() && *out >= 0;
  };
  int64_t used = 0, max = 0;
  if (!field("used_memory", &used) || !field("maxmemory", &max)) {
    return Internal("the store's INFO memory reply lacks used_memory or maxmemory");
  }
  used_memory_->With({}).Set(static_cast<double>(used));
  max_memory_->With({}).Set(static_cast<double>(max));
  return Status::Ok();
}

ClockSync::~ClockSync() { Stop(); }

Status ClockSync::SampleOnce() {
  const int64_t before = clock_->base()->NowMs();
  Result<store::Reply> r = valkey_->Command({"TIME"});
  const int64_t after = clock_->base()->NowMs();
  if (!r.ok()) return r.status();
  int64_t server_ms = 0;
  if (!ParseTime(*r, &server_ms)) return Internal("the store's TIME reply is not two non-negative integers");
  if (!clock_->Observe(server_ms, before, after)) return Unavailable("TIME took too long to say when it was read");
  const int64_t offset = clock_->offset_ms();
  offset_->With({}).Set(static_cast<double>(offset) / 1000.0);
  const bool off = std::llabs(offset) > kClockOffsetWarnMs;
  if (off && !warned_) {
    spdlog::warn("this replica's clock is {} ms {} the store's; vramd decides on the store's time", std::llabs(offset),
                 offset > 0 ? "behind" : "ahead of");
  }
  warned_ = off;
  return Status::Ok();
}

void ClockSync::Start() {
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void ClockSync::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    cv_.NotifyAll();
    thread_.join();
  }
}

void ClockSync::Loop(std::stop_token st) {
  while (!st.stop_requested()) {
    bool ok = metrics::GuardedStep(metrics::kThreadClockSync, [&] {
      if (Status s = SampleOnce(); !s.ok()) spdlog::debug("store clock sample: {}", s.message());
      if (Status s = SampleMemory(); !s.ok()) spdlog::debug("store memory sample: {}", s.message());
    });
    if (!ok) metrics::PauseAfterError(st);
    MutexLock lock(&mu_);
    cv_.WaitFor(&lock, st, std::chrono::milliseconds(interval_ms_));
  }
}

}  // namespace vramd::daemon
