#include "vramd/ledger/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "vramd/ledger/metrics.h"
#include "vramd/ledger/quantity.h"

namespace vramd::ledger {

const char* ScorePolicyName(ScorePolicy p) {
  return p == ScorePolicy::kBinpack ? "binpack" : "headroom";
}

bool ParseScorePolicy(std::string_view s, ScorePolicy* out) {
  if (s == "headroom") *out = ScorePolicy::kHeadroom;
  else if (s == "binpack") *out = ScorePolicy::kBinpack;
  else return false;
  return true;
}

int64_t FreeBytes(const Vectors& v) { return v.capacity - std::max(v.allocated, v.used); }

namespace {

std::string GpuWord(int n) { return n == 1 ? "1 GPU" : std::to_string(n) + " GPUs"; }

std::string Needs(const VramRequest& req) {
  if (req.gpu_count == 1) return "needs " + FormatBytes(req.per_gpu) + " on 1 GPU";
  return "needs " + FormatBytes(req.per_gpu) + " on each of " + std::to_string(req.gpu_count) + " GPUs";
}

std::string Describe(const Gpu& g, const Vectors& v) {
  std::string s = "GPU " + std::to_string(g.index) + " (capacity " + FormatBytes(v.capacity) +
                  ", allocated " + FormatBytes(v.allocated);
  if (v.used > v.allocated) s += ", used " + FormatBytes(v.used);
  return s + ")";
}

bool IsWarm(const Node& node, const std::string& model) {
  if (model.empty()) return false;
  if (node.models.count(model)) return true;
  return std::any_of(node.entries.begin(), node.entries.end(),
                     [&](const Entry& e) { return e.model == model; });
}

}  // namespace

NodeDecision DecideNode(const Node* node, std::string_view node_name, const VramRequest& req,
                        const Policy& policy, int64_t now_ms) {
  NodeDecision d;
  if (node == nullptr) {
    d.verdict = Verdict::kUnresolvable;
    // Reasons carry no node name so kube-scheduler groups identical ones
    // ("0/N nodes are available: 12 no GPU capacity known to vramd ...").
    d.reason = "no GPU capacity known to vramd (no config entry, vramd.io/capacity annotation "
               "or GPU Feature Discovery labels)";
    return d;
  }
  if (node->gpus.empty()) {
    d.verdict = Verdict::kUnresolvable;
    d.reason = "node has no GPUs";
    return d;
  }
  const int want = req.gpu_count;
  if (static_cast<size_t>(want) > node->gpus.size()) {
    d.verdict = Verdict::kUnresolvable;
    d.reason = Needs(req) + "; node has only " + GpuWord(static_cast<int>(node->gpus.size()));
    return d;
  }

  std::vector<Vectors> vec = GpuVectors(*node, now_ms, policy.usage_max_age_ms);
  int big_enough = 0;
  size_t largest_cap = 0;
  for (size_t i = 0; i < vec.size(); ++i) {
    if (vec[i].capacity >= req.per_gpu) ++big_enough;
    if (vec[i].capacity > vec[largest_cap].capacity) largest_cap = i;
  }
  if (big_enough < want) {
    d.verdict = Verdict::kUnresolvable;
    d.reason = Needs(req) + "; largest GPU capacity is " + FormatBytes(vec[largest_cap].capacity) +
               " (GPU " + std::to_string(node->gpus[largest_cap].index) + ")";
    if (want > 1) d.reason += ", " + GpuWord(big_enough) + " large enough";
    return d;
  }

  // Candidates with room now, ordered by the policy's preference.
  std::vector<size_t> order(vec.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<size_t> room;
  size_t largest_free = 0;
  for (size_t i : order) {
    if (FreeBytes(vec[i]) >= req.per_gpu) room.push_back(i);
    if (FreeBytes(vec[i]) > FreeBytes(vec[largest_free])) largest_free = i;
  }
  if (static_cast<int>(room.size()) < want) {
    d.verdict = Verdict::kNoRoomNow;
    d.reason = Needs(req) + "; ";
    if (want > 1) d.reason += GpuWord(static_cast<int>(room.size())) + " with that free; ";
    d.reason += "largest free is " + FormatBytes(std::max<int64_t>(0, FreeBytes(vec[largest_free]))) +
                " on " + Describe(node->gpus[largest_free], vec[largest_free]);
    return d;
  }
  // Headroom policy spreads onto the GPUs with the most free memory; binpack
  // fills the tightest GPUs first. Ties go to the lower index.
  std::stable_sort(room.begin(), room.end(), [&](size_t a, size_t b) {
    int64_t fa = FreeBytes(vec[a]), fb = FreeBytes(vec[b]);
    return policy.score == ScorePolicy::kBinpack ? fa < fb : fa > fb;
  });
  room.resize(want);
  d.verdict = Verdict::kFits;
  d.choice.per_gpu = req.per_gpu;
  for (size_t i : room) d.choice.gpus.push_back(node->gpus[i].index);
  std::sort(d.choice.gpus.begin(), d.choice.gpus.end());
  return d;
}

FilterResult Filter(const Snapshot& snap, const std::vector<std::string_view>& names,
                    const VramRequest& req, const Policy& policy, int64_t now_ms) {
  FilterResult out;
  out.fits.reserve(names.size());
  std::unordered_set<std::string_view> seen;
  seen.reserve(names.size() * 2);
  for (std::string_view name : names) {
    if (!seen.insert(name).second) continue;
    NodeDecision d = DecideNode(snap.Find(name), name, req, policy, now_ms);
    switch (d.verdict) {
      case Verdict::kFits: out.fits.push_back(name); break;
      case Verdict::kNoRoomNow: out.failed.emplace_back(name, std::move(d.reason)); break;
      case Verdict::kUnresolvable: out.unresolvable.emplace_back(name, std::move(d.reason)); break;
    }
  }
  return out;
}

// Scores, 0..10:
//  headroom: a warm node (it holds or last ran the pod's vramd.io/model) scores
//            6 + round(4 × (1 − saturation)), so warm beats cold and the
//            least saturated warm node wins; a cold node scores
//            round(5 × free / max free among cold candidates), free being the
//            node's bytes free under the fit rule.
//  binpack:  10 − round(10 × free_after / max free_after), free_after being
//            the node's free bytes left once the pod is placed.
std::vector<HostScore> Prioritize(const Snapshot& snap, const std::vector<std::string_view>& names,
                                  const VramRequest& req, const Policy& policy, int64_t now_ms) {
  struct Cand {
    bool fits = false;
    bool warm = false;
    double saturation = 0;
    int64_t free = 0;
  };
  std::vector<Cand> cands(names.size());
  int64_t max_cold_free = 0;
  int64_t max_free_after = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const Node* node = snap.Find(names[i]);
    if (node == nullptr) continue;
    NodeDecision d = DecideNode(node, names[i], req, policy, now_ms);
    if (d.verdict != Verdict::kFits) continue;
    Cand& c = cands[i];
    c.fits = true;
    std::vector<Vectors> vec = GpuVectors(*node, now_ms, policy.usage_max_age_ms);
    for (const Vectors& v : vec) c.free += std::max<int64_t>(0, FreeBytes(v));
    c.saturation = ComputeMetrics(SumVectors(vec)).saturation;
    c.warm = policy.score == ScorePolicy::kHeadroom && IsWarm(*node, req.model);
    if (!c.warm) max_cold_free = std::max(max_cold_free, c.free);
    max_free_after = std::max(max_free_after, c.free - req.total);
  }
  std::vector<HostScore> out;
  out.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const Cand& c = cands[i];
    int score = 0;
    if (c.fits) {
      if (policy.score == ScorePolicy::kBinpack) {
        double frac = max_free_after > 0 ? static_cast<double>(c.free - req.total) / max_free_after : 0;
        score = 10 - static_cast<int>(std::lround(10 * std::clamp(frac, 0.0, 1.0)));
      } else if (c.warm) {
        double sat = std::isfinite(c.saturation) ? std::clamp(c.saturation, 0.0, 1.0) : 1.0;
        score = 6 + static_cast<int>(std::lround(4 * (1 - sat)));
      } else {
        double frac = max_cold_free > 0 ? static_cast<double>(c.free) / max_cold_free : 0;
        score = static_cast<int>(std::lround(5 * std::clamp(frac, 0.0, 1.0)));
      }
    }
    out.push_back({names[i], score});
  }
  return out;
}

}  // namespace vramd::ledger
