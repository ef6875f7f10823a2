// The peak rule (fit.h) in placement: Filter, Prioritize and DecideNode
// answer the same with and without the snapshot's index on nodes with and
// without burst (also after incremental re-indexing), DecideNode's reasons
// and choices, and the designated-victim classes a demand is computed with.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "vramd/ledger/fit.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/pod_request.h"

namespace vramd::ledger {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kNow = 10'000'000;

Entry Hold(const std::string& uid, std::vector<int> gpus, int64_t per_gpu, int64_t peak = 0, bool victim = false) {
  Entry e;
  e.pod_uid = uid;
  e.name = uid;
  e.gpus = std::move(gpus);
  e.per_gpu = per_gpu;
  e.peak_per_gpu = peak;
  e.victim = victim;
  return e;
}

Node MakeNode(const std::string& name, std::vector<int> indices, int64_t cap) {
  Node n;
  n.name = name;
  for (int i : indices) n.gpus.push_back(Gpu{i, "", cap});
  return n;
}

VramRequest Want(int64_t per_gpu, int count, int64_t peak = 0, bool victim = false) {
  VramRequest r;
  r.gpu_count = count;
  r.per_gpu = per_gpu;
  r.total = per_gpu * count;
  r.peak_per_gpu = std::max(per_gpu, peak);
  r.victim = victim;
  return r;
}

void ExpectSameAnswers(const Snapshot& plain, const Snapshot& indexed, const std::vector<std::string_view>& names,
                       const VramRequest& req, const Policy& p) {
  FilterResult a = Filter(plain, names, req, p, kNow);
  FilterResult b = Filter(indexed, names, req, p, kNow);
  ASSERT_EQ(a.fits, b.fits);
  ASSERT_EQ(a.failed, b.failed);
  ASSERT_EQ(a.unresolvable, b.unresolvable);
  std::vector<HostScore> pa = Prioritize(plain, names, req, p, kNow);
  std::vector<HostScore> pb = Prioritize(indexed, names, req, p, kNow);
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i].host, pb[i].host);
    ASSERT_EQ(pa[i].score, pb[i].score) << pa[i].host;
  }
  // Filter agrees with DecideNode node by node (bind and explain use it):
  // the verdict, and the text of the node's group with the best figure of
  // the group's nodes.
  std::map<MissGroup, int64_t> best;
  std::vector<std::tuple<std::string_view, std::string_view, NodeDecision>> missed;
  for (const auto* list : {&a.failed, &a.unresolvable}) {
    for (const auto& [name, why] : *list) {
      const Node* node = plain.Find(name);
      NodeDecision d = DecideNode(node, name, req, p, kNow);
      EXPECT_EQ(d.verdict, list == &a.failed ? Verdict::kNoRoomNow : Verdict::kUnresolvable) << name;
      if (node == nullptr) {
        EXPECT_EQ(why, d.reason) << name;
        continue;
      }
      auto [it, added] = best.emplace(d.miss.group, d.miss.figure);
      if (!added) it->second = std::max(it->second, d.miss.figure);
      missed.emplace_back(name, why, std::move(d));
    }
  }
  for (const auto& [name, why, d] : missed) {
    EXPECT_EQ(why, GroupedReason(d.miss.group, best[d.miss.group], req.per_gpu, req.gpu_count, req.peak_per_gpu,
                                 p.max_peak_ratio))
        << name << ": " << d.reason;
  }
  for (std::string_view name : a.fits) {
    EXPECT_EQ(DecideNode(plain.Find(name), name, req, p, kNow).verdict, Verdict::kFits) << name;
  }
}

TEST(BurstPlacement, IndexAndNodesAnswerTheSameOnRandomBurstNodes) {
  std::mt19937_64 rng(20261124);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  int uid = 0;
  auto random_node = [&](const std::string& name) {
    const int gpus = pick(6) == 0 ? 0 : 1 + pick(4);
    std::vector<int> idx;
    for (int i = 0; i < gpus; ++i) idx.push_back(i);
    Node n = MakeNode(name, idx, (16 + 8 * pick(5)) * kGi);
    for (int e = pick(5); e > 0 && gpus > 0; --e) {
      const int64_t per = (1 + pick(12)) * kGi;
      const int64_t peak = pick(3) == 0 ? per + pick(20) * kGi : 0;
      n.entries.push_back(Hold("u" + std::to_string(uid++), {pick(gpus)}, per, peak, pick(4) == 0));
    }
    if (pick(4) == 0) {
      for (Gpu& g : n.gpus) {
        g.used = pick(30) * kGi;
        g.used_ts_ms = kNow - 1000;
      }
    }
    return n;
  };
  Snapshot snap;
  for (int i = 0; i < 50; ++i) {
    const std::string name = "node-" + std::to_string(i);
    snap.nodes.emplace(name, random_node(name));
  }
  IndexSnapshot(&snap);
  std::vector<std::string> storage;
  for (int i = 0; i < 52; ++i) storage.push_back("node-" + std::to_string(i));
  const std::vector<std::string_view> names(storage.begin(), storage.end());
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Change a few nodes' entries in place (same GPUs): incremental re-index.
    std::shared_ptr<const PlacementIndex> old = snap.index;
    Snapshot next = std::move(snap);
    next.index.reset();
    std::vector<std::string> changed;
    for (int k = 1 + pick(3); k > 0; --k) {
      const std::string name = "node-" + std::to_string(pick(50));
      Node& n = next.nodes.at(name);
      Node fresh = random_node(name);
      if (fresh.gpus.size() == n.gpus.size()) n.entries = fresh.entries;
      changed.push_back(name);
    }
    ReindexSnapshot(&next, old, changed, /*nodes_moved=*/false);
    const Snapshot plain = next.Clone();
    const int64_t per = (1 + pick(16)) * kGi;
    const VramRequest req = Want(per, 1 + pick(2), pick(2) == 0 ? per + pick(24) * kGi : 0, pick(3) == 0);
    Policy p;
    p.score = pick(2) ? ScorePolicy::kHeadroom : ScorePolicy::kBinpack;
    p.max_peak_ratio = pick(2) ? 1.5 : 1.0 + pick(10) / 4.0;
    ExpectSameAnswers(plain, next, names, req, p);
    snap = std::move(next);
  }
}

// The burstable ADR's node-4: inference (request 8Gi, peak 32Gi) lands on the
// GPU where the disposable tier covers its overshoot, never on the other.
TEST(BurstPlacement, Node4InferenceGoesWhereTheDisposableTierCoversItsPeak) {
  Node n = MakeNode("node-4", {0, 1}, 40 * kGi);
  n.entries = {Hold("agents", {1}, 16 * kGi, 0, /*victim=*/true), Hold("db", {0}, 12 * kGi)};
  for (ScorePolicy score : {ScorePolicy::kHeadroom, ScorePolicy::kBinpack}) {
    Policy p;
    p.score = score;
    const NodeDecision d = DecideNode(&n, n.name, Want(8 * kGi, 1, 32 * kGi), p, kNow);
    ASSERT_EQ(d.verdict, Verdict::kFits) << d.reason;
    EXPECT_EQ(d.choice.gpus, std::vector<int>{1});
  }
  // Without the disposable tier, no GPU can take the peak: refused for now,
  // naming the first GPU with room where the rule breaks.
  n.entries[0].victim = false;
  const NodeDecision d = DecideNode(&n, n.name, Want(8 * kGi, 1, 32 * kGi), Policy{}, kNow);
  EXPECT_EQ(d.verdict, Verdict::kNoRoomNow);
  EXPECT_EQ(d.reason,
            "needs 8Gi on 1 GPU (peak 32Gi); on GPU 0 peak demand would be 44Gi over capacity 40Gi, 4Gi more than "
            "designated victims cover (0)");
}

TEST(BurstPlacement, APeakAboveEveryCeilingNeverFitsAndARaisedRatioLetsItFit) {
  Node n = MakeNode("n", {0}, 24 * kGi);
  n.entries = {Hold("v", {0}, 16 * kGi, 0, /*victim=*/true)};
  Policy p;
  NodeDecision d = DecideNode(&n, n.name, Want(4 * kGi, 1, 40 * kGi), p, kNow);
  EXPECT_EQ(d.verdict, Verdict::kUnresolvable);
  EXPECT_EQ(d.reason,
            "needs 4Gi on 1 GPU (peak 40Gi); peak is above the ceiling 36Gi (1.5 × capacity 24Gi) of the largest "
            "GPU (GPU 0)");
  p.max_peak_ratio = 2.5;  // ceiling 60Gi; P = 56Gi, overshoot 32Gi > cover 16Gi: no room now
  d = DecideNode(&n, n.name, Want(4 * kGi, 1, 40 * kGi), p, kNow);
  EXPECT_EQ(d.verdict, Verdict::kNoRoomNow);
  EXPECT_EQ(d.reason,
            "needs 4Gi on 1 GPU (peak 40Gi); on GPU 0 peak demand would be 56Gi over capacity 24Gi, 16Gi more than "
            "designated victims cover (16Gi)");
}

TEST(BurstPlacement, AGpuThatBreaksTheRuleIsFlaggedAndRefusesMoreButKeepsItsEntries) {
  Node n = MakeNode("n", {0}, 24 * kGi);
  n.entries = {Hold("inference", {0}, 8 * kGi, 20 * kGi), Hold("agents", {0}, 12 * kGi, 0, true)};
  const GpuPeak peak = GpuPeaks(n)[0];
  EXPECT_EQ(peak, (GpuPeak{32 * kGi, 12 * kGi}));
  EXPECT_TRUE(BurstSafe(24 * kGi, peak, 1.5)) << "overshoot 8Gi, covered by 12Gi, within 36Gi";
  // Removing an entry never breaks the rule: P drops by max(r, p) >= the r
  // it took from V.
  Node without_victim = n;
  without_victim.entries.pop_back();
  EXPECT_TRUE(BurstSafe(24 * kGi, GpuPeaks(without_victim)[0], 1.5));
  // A lower ceiling (config) does: the GPU is flagged, its entries stay, and
  // a demand that raises P further is refused there until it is safe again.
  EXPECT_FALSE(BurstSafe(24 * kGi, peak, 1.25)) << "P 32Gi above the ceiling 30Gi";
  Policy lower;
  lower.max_peak_ratio = 1.25;
  const NodeDecision d = DecideNode(&n, n.name, Want(1 * kGi, 1), lower, kNow);
  EXPECT_EQ(d.verdict, Verdict::kNoRoomNow);
  EXPECT_EQ(d.reason,
            "needs 1Gi on 1 GPU; on GPU 0 peak demand would be 33Gi, above the ceiling 30Gi (1.25 × capacity 24Gi)");
  EXPECT_EQ(n.entries.size(), 2u);
  EXPECT_EQ(DecideNode(&n, n.name, Want(1 * kGi, 1), Policy{}, kNow).verdict, Verdict::kFits);
}

TEST(BurstPlacement, EntriesOnGpusTheNodeLacksCountNowhere) {
  Node n = MakeNode("n", {0, 2}, 24 * kGi);
  n.entries = {Hold("a", {2}, 4 * kGi, 10 * kGi, true), Hold("b", {1}, 8 * kGi, 30 * kGi)};
  const std::vector<GpuPeak> peaks = GpuPeaks(n);
  ASSERT_EQ(peaks.size(), 2u);
  EXPECT_EQ(peaks[0], (GpuPeak{0, 0}));
  EXPECT_EQ(peaks[1], (GpuPeak{10 * kGi, 4 * kGi}));
}

TEST(BurstPlacement, ThePriorityClassesConfiguredDecideWhoIsAVictim) {
  PodSpecView pod;
  pod.containers = {ContainerAmount{std::string("8Gi"), std::nullopt}};
  pod.vram_peak = "24Gi";
  pod.priority_class = "homelab-disposable";
  Result<VramRequest> by_default = ComputeVramRequest(pod);
  ASSERT_TRUE(by_default.ok());
  EXPECT_FALSE(by_default->victim);
  const std::vector<std::string> classes = {"homelab-disposable"};
  Result<VramRequest> configured = ComputeVramRequest(pod, classes);
  ASSERT_TRUE(configured.ok());
  EXPECT_TRUE(configured->victim);
  EXPECT_EQ(configured->peak_per_gpu, 24 * kGi);
  // Only as a victim does its own reservation cover its overshoot.
  Node n = MakeNode("n", {0}, 24 * kGi);
  n.entries = {Hold("x", {0}, 4 * kGi)};
  EXPECT_EQ(DecideNode(&n, n.name, *by_default, Policy{}, kNow).verdict, Verdict::kNoRoomNow);
  EXPECT_EQ(DecideNode(&n, n.name, *configured, Policy{}, kNow).verdict, Verdict::kFits);
  // The annotation still works whatever the classes; the default class is
  // no victim once the list leaves it out.
  pod.priority_class = "vramd-disposable";
  EXPECT_FALSE(IsDesignatedVictim(pod, classes));
  pod.disposable = "True";
  EXPECT_TRUE(IsDesignatedVictim(pod, classes));
  // An invalid peak stays an error with any classes.
  pod.vram_peak = "4Gi";
  EXPECT_FALSE(ComputeVramRequest(pod, classes).ok());
}

TEST(BurstPlacement, PrioritizeScoresZeroWhereOnlyThePeakRuleRefuses) {
  Snapshot s;
  Node a = MakeNode("a", {0}, 24 * kGi);
  a.entries = {Hold("x", {0}, 4 * kGi)};
  Node b = MakeNode("b", {0}, 24 * kGi);
  b.entries = {Hold("y", {0}, 4 * kGi, 0, true)};
  s.nodes.emplace("a", a);
  s.nodes.emplace("b", b);
  IndexSnapshot(&s);
  const std::vector<std::string_view> names = {"a", "b"};
  const std::vector<HostScore> scores = Prioritize(s, names, Want(8 * kGi, 1, 22 * kGi), Policy{}, kNow);
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].score, 0) << "a: P 26Gi over capacity, nothing covers it";
  EXPECT_GT(scores[1].score, 0) << "b: the 2Gi overshoot is covered by the 4Gi victim";
}

}  // namespace
}  // namespace vramd::ledger
