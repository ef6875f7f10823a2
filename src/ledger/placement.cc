#include "vramd/ledger/placement.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

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

// Filter and Prioritize run over thousands of nodes per call, so the per-node
// work allocates nothing unless it must: the GPU vectors live in a buffer on
// the stack (nodes with up to kInlineGpus GPUs), the pod-level part of a
// reason is formatted once per call, and only a node that does not fit pays
// for its reason string. The results are the same as computing each node
// with GpuVectors and plain string concatenation (docs/performance.md).
namespace {

constexpr size_t kInlineGpus = 16;

// A node's per-GPU vectors: on the stack for up to kInlineGpus GPUs.
class NodeVectors {
 public:
  NodeVectors(const Node& node, int64_t now_ms, int64_t usage_max_age_ms) {
    const size_t n = node.gpus.size();
    if (n > kInlineGpus) {
      heap_.resize(n);
      v_ = heap_.data();
    } else {
      v_ = inline_;
    }
    size_ = n;
    // Same sums as AllocatedPerGpu: an entry's GPU index is looked up among
    // node.gpus (sorted by index); unknown indices count nowhere. Indices
    // are almost always 0..n-1, where the position is the index itself.
    bool dense = true;
    for (size_t i = 0; i < n; ++i) {
      v_[i] = Vectors{node.gpus[i].capacity, 0, 0};
      dense = dense && node.gpus[i].index == static_cast<int>(i);
    }
    for (const Entry& e : node.entries) {
      for (int g : e.gpus) {
        if (dense) {
          if (g >= 0 && static_cast<size_t>(g) < n) v_[g].allocated += e.per_gpu;
          continue;
        }
        auto it = std::lower_bound(node.gpus.begin(), node.gpus.end(), g,
                                   [](const Gpu& gpu, int idx) { return gpu.index < idx; });
        if (it != node.gpus.end() && it->index == g) v_[it - node.gpus.begin()].allocated += e.per_gpu;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const Gpu& g = node.gpus[i];
      bool fresh = g.used_ts_ms > 0 && now_ms - g.used_ts_ms <= usage_max_age_ms;
      v_[i].used = fresh ? g.used : v_[i].allocated;
    }
  }
  NodeVectors(const NodeVectors&) = delete;
  NodeVectors& operator=(const NodeVectors&) = delete;

  size_t size() const { return size_; }
  const Vectors& operator[](size_t i) const { return v_[i]; }
  Vectors Sum() const {
    Vectors sum;
    for (size_t i = 0; i < size_; ++i) {
      sum.capacity += v_[i].capacity;
      sum.allocated += v_[i].allocated;
      sum.used += v_[i].used;
    }
    return sum;
  }

 private:
  Vectors inline_[kInlineGpus];
  std::vector<Vectors> heap_;
  Vectors* v_ = nullptr;
  size_t size_ = 0;
};

void AppendGpuWord(int n, std::string* out) {
  if (n == 1) {
    *out += "1 GPU";
    return;
  }
  *out += std::to_string(n);
  *out += " GPUs";
}

std::string Needs(const VramRequest& req) {
  std::string s = "needs " + FormatBytes(req.per_gpu);
  if (req.gpu_count == 1) return s + " on 1 GPU";
  return s + " on each of " + std::to_string(req.gpu_count) + " GPUs";
}

void AppendDescribe(const Gpu& g, const Vectors& v, std::string* out) {
  *out += "GPU ";
  *out += std::to_string(g.index);
  *out += " (capacity ";
  *out += FormatBytes(v.capacity);
  *out += ", allocated ";
  *out += FormatBytes(v.allocated);
  if (v.used > v.allocated) {
    *out += ", used ";
    *out += FormatBytes(v.used);
  }
  *out += ')';
}

bool IsWarm(const Node& node, const std::string& model) {
  if (model.empty()) return false;
  if (node.models.count(model)) return true;
  return std::any_of(node.entries.begin(), node.entries.end(),
                     [&](const Entry& e) { return e.model == model; });
}

constexpr const char* kUnknownNodeReason =
    // Reasons carry no node name so kube-scheduler groups identical ones
    // ("0/N nodes are available: 12 no GPU capacity known to vramd ...").
    "no GPU capacity known to vramd (no config entry, vramd.io/capacity annotation "
    "or GPU Feature Discovery labels)";

// What one call knows about the pod, computed once for all its nodes.
struct PodContext {
  const VramRequest& req;
  const Policy& policy;
  int64_t now_ms;
  std::string needs;  // Needs(req), the start of every capacity reason
};

// Decides one node. Fills d->choice only when `choose` (Filter and
// Prioritize need the verdict, bind needs the GPUs). `vec` must be the
// node's vectors.
void Decide(const Node& node, const NodeVectors& vec, const PodContext& pc, bool choose, NodeDecision* d) {
  const VramRequest& req = pc.req;
  const int want = req.gpu_count;
  if (node.gpus.empty()) {
    d->verdict = Verdict::kUnresolvable;
    d->reason = "node has no GPUs";
    return;
  }
  if (static_cast<size_t>(want) > node.gpus.size()) {
    d->verdict = Verdict::kUnresolvable;
    d->reason.reserve(pc.needs.size() + 32);
    d->reason = pc.needs;
    d->reason += "; node has only ";
    AppendGpuWord(static_cast<int>(node.gpus.size()), &d->reason);
    return;
  }

  const size_t n = vec.size();
  int big_enough = 0;
  size_t largest_cap = 0;
  int room = 0;
  size_t largest_free = 0;
  for (size_t i = 0; i < n; ++i) {
    if (vec[i].capacity >= req.per_gpu) ++big_enough;
    if (vec[i].capacity > vec[largest_cap].capacity) largest_cap = i;
    if (FreeBytes(vec[i]) >= req.per_gpu) ++room;
    if (FreeBytes(vec[i]) > FreeBytes(vec[largest_free])) largest_free = i;
  }
  if (big_enough < want) {
    d->verdict = Verdict::kUnresolvable;
    std::string& r = d->reason;
    r.reserve(pc.needs.size() + 80);
    r = pc.needs;
    r += "; largest GPU capacity is ";
    r += FormatBytes(vec[largest_cap].capacity);
    r += " (GPU ";
    r += std::to_string(node.gpus[largest_cap].index);
    r += ')';
    if (want > 1) {
      r += ", ";
      AppendGpuWord(big_enough, &r);
      r += " large enough";
    }
    return;
  }
  if (room < want) {
    d->verdict = Verdict::kNoRoomNow;
    std::string& r = d->reason;
    r.reserve(pc.needs.size() + 112);
    r = pc.needs;
    r += "; ";
    if (want > 1) {
      AppendGpuWord(room, &r);
      r += " with that free; ";
    }
    r += "largest free is ";
    r += FormatBytes(std::max<int64_t>(0, FreeBytes(vec[largest_free])));
    r += " on ";
    AppendDescribe(node.gpus[largest_free], vec[largest_free], &r);
    return;
  }
  d->verdict = Verdict::kFits;
  if (!choose) return;

  // Headroom policy spreads onto the GPUs with the most free memory; binpack
  // fills the tightest GPUs first. Ties go to the lower index (a stable
  // insertion sort of the candidates, which are few).
  size_t inline_order[kInlineGpus];
  std::vector<size_t> heap_order;
  size_t* order = inline_order;
  if (n > kInlineGpus) {
    heap_order.resize(n);
    order = heap_order.data();
  }
  size_t m = 0;
  const bool binpack = pc.policy.score == ScorePolicy::kBinpack;
  for (size_t i = 0; i < n; ++i) {
    const int64_t f = FreeBytes(vec[i]);
    if (f < req.per_gpu) continue;
    size_t j = m++;
    while (j > 0) {
      const int64_t fp = FreeBytes(vec[order[j - 1]]);
      if (binpack ? !(f < fp) : !(f > fp)) break;
      order[j] = order[j - 1];
      --j;
    }
    order[j] = i;
  }
  d->choice.per_gpu = req.per_gpu;
  d->choice.gpus.reserve(static_cast<size_t>(want));
  for (int k = 0; k < want; ++k) d->choice.gpus.push_back(node.gpus[order[k]].index);
  std::sort(d->choice.gpus.begin(), d->choice.gpus.end());
}

// Names already evaluated by one Filter call: open addressing over the
// caller's views, one allocation per call.
class NameSet {
 public:
  explicit NameSet(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, nullptr);
    mask_ = cap - 1;
  }
  // False when `name` was inserted before.
  bool Insert(const std::string_view* name) {
    size_t i = std::hash<std::string_view>{}(*name) & mask_;
    while (slots_[i] != nullptr) {
      if (*slots_[i] == *name) return false;
      i = (i + 1) & mask_;
    }
    slots_[i] = name;
    return true;
  }

 private:
  std::vector<const std::string_view*> slots_;
  size_t mask_ = 0;
};

// snap.Find without a key allocation per call for names longer than the
// small-string buffer: the key string is reused across the nodes of a call.
const Node* FindNode(const Snapshot& snap, std::string_view name, std::string* key) {
  key->assign(name);
  auto it = snap.nodes.find(*key);
  return it == snap.nodes.end() ? nullptr : &it->second;
}

}  // namespace

NodeDecision DecideNode(const Node* node, std::string_view node_name, const VramRequest& req,
                        const Policy& policy, int64_t now_ms) {
  NodeDecision d;
  if (node == nullptr) {
    d.verdict = Verdict::kUnresolvable;
    d.reason = kUnknownNodeReason;
    return d;
  }
  PodContext pc{req, policy, now_ms, Needs(req)};
  NodeVectors vec(*node, now_ms, policy.usage_max_age_ms);
  Decide(*node, vec, pc, /*choose=*/true, &d);
  return d;
}

FilterResult Filter(const Snapshot& snap, const std::vector<std::string_view>& names,
                    const VramRequest& req, const Policy& policy, int64_t now_ms) {
  FilterResult out;
  out.fits.reserve(names.size());
  const PodContext pc{req, policy, now_ms, Needs(req)};
  NameSet seen(names.size());
  std::string key;
  for (const std::string_view& name : names) {
    if (!seen.Insert(&name)) continue;
    const Node* node = FindNode(snap, name, &key);
    if (node == nullptr) {
      out.unresolvable.emplace_back(name, kUnknownNodeReason);
      continue;
    }
    NodeVectors vec(*node, now_ms, policy.usage_max_age_ms);
    NodeDecision d;
    Decide(*node, vec, pc, /*choose=*/false, &d);
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
  const PodContext pc{req, policy, now_ms, Needs(req)};
  std::string key;
  for (size_t i = 0; i < names.size(); ++i) {
    const Node* node = FindNode(snap, names[i], &key);
    if (node == nullptr) continue;
    NodeVectors vec(*node, now_ms, policy.usage_max_age_ms);
    NodeDecision d;
    Decide(*node, vec, pc, /*choose=*/false, &d);
    if (d.verdict != Verdict::kFits) continue;
    Cand& c = cands[i];
    c.fits = true;
    for (size_t g = 0; g < vec.size(); ++g) c.free += std::max<int64_t>(0, FreeBytes(vec[g]));
    c.saturation = ComputeMetrics(vec.Sum()).saturation;
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
