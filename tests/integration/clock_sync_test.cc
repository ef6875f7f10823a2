// The store's clock (issue 32): daemon::ClockSync against a real
// redis-server, from a replica whose own clock is an hour off.
#include "daemon/clock_sync.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "vramd/metrics/registry.h"
#include "vramd/store/valkey_client.h"

namespace vramd {
namespace {

constexpr int64_t kHourMs = 3'600'000;

// This replica's clock: stands still where it was set.
class StillClock final : public Clock {
 public:
  explicit StillClock(int64_t now_ms) : now_ms_(now_ms) {}
  int64_t NowMs() const override { return now_ms_; }

 private:
  int64_t now_ms_;
};

TEST(ClockSync, AReplicaWhoseClockIsAnHourOffDecidesOnTheStoresTime) {
  const char* url = std::getenv("VRAMD_TEST_VALKEY_URL");
  if (url == nullptr || *url == '\0') {
    GTEST_FAIL() << "VRAMD_TEST_VALKEY_URL is not set (e.g. redis://127.0.0.1:16399 of a throwaway server)";
  }
  store::ValkeyOptions opts;
  opts.url = url;
  std::shared_ptr<store::ValkeyClient> valkey = store::NewValkeyClient(opts);
  SystemClock real;
  StillClock behind(real.NowMs() - kHourMs);  // this replica's clock, an hour behind
  OffsetClock clock(&behind);
  metrics::Registry registry;
  daemon::ClockSync sync(valkey.get(), &clock, &registry, /*interval_ms=*/10'000);
  EXPECT_EQ(clock.NowMs(), behind.NowMs());  // nothing measured yet
  ASSERT_TRUE(sync.SampleOnce().ok());
  // The same machine's server: the store's time is the real time (within a
  // second of slack for the round trip and the scheduler).
  EXPECT_NEAR(static_cast<double>(clock.NowMs()), static_cast<double>(real.NowMs()), 1000.0);
  EXPECT_NEAR(static_cast<double>(clock.offset_ms()), static_cast<double>(kHourMs), 1000.0);
  const std::string text = registry.Render();
  const size_t at = text.find("\nvramd_store_clock_offset_seconds ");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::stod(text.substr(at + 34)), 3600.0, 1.0);
  // The thread keeps it: started, a sample at once, stopped.
  OffsetClock fresh(&behind);
  daemon::ClockSync loop(valkey.get(), &fresh, &registry, /*interval_ms=*/50);
  loop.Start();
  for (int i = 0; i < 200 && fresh.offset_ms() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  loop.Stop();
  EXPECT_NEAR(static_cast<double>(fresh.offset_ms()), static_cast<double>(kHourMs), 1000.0);
}


// Issue 33: the store's memory against its limit, read with INFO memory,
// as the alert VramdStoreMemoryHigh needs it (the chart's Valkey runs with
// maxmemory below its container's limit and the noeviction policy).
TEST(ClockSync, TheStoresMemoryAndItsLimitAreMetrics) {
  const char* url = std::getenv("VRAMD_TEST_VALKEY_URL");
  if (url == nullptr || *url == '\0') GTEST_FAIL() << "VRAMD_TEST_VALKEY_URL is not set";
  store::ValkeyOptions opts;
  opts.url = url;
  std::shared_ptr<store::ValkeyClient> valkey = store::NewValkeyClient(opts);
  SystemClock real;
  OffsetClock clock(&real);
  metrics::Registry registry;
  daemon::ClockSync sync(valkey.get(), &clock, &registry, /*interval_ms=*/10'000);
  ASSERT_TRUE(sync.SampleMemory().ok());
  Result<store::Reply> max = valkey->Command({"CONFIG", "GET", "maxmemory"});
  ASSERT_TRUE(max.ok());
  ASSERT_EQ(max->elements.size(), 2u);
  const std::string text = registry.Render();
  auto value = [&](const std::string& name) {
    const size_t at = text.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name << " in\n" << text;
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
  };
  EXPECT_GT(value("vramd_store_used_memory_bytes"), 100'000.0);  // a server's own structures alone
  EXPECT_EQ(value("vramd_store_maxmemory_bytes"), std::stod(max->elements[1].str));
}

}  // namespace
}  // namespace vramd
