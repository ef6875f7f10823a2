// OffsetClock (issue 32): the store's time from this process's clock and one
// TIME sample.
#include <gtest/gtest.h>

#include "fakes/fake_clock.h"
#include "vramd/clock.h"

namespace vramd {
namespace {

TEST(OffsetClock, ASampleSetsTheOffsetFromTheRoundTripsMidpoint) {
  testing::FakeClock base(10'000);
  OffsetClock clock(&base);
  EXPECT_EQ(clock.NowMs(), 10'000);
  struct Case {
    const char* name;
    int64_t server, before, after;
    bool taken;
    int64_t offset;  // after the case
  };
  const Case cases[] = {
      {"ServerAhead", 20'010, 10'000, 10'020, true, 10'000},
      {"ServerBehind", 5'005, 10'000, 10'010, true, -5'000},
      {"NoRoundTrip", 10'000, 10'000, 10'000, true, 0},
      {"RoundTripTooLong_Kept", 99'999, 10'000, 10'000 + OffsetClock::kMaxRoundTripMs + 1, false, 0},
      {"BackwardsRoundTrip_Kept", 99'999, 10'010, 10'000, false, 0},
      {"LongestAllowed", 10'500, 10'000, 10'000 + OffsetClock::kMaxRoundTripMs, true, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(clock.Observe(c.server, c.before, c.after), c.taken);
    EXPECT_EQ(clock.offset_ms(), c.offset);
    EXPECT_EQ(clock.NowMs(), base.NowMs() + c.offset);
  }
}

}  // namespace
}  // namespace vramd
