// Placement decisions: pure functions of (pod request, ledger snapshot,
// policy, now) -> decision. No I/O, no clock, no logging.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/ledger/fit.h"
#include "vramd/ledger/model.h"
#include "vramd/ledger/pod_request.h"

namespace vramd::ledger {

enum class ScorePolicy {
  kHeadroom,  // capacity-model default: warm node (lowest saturation), else most headroom
  kBinpack,   // fewest free bytes left after placement
};
const char* ScorePolicyName(ScorePolicy p);
bool ParseScorePolicy(std::string_view s, ScorePolicy* out);

struct Policy {
  ScorePolicy score = ScorePolicy::kHeadroom;
  int64_t usage_max_age_ms = 60'000;  // usage older than this falls back to A
  bool fit_on_usage = true;           // false: usage reports never count (U = A)
  double max_peak_ratio = kDefaultMaxPeakRatio;  // burst.max_peak_ratio: fit.h's peak rule
  // burst.victim_classes: priority classes whose pods are designated victims
  // (IsDesignatedVictim; every path that computes a demand passes them).
  std::vector<std::string> victim_classes{std::string(kDefaultVictimClasses[0])};

  FitPolicy fit() const { return FitPolicy{fit_on_usage, usage_max_age_ms, max_peak_ratio}; }
};

struct GpuChoice {
  std::vector<int> gpus;  // GPU indices, ascending
  int64_t per_gpu = 0;
};

struct NodeDecision {
  Verdict verdict = Verdict::kUnresolvable;
  std::string reason;   // human readable; empty when it fits
  GpuChoice choice;     // valid when verdict == kFits
  GroupedMiss miss;     // when it does not fit (a known node): its group and figure, as Filter groups it
};

// Chooses `req.gpu_count` GPUs of `node` with room for `req.per_gpu` each
// where the peak rule holds once the demand is added (fit.h), or explains
// precisely why none can be chosen. `node` may be null (unknown).
// The fit rule, the GPU order (headroom: kMostFree, binpack: kTightest) and
// the reason texts are fit.h's.
NodeDecision DecideNode(const Node* node, std::string_view node_name, const VramRequest& req,
                        const Policy& policy, int64_t now_ms);

// Builds snap->index: a compact, cache-friendly copy of what Filter and
// Prioritize read (per-GPU capacity and allocation, usage reports, a flat
// name table). Results are identical with or without it; with it, a call
// over thousands of nodes reads a few contiguous arrays instead of chasing
// pointers through every Node (docs/performance.md). Call it once the
// snapshot is complete, before sharing it.
void IndexSnapshot(Snapshot* snap);

// After the nodes named in `changed` were replaced, added or removed in
// `snap`: its index from `old` (the index of the snapshot it was changed
// from), updating only those nodes' records — O(changed) instead of
// O(nodes) — or from scratch when the node set or a node's GPU count
// changed. `nodes_moved`: `snap` is a copy, so every node lives at a new
// address. The result answers exactly as IndexSnapshot's would. Returns
// whether it was incremental.
bool ReindexSnapshot(Snapshot* snap, std::shared_ptr<const PlacementIndex> old,
                     const std::vector<std::string>& changed, bool nodes_moved);

// Node names are views into the caller's storage; reasons are views into
// `reasons` (each distinct text once: one per reason group) or into static
// text. Move-only, so
// that no copy can point into another result's reasons.
struct FilterResult {
  std::vector<std::string_view> fits;  // in input order
  std::vector<std::pair<std::string_view, std::string_view>> failed;        // may fit later
  std::vector<std::pair<std::string_view, std::string_view>> unresolvable;  // never fits
  std::deque<std::string> reasons;  // stable addresses as it grows

  FilterResult() = default;
  FilterResult(FilterResult&&) = default;
  FilterResult& operator=(FilterResult&&) = default;
  FilterResult(const FilterResult&) = delete;
  FilterResult& operator=(const FilterResult&) = delete;
};

// Filter over candidate node names (views into the caller's storage).
// Duplicate names are evaluated once and reported once. Reasons are grouped
// (fit.h's MissGroup and GroupedReason): every node that misses the same way
// gets the same text, whose figure is the best over these nodes, so that
// kube-scheduler's event stays a few lines at any cluster size; DecideNode
// gives one node's detailed reason.
// Room held for another pod (EntryState::kHold, issue 32) counts as spent
// like any entry, but for the holds the pod may take (MayTakeHold): its own
// (req.uid), and those of pods of lower priority; a node with such holds is
// also decided without them (DecideNode on the node less those holds), and
// fits when either way fits. The bind's reserve script takes them the same way.
FilterResult Filter(const Snapshot& snap, const std::vector<std::string_view>& names,
                    const VramRequest& req, const Policy& policy, int64_t now_ms);

// Whether `req`'s pod may take the room of `hold` (issue 32): it is a hold,
// and it is the pod's own or held for a pod of lower priority (a pod of
// higher priority never waits for room held for a lesser one; the lesser pod
// loses the hold when the room is taken, and waits again).
bool MayTakeHold(const Entry& hold, const VramRequest& req);

// The hold of pod `uid` (EntryState::kHold) and its node's name (into
// `node_name` when not null), or null: through the snapshot's index when it
// has one (O(1)), else a scan.
const Entry* FindHold(const Snapshot& snap, std::string_view uid, std::string_view* node_name = nullptr);

struct HostScore {
  std::string_view host;
  int score = 0;  // 0..10
};

// Scores candidate nodes 0..10 (MaxExtenderPriority). Nodes where the pod does
// not fit score 0. See placement.cc for the formulas. The node where the pod
// holds room (req.uid's hold) scores 10 when it fits there without the hold.
std::vector<HostScore> Prioritize(const Snapshot& snap, const std::vector<std::string_view>& names,
                                  const VramRequest& req, const Policy& policy, int64_t now_ms);

}  // namespace vramd::ledger
