// IndexSnapshot: Filter and Prioritize answer exactly the same with the
// snapshot's index as without it (the index is only a faster layout).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "vramd/ledger/placement.h"

namespace vramd::ledger {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kNow = 10'000'000;

Entry Hold(const std::string& uid, std::vector<int> gpus, int64_t per_gpu, std::string model = "") {
  Entry e;
  e.pod_uid = uid;
  e.name = uid;
  e.gpus = std::move(gpus);
  e.per_gpu = per_gpu;
  e.model = std::move(model);
  return e;
}

Node MakeNode(const std::string& name, std::vector<int> indices, int64_t cap) {
  Node n;
  n.name = name;
  for (int i : indices) n.gpus.push_back(Gpu{i, "", cap});
  return n;
}

// Every case the fast path treats specially: full and partly used nodes,
// sparse GPU indices, fresh / stale / missing usage, warm models (from the
// models map and from entries), no GPUs, more than the inline 16 GPUs, and a
// name longer than the small-string buffer.
Snapshot Mixed() {
  Snapshot s;
  Node full = MakeNode("full", {0, 1}, 80 * kGi);
  full.entries = {Hold("a", {0}, 80 * kGi), Hold("b", {1}, 80 * kGi, "llama")};
  Node part = MakeNode("part", {0, 1, 2, 3}, 80 * kGi);
  part.entries = {Hold("c", {0, 1}, 40 * kGi), Hold("d", {7}, 8 * kGi)};  // GPU 7 unknown: counts nowhere
  Node sparse = MakeNode("sparse", {1, 4, 6}, 48 * kGi);
  sparse.entries = {Hold("e", {4}, 30 * kGi), Hold("f", {6}, 10 * kGi)};
  Node used = MakeNode("a-node-name-longer-than-sso-buffers", {0, 1}, 96 * kGi);
  used.gpus[0].used = 90 * kGi;
  used.gpus[0].used_ts_ms = kNow - 1000;      // fresh: counts
  used.gpus[1].used = 90 * kGi;
  used.gpus[1].used_ts_ms = kNow - 3'600'000;  // stale: U = A
  used.models["qwen"] = kNow - 5000;
  Node small = MakeNode("small", {0}, 8 * kGi);
  Node none = MakeNode("cpu", {}, 0);
  std::vector<int> many;
  for (int i = 0; i < 20; ++i) many.push_back(i);
  Node big = MakeNode("big", many, 24 * kGi);
  big.entries = {Hold("g", {3, 17}, 20 * kGi, "qwen")};
  for (Node* n : {&full, &part, &sparse, &used, &small, &none, &big}) s.nodes.emplace(n->name, *n);
  return s;
}

struct Case {
  std::string name;
  VramRequest req;
  ScorePolicy policy;
};

VramRequest Want(int64_t per_gpu, int count, std::string model = "") {
  VramRequest r;
  r.gpu_count = count;
  r.per_gpu = per_gpu;
  r.total = per_gpu * count;
  r.peak_per_gpu = per_gpu;
  r.model = std::move(model);
  return r;
}

TEST(PlacementIndex, FilterAndPrioritizeAnswerTheSameWithAndWithoutIt) {
  const Snapshot plain = Mixed();
  Snapshot indexed = Mixed();
  IndexSnapshot(&indexed);
  ASSERT_NE(indexed.index, nullptr);
  const std::vector<std::string_view> names = {"full", "part",  "sparse", "a-node-name-longer-than-sso-buffers",
                                               "small", "cpu", "big", "unknown", "part", "unknown"};
  const std::vector<Case> cases = {
      {"one GPU", Want(16 * kGi, 1), ScorePolicy::kHeadroom},
      {"two GPUs warm", Want(20 * kGi, 2, "qwen"), ScorePolicy::kHeadroom},
      {"warm from an entry", Want(4 * kGi, 1, "llama"), ScorePolicy::kHeadroom},
      {"too big", Want(90 * kGi, 1), ScorePolicy::kHeadroom},
      {"more GPUs than most nodes", Want(4 * kGi, 3), ScorePolicy::kBinpack},
      {"all eight", Want(2 * kGi, 8), ScorePolicy::kBinpack},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Policy p;
    p.score = c.policy;
    FilterResult a = Filter(plain, names, c.req, p, kNow);
    FilterResult b = Filter(indexed, names, c.req, p, kNow);
    EXPECT_EQ(a.fits, b.fits);
    EXPECT_EQ(a.failed, b.failed);
    EXPECT_EQ(a.unresolvable, b.unresolvable);
    std::vector<HostScore> pa = Prioritize(plain, names, c.req, p, kNow);
    std::vector<HostScore> pb = Prioritize(indexed, names, c.req, p, kNow);
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i].host, pb[i].host);
      EXPECT_EQ(pa[i].score, pb[i].score) << pa[i].host;
    }
  }
}

TEST(PlacementIndex, DuplicateAndUnknownNamesAreReportedOnce) {
  Snapshot s = Mixed();
  IndexSnapshot(&s);
  FilterResult r = Filter(s, {"small", "nope", "small", "nope"}, Want(4 * kGi, 1), Policy{}, kNow);
  EXPECT_EQ(r.fits, (std::vector<std::string_view>{"small"}));
  ASSERT_EQ(r.unresolvable.size(), 1u);
  EXPECT_EQ(r.unresolvable[0].first, "nope");
}

TEST(PlacementIndex, ACopyOfASnapshotHasNoIndex) {
  Snapshot s = Mixed();
  IndexSnapshot(&s);
  Snapshot copy = s.Clone();
  EXPECT_EQ(copy.index, nullptr);  // the copy may be changed; it is read directly
  copy.nodes.at("small").entries.push_back(Hold("x", {0}, 8 * kGi));
  FilterResult r = Filter(copy, {"small"}, Want(4 * kGi, 1), Policy{}, kNow);
  EXPECT_TRUE(r.fits.empty());
  Snapshot moved = std::move(s);
  EXPECT_NE(moved.index, nullptr);
}

// ReindexSnapshot: after random changes to random nodes (entries, usage
// reports appearing and going, warm models, GPU counts, nodes leaving and
// joining), in place or on a copy, with the old index handed over (changed
// in place) or still held elsewhere (copied), the incrementally updated
// index answers exactly as the plain path does.
TEST(PlacementIndex, AnIncrementallyUpdatedIndexAnswersLikeTheNodes) {
  std::mt19937_64 rng(20261121);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const std::vector<std::string> models = {"", "", "llama", "qwen", "mistral"};
  int uid = 0;
  auto random_node = [&](const std::string& name) {
    const int gpus = pick(5) == 0 ? 0 : 1 + pick(8);
    std::vector<int> idx;
    for (int i = 0; i < gpus; ++i) idx.push_back(i * (pick(4) == 0 ? 2 : 1));
    Node n = MakeNode(name, idx, (16 + 16 * pick(5)) * kGi);
    for (int e = pick(5); e > 0 && gpus > 0; --e) {
      n.entries.push_back(Hold("u" + std::to_string(uid++), {idx[static_cast<size_t>(pick(gpus))]},
                               (1 + pick(24)) * kGi, models[static_cast<size_t>(pick(5))]));
    }
    if (pick(3) == 0) {
      for (Gpu& g : n.gpus) {
        if (pick(2) == 0) continue;
        g.used = pick(40) * kGi;
        g.used_ts_ms = pick(3) == 0 ? kNow - 3'600'000 : kNow - 1000;
      }
    }
    if (pick(4) == 0) n.models[models[2 + static_cast<size_t>(pick(3))]] = kNow - 5000;
    return n;
  };
  Snapshot snap;
  for (int i = 0; i < 60; ++i) {
    std::string name = "node-" + std::to_string(i);
    snap.nodes.emplace(name, random_node(name));
  }
  IndexSnapshot(&snap);
  int incremental = 0, in_place = 0;
  for (int round = 0; round < 400; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::shared_ptr<const PlacementIndex> old = snap.index;
    const bool copy = pick(3) == 0;
    Snapshot next = copy ? snap.Clone() : std::move(snap);
    next.index.reset();
    std::vector<std::string> changed;
    for (int k = 1 + pick(3); k > 0; --k) {
      std::string name = "node-" + std::to_string(pick(70));
      auto it = next.nodes.find(name);
      const int what = pick(20);
      if (what == 0 && it != next.nodes.end()) {
        next.nodes.erase(it);  // left the cluster
      } else if (it == next.nodes.end() || what == 1) {
        next.nodes.insert_or_assign(name, random_node(name));  // joined, or any GPU count
      } else {  // the common case: same GPUs, new entries, usage or models
        Node& n = it->second;
        Node fresh = random_node(name);
        n.entries = fresh.entries;
        for (Gpu& g : n.gpus) {
          g.used = pick(2) ? pick(40) * kGi : 0;
          g.used_ts_ms = g.used ? kNow - 1000 * pick(5000) : 0;
        }
        n.models = fresh.models;
      }
      changed.push_back(name);
    }
    // Handed over (the writer's only reference: updated in place) or still
    // held here too (a reader's: copied first).
    const bool hand_over = pick(2) == 0;
    const PlacementIndex* const before = old.get();
    if (ReindexSnapshot(&next, hand_over ? std::move(old) : old, changed, copy)) {
      ++incremental;
      if (hand_over && !copy) ++in_place;
      if (!hand_over) {
        ASSERT_NE(next.index.get(), before) << "an index someone else holds was changed";
      }
    }
    ASSERT_NE(next.index, nullptr);
    const Snapshot plain = next.Clone();  // a copy has no index: read from the nodes
    std::vector<std::string> storage;  // every node that ever was, and two that never were
    for (int i = 0; i < 72; ++i) storage.push_back("node-" + std::to_string(i));
    const std::vector<std::string_view> names(storage.begin(), storage.end());
    const VramRequest req = Want((1 + pick(40)) * kGi, 1 + pick(3), models[static_cast<size_t>(pick(5))]);
    Policy p;
    p.score = pick(2) ? ScorePolicy::kHeadroom : ScorePolicy::kBinpack;
    FilterResult a = Filter(plain, names, req, p, kNow);
    FilterResult b = Filter(next, names, req, p, kNow);
    ASSERT_EQ(a.fits, b.fits);
    ASSERT_EQ(a.failed, b.failed);
    ASSERT_EQ(a.unresolvable, b.unresolvable);
    std::vector<HostScore> pa = Prioritize(plain, names, req, p, kNow);
    std::vector<HostScore> pb = Prioritize(next, names, req, p, kNow);
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      ASSERT_EQ(pa[i].host, pb[i].host);
      ASSERT_EQ(pa[i].score, pb[i].score) << pa[i].host;
    }
    snap = std::move(next);
  }
  EXPECT_GT(incremental, 200) << "the incremental path was hardly taken";
  EXPECT_GT(in_place, 60) << "the in-place path was hardly taken";
}

// Nodes with usage reports answer from their offer while every report
// counts (placement.cc, UsageOfferKnown). Random nodes with fresh, stale,
// future and missing reports, usage above and below allocation, burst
// entries, and demands with and without a peak or as designated victims,
// under policies that count usage or not and with different age limits:
// Filter (verdicts and grouped reasons) and Prioritize answer exactly as
// the plain path.
TEST(PlacementIndex, NodesWithUsageReportsAnswerLikeTheNodesWhateverTheReportsAge) {
  std::mt19937_64 rng(20261127);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  int uid = 0;
  int usage_nodes = 0;
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Snapshot plain;
    std::vector<std::string> storage;
    for (int i = 0; i < 24; ++i) {
      const std::string name = "n" + std::to_string(i);
      storage.push_back(name);
      const int gpus = 1 + pick(8);
      std::vector<int> idx;
      for (int g = 0; g < gpus; ++g) idx.push_back(g);
      Node n = MakeNode(name, idx, (8 + 8 * pick(10)) * kGi);
      if (pick(4) == 0) n.gpus[static_cast<size_t>(pick(gpus))].capacity = (8 + 8 * pick(10)) * kGi;
      for (int e = pick(6); e > 0; --e) {
        Entry en = Hold("u" + std::to_string(uid++), {pick(gpus)}, (1 + pick(30)) * kGi);
        if (pick(10) == 0) en.peak_per_gpu = en.per_gpu + (1 + pick(20)) * kGi;  // burst
        if (pick(10) == 0) en.victim = true;
        n.entries.push_back(en);
      }
      if (pick(5) != 0) {
        ++usage_nodes;
        for (Gpu& g : n.gpus) {
          const int kind = pick(7);
          if (kind == 0) continue;  // this GPU not reported
          g.used = pick(90) * kGi;
          g.used_ts_ms = kind == 1   ? kNow - 3'600'000              // stale under any limit used here
                         : kind == 2 ? kNow + 5000                   // ahead within the tolerance: fresh
                         : kind == 3 ? kNow - 1000 * (1 + pick(120))  // fresh or stale by the limit
                         : kind == 4 ? kNow + kUsageFutureToleranceMs + 1 + pick(60'000)  // too far ahead: stale
                                     : kNow - 1000;                  // fresh
        }
      }
      plain.nodes.emplace(name, std::move(n));
    }
    storage.push_back("unknown");
    Snapshot indexed = plain.Clone();
    IndexSnapshot(&indexed);
    const std::vector<std::string_view> names(storage.begin(), storage.end());
    VramRequest req = Want((1 + pick(60)) * kGi, pick(4) == 0 ? 2 : 1);
    if (pick(4) == 0) req.peak_per_gpu = req.per_gpu + (1 + pick(30)) * kGi;
    req.victim = pick(8) == 0;
    Policy p;
    p.score = pick(2) ? ScorePolicy::kHeadroom : ScorePolicy::kBinpack;
    p.fit_on_usage = pick(6) != 0;
    p.usage_max_age_ms = pick(2) ? 60'000 : 30'000;
    const FilterResult a = Filter(plain, names, req, p, kNow);
    const FilterResult b = Filter(indexed, names, req, p, kNow);
    ASSERT_EQ(a.fits, b.fits);
    ASSERT_EQ(a.failed, b.failed);
    ASSERT_EQ(a.unresolvable, b.unresolvable);
    const std::vector<HostScore> pa = Prioritize(plain, names, req, p, kNow);
    const std::vector<HostScore> pb = Prioritize(indexed, names, req, p, kNow);
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      ASSERT_EQ(pa[i].host, pb[i].host);
      ASSERT_EQ(pa[i].score, pb[i].score) << pa[i].host;
    }
  }
  EXPECT_GT(usage_nodes, 4000);
}

// The grouped reason of a node answered from its usage offer names measured
// usage when the most free GPU's usage is above its allocation, as the
// plain path does (a zombie holding VRAM).
TEST(PlacementIndex, AUsageOfferNodeSaysWhenMeasuredUsageTakesTheRoom) {
  Snapshot plain;
  Node n = MakeNode("z", {0, 1}, 80 * kGi);
  n.entries = {Hold("a", {0}, 70 * kGi)};
  n.gpus[0].used = 71 * kGi;  // a little above its allocation
  n.gpus[0].used_ts_ms = kNow - 1000;
  n.gpus[1].used = 75 * kGi;  // nothing allocated: a zombie
  n.gpus[1].used_ts_ms = kNow - 2000;
  plain.nodes.emplace("z", n);
  Snapshot indexed = plain.Clone();
  IndexSnapshot(&indexed);
  const std::vector<std::string_view> names = {"z"};
  for (const Snapshot* s : {&plain, &indexed}) {
    const FilterResult r = Filter(*s, names, Want(10 * kGi, 1), Policy{}, kNow);
    ASSERT_EQ(r.failed.size(), 1u);
    EXPECT_EQ(r.failed[0].second, "no GPU with 10Gi free, measured usage counted (best: 9Gi)");
    // Once the reports are stale, U = A again and GPU 1 is free.
    EXPECT_EQ(Filter(*s, names, Want(10 * kGi, 1), Policy{}, kNow + 60'000).fits, names);
  }
}

}  // namespace
}  // namespace vramd::ledger
