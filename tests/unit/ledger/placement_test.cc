#include "vramd/ledger/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "vramd/ledger/metrics.h"

namespace vramd::ledger {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kNow = 1'000'000;

Node MakeNode(const std::string& name, std::vector<int64_t> caps) {
  Node n;
  n.name = name;
  for (size_t i = 0; i < caps.size(); ++i) n.gpus.push_back(Gpu{static_cast<int>(i), "", caps[i]});
  return n;
}

void Hold(Node& n, const std::string& uid, std::vector<int> gpus, int64_t per_gpu, std::string model = "") {
  Entry e;
  e.pod_uid = uid;
  e.name = uid;
  e.ns = "default";
  e.gpus = std::move(gpus);
  e.per_gpu = per_gpu;
  e.model = std::move(model);
  n.entries.push_back(e);
}

void Drop(Node& n, const std::string& uid) {
  n.entries.erase(std::remove_if(n.entries.begin(), n.entries.end(),
                                 [&](const Entry& e) { return e.pod_uid == uid; }),
                  n.entries.end());
}

VramRequest Want(int64_t total, int gpus = 1, std::string model = "") {
  VramRequest r;
  r.total = total;
  r.gpu_count = gpus;
  r.per_gpu = (total + gpus - 1) / gpus;
  r.peak_per_gpu = r.per_gpu;
  r.model = std::move(model);
  return r;
}

// Places the request on the node if it fits (what a bind does), returning the decision.
NodeDecision Place(Node& n, const std::string& uid, const VramRequest& req, const Policy& p = {}) {
  NodeDecision d = DecideNode(&n, n.name, req, p, kNow);
  if (d.verdict == Verdict::kFits) Hold(n, uid, d.choice.gpus, d.choice.per_gpu, req.model);
  return d;
}

SixMetrics NodeMetrics(const Node& n) { return ComputeMetrics(SumVectors(GpuVectors(n, kNow, 60'000))); }

// The capacity model's worked example (background/capacity-model-whitepaper.txt).
TEST(WorkedExample, NessLinux3AtCapacity) {
  Node n = MakeNode("ness-linux3", {96 * kGi});
  ASSERT_EQ(Place(n, "devstral-small", Want(54 * kGi)).verdict, Verdict::kFits);
  ASSERT_EQ(Place(n, "hermes-beast", Want(32 * kGi)).verdict, Verdict::kFits);
  SixMetrics m = NodeMetrics(n);
  EXPECT_EQ(SumVectors(GpuVectors(n, kNow, 60'000)).allocated, 86 * kGi);
  EXPECT_EQ(m.headroom, 10 * kGi);
  EXPECT_EQ(m.potential, 0);
  EXPECT_EQ(m.risk, 0.0);

  NodeDecision refused = Place(n, "wan22-video", Want(38 * kGi));
  EXPECT_EQ(refused.verdict, Verdict::kNoRoomNow);
  EXPECT_EQ(refused.reason,
            "needs 38Gi on 1 GPU; largest free is 10Gi on GPU 0 (capacity 96Gi, allocated 86Gi)");

  Drop(n, "hermes-beast");
  ASSERT_EQ(Place(n, "wan22-video", Want(38 * kGi)).verdict, Verdict::kFits);
  m = NodeMetrics(n);
  EXPECT_EQ(SumVectors(GpuVectors(n, kNow, 60'000)).allocated, 92 * kGi);
  EXPECT_EQ(m.headroom, 4 * kGi);
  EXPECT_EQ(m.risk, 0.0);
}

struct DecideCase {
  const char* name;
  Node node;
  VramRequest req;
  ScorePolicy policy;
  Verdict verdict;
  std::vector<int> gpus;   // when it fits
  const char* reason;      // exact reason when it does not
};

class DecideNodeTable : public ::testing::TestWithParam<DecideCase> {};

TEST_P(DecideNodeTable, Decides) {
  const DecideCase& c = GetParam();
  Policy p;
  p.score = c.policy;
  NodeDecision d = DecideNode(&c.node, c.node.name, c.req, p, kNow);
  EXPECT_EQ(d.verdict, c.verdict) << d.reason;
  if (c.verdict == Verdict::kFits) {
    EXPECT_EQ(d.choice.gpus, c.gpus);
    EXPECT_EQ(d.choice.per_gpu, c.req.per_gpu);
  } else {
    EXPECT_EQ(d.reason, c.reason);
  }
}

Node Busy(Node n, std::vector<std::pair<int, int64_t>> holds) {
  int i = 0;
  for (auto [g, b] : holds) Hold(n, "p" + std::to_string(i++), {g}, b);
  return n;
}

Node WithUsage(Node n, int gpu, int64_t used, int64_t ts) {
  n.gpus[gpu].used = used;
  n.gpus[gpu].used_ts_ms = ts;
  return n;
}

INSTANTIATE_TEST_SUITE_P(
    Placement, DecideNodeTable,
    ::testing::Values(
        DecideCase{"ExactFitOnEmptyGpu", MakeNode("n", {8 * kGi}), Want(8 * kGi), ScorePolicy::kHeadroom,
                   Verdict::kFits, {0}, ""},
        DecideCase{"HeadroomPicksMostFreeGpu", Busy(MakeNode("n", {16 * kGi, 16 * kGi}), {{0, 10 * kGi}}),
                   Want(4 * kGi), ScorePolicy::kHeadroom, Verdict::kFits, {1}, ""},
        DecideCase{"BinpackPicksTightestGpu", Busy(MakeNode("n", {16 * kGi, 16 * kGi}), {{0, 10 * kGi}}),
                   Want(4 * kGi), ScorePolicy::kBinpack, Verdict::kFits, {0}, ""},
        DecideCase{"TiesGoToLowerIndex", MakeNode("n", {8 * kGi, 8 * kGi, 8 * kGi}), Want(kGi),
                   ScorePolicy::kHeadroom, Verdict::kFits, {0}, ""},
        DecideCase{"TwoGpusTensorParallel", Busy(MakeNode("n", {80 * kGi, 80 * kGi, 80 * kGi}), {{1, 70 * kGi}}),
                   Want(128 * kGi, 2), ScorePolicy::kHeadroom, Verdict::kFits, {0, 2}, ""},
        DecideCase{"EightGpus", MakeNode("n", std::vector<int64_t>(8, 80 * kGi)), Want(640 * kGi, 8),
                   ScorePolicy::kHeadroom, Verdict::kFits, {0, 1, 2, 3, 4, 5, 6, 7}, ""},
        DecideCase{"NoGpus", MakeNode("cpu-only", {}), Want(kGi), ScorePolicy::kHeadroom,
                   Verdict::kUnresolvable, {}, "node has no GPUs"},
        DecideCase{"TooFewGpus", MakeNode("n", {80 * kGi}), Want(128 * kGi, 2), ScorePolicy::kHeadroom,
                   Verdict::kUnresolvable, {}, "needs 64Gi on each of 2 GPUs; node has only 1 GPU"},
        DecideCase{"LargerThanAnyGpu", MakeNode("ness-server2", {8 * kGi}), Want(32 * kGi),
                   ScorePolicy::kHeadroom, Verdict::kUnresolvable, {},
                   "needs 32Gi on 1 GPU; largest GPU capacity is 8Gi (GPU 0)"},
        DecideCase{"OnlyOneGpuLargeEnough", MakeNode("n", {80 * kGi, 16 * kGi}), Want(64 * kGi, 2),
                   ScorePolicy::kHeadroom, Verdict::kUnresolvable, {},
                   "needs 32Gi on each of 2 GPUs; largest GPU capacity is 80Gi (GPU 0), 1 GPU large enough"},
        DecideCase{"MultiGpuNoRoom", Busy(MakeNode("n", {40 * kGi, 40 * kGi}), {{0, 30 * kGi}}),
                   Want(40 * kGi, 2), ScorePolicy::kHeadroom, Verdict::kNoRoomNow, {},
                   "needs 20Gi on each of 2 GPUs; 1 GPU with that free; largest free is 40Gi on GPU 1 "
                   "(capacity 40Gi, allocated 0)"},
        // Fit rule max(A, U): a fresh report of usage above allocation blocks.
        DecideCase{"FreshUsageAboveAllocationBlocks",
                   WithUsage(Busy(MakeNode("n", {24 * kGi}), {{0, 4 * kGi}}), 0, 20 * kGi, kNow - 1000),
                   Want(8 * kGi), ScorePolicy::kHeadroom, Verdict::kNoRoomNow, {},
                   "needs 8Gi on 1 GPU; largest free is 4Gi on GPU 0 (capacity 24Gi, allocated 4Gi, used 20Gi)"},
        DecideCase{"StaleUsageIsIgnored",
                   WithUsage(Busy(MakeNode("n", {24 * kGi}), {{0, 4 * kGi}}), 0, 20 * kGi, kNow - 120'000),
                   Want(8 * kGi), ScorePolicy::kHeadroom, Verdict::kFits, {0}, ""},
        DecideCase{"UsageBelowAllocationDoesNotFreeMemory",
                   WithUsage(Busy(MakeNode("n", {24 * kGi}), {{0, 20 * kGi}}), 0, 2 * kGi, kNow - 1000),
                   Want(8 * kGi), ScorePolicy::kHeadroom, Verdict::kNoRoomNow, {},
                   "needs 8Gi on 1 GPU; largest free is 4Gi on GPU 0 (capacity 24Gi, allocated 20Gi)"},
        DecideCase{"OverCommittedGpuShowsZeroFree",
                   Busy(MakeNode("n", {8 * kGi}), {{0, 10 * kGi}}), Want(kGi), ScorePolicy::kHeadroom,
                   Verdict::kNoRoomNow, {},
                   "needs 1Gi on 1 GPU; largest free is 0 on GPU 0 (capacity 8Gi, allocated 10Gi)"}),
    [](const auto& info) { return info.param.name; });

TEST(Placement, UnknownNodeIsUnresolvable) {
  NodeDecision d = DecideNode(nullptr, "ghost", Want(kGi), Policy{}, kNow);
  EXPECT_EQ(d.verdict, Verdict::kUnresolvable);
  EXPECT_EQ(d.reason.find("no GPU capacity known to vramd"), 0u);
}

Snapshot ThreeNodeHomelab() {
  Snapshot s;
  for (auto& [name, cap] : std::vector<std::pair<std::string, int64_t>>{
           {"ness-linux3", 96 * kGi}, {"ness-server2", 8 * kGi}, {"ness-legion1", 8 * kGi}}) {
    s.nodes[name] = MakeNode(name, {cap});
  }
  return s;
}

TEST(Filter, SplitsNodesIntoFitsFailedAndUnresolvable) {
  Snapshot s = ThreeNodeHomelab();
  Hold(s.nodes["ness-server2"], "x", {0}, 6 * kGi);
  std::vector<std::string_view> names = {"ness-linux3", "ness-server2", "ness-legion1", "cpu-only",
                                         "ness-linux3"};
  FilterResult r = Filter(s, names, Want(4 * kGi), Policy{}, kNow);
  EXPECT_EQ(r.fits, (std::vector<std::string_view>{"ness-linux3", "ness-legion1"}));
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_EQ(r.failed[0].first, "ness-server2");
  EXPECT_EQ(r.failed[0].second, "no GPU with 4Gi free (best: 2Gi)");
  ASSERT_EQ(r.unresolvable.size(), 1u);
  EXPECT_EQ(r.unresolvable[0].first, "cpu-only");
}

TEST(Filter, RequestLargerThanEveryGpuIsUnresolvableEverywhere) {
  Snapshot s = ThreeNodeHomelab();
  FilterResult r = Filter(s, {"ness-linux3", "ness-server2"}, Want(100 * kGi), Policy{}, kNow);
  EXPECT_TRUE(r.fits.empty());
  EXPECT_TRUE(r.failed.empty());
  EXPECT_EQ(r.unresolvable.size(), 2u);
}

// kube-scheduler groups identical reasons only: nodes that miss the same way
// share one text whatever their own figures, and the text carries the best
// figure among them (what would fit), not any one node's.
TEST(Filter, NodesThatMissAlikeShareOneGroupedText) {
  Snapshot s;
  std::vector<std::string> names;
  for (int i = 0; i < 50; ++i) {
    names.push_back("n" + std::to_string(i));
    s.nodes[names.back()] = MakeNode(names.back(), {8 * kGi});
    if (i % 2 == 0) Hold(s.nodes[names.back()], "x" + std::to_string(i), {0}, (i % 4 == 0 ? 7 : 6) * kGi);
  }
  s.nodes["tiny"] = MakeNode("tiny", {1 * kGi});
  s.nodes["small"] = MakeNode("small", {3 * kGi});
  names.push_back("tiny");
  names.push_back("small");
  std::vector<std::string_view> views(names.begin(), names.end());
  FilterResult r = Filter(s, views, Want(4 * kGi), Policy{}, kNow);
  EXPECT_EQ(r.fits.size(), 25u);
  ASSERT_EQ(r.failed.size(), 25u);
  ASSERT_EQ(r.unresolvable.size(), 2u);
  for (const auto& [node, why] : r.failed) {
    EXPECT_EQ(why, "no GPU with 4Gi free (best: 2Gi)") << node;
    EXPECT_EQ(why.data(), r.failed[0].second.data()) << "one text, not a copy per node";
  }
  for (const auto& [node, why] : r.unresolvable) {
    EXPECT_EQ(why, "GPU too small for 4Gi (largest: 3Gi)") << node;
  }
  EXPECT_EQ(r.reasons.size(), 2u);
  // The result may move (it is returned by value); its views stay valid.
  FilterResult moved = std::move(r);
  EXPECT_EQ(moved.failed[24].second, "no GPU with 4Gi free (best: 2Gi)");
}

// Every group, on the index path (settled nodes) and on the node path alike
// (Filter without an index): one text per group at any cluster size.
TEST(Filter, ThousandsOfNodesGiveOneTextPerGroup) {
  for (bool indexed : {false, true}) {
    Snapshot s;
    std::vector<std::string> names;
    for (int i = 0; i < 3000; ++i) {
      names.push_back("node-" + std::to_string(i));
      Node& n = s.nodes[names.back()] = MakeNode(names.back(), i % 3 == 0   ? std::vector<int64_t>{24 * kGi}
                                                               : i % 3 == 1 ? std::vector<int64_t>{80 * kGi, 80 * kGi}
                                                                            : std::vector<int64_t>{});
      if (i % 3 == 1) {
        Hold(n, "a" + std::to_string(i), {0}, (50 + i % 20) * kGi);
        Hold(n, "b" + std::to_string(i), {1}, 79 * kGi);
      }
    }
    names.push_back("not-in-ledger");
    if (indexed) IndexSnapshot(&s);
    std::vector<std::string_view> views(names.begin(), names.end());
    FilterResult r = Filter(s, views, Want(40 * kGi), Policy{}, kNow);
    EXPECT_TRUE(r.fits.empty());
    std::map<std::string_view, int> counts;
    for (const auto& [node, why] : r.failed) ++counts[why];
    for (const auto& [node, why] : r.unresolvable) ++counts[why];
    EXPECT_EQ(counts, (std::map<std::string_view, int>{
                          {"GPU too small for 40Gi (largest: 24Gi)", 1000},
                          {"no GPU with 40Gi free (best: 30Gi)", 1000},
                          {"node has no GPUs", 1000},
                          {"no GPU capacity known to vramd (no config entry, vramd.io/capacity annotation or GPU "
                           "Feature Discovery labels)",
                           1},
                      }))
        << "indexed " << indexed;
  }
}

// Issue 32: room held for a pod (EntryState::kHold) is spent for every other
// pod and free for its holder (req.uid), which scores the node highest;
// with and without the index, and after the hold moves (incremental reindex).
TEST(Filter, RoomHeldForAPodIsSpentForOthersAndFreeForIt) {
  for (bool indexed : {false, true}) {
    SCOPED_TRACE(indexed ? "indexed" : "scanned");
    Snapshot s;
    s.nodes["held"] = MakeNode("held", {24 * kGi});
    s.nodes["other"] = MakeNode("other", {24 * kGi});
    Hold(s.nodes["held"], "busy", {0}, 8 * kGi);
    Hold(s.nodes["held"], "waiting", {0}, 16 * kGi);
    s.nodes["held"].entries.back().state = EntryState::kHold;
    Hold(s.nodes["other"], "big", {0}, 20 * kGi);
    if (indexed) IndexSnapshot(&s);
    VramRequest someone = Want(16 * kGi);
    someone.uid = "replacement";
    VramRequest holder = Want(16 * kGi);
    holder.uid = "waiting";
    const std::vector<std::string_view> both{"held", "other"};
    EXPECT_TRUE(Filter(s, both, someone, Policy{}, kNow).fits.empty());
    FilterResult mine = Filter(s, both, holder, Policy{}, kNow);
    EXPECT_EQ(mine.fits, (std::vector<std::string_view>{"held"}));
    ASSERT_EQ(mine.failed.size(), 1u);
    EXPECT_EQ(mine.failed[0].first, "other");
    std::string_view on;
    ASSERT_NE(FindHold(s, "waiting", &on), nullptr);
    EXPECT_EQ(on, "held");
    EXPECT_EQ(FindHold(s, "busy"), nullptr);  // not a hold
    // The holder scores its node highest (binpack would prefer neither).
    std::vector<HostScore> scores = Prioritize(s, both, holder, Policy{}, kNow);
    EXPECT_EQ(scores[0].score, 10);
    // The hold moves to "other" (its pod's room made there instead).
    Node& o = s.nodes["other"];
    Drop(s.nodes["held"], "waiting");
    Drop(o, "big");
    Hold(o, "waiting", {0}, 16 * kGi);
    o.entries.back().state = EntryState::kHold;
    if (indexed) ReindexSnapshot(&s, s.index, {"held", "other"}, /*nodes_moved=*/false);
    ASSERT_NE(FindHold(s, "waiting", &on), nullptr);
    EXPECT_EQ(on, "other");
    EXPECT_EQ(Filter(s, both, someone, Policy{}, kNow).fits, (std::vector<std::string_view>{"held"}));
    EXPECT_EQ(Filter(s, both, holder, Policy{}, kNow).fits, (std::vector<std::string_view>{"held", "other"}));
  }
}

// Issue 32: a pod of higher priority than the holder may take held room; a
// pod of equal or lower priority may not. The node where it fits only by
// taking another pod's hold keeps its own score (not the holder's 10).
TEST(Filter, APodOfHigherPriorityMayTakeRoomHeldForALesserOne) {
  const struct {
    const char* name;
    int32_t hold_priority, pod_priority;
    bool fits;
  } cases[] = {
      {"higher_takes", 0, 100, true},
      {"equal_waits", 100, 100, false},
      {"lower_waits", 100, 0, false},
      {"negative_holder_and_default_pod", -10, 0, true},
  };
  for (bool indexed : {false, true}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(std::string(c.name) + (indexed ? " indexed" : " scanned"));
      Snapshot s;
      s.nodes["held"] = MakeNode("held", {24 * kGi});
      Hold(s.nodes["held"], "busy", {0}, 8 * kGi);
      Hold(s.nodes["held"], "waiting", {0}, 16 * kGi);
      s.nodes["held"].entries.back().state = EntryState::kHold;
      s.nodes["held"].entries.back().priority = c.hold_priority;
      if (indexed) IndexSnapshot(&s);
      VramRequest pod = Want(16 * kGi);
      pod.uid = "urgent";
      pod.priority = c.pod_priority;
      FilterResult r = Filter(s, {"held"}, pod, Policy{}, kNow);
      EXPECT_EQ(r.fits.size(), c.fits ? 1u : 0u);
      EXPECT_EQ(r.failed.size(), c.fits ? 0u : 1u);
      EXPECT_EQ(Prioritize(s, {"held"}, pod, Policy{}, kNow)[0].score, 0);
      EXPECT_EQ(MayTakeHold(s.nodes["held"].entries.back(), pod), c.fits);
      EXPECT_FALSE(MayTakeHold(s.nodes["held"].entries.front(), pod)) << "a reservation is never taken";
    }
  }
}

// A group's figure is the best over the call's nodes for multi-GPU pods
// too, and usage above allocation is its own group (what to look at
// differs: a leak or a runaway pod, not the reservations).
TEST(Filter, MultiGpuAndUsageGroupsCarryTheBestFigure) {
  Snapshot s;
  s.nodes["one-free"] = MakeNode("one-free", {24 * kGi, 24 * kGi, 24 * kGi});
  Hold(s.nodes["one-free"], "a", {0}, 20 * kGi);
  Hold(s.nodes["one-free"], "b", {1}, 20 * kGi);
  s.nodes["none-free"] = MakeNode("none-free", {24 * kGi, 24 * kGi});
  Hold(s.nodes["none-free"], "c", {0}, 20 * kGi);
  Hold(s.nodes["none-free"], "d", {1}, 20 * kGi);
  FilterResult two = Filter(s, {"one-free", "none-free"}, Want(16 * kGi, 2), Policy{}, kNow);
  ASSERT_EQ(two.failed.size(), 2u);
  for (const auto& [node, why] : two.failed) {
    EXPECT_EQ(why, "too few GPUs with 8Gi free (needs 2, most: 1)") << node;
  }
  // Usage above allocation on the most free GPU: its own group.
  s.nodes["leak"] = MakeNode("leak", {24 * kGi});
  s.nodes["leak"].gpus[0].used = 20 * kGi;
  s.nodes["leak"].gpus[0].used_ts_ms = kNow - 1000;
  FilterResult one = Filter(s, {"one-free", "leak"}, Want(10 * kGi), Policy{}, kNow);
  ASSERT_EQ(one.failed.size(), 1u);
  EXPECT_EQ(one.failed[0].first, "leak");
  EXPECT_EQ(one.failed[0].second, "no GPU with 10Gi free, measured usage counted (best: 4Gi)");
  EXPECT_EQ(one.fits, (std::vector<std::string_view>{"one-free"}));
}

int ScoreOf(const std::vector<HostScore>& scores, std::string_view host) {
  for (const HostScore& h : scores) {
    if (h.host == host) return h.score;
  }
  ADD_FAILURE() << "no score for " << host;
  return -1;
}

TEST(Prioritize, ColdPodPrefersMostHeadroom) {
  Snapshot s = ThreeNodeHomelab();
  auto scores = Prioritize(s, {"ness-linux3", "ness-server2", "ness-legion1"}, Want(4 * kGi), Policy{}, kNow);
  EXPECT_EQ(ScoreOf(scores, "ness-linux3"), 5);
  EXPECT_EQ(ScoreOf(scores, "ness-server2"), 0);  // 8Gi of 96Gi rounds to 0
  EXPECT_EQ(ScoreOf(scores, "ness-legion1"), 0);
}

TEST(Prioritize, WarmNodeBeatsColdNodeWithMoreHeadroom) {
  Snapshot s = ThreeNodeHomelab();
  s.nodes["ness-legion1"].models["qwen-7b"] = kNow - 5000;
  auto scores =
      Prioritize(s, {"ness-linux3", "ness-legion1"}, Want(4 * kGi, 1, "qwen-7b"), Policy{}, kNow);
  EXPECT_EQ(ScoreOf(scores, "ness-legion1"), 10);  // warm, saturation 0
  EXPECT_EQ(ScoreOf(scores, "ness-linux3"), 5);
}

TEST(Prioritize, AmongWarmNodesLowestSaturationWins) {
  Snapshot s = ThreeNodeHomelab();
  Hold(s.nodes["ness-server2"], "a", {0}, 6 * kGi, "qwen-7b");   // saturation 0.75
  Hold(s.nodes["ness-legion1"], "b", {0}, 2 * kGi, "qwen-7b");   // saturation 0.25
  auto scores =
      Prioritize(s, {"ness-server2", "ness-legion1"}, Want(kGi, 1, "qwen-7b"), Policy{}, kNow);
  EXPECT_GT(ScoreOf(scores, "ness-legion1"), ScoreOf(scores, "ness-server2"));
  EXPECT_GE(ScoreOf(scores, "ness-server2"), 6);
}

TEST(Prioritize, BinpackPrefersFewestFreeBytesLeft) {
  Snapshot s = ThreeNodeHomelab();
  Policy p;
  p.score = ScorePolicy::kBinpack;
  auto scores = Prioritize(s, {"ness-linux3", "ness-server2"}, Want(4 * kGi), p, kNow);
  EXPECT_EQ(ScoreOf(scores, "ness-server2"), 10);
  EXPECT_EQ(ScoreOf(scores, "ness-linux3"), 0);
}

TEST(Prioritize, NodesWhereThePodDoesNotFitScoreZero) {
  Snapshot s = ThreeNodeHomelab();
  auto scores = Prioritize(s, {"ness-linux3", "ness-server2", "ghost"}, Want(40 * kGi), Policy{}, kNow);
  EXPECT_EQ(ScoreOf(scores, "ness-linux3"), 5);
  EXPECT_EQ(ScoreOf(scores, "ness-server2"), 0);
  EXPECT_EQ(ScoreOf(scores, "ghost"), 0);
  EXPECT_EQ(scores.size(), 3u);
}

}  // namespace
}  // namespace vramd::ledger
