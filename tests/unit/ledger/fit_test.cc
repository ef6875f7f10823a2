// The fit rule's table (tests/data/fit_cases.json) against the C++ rule:
// fit.h itself, DecideNode (bind, explain, preempt), Filter with and without
// its index (the fast paths) and the fake store. The same table runs against
// the reserve script in tests/integration/fit_lua_test.cc.
#include "vramd/ledger/fit.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "fakes/fake_ledger_store.h"
#include "fit_cases.h"
#include "vramd/ledger/placement.h"

namespace vramd::ledger {
namespace {

using testing::FitCase;
using testing::FitUsage;

constexpr int64_t kNow = 10'000'000;

const std::vector<FitCase>& Cases() {
  static const std::vector<FitCase> cases = [] {
    std::string error;
    return testing::LoadFitCases(&error);
  }();
  return cases;
}

// When the case's usage report was made: a fresh one a second ago, a stale
// one a millisecond too long ago, one a second or an hour ahead; 0: none.
int64_t ReportedMs(const FitCase& c) {
  switch (c.usage) {
    case FitUsage::kFresh: return kNow - 1000;
    case FitUsage::kStale: return kNow - c.policy.usage_max_age_ms - 1;
    case FitUsage::kAhead: return kNow + 1000;
    case FitUsage::kFuture: return kNow + 3'600'000;
    case FitUsage::kNone: return 0;
  }
  return 0;
}

Node NodeOf(const FitCase& c, const std::string& name) {
  Node n;
  n.name = name;
  for (size_t i = 0; i < c.gpus.size(); ++i) {
    Gpu g{static_cast<int>(i), "", c.gpus[i].capacity};
    if (c.gpus[i].used) {
      g.used = *c.gpus[i].used;
      g.used_ts_ms = ReportedMs(c);
    }
    n.gpus.push_back(g);
    for (size_t k = 0; k < c.gpus[i].held.size(); ++k) {
      const testing::FitHeld& h = c.gpus[i].held[k];
      Entry e;
      e.pod_uid = "held-" + std::to_string(i) + (k > 0 ? "-" + std::to_string(k) : "");
      e.ns = "default";
      e.name = e.pod_uid;
      e.gpus = {static_cast<int>(i)};
      e.per_gpu = h.per_gpu;
      e.peak_per_gpu = h.peak_per_gpu;
      e.victim = h.victim;
      e.state = EntryState::kBound;
      n.entries.push_back(e);
    }
  }
  return n;
}

VramRequest RequestOf(const FitCase& c) {
  VramRequest r;
  r.gpu_count = c.count;
  r.per_gpu = c.per_gpu;
  r.total = c.per_gpu * c.count;
  r.peak_per_gpu = std::max(c.per_gpu, c.peak_per_gpu);
  r.victim = c.victim;
  return r;
}

Policy PolicyOf(const FitCase& c, ScorePolicy score) {
  Policy p;
  p.score = score;
  p.fit_on_usage = c.policy.count_usage;
  p.usage_max_age_ms = c.policy.usage_max_age_ms;
  p.max_peak_ratio = c.policy.max_peak_ratio;
  return p;
}

PeakDemand PeakDemandOfCase(const FitCase& c) {
  return PeakDemandOf(c.per_gpu, c.peak_per_gpu, c.victim, c.policy.max_peak_ratio);
}

bool CaseBursts(const FitCase& c) {
  if (Bursts(c.per_gpu, c.peak_per_gpu)) return true;
  for (const testing::FitGpuCase& g : c.gpus) {
    for (const testing::FitHeld& h : g.held) {
      if (h.victim || Bursts(h.per_gpu, h.peak_per_gpu)) return true;
    }
  }
  return false;
}

// What reserving the case's demand on `gpus` (positions) says, in the
// reserve script's order: "reserved", else the fit rule's refusal of the
// GPUs without room, else the peak rule's.
std::string RefusalOf(const FitCase& c, const std::vector<Vectors>& vec, const std::vector<GpuPeak>& peaks,
                      const std::vector<size_t>& gpus) {
  const PeakDemand d = PeakDemandOfCase(c);
  std::vector<GpuShort> no_room;
  std::vector<GpuPeakShort> peak_short;
  for (size_t i : gpus) {
    if (!HasRoom(vec[i], c.per_gpu)) {
      no_room.push_back({static_cast<int>(i), vec[i]});
    } else if (!PeakRoom(vec[i], peaks[i], d)) {
      peak_short.push_back({static_cast<int>(i), vec[i].capacity, {peaks[i].peak + d.peak, peaks[i].victim + d.cover}});
    }
  }
  const int count = static_cast<int>(gpus.size());
  if (!no_room.empty()) return RefusedReason(c.per_gpu, count, no_room, c.peak_per_gpu);
  if (!peak_short.empty()) return PeakRefusedReason(c.per_gpu, c.peak_per_gpu, count, peak_short, d.ratio);
  return "reserved";
}

bool InRoom(const FitCase& c, size_t gpu) {
  return std::find(c.room.begin(), c.room.end(), static_cast<int>(gpu)) != c.room.end();
}

TEST(FitTable, IsReadableAndCoversTheEdgeCases) {
  std::string error;
  const std::vector<FitCase> cases = testing::LoadFitCases(&error);
  ASSERT_TRUE(error.empty()) << error;
  std::set<std::string> names;
  for (const FitCase& c : cases) names.insert(c.name);
  EXPECT_EQ(names.size(), cases.size()) << "case names are unique";
  for (const char* must : {"ExactFit", "OneByteOver", "FreshUsageAboveAllocationTakesRoom", "StaleUsageIsIgnored",
                           "UsageBelowAllocationFreesNothing", "MultiGpuWhereOnlySomeFit", "ZeroCapacityGpu",
                           "ZeroCapacityNode", "BurstWithinCapacity", "BurstOvershootCoveredByVictim",
                           "BurstOvershootNotCovered", "BurstVictimIsTheNewPod", "BurstAboveTheCeiling",
                           "BurstPeakAboveEveryCeiling", "BurstRatioOne", "Node4InferenceWithDisposableTier",
                           "UnsafeGpuRefusesAPlainDemand"}) {
    EXPECT_EQ(names.count(must), 1u) << must;
  }
}

class FitCaseTest : public ::testing::TestWithParam<FitCase> {};

TEST_P(FitCaseTest, EachGpuHasRoomOrIsRefusedAsTheTableSays) {
  const FitCase& c = GetParam();
  const Node n = NodeOf(c, "n");
  const std::vector<Vectors> vec = GpuVectors(n, kNow, c.policy);
  const std::vector<GpuPeak> peaks = GpuPeaks(n);
  ASSERT_EQ(vec.size(), c.gpus.size());
  ASSERT_EQ(peaks.size(), c.gpus.size());
  const PeakDemand d = PeakDemandOfCase(c);
  for (size_t i = 0; i < vec.size(); ++i) {
    EXPECT_EQ(HasRoomWithPeak(vec[i], peaks[i], c.per_gpu, d), InRoom(c, i)) << "GPU " << i;
    if (!CaseBursts(c)) EXPECT_EQ(HasRoom(vec[i], c.per_gpu), InRoom(c, i)) << "GPU " << i;
    if (!InRoom(c, i)) {
      const GpuShort one{static_cast<int>(i), vec[i]};
      if (!CaseBursts(c)) {
        EXPECT_EQ(RefusedReason(c.per_gpu, 1, {&one, 1}), c.refused.at(static_cast<int>(i))) << "GPU " << i;
      }
      EXPECT_EQ(RefusalOf(c, vec, peaks, {i}), c.refused.at(static_cast<int>(i))) << "GPU " << i;
    }
  }
  if (c.reserve_all) {
    std::vector<size_t> all(vec.size());
    for (size_t i = 0; i < vec.size(); ++i) all[i] = i;
    EXPECT_EQ(RefusalOf(c, vec, peaks, all), *c.reserve_all);
  }
}

TEST_P(FitCaseTest, TheNodeDecidesAndChoosesAsTheTableSays) {
  const FitCase& c = GetParam();
  const Node n = NodeOf(c, "n");
  const std::vector<Vectors> vec = GpuVectors(n, kNow, c.policy);
  const std::vector<GpuPeak> peaks = GpuPeaks(n);
  if (!CaseBursts(c)) EXPECT_EQ(FitNode(vec, c.per_gpu, c.count).verdict(), c.verdict);
  EXPECT_EQ(FitNodeWithPeak(vec, peaks, c.per_gpu, c.count, PeakDemandOfCase(c)).verdict(), c.verdict);
  for (ScorePolicy score : {ScorePolicy::kHeadroom, ScorePolicy::kBinpack}) {
    SCOPED_TRACE(ScorePolicyName(score));
    const std::vector<int>& want = score == ScorePolicy::kHeadroom ? c.headroom : c.binpack;
    const NodeDecision d = DecideNode(&n, n.name, RequestOf(c), PolicyOf(c, score), kNow);
    EXPECT_EQ(d.verdict, c.verdict);
    const GpuOrder order = score == ScorePolicy::kHeadroom ? GpuOrder::kMostFree : GpuOrder::kTightest;
    if (!CaseBursts(c)) {
      const std::vector<size_t> plain = ChooseGpus(vec, c.per_gpu, c.count, order);
      EXPECT_EQ(plain, ChooseGpus(vec, peaks, c.per_gpu, c.count, PeakDemandOfCase(c), order));
    }
    const std::vector<size_t> chosen = ChooseGpus(vec, peaks, c.per_gpu, c.count, PeakDemandOfCase(c), order);
    if (c.verdict == Verdict::kFits) {
      EXPECT_EQ(d.choice.gpus, want);
      EXPECT_EQ(std::vector<int>(chosen.begin(), chosen.end()), want);
      EXPECT_EQ(d.reason, "");
    } else {
      EXPECT_TRUE(chosen.empty());
      EXPECT_EQ(d.reason, c.reason);
      EXPECT_EQ(GroupedReason(d.miss.group, d.miss.figure, c.per_gpu, c.count, c.peak_per_gpu,
                              PolicyOf(c, score).max_peak_ratio),
                c.grouped);
    }
  }
}

TEST_P(FitCaseTest, FilterAnswersAsTheTableSaysWithAndWithoutItsIndex) {
  const FitCase& c = GetParam();
  Snapshot snap;
  // Two alike nodes share the grouped text (on the index, one-GPU pods on
  // settled nodes take the fast path).
  snap.nodes["a"] = NodeOf(c, "a");
  snap.nodes["b"] = NodeOf(c, "b");
  const std::vector<std::string_view> names{"a", "b"};
  for (bool indexed : {false, true}) {
    SCOPED_TRACE(indexed ? "indexed" : "plain");
    if (indexed) IndexSnapshot(&snap);
    const FilterResult r = Filter(snap, names, RequestOf(c), PolicyOf(c, ScorePolicy::kHeadroom), kNow);
    const auto& missed = c.verdict == Verdict::kNoRoomNow ? r.failed : r.unresolvable;
    if (c.verdict == Verdict::kFits) {
      EXPECT_EQ(r.fits, names);
      EXPECT_TRUE(r.failed.empty() && r.unresolvable.empty());
      continue;
    }
    EXPECT_TRUE(r.fits.empty());
    ASSERT_EQ(missed.size(), 2u);
    for (const auto& [node, why] : missed) EXPECT_EQ(why, c.grouped) << node;
  }
}

TEST_P(FitCaseTest, TheFakeStoreReservesAsTheTableSays) {
  const FitCase& c = GetParam();
  testing::FakeLedgerStore store;
  std::vector<store::GpuCapacity> caps;
  std::map<int, int64_t> used;
  for (size_t i = 0; i < c.gpus.size(); ++i) {
    caps.push_back({static_cast<int>(i), c.gpus[i].capacity, ""});
    if (c.gpus[i].used) used[static_cast<int>(i)] = *c.gpus[i].used;
  }
  ASSERT_TRUE(store.SetCapacity("n", caps).ok());
  for (const Entry& e : NodeOf(c, "n").entries) ASSERT_TRUE(store.PutEntry("n", e).ok());
  if (c.usage != FitUsage::kNone) {
    store.now_ms = ReportedMs(c);
    ASSERT_TRUE(store.PushUsage("n", used).ok());
  }
  store.now_ms = kNow;
  auto reserve = [&](const std::string& uid, std::vector<int> gpus) {
    store::ReserveRequest req;
    req.node = "n";
    req.entry.pod_uid = uid;
    req.entry.gpus = std::move(gpus);
    req.entry.per_gpu = c.per_gpu;
    req.entry.peak_per_gpu = c.peak_per_gpu;
    req.entry.victim = c.victim;
    req.fit_on_usage = c.policy.count_usage;
    req.usage_max_age_ms = c.policy.usage_max_age_ms;
    req.max_peak_ratio = c.policy.max_peak_ratio;
    Result<store::ReserveOutcome> r = store.Reserve(req);
    if (!r.ok()) return r.status().message();
    EXPECT_TRUE(*store.Release("n", uid));
    return std::string("reserved");
  };
  for (size_t i = 0; i < c.gpus.size(); ++i) {
    EXPECT_EQ(reserve("probe", {static_cast<int>(i)}),
              InRoom(c, i) ? std::string("reserved") : c.refused.at(static_cast<int>(i)))
        << "GPU " << i;
  }
  if (c.reserve_all) {
    std::vector<int> all;
    for (size_t i = 0; i < c.gpus.size(); ++i) all.push_back(static_cast<int>(i));
    EXPECT_EQ(reserve("probe-all", all), *c.reserve_all);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, FitCaseTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<FitCase>& info) { return info.param.name; });


// Issue 32: a report stamped ahead of now counts only within the skew the
// store's clock and vramd's may have; beyond it, its age is unknown: stale.
TEST(UsageFreshness, Boundaries) {
  struct Case {
    const char* name;
    int64_t reported_ms;
    bool fresh;
  };
  const int64_t max_age = 60'000;
  const Case cases[] = {
      {"NeverReported", 0, false},
      {"Now", kNow, true},
      {"ExactlyMaxAgeOld", kNow - max_age, true},
      {"OneMsOlderThanMaxAge", kNow - max_age - 1, false},
      {"AheadByTheTolerance", kNow + kUsageFutureToleranceMs, true},
      {"OneMsBeyondTheTolerance", kNow + kUsageFutureToleranceMs + 1, false},
      {"AnHourAhead", kNow + 3'600'000, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(UsageFresh(c.reported_ms, kNow, max_age), c.fresh);
  }
}

}  // namespace
}  // namespace vramd::ledger
