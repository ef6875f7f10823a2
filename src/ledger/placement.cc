#include "vramd/ledger/placement.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <span>

#include "vramd/ledger/metrics.h"

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

// The compact copy of a snapshot that Filter and Prioritize read (built by
// IndexSnapshot). Per node: its GPUs' capacity and allocation side by side,
// usage only for nodes that reported any, the models that make it warm, and
// a flat open-addressing table from name to node.
struct PlacementIndex {
  static constexpr uint32_t kNone = UINT32_MAX;
  struct NodeRec {
    const Node* node = nullptr;
    uint32_t name_off = 0, name_len = 0;  // in `names`
    uint32_t gpu_begin = 0, gpu_count = 0;  // in `gpus` and `gpu_index`
    uint32_t usage_begin = kNone;  // in `usage` (gpu_count records); kNone: no report on any GPU
    uint32_t models_begin = 0, models_count = 0;  // in `models`
    // Without usage reports a node's vectors do not depend on the time, so
    // whether a one-GPU pod fits is known in advance from what its GPUs
    // offer (FitOneGpu; `settled` nodes only), and for one that does not
    // fit, its reason group (SettledMiss).
    bool settled = false;
    // Some entry adds burst (fit.h's AddsBurst): the GPUs' P and V are in
    // `peaks` at gpu_begin; else P = A, V = 0 on every GPU. (Flags in the
    // padding, so that a record stays within one cache line.)
    bool burst = false;
    // A node with usage reports and no burst: `offer` (and its sums) count
    // every reported GPU's usage, which is what the rule sees while the
    // oldest of those reports is fresh (NodeSums::usage_from). A one-GPU
    // demand's verdict then mostly follows from them (UsageOfferKnown).
    bool usage_offer = false;
    // With usage_offer: the offer's most free GPU has measured usage above
    // its allocation (GroupMiss's kNoRoomInUse).
    bool most_free_in_use = false;
    GpuOffer offer;
  };
  // Prioritize's inputs of a settled or usage_offer node (parallel to `nodes`).
  struct NodeSums {
    Vectors sum;           // of the GPUs' vectors (U = A, or with usage_offer the reported usage)
    int64_t free_sum = 0;  // sum over GPUs of max(0, free)
    int64_t usage_from = 0;  // with usage_offer: the oldest report time among the reported GPUs
    int64_t usage_to = 0;    // with usage_offer: the newest (it must not be too far ahead, UsageFresh)
    int64_t max_free_alloc = 0;  // with usage_offer: the most of C - A on one GPU (usage not counted)
  };
  struct GpuRec {
    int64_t capacity = 0;
    int64_t allocated = 0;
  };
  struct UsageRec {
    int64_t used = 0;
    int64_t used_ts_ms = 0;
  };
  struct Slot {
    uint64_t hash = 0;
    uint32_t node = 0;  // position in `nodes` + 1; 0 = empty
  };

  size_t node_count = 0;  // snap.nodes.size() when built
  std::vector<NodeRec> nodes;
  std::vector<NodeSums> sums;
  std::vector<GpuRec> gpus;
  std::vector<int> gpu_index;  // Gpu::index, parallel to `gpus`
  std::vector<UsageRec> usage;
  std::vector<GpuPeak> peaks;  // parallel to `gpus`; read only for nodes with `burst`
  std::vector<std::pair<uint32_t, uint32_t>> models;  // (offset, length) in `names`
  std::vector<Slot> slots;
  uint64_t mask = 0;
  std::string names;  // node names and model names
  size_t dead = 0;    // usage and model records left behind by ReindexSnapshot
  // Holds (EntryState::kHold, issue 32): holder pod UID -> node. Few; kept
  // so that a holder's filter finds its hold without reading every node.
  std::unordered_map<std::string, std::string> holds;

  std::string_view Str(uint32_t off, uint32_t len) const { return std::string_view(names).substr(off, len); }

  const NodeRec* Find(std::string_view name, uint64_t hash) const {
    for (uint64_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& s = slots[i];
      if (s.node == 0) return nullptr;
      if (s.hash == hash) {
        const NodeRec& r = nodes[s.node - 1];
        if (Str(r.name_off, r.name_len) == name) return &r;
      }
    }
  }
};

// Filter and Prioritize run over thousands of nodes per call, so the per-node
// work reads the snapshot's index when it has one (a few contiguous arrays
// instead of a hash-node, GPU vector and entry vectors per node) and
// allocates nothing unless it must: the GPU vectors live in a buffer on the
// stack (nodes with up to kInlineGpus GPUs), the pod-level part of a reason
// is formatted once per call, and only a node that does not fit pays for its
// reason string. The results are the same as computing each node with
// GpuVectors and plain string concatenation (docs/performance.md).
namespace {

constexpr size_t kInlineGpus = 16;

// A node's per-GPU vectors: on the stack for up to kInlineGpus GPUs.
class NodeVectors {
 public:
  // From the node itself (fit.h's GpuVectors, and GpuPeaks when an entry
  // adds burst, without allocating).
  NodeVectors(const Node& node, int64_t now_ms, const FitPolicy& fit) {
    const size_t n = Init(node.gpus.size());
    // Same sums as AllocatedPerGpu: an entry's GPU index is looked up among
    // node.gpus (sorted by index); unknown indices count nowhere. Indices
    // are almost always 0..n-1, where the position is the index itself.
    bool dense = true;
    for (size_t i = 0; i < n; ++i) {
      v_[i] = Vectors{node.gpus[i].capacity, 0, 0};
      dense = dense && node.gpus[i].index == static_cast<int>(i);
    }
    bool burst = false;
    for (const Entry& e : node.entries) {
      burst = burst || AddsBurst(e);
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
    has_peaks_ = burst;
    if (burst) {  // rare: a second pass for P and V (fit.h's GpuPeaks)
      for (size_t i = 0; i < n; ++i) p_[i] = GpuPeak{};
      for (const Entry& e : node.entries) {
        for (int g : e.gpus) {
          auto it = std::lower_bound(node.gpus.begin(), node.gpus.end(), g,
                                     [](const Gpu& gpu, int idx) { return gpu.index < idx; });
          if (it != node.gpus.end() && it->index == g) AddToPeak(&p_[it - node.gpus.begin()], e);
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const Gpu& g = node.gpus[i];
      v_[i] = GpuVectorsOf(v_[i].capacity, v_[i].allocated, g.used, g.used_ts_ms, now_ms, fit);
    }
  }

  // From a snapshot index (see PlacementIndex below).
  NodeVectors(const PlacementIndex& ix, const PlacementIndex::NodeRec& rec, int64_t now_ms, const FitPolicy& fit);

  NodeVectors(const NodeVectors&) = delete;
  NodeVectors& operator=(const NodeVectors&) = delete;

  size_t size() const { return size_; }
  const Vectors& operator[](size_t i) const { return v_[i]; }
  std::span<const Vectors> span() const { return {v_, size_}; }
  // The GPUs' P and V (fit.h) when an entry adds burst; empty without (P =
  // A, V = 0: FitNodeWithPeak's empty span).
  bool has_peaks() const { return has_peaks_; }
  std::span<const GpuPeak> peaks() const { return {p_, has_peaks_ ? size_ : 0}; }
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
  size_t Init(size_t n) {
    if (n > kInlineGpus) {
      heap_.resize(n);
      heap_peaks_.resize(n);
      v_ = heap_.data();
      p_ = heap_peaks_.data();
    } else {
      v_ = inline_.v;
      p_ = inline_peaks_.p;
    }
    size_ = n;
    return n;
  }

  // Left uninitialised (every used element is written before it is read):
  // zeroing the whole buffer for each node cost as much as filling it.
  union InlineBuffer {
    InlineBuffer() {}
    Vectors v[kInlineGpus];
  } inline_;
  union InlinePeaks {
    InlinePeaks() {}
    GpuPeak p[kInlineGpus];
  } inline_peaks_;  // written only when has_peaks_
  std::vector<Vectors> heap_;
  std::vector<GpuPeak> heap_peaks_;
  Vectors* v_ = nullptr;
  GpuPeak* p_ = nullptr;
  size_t size_ = 0;
  bool has_peaks_ = false;
};

// Filter reads one record per candidate node: keep it within a cache line.
static_assert(sizeof(PlacementIndex::NodeRec) <= 64);

NodeVectors::NodeVectors(const PlacementIndex& ix, const PlacementIndex::NodeRec& rec, int64_t now_ms,
                         const FitPolicy& fit) {
  const size_t n = Init(rec.gpu_count);
  const PlacementIndex::GpuRec* g = ix.gpus.data() + rec.gpu_begin;
  for (size_t i = 0; i < n; ++i) v_[i] = Vectors{g[i].capacity, g[i].allocated, g[i].allocated};
  if (rec.burst) {
    std::copy_n(ix.peaks.data() + rec.gpu_begin, n, p_);
    has_peaks_ = true;
  }
  if (rec.usage_begin != PlacementIndex::kNone) {
    const PlacementIndex::UsageRec* u = ix.usage.data() + rec.usage_begin;
    for (size_t i = 0; i < n; ++i) {
      if (UsageCounts(u[i].used_ts_ms, now_ms, fit)) v_[i].used = u[i].used;
    }
  }
}

// Gpu::index of a node's i-th GPU, from the node or from the index.
struct GpuIndices {
  const Gpu* gpus = nullptr;
  const int* index = nullptr;
  int operator()(size_t i) const { return gpus != nullptr ? gpus[i].index : index[i]; }
};

bool IsWarm(const Node& node, const std::string& model) {
  if (model.empty()) return false;
  if (node.models.count(model)) return true;
  return std::any_of(node.entries.begin(), node.entries.end(),
                     [&](const Entry& e) { return e.model == model; });
}

// IsWarm over the index: the node's models and its entries' models.
bool IsWarm(const PlacementIndex& ix, const PlacementIndex::NodeRec& rec, const std::string& model) {
  if (model.empty()) return false;
  for (uint32_t k = 0; k < rec.models_count; ++k) {
    const auto& [off, len] = ix.models[rec.models_begin + k];
    if (ix.Str(off, len) == model) return true;
  }
  return false;
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
  std::string needs;  // NeedsText of the request, the start of every capacity reason
  bool reasons = true;  // false: the verdict is enough (Filter groups, Prioritize)
  std::deque<std::string>* store = nullptr;  // where reasons are kept (required when `reasons`)

  // The reason `tail` writes after the pod's "needs ..." text, kept in `store`.
  template <typename Tail>
  std::string_view Reason(size_t size_hint, Tail&& tail) const {
    std::string r;
    r.reserve(needs.size() + size_hint);
    r = needs;
    tail(r);
    return store->emplace_back(std::move(r));
  }
};

// Decides one node from its vectors. Fills d->choice only when `choose`
// (Filter and Prioritize need the verdict, bind needs the GPUs). A node that
// does not fit gets its reason in *why (a view into pc.store or static
// text) when pc.reasons, and its group in *grouped when that is not null
// (Filter); d->reason is left alone.
void Decide(const NodeVectors& vec, GpuIndices gpu_index, const PodContext& pc, bool choose, NodeDecision* d,
            std::string_view* why, GroupedMiss* grouped = nullptr) {
  const VramRequest& req = pc.req;
  const int want = req.gpu_count;
  const size_t n = vec.size();
  // The peak rule only where it can bind (fit.h): a node with burst or a
  // demand that bursts; elsewhere it follows from the fit rule.
  const bool peak_rule = vec.has_peaks() || Bursts(req.per_gpu, req.peak_per_gpu);
  const PeakDemand pd = PeakDemandOf(req.per_gpu, req.peak_per_gpu, req.victim, pc.policy.max_peak_ratio);
  const NodeFit fit = peak_rule ? FitNodeWithPeak(vec.span(), vec.peaks(), req.per_gpu, want, pd)
                                : FitNode(vec.span(), req.per_gpu, want);
  d->verdict = fit.verdict();
  if (grouped != nullptr && fit.miss != FitMiss::kNone) {
    *grouped = GroupMiss(fit, want, n, pd.ratio, fit.miss == FitMiss::kNoRoom ? vec[fit.offer.most_free] : Vectors{});
  }
  switch (fit.miss) {
    case FitMiss::kNone:
      break;
    case FitMiss::kNoGpus:
      *why = kNoGpusReason;
      return;
    case FitMiss::kTooFewGpus:
      if (!pc.reasons) return;
      *why = pc.Reason(32, [&](std::string& r) { AppendMissReason(fit, want, n, 0, Vectors{}, &r); });
      return;
    case FitMiss::kTooSmall: {
      if (!pc.reasons) return;
      const int gpu = gpu_index(fit.offer.largest);
      *why = pc.Reason(80, [&](std::string& r) {
        AppendMissReason(fit, want, n, gpu, vec[fit.offer.largest], &r);
      });
      return;
    }
    case FitMiss::kNoRoom: {
      if (!pc.reasons) return;
      const int gpu = gpu_index(fit.offer.most_free);
      const Vectors& lf = vec[fit.offer.most_free];
      *why = pc.Reason(112, [&](std::string& r) { AppendMissReason(fit, want, n, gpu, lf, &r); });
      return;
    }
    case FitMiss::kAboveCeiling: {
      if (!pc.reasons) return;
      const int gpu = gpu_index(fit.offer.largest);
      *why = pc.Reason(96, [&](std::string& r) {
        AppendPeakMissReason(fit, want, gpu, vec[fit.offer.largest], GpuPeak{}, pd.ratio, &r);
      });
      return;
    }
    case FitMiss::kPeakShort: {
      if (!pc.reasons) return;
      const int gpu = gpu_index(fit.peak_short);
      const Vectors& v = vec[fit.peak_short];
      GpuPeak after = vec.has_peaks() ? vec.peaks()[fit.peak_short] : GpuPeak{v.allocated, 0};
      after.peak += pd.peak;
      after.victim += pd.cover;
      *why = pc.Reason(128, [&](std::string& r) {
        AppendPeakMissReason(fit, want, gpu, v, after, pd.ratio, &r);
      });
      return;
    }
  }
  if (!choose) return;

  // fit.h's GPU order: headroom spreads onto the GPUs with the most free
  // memory, binpack fills the tightest first; ties go to the lower index.
  size_t inline_order[kInlineGpus];
  std::vector<size_t> heap_order;
  size_t* order = inline_order;
  if (n > kInlineGpus) {
    heap_order.resize(n);
    order = heap_order.data();
  }
  const GpuOrder gpu_order = pc.policy.score == ScorePolicy::kBinpack ? GpuOrder::kTightest : GpuOrder::kMostFree;
  if (peak_rule) {
    std::vector<GpuPeak> implicit;  // P = A, V = 0 (a node without burst)
    if (!vec.has_peaks()) {
      for (size_t i = 0; i < n; ++i) implicit.push_back(GpuPeak{vec[i].allocated, 0});
    }
    RankGpus(vec.span(), vec.has_peaks() ? vec.peaks() : std::span<const GpuPeak>(implicit), req.per_gpu, pd,
             gpu_order, order);
  } else {
    RankGpus(vec.span(), req.per_gpu, gpu_order, order);
  }
  d->choice.per_gpu = req.per_gpu;
  d->choice.gpus.reserve(static_cast<size_t>(want));
  for (int k = 0; k < want; ++k) d->choice.gpus.push_back(gpu_index(order[k]));
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
  // False when `name` (whose std::hash is `hash`) was inserted before.
  bool Insert(const std::string_view* name, uint64_t hash) {
    size_t i = hash & mask_;
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

// The index when it is usable (built for this snapshot's node set).
const PlacementIndex* IndexOf(const Snapshot& snap) {
  const PlacementIndex* ix = snap.index.get();
  return ix != nullptr && ix->node_count == snap.nodes.size() ? ix : nullptr;
}

// A name's hash for the index and the name sets: 8 bytes at a time (the
// last word read as the name's final 8 bytes, overlapping), then murmur3's
// 64-bit finalizer so that the low bits the tables use depend on every byte.
// About twice as fast as std::hash for node names, which is per name of every
// filter and prioritize call (docs/performance.md, issue 17).
uint64_t HashName(std::string_view name) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  const size_t n = name.size();
  uint64_t h = (n + 1) * kMul;
  uint64_t w = 0;
  if (n < 8) {
    if (n > 0) std::memcpy(&w, name.data(), n);
    h = (h ^ w) * kMul;
  } else {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      std::memcpy(&w, name.data() + i, 8);
      h = (h ^ w) * kMul;
      h ^= h >> 29;
    }
    if (n % 8 != 0) {
      std::memcpy(&w, name.data() + n - 8, 8);
      h = (h ^ w) * kMul;
    }
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

namespace {

// The offer of a node's GPUs and Prioritize's sums of them.
void SumOffer(const NodeVectors& vec, PlacementIndex::NodeRec* rec, PlacementIndex::NodeSums* sums) {
  rec->offer = FirstOffer(vec[0]);
  for (uint32_t i = 0; i < vec.size(); ++i) {
    AddToOffer(&rec->offer, i, vec[i]);
    sums->free_sum += std::max<int64_t>(0, FreeBytes(vec[i]));
  }
  sums->sum = vec.Sum();
}

// Fills a node's GPU records (at rec->gpu_begin when `in_place`: same GPU
// count as before; else appended), its usage records (overwritten when it
// had them, else appended) and the settled verdict and sums.
void IndexGpus(PlacementIndex* ix, const Node& node, PlacementIndex::NodeRec* rec, PlacementIndex::NodeSums* sums,
               bool in_place) {
  const uint32_t n = static_cast<uint32_t>(node.gpus.size());
  if (!in_place) {
    rec->gpu_begin = static_cast<uint32_t>(ix->gpus.size());
    rec->gpu_count = n;
    ix->gpus.resize(ix->gpus.size() + n);
    ix->gpu_index.resize(ix->gpu_index.size() + n);
    ix->peaks.resize(ix->peaks.size() + n);
  }
  // Allocation sums exactly as the node path computes them (usage aside).
  NodeVectors vec(node, /*now_ms=*/0, FitPolicy{/*count_usage=*/false, 0});
  bool reported = false;
  for (uint32_t i = 0; i < n; ++i) {
    ix->gpus[rec->gpu_begin + i] = {vec[i].capacity, vec[i].allocated};
    ix->gpu_index[rec->gpu_begin + i] = node.gpus[i].index;
    reported = reported || node.gpus[i].used_ts_ms > 0;
  }
  *sums = PlacementIndex::NodeSums{};
  rec->settled = false;
  rec->usage_offer = false;
  rec->most_free_in_use = false;
  rec->offer = GpuOffer{};
  rec->burst = vec.has_peaks();
  if (rec->burst) std::copy_n(vec.peaks().data(), n, ix->peaks.data() + rec->gpu_begin);
  const bool had_usage = in_place && rec->usage_begin != PlacementIndex::kNone;
  if (reported) {  // a GPU without a report (ts 0) is never fresh: U = A
    if (!had_usage) {
      rec->usage_begin = static_cast<uint32_t>(ix->usage.size());
      ix->usage.resize(ix->usage.size() + n);
    }
    for (uint32_t i = 0; i < n; ++i) ix->usage[rec->usage_begin + i] = {node.gpus[i].used, node.gpus[i].used_ts_ms};
    if (n == 0 || vec.has_peaks()) return;
    // Every reported GPU's usage counted: at the newest report's time, with
    // no age limit, each report with a time above 0 is fresh.
    int64_t oldest = INT64_MAX, newest = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (node.gpus[i].used_ts_ms > 0) {
        oldest = std::min(oldest, node.gpus[i].used_ts_ms);
        newest = std::max(newest, node.gpus[i].used_ts_ms);
      }
    }
    const NodeVectors counted(node, newest, FitPolicy{/*count_usage=*/true, INT64_MAX / 2});
    rec->usage_offer = true;
    sums->usage_from = oldest;
    sums->usage_to = newest;
    SumOffer(counted, rec, sums);
    sums->max_free_alloc = FreeBytes(vec[0]);
    for (uint32_t i = 1; i < n; ++i) sums->max_free_alloc = std::max(sums->max_free_alloc, FreeBytes(vec[i]));
    const Vectors& most_free = counted[rec->offer.most_free];
    rec->most_free_in_use = most_free.used > most_free.allocated;
    return;
  }
  if (had_usage) ix->dead += n;
  rec->usage_begin = PlacementIndex::kNone;
  if (n == 0 || vec.has_peaks()) return;  // with burst the peak rule may bind: not settled
  rec->settled = true;
  SumOffer(vec, rec, sums);
}

// The node's warm models (from its models map and its entries), sorted and
// distinct; kept as they are when unchanged (`in_place`), else appended.
void IndexModels(PlacementIndex* ix, const Node& node, PlacementIndex::NodeRec* rec,
                 std::vector<std::string_view>* scratch, bool in_place) {
  std::vector<std::string_view>& node_models = *scratch;
  node_models.clear();
  for (const auto& [model, ms] : node.models) {
    if (!model.empty()) node_models.push_back(model);
  }
  for (const Entry& e : node.entries) {
    if (!e.model.empty()) node_models.push_back(e.model);
  }
  std::sort(node_models.begin(), node_models.end());
  node_models.erase(std::unique(node_models.begin(), node_models.end()), node_models.end());
  if (in_place) {
    bool same = node_models.size() == rec->models_count;
    for (uint32_t i = 0; same && i < rec->models_count; ++i) {
      const auto& [off, len] = ix->models[rec->models_begin + i];
      same = ix->Str(off, len) == node_models[i];
    }
    if (same) return;
    ix->dead += rec->models_count;
  }
  rec->models_begin = static_cast<uint32_t>(ix->models.size());
  rec->models_count = static_cast<uint32_t>(node_models.size());
  for (std::string_view m : node_models) {
    ix->models.emplace_back(static_cast<uint32_t>(ix->names.size()), static_cast<uint32_t>(m.size()));
    ix->names += m;
  }
}

}  // namespace

void IndexHolds(PlacementIndex* ix, const std::string& name, const Node& node) {
  for (const Entry& e : node.entries) {
    if (e.state == EntryState::kHold) ix->holds[e.pod_uid] = name;
  }
}

void IndexSnapshot(Snapshot* snap) {
  auto ix = std::make_shared<PlacementIndex>();
  const size_t n = snap->nodes.size();
  ix->node_count = n;
  ix->nodes.reserve(n);
  ix->sums.reserve(n);
  size_t total_gpus = 0;
  for (const auto& [name, node] : snap->nodes) total_gpus += node.gpus.size();
  ix->gpus.reserve(total_gpus);
  ix->gpu_index.reserve(total_gpus);
  ix->peaks.reserve(total_gpus);
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  ix->slots.assign(cap, PlacementIndex::Slot{});
  ix->mask = cap - 1;
  std::vector<std::string_view> scratch;
  for (const auto& [name, node] : snap->nodes) {
    PlacementIndex::NodeRec rec;
    rec.node = &node;
    rec.name_off = static_cast<uint32_t>(ix->names.size());
    rec.name_len = static_cast<uint32_t>(name.size());
    ix->names += name;
    PlacementIndex::NodeSums sums;
    IndexGpus(ix.get(), node, &rec, &sums, /*in_place=*/false);
    IndexModels(ix.get(), node, &rec, &scratch, /*in_place=*/false);
    const uint64_t h = HashName(name);
    uint64_t i = h & ix->mask;
    while (ix->slots[i].node != 0) i = (i + 1) & ix->mask;
    ix->nodes.push_back(rec);
    ix->sums.push_back(sums);
    ix->slots[i] = {h, static_cast<uint32_t>(ix->nodes.size())};
    IndexHolds(ix.get(), name, node);
  }
  snap->index = std::move(ix);
}

bool ReindexSnapshot(Snapshot* snap, std::shared_ptr<const PlacementIndex> old,
                     const std::vector<std::string>& changed, bool nodes_moved) {
  // Incremental only while the node set is the one indexed and each changed
  // node keeps its GPU count; records left behind are bounded by a rebuild.
  if (old == nullptr || old->node_count != snap->nodes.size() || old->dead > old->nodes.size() + 1024) {
    IndexSnapshot(snap);
    return false;
  }
  for (const std::string& name : changed) {
    auto it = snap->nodes.find(name);
    const PlacementIndex::NodeRec* rec = old->Find(name, HashName(name));
    if (it == snap->nodes.end() || rec == nullptr || rec->gpu_count != it->second.gpus.size()) {
      IndexSnapshot(snap);
      return false;
    }
  }
  // The old index itself when nothing else holds it (the snapshot it
  // belonged to is the one being changed, taken whole by its writer): new
  // references to it come only from copying `old`, so a count of 1 stays 1,
  // and the fence pairs with the last other holder's release. Else a copy.
  std::shared_ptr<PlacementIndex> ix;
  if (old.use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);
    ix = std::const_pointer_cast<PlacementIndex>(std::move(old));  // made non-const by IndexSnapshot
  } else {
    ix = std::make_shared<PlacementIndex>(*old);
  }
  if (nodes_moved) {  // a copy of the snapshot: its nodes live elsewhere
    std::string key;
    for (PlacementIndex::NodeRec& rec : ix->nodes) {
      key.assign(ix->Str(rec.name_off, rec.name_len));
      auto it = snap->nodes.find(key);
      if (it == snap->nodes.end()) {  // another node set after all
        IndexSnapshot(snap);
        return false;
      }
      rec.node = &it->second;
    }
  }
  std::vector<std::string_view> scratch;
  for (const std::string& name : changed) {
    const Node& node = snap->nodes.find(name)->second;
    const size_t pos = static_cast<size_t>(ix->Find(name, HashName(name)) - ix->nodes.data());
    PlacementIndex::NodeRec& rec = ix->nodes[pos];
    rec.node = &node;
    IndexGpus(ix.get(), node, &rec, &ix->sums[pos], /*in_place=*/true);
    IndexModels(ix.get(), node, &rec, &scratch, /*in_place=*/true);
    std::erase_if(ix->holds, [&](const auto& h) { return h.second == name; });
    IndexHolds(ix.get(), name, node);
  }
  snap->index = std::move(ix);
  return true;
}

NodeDecision DecideNode(const Node* node, std::string_view node_name, const VramRequest& req,
                        const Policy& policy, int64_t now_ms) {
  NodeDecision d;
  if (node == nullptr) {
    d.verdict = Verdict::kUnresolvable;
    d.reason = kUnknownNodeReason;
    return d;
  }
  std::deque<std::string> store;
  PodContext pc{req, policy, now_ms, NeedsText(req.per_gpu, req.gpu_count, req.peak_per_gpu), /*reasons=*/true,
                &store};
  NodeVectors vec(*node, now_ms, policy.fit());
  std::string_view why;
  Decide(vec, GpuIndices{node->gpus.data()}, pc, /*choose=*/true, &d, &why, &d.miss);
  if (d.verdict != Verdict::kFits) d.reason = why;
  return d;
}

namespace {

// Looks up the candidate names in the index a block at a time, with the
// block's memory accesses overlapped: hash every name and prefetch its slot,
// then read the slots and prefetch the node records, then prefetch each
// node's name and GPU records, and only then compare and hand them out. One
// lookup at a time would wait for each of those cache misses in turn; at
// thousands of nodes the index does not fit in L2 and that waiting was most
// of the time of a call.
class IndexLookup {
 public:
  // `settled_known`: SettledKnown holds for the call's request, so a
  // settled node is answered from its record (and Prioritize's sums) alone
  // and its GPU records are not prefetched; `sums`: prefetch those sums.
  IndexLookup(const PlacementIndex& ix, const std::vector<std::string_view>& names, bool settled_known, bool sums)
      : ix_(ix), names_(names), settled_known_(settled_known), sums_(sums) {}

  // The record of names[i] or null; i must not decrease between calls.
  const PlacementIndex::NodeRec* Get(size_t i) {
    if (i >= end_) Fill(i);
    return recs_[i - begin_];
  }

 private:
  static constexpr size_t kBlock = 16;

  void Fill(size_t begin) {
    begin_ = begin;
    end_ = std::min(begin + kBlock, names_.size());
    const size_t m = end_ - begin_;
    uint64_t hash[kBlock];
    uint32_t cand[kBlock];
    for (size_t k = 0; k < m; ++k) {
      hash[k] = HashName(names_[begin_ + k]);
      __builtin_prefetch(&ix_.slots[hash[k] & ix_.mask]);
    }
    for (size_t k = 0; k < m; ++k) {
      // The first slot with this hash (or the empty one ending the run).
      uint64_t i = hash[k] & ix_.mask;
      while (ix_.slots[i].node != 0 && ix_.slots[i].hash != hash[k]) i = (i + 1) & ix_.mask;
      cand[k] = ix_.slots[i].node;
      if (cand[k] != 0) __builtin_prefetch(&ix_.nodes[cand[k] - 1]);
    }
    for (size_t k = 0; k < m; ++k) {
      if (cand[k] == 0) continue;
      const PlacementIndex::NodeRec& r = ix_.nodes[cand[k] - 1];
      __builtin_prefetch(ix_.names.data() + r.name_off);
      if ((r.settled || r.usage_offer) && settled_known_) {
        if (sums_ || r.usage_offer) __builtin_prefetch(ix_.sums.data() + (cand[k] - 1));
        continue;
      }
      const char* g = reinterpret_cast<const char*>(ix_.gpus.data() + r.gpu_begin);
      const size_t bytes = r.gpu_count * sizeof(PlacementIndex::GpuRec);
      for (size_t off = 0; off < bytes && off < 4 * 64; off += 64) __builtin_prefetch(g + off);
      if (bytes > 0) __builtin_prefetch(g + bytes - 1);
    }
    for (size_t k = 0; k < m; ++k) {
      const std::string_view name = names_[begin_ + k];
      if (cand[k] == 0) {
        recs_[k] = nullptr;
        continue;
      }
      const PlacementIndex::NodeRec& r = ix_.nodes[cand[k] - 1];
      // Equal hashes of different names: the full probe decides.
      recs_[k] = ix_.Str(r.name_off, r.name_len) == name ? &r : ix_.Find(name, hash[k]);
    }
  }

  const PlacementIndex& ix_;
  const std::vector<std::string_view>& names_;
  const bool settled_known_, sums_;
  size_t begin_ = 0, end_ = 0;
  const PlacementIndex::NodeRec* recs_[kBlock];
};

// Whether Decide's answer for `req` on the settled node `rec` is known from
// what its GPUs offer: a one-GPU demand that is no designated victim. On a
// settled node (no usage reports, no burst) U = A, P = A and V = 0 on every
// GPU, so the demand (request r, peak p = max(r, peak_per_gpu)) fits a GPU
// exactly when p <= C - A (room, and P + p <= C): when p fits the offer's
// most free GPU (FitOneGpu with p; without burst p = r).
bool SettledKnownFor(const VramRequest& req) { return req.gpu_count == 1 && !req.victim; }
bool SettledKnown(const PlacementIndex::NodeRec& rec, const VramRequest& req) {
  return rec.settled && SettledKnownFor(req);
}

// The same for a usage_offer node, whose offer counts its reported usage:
// it holds while every report counts (the oldest and the newest are fresh
// under the policy: not too old, not too far ahead). Without burst (P = A, V = 0) a demand (r, peak p >= r) fits a GPU
// exactly when r <= C - max(A, U) and p <= C - A. C - max(A, U) <= C - A,
// so the offer answers every case but one: p fits the most free GPU under
// usage (and then both hold there), or r fits no GPU, or p fits none under
// A alone (the peak rule fails wherever r has room: kPeakShort). Left to
// the full rule: r has room somewhere, p does not under usage, and some GPU
// has C - A >= p.
bool UsageOfferKnown(const PlacementIndex& ix, const PlacementIndex::NodeRec& rec, const VramRequest& req,
                     const FitPolicy& fit, int64_t now_ms) {
  if (!rec.usage_offer || !SettledKnownFor(req)) return false;
  const PlacementIndex::NodeSums& sums = ix.sums[static_cast<size_t>(&rec - ix.nodes.data())];
  if (!UsageCounts(sums.usage_from, now_ms, fit) || !UsageCounts(sums.usage_to, now_ms, fit)) return false;
  const int64_t peak = std::max(req.per_gpu, req.peak_per_gpu);
  return peak == req.per_gpu || FitsIn(peak, rec.offer.max_free) || !FitsIn(req.per_gpu, rec.offer.max_free) ||
         !FitsIn(peak, sums.max_free_alloc);
}
bool OfferKnown(const PlacementIndex& ix, const PlacementIndex::NodeRec& rec, const VramRequest& req,
                const FitPolicy& fit, int64_t now_ms) {
  return SettledKnown(rec, req) || UsageOfferKnown(ix, rec, req, fit, now_ms);
}

// For SettledKnown when `peak` (max(r, peak_per_gpu)) does not fit the
// offer: the verdict Decide reaches and its group, in FitNodeWithPeak's
// order of misses (too small, peak above every ceiling, no room, the peak
// rule on every GPU with room).
Verdict SettledMiss(const PlacementIndex::NodeRec& rec, const VramRequest& req, int64_t peak, double ratio,
                    GroupedMiss* grouped) {
  const GpuOffer& o = rec.offer;
  if (!FitsIn(req.per_gpu, o.max_capacity)) {
    *grouped = {MissGroup::kTooSmall, o.max_capacity};
    return Verdict::kUnresolvable;
  }
  if (!FitsIn(peak, o.max_capacity) && !FitsIn(peak, PeakCeiling(o.max_capacity, ratio))) {  // grows with C
    *grouped = {MissGroup::kAboveCeiling, PeakCeiling(o.max_capacity, ratio)};
    return Verdict::kUnresolvable;
  }
  // Room for r on no GPU; else room for r somewhere and for p nowhere.
  *grouped = FitsIn(req.per_gpu, o.max_free)
                 ? GroupedMiss{MissGroup::kPeakShort, 0}
                 : GroupedMiss{rec.most_free_in_use ? MissGroup::kNoRoomInUse : MissGroup::kNoRoom,
                               std::max<int64_t>(0, o.max_free)};
  return Verdict::kNoRoomNow;
}

// Filter's grouped reasons: each node that misses is listed with an empty
// reason and its group; Finish writes one text per group (its best figure
// over the call) and points every listed node at it.
class ReasonGroups {
 public:
  void Add(std::string_view name, Verdict verdict, const GroupedMiss& m, FilterResult* out) {
    const auto g = static_cast<size_t>(m.group);
    if (!used_[g] || m.figure > best_[g]) best_[g] = m.figure;
    used_[g] = true;
    auto& list = verdict == Verdict::kNoRoomNow ? out->failed : out->unresolvable;
    (verdict == Verdict::kNoRoomNow ? failed_ : unresolvable_).push_back({list.size(), static_cast<uint8_t>(g)});
    list.emplace_back(name, std::string_view());
  }
  void Finish(const VramRequest& req, double ratio, FilterResult* out) {
    std::string_view text[kMissGroupCount];
    for (size_t g = 0; g < kMissGroupCount; ++g) {
      if (!used_[g]) continue;
      text[g] = out->reasons.emplace_back(GroupedReason(static_cast<MissGroup>(g), best_[g], req.per_gpu,
                                                        req.gpu_count, req.peak_per_gpu, ratio));
    }
    for (const Slot& s : failed_) out->failed[s.pos].second = text[s.group];
    for (const Slot& s : unresolvable_) out->unresolvable[s.pos].second = text[s.group];
  }

 private:
  struct Slot {
    size_t pos;     // in the result's list
    uint8_t group;  // MissGroup
  };
  bool used_[kMissGroupCount] = {};
  int64_t best_[kMissGroupCount] = {};
  std::vector<Slot> failed_, unresolvable_;
};

}  // namespace

namespace {

// Filter with every entry counted (holds included): ledger::Filter's rule.
FilterResult FilterCounted(const Snapshot& snap, const std::vector<std::string_view>& names,
                           const VramRequest& req, const Policy& policy, int64_t now_ms) {
  FilterResult out;
  out.fits.reserve(names.size());
  const PodContext pc{req, policy, now_ms, std::string(), /*reasons=*/false};
  const int64_t peak = std::max(req.per_gpu, req.peak_per_gpu);
  ReasonGroups groups;
  const PlacementIndex* ix = IndexOf(snap);
  if (ix == nullptr) {
    NameSet seen(names.size());
    std::string key;
    for (const std::string_view& name : names) {
      if (!seen.Insert(&name, HashName(name))) continue;
      const Node* node = FindNode(snap, name, &key);
      if (node == nullptr) {
        out.unresolvable.emplace_back(name, kUnknownNodeReason);
        continue;
      }
      NodeVectors vec(*node, now_ms, policy.fit());
      NodeDecision d;
      std::string_view unused;
      GroupedMiss miss;
      Decide(vec, GpuIndices{node->gpus.data()}, pc, /*choose=*/false, &d, &unused, &miss);
      if (d.verdict == Verdict::kFits) out.fits.push_back(name);
      else groups.Add(name, d.verdict, miss, &out);
    }
    groups.Finish(req, policy.max_peak_ratio, &out);
    return out;
  }
  // Duplicates: a known name is a node position (one bit each); unknown
  // names, rare, go to a name set made on first need.
  std::vector<uint64_t> seen_nodes((ix->nodes.size() + 63) / 64);
  std::unique_ptr<NameSet> seen_unknown;
  IndexLookup lookup(*ix, names, SettledKnownFor(req), /*sums=*/false);
  for (size_t i = 0; i < names.size(); ++i) {
    const PlacementIndex::NodeRec* rec = lookup.Get(i);
    if (rec == nullptr) {
      if (!seen_unknown) seen_unknown = std::make_unique<NameSet>(names.size());
      if (seen_unknown->Insert(&names[i], HashName(names[i]))) {
        out.unresolvable.emplace_back(names[i], kUnknownNodeReason);
      }
      continue;
    }
    const size_t pos = static_cast<size_t>(rec - ix->nodes.data());
    const uint64_t bit = uint64_t{1} << (pos & 63);
    if (seen_nodes[pos >> 6] & bit) continue;
    seen_nodes[pos >> 6] |= bit;
    GroupedMiss miss;
    if (OfferKnown(*ix, *rec, req, policy.fit(), now_ms)) {  // known from the node's offer
      if (FitOneGpu(rec->offer, peak) == Verdict::kFits) {
        out.fits.push_back(names[i]);
      } else {
        groups.Add(names[i], SettledMiss(*rec, req, peak, policy.max_peak_ratio, &miss), miss, &out);
      }
      continue;
    }
    NodeVectors vec(*ix, *rec, now_ms, policy.fit());
    NodeDecision d;
    std::string_view unused;
    Decide(vec, GpuIndices{nullptr, ix->gpu_index.data() + rec->gpu_begin}, pc, /*choose=*/false, &d, &unused,
           &miss);
    if (d.verdict == Verdict::kFits) out.fits.push_back(names[i]);
    else groups.Add(names[i], d.verdict, miss, &out);
  }
  groups.Finish(req, policy.max_peak_ratio, &out);
  return out;
}

}  // namespace

const Entry* FindHold(const Snapshot& snap, std::string_view uid, std::string_view* node_name) {
  if (uid.empty()) return nullptr;
  auto in_node = [&](const std::string& name, const Node& node) -> const Entry* {
    for (const Entry& e : node.entries) {
      if (e.state == EntryState::kHold && e.pod_uid == uid) {
        if (node_name != nullptr) *node_name = name;
        return &e;
      }
    }
    return nullptr;
  };
  if (const PlacementIndex* ix = IndexOf(snap)) {
    if (ix->holds.empty()) return nullptr;
    auto h = ix->holds.find(std::string(uid));
    if (h == ix->holds.end()) return nullptr;
    auto n = snap.nodes.find(h->second);
    return n == snap.nodes.end() ? nullptr : in_node(n->first, n->second);
  }
  for (const auto& [name, node] : snap.nodes) {
    if (const Entry* e = in_node(name, node)) return e;
  }
  return nullptr;
}

bool MayTakeHold(const Entry& hold, const VramRequest& req) {
  return hold.state == EntryState::kHold && ((!req.uid.empty() && hold.pod_uid == req.uid) ||
                                             hold.priority < req.priority);
}

namespace {

// A node of `names` with holds `req`'s pod may take (MayTakeHold): its
// decision with them not counted, and whether one of them is the pod's own.
struct HeldRoomDecision {
  std::string_view name;
  NodeDecision decision;
  bool own = false;
};

// The nodes of `names` with holds `req`'s pod may take. Holds are few: the
// snapshot's index lists them (none: nothing to do); without an index, a scan.
std::vector<HeldRoomDecision> DecideTakingHolds(const Snapshot& snap, const std::vector<std::string_view>& names,
                                                const VramRequest& req, const Policy& policy, int64_t now_ms) {
  std::vector<HeldRoomDecision> out;
  std::vector<std::string_view> nodes;  // with a hold the pod may take
  auto consider = [&](std::string_view node_name, const Node& node) {
    for (const Entry& e : node.entries) {
      if (MayTakeHold(e, req)) {
        if (std::find(nodes.begin(), nodes.end(), node_name) == nodes.end()) nodes.push_back(node_name);
        return;
      }
    }
  };
  if (const PlacementIndex* ix = IndexOf(snap)) {
    if (ix->holds.empty()) return out;
    for (const auto& [uid, node_name] : ix->holds) {
      if (auto n = snap.nodes.find(node_name); n != snap.nodes.end()) consider(n->first, n->second);
    }
  } else {
    for (const auto& [name, node] : snap.nodes) consider(name, node);
  }
  for (std::string_view held_on : nodes) {
    auto name = std::find(names.begin(), names.end(), held_on);
    if (name == names.end()) continue;
    Node without = *snap.Find(held_on);
    bool own = false;
    std::erase_if(without.entries, [&](const Entry& e) {
      if (!MayTakeHold(e, req)) return false;
      own = own || e.pod_uid == req.uid;
      return true;
    });
    out.push_back({*name, DecideNode(&without, held_on, req, policy, now_ms), own});
  }
  return out;
}

}  // namespace

FilterResult Filter(const Snapshot& snap, const std::vector<std::string_view>& names, const VramRequest& req,
                    const Policy& policy, int64_t now_ms) {
  FilterResult out = FilterCounted(snap, names, req, policy, now_ms);
  for (const HeldRoomDecision& held : DecideTakingHolds(snap, names, req, policy, now_ms)) {
    if (held.decision.verdict != Verdict::kFits) continue;
    // The node fits with the holds the pod may take not counted: it fits.
    auto drop = [&](auto* list) {
      std::erase_if(*list, [&](const auto& f) { return f.first == held.name; });
    };
    drop(&out.failed);
    drop(&out.unresolvable);
    if (std::find(out.fits.begin(), out.fits.end(), held.name) == out.fits.end()) out.fits.push_back(held.name);
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
  const PodContext pc{req, policy, now_ms, std::string(), /*reasons=*/false};
  const PlacementIndex* ix = IndexOf(snap);
  const bool headroom = policy.score == ScorePolicy::kHeadroom;
  std::string key;
  std::optional<IndexLookup> lookup;
  if (ix != nullptr) lookup.emplace(*ix, names, SettledKnownFor(req), /*sums=*/true);
  for (size_t i = 0; i < names.size(); ++i) {
    Cand& c = cands[i];
    // A node where the pod fits: its free bytes (sum over GPUs of the
    // positive free), the saturation of its summed vectors, warm or not.
    auto accept = [&](int64_t free, const Vectors& sum, auto&& warm) {
      c.fits = true;
      c.free = free;
      c.saturation = ComputeMetrics(sum).saturation;
      c.warm = headroom && warm();
      if (!c.warm) max_cold_free = std::max(max_cold_free, c.free);
      max_free_after = std::max(max_free_after, c.free - req.total);
    };
    auto decide = [&](const NodeVectors& vec, GpuIndices gpu_index, auto&& warm) {
      NodeDecision d;
      std::string_view unused;
      Decide(vec, gpu_index, pc, /*choose=*/false, &d, &unused);
      if (d.verdict != Verdict::kFits) return;
      int64_t free = 0;
      for (size_t g = 0; g < vec.size(); ++g) free += std::max<int64_t>(0, FreeBytes(vec[g]));
      accept(free, vec.Sum(), warm);
    };
    if (ix != nullptr) {
      const PlacementIndex::NodeRec* rec = lookup->Get(i);
      if (rec == nullptr) continue;
      auto warm = [&] { return IsWarm(*ix, *rec, req.model); };
      if (OfferKnown(*ix, *rec, req, policy.fit(), now_ms)) {  // the verdict is known from the offer
        if (FitOneGpu(rec->offer, std::max(req.per_gpu, req.peak_per_gpu)) == Verdict::kFits) {
          const PlacementIndex::NodeSums& sums = ix->sums[static_cast<size_t>(rec - ix->nodes.data())];
          accept(sums.free_sum, sums.sum, warm);
        }
        continue;
      }
      NodeVectors vec(*ix, *rec, now_ms, policy.fit());
      decide(vec, GpuIndices{nullptr, ix->gpu_index.data() + rec->gpu_begin}, warm);
    } else {
      const Node* node = FindNode(snap, names[i], &key);
      if (node == nullptr) continue;
      NodeVectors vec(*node, now_ms, policy.fit());
      decide(vec, GpuIndices{node->gpus.data()}, [&] { return IsWarm(*node, req.model); });
    }
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
  // The node where the pod holds room an eviction made for it (issue 32):
  // the best score when it fits there, so that the room goes where it was
  // made. A node where it fits only by taking a lower-priority pod's hold
  // keeps its score (0 when it does not fit otherwise): any other room first.
  for (const HeldRoomDecision& held : DecideTakingHolds(snap, names, req, policy, now_ms)) {
    if (!held.own || held.decision.verdict != Verdict::kFits) continue;
    for (HostScore& s : out) {
      if (s.host == held.name) s.score = 10;
    }
  }
  return out;
}

}  // namespace vramd::ledger
