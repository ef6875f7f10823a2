// The fit rule: whether a demand fits a GPU and a node, which GPUs it gets,
// and the words of every "does not fit" reason. Standard library only, no
// I/O, no clock (`now_ms` is a parameter). Every path that decides fit uses
// these functions: Filter and Prioritize (and their index fast paths), bind,
// explain, preempt, reconcile's re-add and the in-memory fake store.
//
// The rule. A GPU has capacity C, allocation A (the sum of its entries'
// per-GPU bytes) and usage U. U is the GPU's last usage report when that
// report counts (UsageCounts: the policy counts usage and the report is at
// most usage_max_age_ms old); otherwise U = A. The GPU's free bytes are
//     free = C - max(A, U)
// and a demand of D bytes fits the GPU when D <= free, i.e.
//     max(A, U) + D <= C.
// Edge cases:
//  - An exact fit (max(A, U) + D == C) fits; one byte more does not.
//  - Usage above allocation (a pod using more than it reserved, or memory
//    the ledger does not know of) takes room: max(A, U).
//  - Usage below allocation frees nothing: the allocation is promised.
//  - A stale report (older than usage_max_age_ms), a GPU never reported
//    (report time 0) or a policy that ignores usage: U = A.
//  - A report stamped after `now` (a clock step) counts as fresh.
//  - free may be negative (capacity shrank below allocation, usage above
//    capacity); nothing fits then. A GPU of capacity 0 fits no demand above 0.
//  - A node fits a demand of D bytes on each of n GPUs when n distinct GPUs
//    each fit D. It never fits (kUnresolvable) when it has no GPUs, fewer
//    than n GPUs, or fewer than n GPUs with C >= D; otherwise, when fewer
//    than n GPUs have room now, it may fit later (kNoRoomNow).
//
// In C++ every decision goes through one comparison, FitsIn. The reserve
// script cannot call C++: src/store/lua/fit.lua holds the same predicate
// (fit_usage_counts, fit_has_room) and the store passes it the policy
// (FitPolicy) as arguments; the script returns the numbers of the GPUs
// without room and RefusedReason words the refusal. One table of named cases,
// tests/data/fit_cases.json, runs against this header (tests/unit/ledger/
// fit_test.cc) and against the script on a real server
// (tests/integration/fit_lua_test.cc), so a change made in one only fails.
//
// The peak rule (burstable VRAM, issue 15). An entry reserves per_gpu (its
// steady state) and may burst to peak_per_gpu (vramd.io/vram-peak; 0 means
// per_gpu). Per GPU:
//     P = sum over the entries holding the GPU (every state) of
//         max(per_gpu, peak_per_gpu)                      (peak demand)
//     V = sum of per_gpu of those entries that are designated victims
//                                                         (victim cover)
// The invariant, PeakOk(C, P, V, ratio):
//     P <= C  or  (P - C <= V  and  P <= floor(ratio x C))
// i.e. peaks may overshoot the capacity only while designated victims hold
// reservations that cover the overshoot, and never beyond the ceiling
// (FitPolicy::max_peak_ratio, config burst.max_peak_ratio). A demand of r
// bytes (peak p, victim v) fits a GPU when the rule above holds AND
//     PeakOk(C, P + max(r, p), V + (v ? r : 0), ratio).
// P and V are computed in one place, AddToPeak (the node path, the
// placement index, GpuPeaks, the metrics); the script's fit_entry_peak
// mirrors it. Removing an entry never breaks PeakOk (P drops by max(r, p),
// at least the r it took from V), so a GPU breaks it only when its capacity
// shrank, the ratio was lowered, or entries were written without the rule
// (reconcile re-adding running pods). Such a GPU is unsafe: it is flagged
// (BurstSafe: metrics, /v1/nodes) and nothing already placed is refused
// retroactively; a new demand there needs PeakOk once added, as anywhere.
// A demand never fits (kUnresolvable) when max(r, p) > floor(ratio x C) on
// every GPU with C >= r (no GPU's ceiling can hold its own peak).
// Without burst on the GPU (P = A, V = 0) and in the demand (p <= r), the
// peak rule follows from the fit rule (A + r <= C): Filter's fast paths skip
// it then. On such a GPU with U = A, a demand that bursts but is no
// designated victim fits exactly when max(r, p) <= C - A, which the
// placement index answers from what a node's GPUs offer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/ledger/model.h"

namespace vramd::ledger {

// The default of burst.max_peak_ratio: peak demand up to 1.5 x capacity.
inline constexpr double kDefaultMaxPeakRatio = 1.5;

// What the rule takes from the configuration.
struct FitPolicy {
  bool count_usage = true;            // false: U = A always (the rule is A + D <= C)
  int64_t usage_max_age_ms = 60'000;  // an older usage report falls back to A
  double max_peak_ratio = kDefaultMaxPeakRatio;  // the peak rule's ceiling, 1..10
};

// How far ahead of `now` a usage report may be stamped and still count:
// reports are stamped with the store's clock (lua/push_usage.lua) and judged
// with vramd's, so a small skew between the two hosts is tolerated; beyond
// it the report's age cannot be known and it is stale (issue 32: a report
// stamped in the future must not stay "fresh" for as long as the skew).
inline constexpr int64_t kUsageFutureToleranceMs = 5'000;

// Whether a usage report stamped `reported_ms` (0: never reported) is fresh
// at `now_ms`: at most `max_age_ms` old and at most kUsageFutureToleranceMs
// ahead of now_ms.
inline bool UsageFresh(int64_t reported_ms, int64_t now_ms, int64_t max_age_ms) {
  return reported_ms > 0 && now_ms - reported_ms <= max_age_ms && reported_ms - now_ms <= kUsageFutureToleranceMs;
}

// Whether a usage report stamped `reported_ms` counts as U under `policy`.
inline bool UsageCounts(int64_t reported_ms, int64_t now_ms, const FitPolicy& policy) {
  return policy.count_usage && UsageFresh(reported_ms, now_ms, policy.usage_max_age_ms);
}

// The vectors of one GPU: U is `used` when its report counts, else A.
inline Vectors GpuVectorsOf(int64_t capacity, int64_t allocated, int64_t used, int64_t reported_ms, int64_t now_ms,
                            const FitPolicy& policy) {
  return Vectors{capacity, allocated, UsageCounts(reported_ms, now_ms, policy) ? used : allocated};
}

// The vectors of each GPU of `node` (same order as node.gpus) under `policy`.
std::vector<Vectors> GpuVectors(const Node& node, int64_t now_ms, const FitPolicy& policy);

// Free bytes of one GPU under the rule: C - max(A, U) (may be negative).
inline int64_t FreeBytes(const Vectors& v) { return v.capacity - std::max(v.allocated, v.used); }

// The comparison at the heart of the rule, the only one: a demand of
// `per_gpu` bytes fits in `bytes` (an exact fit fits).
inline bool FitsIn(int64_t per_gpu, int64_t bytes) { return per_gpu <= bytes; }

// Whether a demand of `per_gpu` bytes fits the GPU now: per_gpu <= C - max(A, U).
inline bool HasRoom(const Vectors& v, int64_t per_gpu) { return FitsIn(per_gpu, FreeBytes(v)); }

// Whether the GPU could ever hold `per_gpu` bytes: per_gpu <= C.
inline bool LargeEnough(const Vectors& v, int64_t per_gpu) { return FitsIn(per_gpu, v.capacity); }

// The peak rule's figures of one GPU (see the top of this file).
struct GpuPeak {
  int64_t peak = 0;    // P: sum of max(per_gpu, peak_per_gpu) of its entries
  int64_t victim = 0;  // V: sum of per_gpu of its designated-victim entries
  bool operator==(const GpuPeak&) const = default;
};

// What one entry (or demand) of `per_gpu` bytes, peak `peak_per_gpu` (0:
// none), designated victim or not, adds to P and V of each of its GPUs: the
// one place where P and V are summed.
inline void AddToPeak(GpuPeak* g, int64_t per_gpu, int64_t peak_per_gpu, bool victim) {
  g->peak += std::max(per_gpu, peak_per_gpu);
  if (victim) g->victim += per_gpu;
}
inline void AddToPeak(GpuPeak* g, const Entry& e) { AddToPeak(g, e.per_gpu, e.peak_per_gpu, e.victim); }

// Whether an entry makes a GPU's P or V differ from (A, 0).
inline bool AddsBurst(const Entry& e) { return e.peak_per_gpu > e.per_gpu || e.victim; }

// P and V of each GPU of `node` (same order as node.gpus; entries on GPU
// indices the node lacks count nowhere, as in AllocatedPerGpu).
std::vector<GpuPeak> GpuPeaks(const Node& node);

// The ceiling of peak demand on a GPU of capacity C: floor(ratio x C)
// (computed in double, exactly as the reserve script does).
inline int64_t PeakCeiling(int64_t capacity, double ratio) {
  return static_cast<int64_t>(std::floor(ratio * static_cast<double>(capacity)));
}

// The invariant: P <= C, or the overshoot P - C is covered by V and P is
// within the ceiling.
inline bool PeakOk(int64_t capacity, int64_t peak, int64_t victim, double ratio) {
  return peak <= capacity || (peak - capacity <= victim && peak <= PeakCeiling(capacity, ratio));
}

// Whether a GPU with `g` is safe (its current P, V satisfy PeakOk).
inline bool BurstSafe(int64_t capacity, const GpuPeak& g, double ratio) {
  return PeakOk(capacity, g.peak, g.victim, ratio);
}

// A demand's share of the peak rule on each of its GPUs.
struct PeakDemand {
  int64_t peak = 0;   // max(per_gpu, peak_per_gpu)
  int64_t cover = 0;  // per_gpu when the demand is a designated victim, else 0
  double ratio = kDefaultMaxPeakRatio;
};

inline PeakDemand PeakDemandOf(int64_t per_gpu, int64_t peak_per_gpu, bool victim, double ratio) {
  GpuPeak g;
  AddToPeak(&g, per_gpu, peak_per_gpu, victim);
  return PeakDemand{g.peak, g.victim, ratio};
}

inline PeakDemand PeakDemandOf(const Entry& e, double ratio) {
  return PeakDemandOf(e.per_gpu, e.peak_per_gpu, e.victim, ratio);
}

// Whether the demand bursts (peak above its request): only then can it break
// the peak rule on a GPU without burst (P = A, V = 0) where it has room.
inline bool Bursts(int64_t per_gpu, int64_t peak_per_gpu) { return peak_per_gpu > per_gpu; }

// PeakOk on a GPU once the demand is added.
inline bool PeakRoom(const Vectors& v, const GpuPeak& g, const PeakDemand& d) {
  return PeakOk(v.capacity, g.peak + d.peak, g.victim + d.cover, d.ratio);
}

// Whether the GPU's ceiling could ever hold the demand's own peak (the
// ceiling is at least C: ratio >= 1).
inline bool WithinCeiling(const Vectors& v, const PeakDemand& d) {
  return FitsIn(d.peak, v.capacity) || FitsIn(d.peak, PeakCeiling(v.capacity, d.ratio));
}

// The whole rule on one GPU: room now and the peak rule after adding.
inline bool HasRoomWithPeak(const Vectors& v, const GpuPeak& g, int64_t per_gpu, const PeakDemand& d) {
  return HasRoom(v, per_gpu) && PeakRoom(v, g, d);
}

enum class Verdict {
  kFits,
  kNoRoomNow,     // fits by capacity, not with what is allocated/used now
  kUnresolvable,  // never fits: unknown node, no GPUs, too few GPUs, or too big
};

// What a node's GPUs offer any demand: the largest capacity and the most free
// bytes, with the position (among the node's GPUs) of the first GPU that has
// each. Not meaningful for a node without GPUs.
struct GpuOffer {
  int64_t max_capacity = 0;
  int64_t max_free = 0;
  uint32_t largest = 0;    // position of the first GPU with max_capacity
  uint32_t most_free = 0;  // position of the first GPU with max_free
};

// The offer of a node whose first GPU has vectors `v`.
inline GpuOffer FirstOffer(const Vectors& v) { return GpuOffer{v.capacity, FreeBytes(v), 0, 0}; }

// Folds the node's GPU at position `pos` (after FirstOffer, in order) into `offer`.
inline void AddToOffer(GpuOffer* offer, uint32_t pos, const Vectors& v) {
  const int64_t free = FreeBytes(v);
  if (v.capacity > offer->max_capacity) {
    offer->max_capacity = v.capacity;
    offer->largest = pos;
  }
  if (free > offer->max_free) {
    offer->max_free = free;
    offer->most_free = pos;
  }
}

// The verdict for a demand of `per_gpu` bytes on one GPU of a node (with at
// least one GPU) that offers `offer`: what NodeFit says for a count of 1,
// without the per-GPU vectors.
inline Verdict FitOneGpu(const GpuOffer& offer, int64_t per_gpu) {
  if (!FitsIn(per_gpu, offer.max_capacity)) return Verdict::kUnresolvable;
  return FitsIn(per_gpu, offer.max_free) ? Verdict::kFits : Verdict::kNoRoomNow;
}

// Why a node does not fit (kNone: it fits).
enum class FitMiss {
  kNone,
  kNoGpus,       // the node has no GPUs
  kTooFewGpus,   // fewer GPUs than the demand's count
  kTooSmall,     // fewer than `count` GPUs with C >= D
  kNoRoom,       // enough GPUs large enough, fewer than `count` with room now
  kAboveCeiling, // enough GPUs with C >= D, fewer than `count` whose ceiling
                 // floor(ratio x C) holds the demand's peak (never fits)
  kPeakShort,    // enough GPUs with room now, fewer than `count` of them where
                 // the peak rule holds once the demand is added
};

// A node's answer to a demand of `per_gpu` bytes on each of `count` GPUs.
struct NodeFit {
  FitMiss miss = FitMiss::kNoGpus;
  int large_enough = 0;  // GPUs with C >= D (counted unless kNoGpus/kTooFewGpus)
  int with_room = 0;     // GPUs where D fits now (idem)
  GpuOffer offer;        // idem
  // FitNodeWithPeak only:
  int within_ceiling = 0;  // GPUs with C >= D whose ceiling holds the peak
                           // (counted only when the node does not fit)
  int with_peak = 0;       // GPUs with room now where the peak rule holds too
  uint32_t peak_short = 0; // position of the first GPU with room now where
                           // the peak rule does not hold (kPeakShort)

  Verdict verdict() const {
    if (miss == FitMiss::kNone) return Verdict::kFits;
    return miss == FitMiss::kNoRoom || miss == FitMiss::kPeakShort ? Verdict::kNoRoomNow : Verdict::kUnresolvable;
  }
};

// Decides a node from its GPUs' vectors (the hot path of Filter: inline).
// `count` is at least 1 (VramRequest::gpu_count).
inline NodeFit FitNode(std::span<const Vectors> gpus, int64_t per_gpu, int count) {
  NodeFit f;
  const size_t n = gpus.size();
  if (n == 0) return f;
  if (static_cast<size_t>(count) > n) {
    f.miss = FitMiss::kTooFewGpus;
    return f;
  }
  f.offer = FirstOffer(gpus[0]);
  for (size_t i = 0; i < n; ++i) {
    const Vectors& v = gpus[i];
    f.large_enough += LargeEnough(v, per_gpu);
    f.with_room += HasRoom(v, per_gpu);
    AddToOffer(&f.offer, static_cast<uint32_t>(i), v);
  }
  if (f.large_enough < count) f.miss = FitMiss::kTooSmall;
  else if (f.with_room < count) f.miss = FitMiss::kNoRoom;
  else f.miss = FitMiss::kNone;
  return f;
}

// FitNode with the peak rule: `peaks` (parallel to `gpus`) are the GPUs' P
// and V (empty: a node without burst, P = A and V = 0 on every GPU), `d` the
// demand's share. Misses in this order: kNoGpus, kTooFewGpus,
// kTooSmall, kAboveCeiling, kNoRoom, kPeakShort.
inline NodeFit FitNodeWithPeak(std::span<const Vectors> gpus, std::span<const GpuPeak> peaks, int64_t per_gpu,
                               int count, const PeakDemand& d) {
  NodeFit f;
  const size_t n = gpus.size();
  if (n == 0) return f;
  if (static_cast<size_t>(count) > n) {
    f.miss = FitMiss::kTooFewGpus;
    return f;
  }
  f.offer = FirstOffer(gpus[0]);
  bool short_found = false;
  for (size_t i = 0; i < n; ++i) {
    const Vectors& v = gpus[i];
    const bool room = HasRoom(v, per_gpu);
    const bool peak_ok = room && PeakRoom(v, peaks.empty() ? GpuPeak{v.allocated, 0} : peaks[i], d);
    f.large_enough += LargeEnough(v, per_gpu);
    f.with_room += room;
    f.with_peak += peak_ok;
    if (room && !peak_ok && !short_found) {
      short_found = true;
      f.peak_short = static_cast<uint32_t>(i);
    }
    AddToOffer(&f.offer, static_cast<uint32_t>(i), v);
  }
  // A GPU where the peak rule holds is within its ceiling (p <= P' <= the
  // ceiling), so the ceilings are counted only for a miss.
  if (f.with_peak >= count) {
    f.miss = FitMiss::kNone;
    return f;
  }
  for (size_t i = 0; i < n; ++i) {
    f.within_ceiling += LargeEnough(gpus[i], per_gpu) && WithinCeiling(gpus[i], d);
  }
  if (f.large_enough < count) f.miss = FitMiss::kTooSmall;
  else if (f.within_ceiling < count) f.miss = FitMiss::kAboveCeiling;
  else if (f.with_room < count) f.miss = FitMiss::kNoRoom;
  else if (f.with_peak < count) f.miss = FitMiss::kPeakShort;
  else f.miss = FitMiss::kNone;
  return f;
}

// The order in which GPUs are given to a demand.
enum class GpuOrder {
  kMostFree,  // spread: the GPUs with the most free bytes first (headroom)
  kTightest,  // pack: the GPUs with the fewest free bytes first (binpack)
};

// Writes to `out` (room for gpus.size()) the positions of the GPUs where
// `per_gpu` fits, in `order`, ties to the lower position; returns how many.
size_t RankGpus(std::span<const Vectors> gpus, int64_t per_gpu, GpuOrder order, size_t* out);
// The same over the GPUs where the whole rule holds (HasRoomWithPeak).
size_t RankGpus(std::span<const Vectors> gpus, std::span<const GpuPeak> peaks, int64_t per_gpu,
                const PeakDemand& d, GpuOrder order, size_t* out);

// The positions (ascending) of the GPUs a demand of `per_gpu` bytes on each
// of `count` GPUs gets: the first `count` of RankGpus. Empty when fewer than
// `count` GPUs have room.
std::vector<size_t> ChooseGpus(std::span<const Vectors> gpus, int64_t per_gpu, int count, GpuOrder order);
// The same under the whole rule (HasRoomWithPeak).
std::vector<size_t> ChooseGpus(std::span<const Vectors> gpus, std::span<const GpuPeak> peaks, int64_t per_gpu,
                               int count, const PeakDemand& d, GpuOrder order);

// The positions (ascending) of the `count` GPUs (at most gpus.size()) with
// the most free bytes, ties to the lower position, whether or not anything
// fits there: where reconcile re-adds the entry of a pod already running on
// the node (an over-commit then shows in the metrics instead of hiding).
std::vector<size_t> MostFreeGpus(std::span<const Vectors> gpus, int count);

// Reason texts. Every "does not fit" text is written here, and nowhere else.
// Reasons carry no node name so that kube-scheduler groups identical ones
// ("0/N nodes are available: 12 needs 32Gi on 1 GPU; ...").

inline constexpr std::string_view kNoGpusReason = "node has no GPUs";

// "needs 8Gi on 1 GPU" or "needs 8Gi on each of 2 GPUs", with " (peak 32Gi)"
// when the demand bursts (peak_per_gpu > per_gpu): how every reason about a
// demand begins.
std::string NeedsText(int64_t per_gpu, int count, int64_t peak_per_gpu = 0);

// The rest of the reason, after NeedsText, for a node with `fit.miss` of
// kTooFewGpus, kTooSmall or kNoRoom (nothing for kNone or kNoGpus):
//  "; node has only 1 GPU"
//  "; largest GPU capacity is 8Gi (GPU 0)[, 1 GPU large enough]"
//  "; [1 GPU with that free; ]largest free is 4Gi on GPU 0 (capacity 24Gi,
//    allocated 4Gi[, used 20Gi])"
// `gpu_count` is the node's number of GPUs; `gpu_index` the index of the GPU
// the reason names (offer.largest for kTooSmall, offer.most_free for kNoRoom);
// `named` the vectors of that GPU (kNoRoom).
void AppendMissReason(const NodeFit& fit, int count, size_t gpu_count, int gpu_index, const Vectors& named,
                      std::string* out);

// The rest of the reason for the peak rule's misses (FitNodeWithPeak):
//  kAboveCeiling: "; peak is above the ceiling 36Gi (1.5 × capacity 24Gi) of
//    the largest GPU (GPU 0)[, 1 GPU within it]" (`gpu_index`: offer.largest,
//    `named` its vectors)
//  kPeakShort: "; [1 GPU with room within the peak rule; ]" then
//    AppendPeakMiss for the GPU at fit.peak_short (`gpu_index`, `named`,
//    `after`: its P and V with the demand added)
void AppendPeakMissReason(const NodeFit& fit, int count, int gpu_index, const Vectors& named, const GpuPeak& after,
                          double ratio, std::string* out);

// Why the peak rule fails on GPU `gpu_index` of capacity C once P and V are
// `after` (the demand added):
//  "on GPU 0 peak demand would be 40Gi over capacity 24Gi, 16Gi more than
//   designated victims cover (0)"          (the overshoot is not covered)
//  "on GPU 0 peak demand would be 40Gi, above the ceiling 36Gi (1.5 ×
//   capacity 24Gi)"                        (covered, beyond the ceiling)
void AppendPeakMiss(int gpu_index, int64_t capacity, const GpuPeak& after, double ratio, std::string* out);

// Filter's reasons, grouped. kube-scheduler shows a pod that fits nowhere
// as "0/N nodes are available: <count> <reason>, ..." and groups identical
// texts only, so Filter gives every node that misses the same way the same
// text, with one figure taken over all the nodes of the call: the best any
// of them offers, which tells the user what would fit. A pod that fits
// nowhere on 5,000 nodes then gets an event of a few lines, not thousands
// of per-node strings. The per-node detail (which GPU, its capacity,
// allocation and usage) is DecideNode's, shown by /v1/explain and
// `vramctl explain`.
enum class MissGroup : uint8_t {
  kNoGpus,        // the node has no GPUs (no figure)
  kTooFewGpus,    // figure: the most GPUs on one node
  kTooSmall,      // count 1: the largest GPU capacity; else the most GPUs large enough on one node
  kNoRoom,        // count 1: the most free on one GPU; else the most GPUs with that free on one node
  kNoRoomInUse,   // kNoRoom where the node's most free GPU has measured usage above its
                  // allocation (a leak, a zombie, a runaway tenant): same figures
  kAboveCeiling,  // count 1: the highest ceiling; else the most GPUs whose ceiling holds the peak
  kPeakShort,     // count 1: no figure; else the most GPUs where the peak rule holds on one node
};
inline constexpr size_t kMissGroupCount = 7;

// A node's miss as Filter groups it.
struct GroupedMiss {
  MissGroup group = MissGroup::kNoGpus;
  int64_t figure = 0;
};

// The group and figure of a node that does not fit (`fit.miss` is not
// kNone): `count` GPUs wanted, `gpu_count` the node's GPUs, `ratio` the
// peak rule's (fit.h), `most_free` the vectors of the GPU at
// fit.offer.most_free (read for kNoRoom only).
GroupedMiss GroupMiss(const NodeFit& fit, int count, size_t gpu_count, double ratio, const Vectors& most_free);

// The text of a group whose best figure over the call is `best`. Short: it
// is read after kube-scheduler's count ("2500 no GPU with 38Gi free (best:
// 10Gi)"), and it is most of filter's answer (once per node that misses):
//  kNoGpus:       "node has no GPUs"
//  kTooFewGpus:   "too few GPUs on the node (needs 4, most: 2)"
//  kTooSmall:     "GPU too small for 38Gi (largest: 24Gi)"
//                 "too few GPUs of 38Gi or more (needs 2, most: 1)"
//  kNoRoom:       "no GPU with 38Gi free (best: 10Gi)"
//                 "too few GPUs with 8Gi free (needs 2, most: 1)"
//  kNoRoomInUse:  "no GPU with 38Gi free, measured usage counted (best: 10Gi)"
//                 "too few GPUs with 8Gi free, measured usage counted (needs 2, most: 1)"
//  kAboveCeiling: "peak 40Gi above every GPU's ceiling of 1.5 × capacity (highest: 36Gi)"
//                 "too few GPUs whose ceiling of 1.5 × capacity holds peak 40Gi (needs 2, most: 1)"
//  kPeakShort:    "no GPU with 8Gi free stays within the peak rule now (peak 32Gi)"
//                 "too few GPUs with 6Gi free within the peak rule now (peak 12Gi; needs 2, most: 1)"
std::string GroupedReason(MissGroup group, int64_t best, int64_t per_gpu, int count, int64_t peak_per_gpu,
                          double ratio);

// "1.5": a ratio as reasons print it (up to 3 decimals, no trailing zeros).
std::string RatioText(double ratio);

// One GPU where a demand did not fit, as a refused reservation reports it.
struct GpuShort {
  int gpu_index = 0;
  Vectors v;
};

// Why a reservation of `per_gpu` bytes on each of `count` GPUs was refused,
// naming the GPUs that had no room:
//  "needs 8Gi on 1 GPU; free is 4Gi on GPU 0 (capacity 24Gi, allocated 4Gi,
//   used 20Gi)[, 0 on GPU 1 (...)]"
// `peak_per_gpu` as for NeedsText.
std::string RefusedReason(int64_t per_gpu, int count, std::span<const GpuShort> short_gpus,
                          int64_t peak_per_gpu = 0);

// One GPU where a reservation had room but broke the peak rule: its capacity
// and its P and V with the reservation added.
struct GpuPeakShort {
  int gpu_index = 0;
  int64_t capacity = 0;
  GpuPeak after;
};

// Why a reservation that had room on every GPU it names was refused by the
// peak rule (the reserve script checks the fit rule first):
//  "needs 8Gi on 1 GPU (peak 32Gi); on GPU 0 peak demand would be 40Gi over
//   capacity 24Gi, 16Gi more than designated victims cover (0)[; on GPU 1 ...]"
std::string PeakRefusedReason(int64_t per_gpu, int64_t peak_per_gpu, int count,
                              std::span<const GpuPeakShort> short_gpus, double ratio);

}  // namespace vramd::ledger
