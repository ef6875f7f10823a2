// Reclaim and priority preemption (queues.h): PlanReclaim, the preempt verb's
// check (PreemptVictimsAllowed). Pure: no I/O, no clock, no logging.
//
// Choices the header leaves open, made here:
//  - Victims are bound entries only: a reserved entry belongs to a pod in the
//    middle of its bind, a terminating one is leaving anyway.
//  - Room being freed counts first: a terminating entry is treated as gone
//    (off its node's A, P, V and usage report, off its queue's figures), and
//    a pending pod that fits once such pods are gone takes that room in the
//    simulation and gets no plan. So nothing is evicted twice for one pod
//    while its first victims terminate, and no queue is taken below its fair
//    share by counting bytes that are already leaving.
//  - Removing a victim in the simulation takes its entry off the node (A, and
//    P and V of the peak rule, through fit.h's own sums) and its own figure in
//    each of its GPUs' usage report (Gpu::pods) off U, as idle eviction does
//    (protection.cc): those bytes are the victim's processes, gone with it.
//    The next usage report shows it; until then filter still sees the old U,
//    so the pending pod binds once the victims are gone and the node reported.
//  - The queue rules, in one place for both PlanReclaim and the preempt verb
//    (CrossQueueRefusal): a victim of another queue V may go when, with the
//    pending pod joined and every victim of the set gone, V and V's parent
//    stay at or above their fair shares, the pod's queue stays within its
//    fair share, and, when V is in another department (top-level queue) than
//    the pod, the pod's department stays within its fair share too (reclaim
//    never feeds a department above its share).
//  - Admission (kPriority, and any plan): the pod must then pass its queue's
//    limits and the in-quota rule, checked here from the QueueStatus figures
//    (AdmissionRefusal: the same rule as AdmitToQueue, over the figures as
//    the plan leaves them).
//  - An entitled pod whose reclaim finds no plan tries priority preemption in
//    its own queue next (the guide's order: reclaim, then within the queue).
//  - Per node, victims are taken greedily in the documented order until the
//    pod fits and is admitted; then each victim the others do without is
//    dropped again, the last taken first.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "vramd/ledger/fit.h"
#include "vramd/ledger/quantity.h"
#include "vramd/ledger/queues.h"

namespace vramd::ledger {

const char* ReclaimKindName(ReclaimKind k) {
  return k == ReclaimKind::kPriority ? "priority" : "reclaim";
}

namespace {

constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinBytes = std::numeric_limits<int64_t>::min();

// a + b, saturated (figures come from the cluster: never overflow).
int64_t AddSat(int64_t a, int64_t b) {
  if (b > 0 && a > kMaxBytes - b) return kMaxBytes;
  if (b < 0 && a < kMinBytes - b) return kMinBytes;
  return a + b;
}

std::string PodName(std::string_view ns, std::string_view name) {
  std::string s(ns);
  s += '/';
  s += name;
  return s;
}

// ---- The queues' figures ------------------------------------------------
// (FairShareRefusal, WithinDeserved and CrossQueueRefusal below are the
// reclaim rule.)

// The queues' allocated and non-preemptible bytes as plans change them (a
// parent's include its children's); fair shares, deserved quotas and limits
// as computed. Queue indices as in QueueSet::queues; -1 is "no queue".
class QueueBook {
 public:
  QueueBook(const QueueSet& set, std::span<const QueueStatus> statuses) : set_(set), st_(statuses) {
    alloc_.reserve(statuses.size());
    nonpre_.reserve(statuses.size());
    for (const QueueStatus& s : statuses) {
      alloc_.push_back(s.allocated);
      nonpre_.push_back(s.allocated_nonpreemptible);
    }
  }

  int Parent(int q) const { return q >= 0 ? set_.queues[static_cast<size_t>(q)].parent : -1; }
  // The queue's department: its parent, or itself when top-level.
  int Top(int q) const {
    const int p = Parent(q);
    return p >= 0 ? p : q;
  }
  const std::string& Name(int q) const { return set_.queues[static_cast<size_t>(q)].spec.name; }
  bool Unmanaged(int q) const { return set_.queues[static_cast<size_t>(q)].unmanaged; }
  int64_t Allocated(int q) const { return alloc_[static_cast<size_t>(q)]; }
  int64_t NonPreemptible(int q) const { return nonpre_[static_cast<size_t>(q)]; }
  int64_t FairShare(int q) const { return st_[static_cast<size_t>(q)].fair_share; }
  int64_t Deserved(int q) const { return st_[static_cast<size_t>(q)].deserved; }
  const std::optional<int64_t>& Limit(int q) const { return st_[static_cast<size_t>(q)].limit; }
  bool Over(int q) const { return q >= 0 && Allocated(q) > FairShare(q); }
  bool OverDeserved(int q) const { return q >= 0 && Allocated(q) > Deserved(q); }

  // A pod of `bytes` joins (bytes > 0) or leaves (bytes < 0) queue q and its parent.
  void Add(int q, int64_t bytes, bool nonpreemptible) {
    for (int x = q, depth = 0; x >= 0 && depth < 2; x = Parent(x), ++depth) {
      alloc_[static_cast<size_t>(x)] = AddSat(alloc_[static_cast<size_t>(x)], bytes);
      if (nonpreemptible) nonpre_[static_cast<size_t>(x)] = AddSat(nonpre_[static_cast<size_t>(x)], bytes);
    }
  }

  // Whether queue x is q or q's parent.
  bool Holds(int x, int q) const { return q >= 0 && (x == q || x == Parent(q)); }

 private:
  const QueueSet& set_;
  std::span<const QueueStatus> st_;
  std::vector<int64_t> alloc_, nonpre_;
};

// A pod leaving in a trial: its queue and bytes (victims are preemptible:
// they never hold non-preemptible bytes).
struct Leaving {
  int queue = -1;
  int64_t bytes = 0;
};

// Queue x's allocated bytes once the pod of `pod_bytes` joined queue q and
// `gone` left.
int64_t AllocAfter(const QueueBook& book, int x, int q, int64_t pod_bytes, std::span<const Leaving> gone) {
  int64_t a = book.Allocated(x);
  if (book.Holds(x, q)) a = AddSat(a, pod_bytes);
  for (const Leaving& l : gone) {
    if (book.Holds(x, l.queue)) a = AddSat(a, -l.bytes);
  }
  return a;
}

std::string AboveFairShare(const QueueBook& book, int x, int64_t after, std::string_view what) {
  std::string s = "queue ";
  s += book.Name(x);
  s += what;
  s += " would go above its fair share (";
  s += FormatBytes(after);
  s += " > fair share ";
  s += FormatBytes(book.FairShare(x));
  s += ')';
  return s;
}

// The fair-share rule: why evicting pods of queue v (another queue
// than the pod's q) breaks it once the pod of `pod_bytes` joined q and
// `gone` (those pods among them) left; "" when it keeps it:
//  - v and v's parent stay at or above their fair shares;
//  - q stays within its fair share;
//  - when v is of another department than q, q's department stays within its
//    fair share too.
std::string FairShareRefusal(const QueueBook& book, int q, int v, int64_t pod_bytes, std::span<const Leaving> gone) {
  for (int x = v, depth = 0; x >= 0 && depth < 2; x = book.Parent(x), ++depth) {
    const int64_t after = AllocAfter(book, x, q, pod_bytes, gone);
    if (after < book.FairShare(x)) {
      std::string s = "it would take queue ";
      s += book.Name(x);
      s += " below its fair share (";
      s += FormatBytes(after);
      s += " left < fair share ";
      s += FormatBytes(book.FairShare(x));
      s += ')';
      return s;
    }
  }
  if (q < 0) return "";
  const int64_t after_q = AllocAfter(book, q, q, pod_bytes, gone);
  if (after_q > book.FairShare(q)) return AboveFairShare(book, q, after_q, "");
  const int top = book.Top(q);
  if (top != q && book.Top(v) != top) {
    const int64_t after_top = AllocAfter(book, top, q, pod_bytes, gone);
    if (after_top > book.FairShare(top)) {
      return AboveFairShare(book, top, after_top, " (the parent of " + book.Name(q) + ")");
    }
  }
  return "";
}

// The deserved rule (issue 32), KAI's reclaim by deserved quota: a queue that
// stays within its deserved quota once the pod joined may take from a queue
// that stays at or above its own deserved quota once `gone` left, even when
// that queue then falls below its (over-quota) fair share: lumpy pods never
// starve a queue below what it deserves. Each level (the queue and its
// department) outside the department both share. The order of shares is
// kept (Kueue's LessThanOrEqualToFinalShare with share = allocated /
// deserved): after the transfer q's share is at most 1 and v's at least 1.
// No cycle follows: v, at or above its deserved quota, can take back only by
// the fair-share rule, which never takes q (within its deserved, so within
// its fair share) below its fair share.
bool WithinDeserved(const QueueBook& book, int q, int v, int64_t pod_bytes, std::span<const Leaving> gone) {
  if (q < 0 || v < 0) return false;
  for (int x = q, depth = 0; x >= 0 && depth < 2; x = book.Parent(x), ++depth) {
    if (book.Holds(x, v)) continue;  // a department both queues share: the transfer stays inside it
    if (AllocAfter(book, x, q, pod_bytes, gone) > book.Deserved(x)) return false;
  }
  for (int x = v, depth = 0; x >= 0 && depth < 2; x = book.Parent(x), ++depth) {
    if (book.Holds(x, q)) continue;
    if (AllocAfter(book, x, q, pod_bytes, gone) < book.Deserved(x)) return false;
  }
  return true;
}

// The reclaim rule: the fair-share rule (FairShareRefusal), or else the
// deserved rule (WithinDeserved). "" when it holds, else the fair-share
// rule's reason.
std::string CrossQueueRefusal(const QueueBook& book, int q, int v, int64_t pod_bytes, std::span<const Leaving> gone) {
  std::string why = FairShareRefusal(book, q, v, pod_bytes, gone);
  if (why.empty() || WithinDeserved(book, q, v, pod_bytes, gone)) return "";
  return why;
}

// The admission rule over the figures (the rule of AdmitToQueue, which reads
// QueueUsage, in the same order and words): why a pod of `total` bytes may
// not join queue q once `gone` left; "" when admitted. Refused when it takes
// q or its parent above a hard limit, or, not preemptible, the
// non-preemptible bytes of q or its parent above the deserved quota. An
// unmanaged queue or no queue admits everything.
std::string AdmissionRefusal(const QueueBook& book, int q, int64_t total, bool preemptible,
                             std::span<const Leaving> gone) {
  if (q < 0 || book.Unmanaged(q)) return "";
  const int levels[2] = {q, book.Parent(q)};
  for (int x : levels) {
    if (x < 0) continue;
    const int64_t alloc = AllocAfter(book, x, -1, 0, gone);
    const std::optional<int64_t>& limit = book.Limit(x);
    if (limit && AddSat(alloc, total) > *limit) {
      return "queue " + book.Name(q) + (x == q ? "" : "'s parent " + book.Name(x)) + " at its limit: " +
             FormatBytes(alloc) + " allocated + " + FormatBytes(total) + " requested > limit " + FormatBytes(*limit);
    }
  }
  if (preemptible) return "";
  for (int x : levels) {
    if (x < 0) continue;
    const int64_t in_use = book.NonPreemptible(x);
    if (AddSat(in_use, total) > book.Deserved(x)) {
      std::string s = "queue " + book.Name(q) + ": non-preemptible pods may use only ";
      s += x == q ? "its deserved " + FormatBytes(book.Deserved(x))
                  : "the deserved " + FormatBytes(book.Deserved(x)) + " of its parent " + book.Name(x);
      s += " (" + FormatBytes(in_use) + (x == q ? " in use, " : " in use there, ") + FormatBytes(total) +
           " requested)";
      return s;
    }
  }
  return "";
}

// ---- The nodes, as plans change them ---------------------------------------

// One node in the simulation, its GPUs in node.gpus order: their vectors
// (fit.h's GpuVectorsOf over A and `used`), P and V, and the usage report's
// figure less what removed pods held there.
struct NodeSim {
  const Node* node = nullptr;
  std::vector<Vectors> v;
  std::vector<GpuPeak> p;
  std::vector<int64_t> used;
};

// Where an entry sits: the position of one of its GPUs among node.gpus and
// its own figure in that GPU's usage report.
struct Foot {
  uint32_t pos = 0;
  int64_t share = 0;
};

// The pod's figure in the GPU's usage report (0 when the report names it nowhere).
int64_t ReportedShare(const Gpu& g, const std::string& uid) {
  for (const PodUsage& u : g.pods) {
    if (u.uid == uid) return u.used;
  }
  return 0;
}

// Position of GPU `index` among node.gpus (sorted by index), or -1.
int GpuPos(const Node& node, int index) {
  auto it = std::lower_bound(node.gpus.begin(), node.gpus.end(), index,
                             [](const Gpu& g, int idx) { return g.index < idx; });
  return it != node.gpus.end() && it->index == index ? static_cast<int>(it - node.gpus.begin()) : -1;
}

// What the pending pod asks of one node.
struct Ask {
  int64_t per_gpu = 0;
  int count = 1;
  int64_t peak_per_gpu = 0;
  bool victim = false;
  PeakDemand demand;
};

// The simulation's arithmetic: fit.h's rule over NodeSim.
class Sim {
 public:
  Sim(const FitPolicy& fit, int64_t now_ms) : fit_(fit), now_ms_(now_ms) {}

  // The node as the snapshot has it: what GpuVectors and GpuPeaks give, in
  // one pass over its entries.
  NodeSim Build(const Node& node) const {
    const size_t n = node.gpus.size();
    NodeSim s;
    s.node = &node;
    s.v.resize(n);
    s.p.resize(n);
    s.used.resize(n);
    for (size_t i = 0; i < n; ++i) s.used[i] = node.gpus[i].used;
    for (const Entry& e : node.entries) {
      for (int index : e.gpus) {
        const int pos = GpuPos(node, index);
        if (pos < 0) continue;
        const size_t at = static_cast<size_t>(pos);
        if (e.state == EntryState::kTerminating) {
          // Leaving already: its room counts as free (nothing is evicted
          // for room that is on its way), its processes as gone.
          s.used[at] = std::max<int64_t>(0, s.used[at] - ReportedShare(node.gpus[at], e.pod_uid));
          continue;
        }
        s.v[at].allocated += e.per_gpu;
        AddToPeak(&s.p[at], e);
      }
    }
    for (size_t i = 0; i < n; ++i) Reset(&s, i, s.v[i].allocated);
    return s;
  }

  // Takes entry `e` (sitting at `feet`) off `s`: its allocation, its share
  // of P and V, and its figure in each GPU's usage report.
  void Remove(NodeSim* s, const Entry& e, std::span<const Foot> feet) const {
    GpuPeak share;
    AddToPeak(&share, e);
    for (const Foot& f : feet) {
      s->p[f.pos].peak -= share.peak;
      s->p[f.pos].victim -= share.victim;
      s->used[f.pos] = std::max<int64_t>(0, s->used[f.pos] - f.share);
      Reset(s, f.pos, s->v[f.pos].allocated - e.per_gpu);
    }
  }

  // Places the pod on `s` (fit.h's choice of GPUs); false when it does not fit.
  bool Place(NodeSim* s, const Ask& ask) const {
    const std::vector<size_t> gpus = ChooseGpus(s->v, s->p, ask.per_gpu, ask.count, ask.demand, GpuOrder::kMostFree);
    for (size_t pos : gpus) {
      AddToPeak(&s->p[pos], ask.per_gpu, ask.peak_per_gpu, ask.victim);
      Reset(s, pos, s->v[pos].allocated + ask.per_gpu);
    }
    return !gpus.empty();
  }

  static bool Fits(const NodeSim& s, const Ask& ask) {
    return FitNodeWithPeak(s.v, s.p, ask.per_gpu, ask.count, ask.demand).miss == FitMiss::kNone;
  }

 private:
  // GPU `pos` of `s` with allocation `allocated`: its vectors again.
  void Reset(NodeSim* s, size_t pos, int64_t allocated) const {
    const Gpu& g = s->node->gpus[pos];
    s->v[pos] = GpuVectorsOf(g.capacity, allocated, s->used[pos], g.used_ts_ms, now_ms_, fit_);
  }

  FitPolicy fit_;
  int64_t now_ms_;
};

// ---- Candidates ------------------------------------------------------------

// A preemptible bound entry of a queue: a possible victim.
struct Cand {
  const Entry* e = nullptr;
  uint32_t node = 0;   // ordinal (NodeTable)
  int queue = -1;
  int64_t bytes = 0;   // EntryBytes
  bool young = false;  // within its minimum runtime: never a victim
  bool taken = false;  // a victim of an earlier plan of this call
  int32_t foot = -1;   // its Foot records in NodeTable::feet (-1: not looked up yet)
  uint32_t feet = 0;   // how many
};

// Every node by name, their simulations (built on first use) and the
// candidates on each.
struct NodeTable {
  std::vector<const Node*> nodes;                       // sorted by name
  std::vector<NodeSim> sims;                            // by ordinal; node == null until built
  std::vector<std::pair<uint32_t, uint32_t>> cands_at;  // [begin, end) in `cands`, by ordinal
  std::vector<uint32_t> with_cands;                     // ordinals with a candidate, ascending
  std::vector<Cand> cands;
  std::vector<Foot> feet;                               // looked up on first use
  std::unordered_map<std::string_view, uint32_t> by_name;  // built on first use
  struct Gone {
    int queue = -1;
    int64_t bytes = 0;
    bool nonpreemptible = false;
  };
  std::vector<Gone> terminating;                        // entries on their way out, by queue
  // Preemptible pods that are never victims (issue 32), cluster-wide, said
  // when no plan is found: "(never victims: 2 of namespaces no queue names, 1 bare pod)".
  size_t unqueued = 0, exempt_bare = 0, exempt_gang = 0;
  std::string Exempt() const {
    std::vector<std::string> parts;
    if (unqueued) parts.push_back(std::to_string(unqueued) + " of namespaces no queue names");
    if (exempt_bare) parts.push_back(std::to_string(exempt_bare) + (exempt_bare == 1 ? " bare pod" : " bare pods"));
    if (exempt_gang) {
      parts.push_back(std::to_string(exempt_gang) + (exempt_gang == 1 ? " rank of a gang" : " ranks of gangs"));
    }
    if (parts.empty()) return "";
    std::string out = " (never victims: ";
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
    return out + ")";
  }

  NodeSim& SimOf(uint32_t n, const Sim& sim) {
    if (sims[n].node == nullptr) sims[n] = sim.Build(*nodes[n]);
    return sims[n];
  }
  std::span<const Foot> FeetOf(uint32_t i) {
    Cand& c = cands[i];
    if (c.foot < 0) {
      const Node& node = *nodes[c.node];
      c.foot = static_cast<int32_t>(feet.size());
      for (int index : c.e->gpus) {
        const int pos = GpuPos(node, index);
        if (pos < 0) continue;
        feet.push_back(
            Foot{static_cast<uint32_t>(pos), ReportedShare(node.gpus[static_cast<size_t>(pos)], c.e->pod_uid)});
      }
      c.feet = static_cast<uint32_t>(feet.size()) - static_cast<uint32_t>(c.foot);
    }
    return std::span<const Foot>(feet.data() + c.foot, c.feet);
  }
  int Ordinal(std::string_view name) {
    if (by_name.empty()) {
      by_name.reserve(nodes.size());
      for (uint32_t i = 0; i < nodes.size(); ++i) by_name.emplace(nodes[i]->name, i);
    }
    auto it = by_name.find(name);
    return it != by_name.end() ? static_cast<int>(it->second) : -1;
  }
};

// Builds the table; `holds` receives, for the pending pods' uids in `pending_uids`,
// the node holding an entry of theirs.
NodeTable BuildTable(const QueueSet& set, const Snapshot& snap, const TenancyPolicy& policy, int64_t now_ms,
                     const std::unordered_set<std::string_view>& pending_uids,
                     std::unordered_map<std::string_view, std::string_view>* holds) {
  NodeTable t;
  t.nodes.reserve(snap.nodes.size());
  for (const auto& [name, node] : snap.nodes) t.nodes.push_back(&node);
  std::sort(t.nodes.begin(), t.nodes.end(), [](const Node* a, const Node* b) { return a->name < b->name; });
  const size_t n = t.nodes.size();
  t.sims.resize(n);
  t.cands_at.resize(n);
  std::unordered_map<std::string_view, int> queue_of;  // namespace -> queue, looked up once
  const GangSizes gangs = CountGangs(snap);
  for (uint32_t i = 0; i < n; ++i) {
    const Node& node = *t.nodes[i];
    const uint32_t begin = static_cast<uint32_t>(t.cands.size());
    for (const Entry& e : node.entries) {
      if (!pending_uids.empty() && pending_uids.contains(e.pod_uid)) holds->emplace(e.pod_uid, node.name);
      if (e.state == EntryState::kReserved || e.state == EntryState::kHold) continue;
      const bool terminating = e.state == EntryState::kTerminating;
      if (!terminating && !IsPreemptible(e, policy)) continue;
      const int64_t bytes = EntryBytes(e);
      if (bytes <= 0) continue;
      auto it = queue_of.find(e.ns);
      if (it == queue_of.end()) it = queue_of.emplace(e.ns, set.QueueOf(e.ns)).first;
      if (it->second < 0) continue;
      if (terminating) {
        t.terminating.push_back({it->second, bytes, !IsPreemptible(e, policy)});
        continue;
      }
      // Never victims: pods of namespaces no VramQueue names (the synthetic
      // default queue) unless queues.reclaim_unqueued, and what
      // EvictionExemption keeps (bare pods, ranks of gangs).
      if (set.queues[static_cast<size_t>(it->second)].synthetic && !policy.reclaim_unqueued) {
        ++t.unqueued;
        continue;
      }
      if (const std::string why = EvictionExemption(e, gangs); !why.empty()) {
        ++(why == "bare pod" ? t.exempt_bare : t.exempt_gang);
        continue;
      }
      Cand c;
      c.e = &e;
      c.node = i;
      c.queue = it->second;
      c.bytes = bytes;
      c.young = now_ms - e.created_ms < policy.min_runtime_ms;
      t.cands.push_back(c);
    }
    t.cands_at[i] = {begin, static_cast<uint32_t>(t.cands.size())};
    if (t.cands.size() > begin) t.with_cands.push_back(i);
  }
  return t;
}

// ---- One pending pod -------------------------------------------------------

struct Pending {
  const PendingPod* p = nullptr;
  int queue = -1;
  bool preemptible = false;
  Ask ask;
};

// What a search over the nodes found for one kind.
struct Search {
  bool found = false;
  uint32_t node = 0;
  std::vector<uint32_t> victims;  // indices in NodeTable::cands, in the order taken
  int64_t bytes = 0;
  // Why not, when nothing was found:
  size_t nodes_with_cands = 0;  // nodes holding an allowed candidate
  size_t young = 0;             // candidates skipped for their minimum runtime
  std::string blocked;          // the first queue rule (fair share, admission) that stopped a node
};

class Planner {
 public:
  Planner(QueueBook& book, NodeTable& table, const FitPolicy& fit, int64_t now_ms)
      : book_(book), t_(table), sim_(fit, now_ms) {}

  // Whether the pod fits a node of `nodes` as it is (terminating pods gone);
  // the first such node's ordinal, else -1.
  int FitsSomewhere(const std::vector<uint32_t>& nodes, const Ask& ask) {
    for (uint32_t n : nodes) {
      if (Sim::Fits(t_.SimOf(n, sim_), ask)) return static_cast<int>(n);
    }
    return -1;
  }

  // The pod takes room it fits without evictions (FitsSomewhere): the next
  // pending pod cannot count the same room.
  void Occupy(const Pending& pod, uint32_t n) {
    book_.Add(pod.queue, pod.p->demand.total, !pod.preemptible);
    sim_.Place(&t_.SimOf(n, sim_), pod.ask);
  }

  // A terminating entry's bytes leave its queue's figures: what it holds is on its way out.
  void Terminating(int queue, int64_t bytes, bool nonpreemptible) { book_.Add(queue, -bytes, nonpreemptible); }

  // The best node and victims for `pod` of `kind` over `nodes` (ascending
  // ordinals; null: every node holding candidates).
  Search Find(const Pending& pod, ReclaimKind kind, const std::vector<uint32_t>* nodes) {
    Search s;
    const std::vector<uint32_t>& list = nodes != nullptr ? *nodes : t_.with_cands;
    for (uint32_t n : list) TryNode(pod, kind, n, &s);
    return s;
  }

  // Carries a plan out in the figures: the victims leave their nodes and
  // queues, the pod joins its queue and takes its GPUs on the node.
  void Commit(const Pending& pod, const Search& s) {
    NodeSim& node = t_.SimOf(s.node, sim_);
    for (uint32_t i : s.victims) {
      Cand& c = t_.cands[i];
      c.taken = true;
      sim_.Remove(&node, *c.e, t_.FeetOf(i));
      book_.Add(c.queue, -c.bytes, false);
    }
    book_.Add(pod.queue, pod.p->demand.total, !pod.preemptible);
    sim_.Place(&node, pod.ask);
  }

 private:
  // Whether candidate c may be a victim of `pod` for `kind` at all (before
  // the queue figures of a set are looked at).
  bool Eligible(const Cand& c, const Pending& pod, ReclaimKind kind) const {
    if (c.taken) return false;
    if (kind == ReclaimKind::kPriority) return c.queue == pod.queue && c.e->priority < pod.p->demand.priority;
    // Over its fair share (the fair-share rule) or its deserved quota (the
    // deserved rule); the set's figures decide (SetRefusal).
    return c.queue != pod.queue && (book_.Over(c.queue) || book_.OverDeserved(c.queue));
  }

  // The queues and bytes of `set` (into gone_).
  const std::vector<Leaving>& Gone(const std::vector<uint32_t>& set) {
    gone_.clear();
    for (uint32_t i : set) gone_.push_back(Leaving{t_.cands[i].queue, t_.cands[i].bytes});
    return gone_;
  }

  // The queue rule for a whole set (kReclaim: every victim's queue; kPriority:
  // same-queue victims need none). "" when it holds.
  std::string SetRefusal(const Pending& pod, ReclaimKind kind, const std::vector<uint32_t>& set) {
    if (kind == ReclaimKind::kPriority) return "";
    const std::vector<Leaving>& gone = Gone(set);
    for (uint32_t i : set) {
      std::string why = CrossQueueRefusal(book_, pod.queue, t_.cands[i].queue, pod.p->demand.total, gone);
      if (!why.empty()) return why;
    }
    return "";
  }

  std::string Admission(const Pending& pod, const std::vector<uint32_t>& set) {
    return AdmissionRefusal(book_, pod.queue, pod.p->demand.total, pod.preemptible, Gone(set));
  }

  // Whether a comes before b in the order victims are taken: kReclaim the
  // most over-share queue first (as `gone` leaves the queues), then lowest
  // priority, then youngest; kPriority lowest priority, then youngest. Ties
  // by uid.
  bool Before(const Cand& a, const Cand& b, ReclaimKind kind, const Pending& pod,
              const std::vector<Leaving>& gone) const {
    if (kind == ReclaimKind::kReclaim && a.queue != b.queue) {
      const int64_t oa = AddSat(AllocAfter(book_, a.queue, pod.queue, pod.p->demand.total, gone), -book_.FairShare(a.queue));
      const int64_t ob = AddSat(AllocAfter(book_, b.queue, pod.queue, pod.p->demand.total, gone), -book_.FairShare(b.queue));
      if (oa != ob) return oa > ob;
    }
    if (a.e->priority != b.e->priority) return a.e->priority < b.e->priority;
    if (a.e->created_ms != b.e->created_ms) return a.e->created_ms > b.e->created_ms;
    return a.e->pod_uid < b.e->pod_uid;
  }

  // Whether the pod fits node n once `set` is gone.
  bool FitsWithout(uint32_t n, const std::vector<uint32_t>& set, const Ask& ask) {
    Copy(t_.SimOf(n, sim_), &scratch_);
    for (uint32_t i : set) sim_.Remove(&scratch_, *t_.cands[i].e, t_.FeetOf(i));
    return Sim::Fits(scratch_, ask);
  }

  static void Copy(const NodeSim& from, NodeSim* to) {
    to->node = from.node;
    to->v.assign(from.v.begin(), from.v.end());
    to->p.assign(from.p.begin(), from.p.end());
    to->used.assign(from.used.begin(), from.used.end());
  }

  // Whether the set makes room on node n and keeps every rule.
  bool Works(const Pending& pod, ReclaimKind kind, uint32_t n, const std::vector<uint32_t>& set) {
    return SetRefusal(pod, kind, set).empty() && Admission(pod, set).empty() && FitsWithout(n, set, pod.ask);
  }

  // Lower bounds on what any set of `cands` making room on node n takes: its
  // bytes and its number of victims. A GPU can take the pod only once its
  // allocation is at most C - per_gpu (fit.h's rule with U and the peak rule
  // on top only asks more), so it needs victims there holding at least the
  // excess, and at least one of them; a victim's bytes count its per-GPU
  // bytes on each of its GPUs. False when fewer than `count` GPUs can take
  // the pod whatever goes: no set makes room.
  bool Bounds(const Pending& pod, uint32_t n, const std::vector<uint32_t>& cands, int64_t* bytes, size_t* victims) {
    const NodeSim& sim = t_.SimOf(n, sim_);
    const size_t g = sim.v.size();
    least_.assign(g, kMaxBytes);
    freeable_.assign(g, 0);
    uint32_t span = 1;
    for (uint32_t i : cands) {
      const std::span<const Foot> feet = t_.FeetOf(i);
      span = std::max<uint32_t>(span, static_cast<uint32_t>(feet.size()));
      for (const Foot& f : feet) {
        freeable_[f.pos] = AddSat(freeable_[f.pos], t_.cands[i].e->per_gpu);
        least_[f.pos] = std::min(least_[f.pos], t_.cands[i].e->per_gpu);
      }
    }
    size_t ready = 0;  // GPUs whose allocation already leaves room
    lower_.clear();
    for (size_t k = 0; k < g; ++k) {
      const Vectors& v = sim.v[k];
      if (!LargeEnough(v, pod.ask.per_gpu)) continue;
      const int64_t excess = AddSat(AddSat(v.allocated, pod.ask.per_gpu), -v.capacity);
      if (excess <= 0) {
        ++ready;
        lower_.push_back(0);
      } else if (freeable_[k] >= excess) {
        lower_.push_back(std::max(excess, least_[k]));
      }
    }
    const size_t count = static_cast<size_t>(pod.ask.count);
    if (lower_.size() < count) return false;
    std::nth_element(lower_.begin(), lower_.begin() + static_cast<std::ptrdiff_t>(count - 1), lower_.end());
    int64_t sum = 0;
    for (size_t k = 0; k < count; ++k) sum = AddSat(sum, lower_[k]);
    *bytes = sum;
    const size_t short_gpus = count > ready ? count - ready : 0;
    *victims = std::max<size_t>(1, (short_gpus + span - 1) / span);
    return true;
  }

  void TryNode(const Pending& pod, ReclaimKind kind, uint32_t n, Search* s) {
    const auto [begin, end] = t_.cands_at[n];
    std::vector<uint32_t>& cands = cands_;
    cands.clear();
    int64_t least = kMaxBytes;  // the smallest candidate: every set takes at least that
    static const std::vector<Leaving> none;
    const Cand* first = nullptr;  // the candidate first in the order: no set of this node starts earlier
    for (uint32_t i = begin; i < end; ++i) {
      const Cand& c = t_.cands[i];
      if (!Eligible(c, pod, kind)) continue;
      if (c.young) {
        ++s->young;
        continue;
      }
      cands.push_back(i);
      least = std::min(least, c.bytes);
    }
    if (cands.empty()) return;
    ++s->nodes_with_cands;
    // A node can win only with fewer bytes, or as many in fewer victims, or
    // as many in as many whose order comes first (nodes come in name order:
    // a full tie keeps the earlier one). Every set takes one victim at
    // least: the cheap bound first.
    auto cannot_win = [&](int64_t min_bytes, size_t min_victims) {
      if (!s->found || min_bytes < s->bytes) return false;
      if (min_bytes > s->bytes || min_victims > s->victims.size()) return true;
      if (min_victims != s->victims.size()) return false;
      if (first == nullptr) {  // only at a tie: rare, and one pass over this node's candidates
        for (uint32_t i : cands) {
          if (first == nullptr || Before(t_.cands[i], *first, kind, pod, none)) first = &t_.cands[i];
        }
      }
      return !Before(*first, t_.cands[s->victims[0]], kind, pod, none);
    };
    if (cannot_win(least, 1)) return;
    int64_t min_bytes = 0;
    size_t min_victims = 1;
    if (!Bounds(pod, n, cands, &min_bytes, &min_victims)) return;
    if (cannot_win(std::max(min_bytes, least), min_victims)) return;
    // Greedy, in order, each victim allowed by the queue rule given those
    // before it, until the pod fits and is admitted.
    std::vector<uint32_t>& chosen = chosen_;
    chosen.clear();
    used_.assign(cands.size(), 0);
    std::string stop;
    Copy(t_.SimOf(n, sim_), &trial_);
    while (true) {
      if (!chosen.empty() && Sim::Fits(trial_, pod.ask)) {
        stop = Admission(pod, chosen);
        if (stop.empty()) break;
        stop = "waits on its queue: " + stop;
      }
      // The first in order among those the queue rule allows; when none is,
      // the first in order names the rule that stopped it.
      std::vector<Leaving>& gone = with_;
      gone = Gone(chosen);
      int pick = -1;
      int refused = -1;
      std::string refused_why;
      for (size_t k = 0; k < cands.size(); ++k) {
        if (used_[k]) continue;
        const Cand& c = t_.cands[cands[k]];
        if (pick >= 0 && !Before(c, t_.cands[cands[static_cast<size_t>(pick)]], kind, pod, gone)) continue;
        if (kind == ReclaimKind::kReclaim) {
          gone.push_back(Leaving{c.queue, c.bytes});
          std::string why = CrossQueueRefusal(book_, pod.queue, c.queue, pod.p->demand.total, gone);
          gone.pop_back();
          if (!why.empty()) {
            if (refused < 0 || Before(c, t_.cands[cands[static_cast<size_t>(refused)]], kind, pod, gone)) {
              refused = static_cast<int>(k);
              refused_why = "evicting " + PodName(c.e->ns, c.e->name) + ": " + why;
            }
            continue;
          }
        }
        pick = static_cast<int>(k);
      }
      if (pick < 0) {
        // A queue rule stopped the walk where every candidate gone (no rule
        // looked at) would have made room: that is why, unless an earlier
        // node said so already.
        if (stop.empty()) stop = refused_why;
        if (s->blocked.empty() && !stop.empty() && FitsWithout(n, cands, pod.ask)) s->blocked = stop;
        return;
      }
      used_[static_cast<size_t>(pick)] = 1;
      const uint32_t ci = cands[static_cast<size_t>(pick)];
      chosen.push_back(ci);
      sim_.Remove(&trial_, *t_.cands[ci].e, t_.FeetOf(ci));
      stop.clear();
    }

    // Drop the victims the others do without, the last taken first.
    for (size_t k = chosen.size(); k-- > 0;) {
      if (chosen.size() < 2) break;
      less_.assign(chosen.begin(), chosen.end());
      less_.erase(less_.begin() + static_cast<std::ptrdiff_t>(k));
      if (Works(pod, kind, n, less_)) chosen.swap(less_);
    }
    int64_t bytes = 0;
    for (uint32_t i : chosen) bytes = AddSat(bytes, t_.cands[i].bytes);
    bool better = !s->found || bytes < s->bytes || (bytes == s->bytes && chosen.size() < s->victims.size());
    if (!better && bytes == s->bytes && chosen.size() == s->victims.size()) {
      // As many bytes in as many victims: the set whose victims come first
      // in the order (lowest priority, then youngest) wins.
      static const std::vector<Leaving> none;
      for (size_t k = 0; k < chosen.size(); ++k) {
        const Cand& a = t_.cands[chosen[k]];
        const Cand& b = t_.cands[s->victims[k]];
        if (a.e == b.e) continue;
        better = Before(a, b, kind, pod, none);
        break;
      }
    }
    if (better) {  // nodes come in name order: a full tie keeps the earlier name
      s->found = true;
      s->node = n;
      s->bytes = bytes;
      s->victims.assign(chosen.begin(), chosen.end());
    }
  }

  QueueBook& book_;
  NodeTable& t_;
  Sim sim_;
  NodeSim scratch_;              // FitsWithout
  NodeSim trial_;                // TryNode's greedy walk
  std::vector<uint32_t> cands_;  // TryNode's candidates
  std::vector<uint32_t> chosen_, less_;  // TryNode's walk
  std::vector<char> used_;              // TryNode's walk
  std::vector<Leaving> gone_, with_;
  std::vector<int64_t> least_, freeable_, lower_;  // Bounds
};

std::string NoRoomText(const Search& s, std::string_view what, bool restricted, const NodeTable& t) {
  if (s.nodes_with_cands == 0) {
    std::string out = "no " + std::string(what) + " may be evicted";
    if (restricted) out += " on its nodes";
    if (s.young > 0) {
      out += " (" + std::to_string(s.young) + (s.young == 1 ? " is" : " are") + " within the minimum runtime)";
    }
    return out + t.Exempt();
  }
  if (!s.blocked.empty()) return s.blocked;
  return "evicting every " + std::string(what) + " would still leave no room on any of " +
         std::to_string(s.nodes_with_cands) + (s.nodes_with_cands == 1 ? " node" : " nodes");
}

ReclaimPlan MakePlan(ReclaimKind kind, const Pending& pod, const Search& s, const NodeTable& table) {
  ReclaimPlan plan;
  plan.kind = kind;
  plan.pending_uid = pod.p->uid;
  plan.pending_ns = pod.p->ns;
  plan.pending_name = pod.p->name;
  plan.queue = pod.queue;
  plan.node = table.nodes[s.node]->name;
  for (uint32_t i : s.victims) {
    const Cand& c = table.cands[i];
    plan.victims.push_back(ReclaimVictim{c.e->pod_uid, c.e->ns, c.e->name, plan.node, c.queue, c.bytes,
                                         c.e->priority, c.e->created_ms});
  }
  return plan;
}

}  // namespace

std::vector<ReclaimPlan> PlanReclaim(const QueueSet& set, std::span<const QueueStatus> statuses, const Snapshot& snap,
                                     std::span<const PendingPod> pending, const TenancyPolicy& policy,
                                     const FitPolicy& fit, int64_t now_ms, size_t max_plans,
                                     std::unordered_map<std::string, std::string>* why_not,
                                     std::unordered_map<std::string, std::string>* fits_on) {
  std::vector<ReclaimPlan> plans;
  auto why = [&](const PendingPod& p, std::string text) {
    if (why_not != nullptr) (*why_not)[p.uid] = std::move(text);
  };
  if (set.empty() || statuses.size() != set.queues.size()) {
    const char* text = set.empty() ? "no queues (no VramQueue objects)" : "queue figures do not match the queues";
    for (const PendingPod& p : pending) why(p, text);
    return plans;
  }

  // Oldest refusal first (ties: uid); a uid given twice counts once.
  std::vector<const PendingPod*> order;
  std::unordered_set<std::string_view> uids;
  for (const PendingPod& p : pending) {
    if (uids.insert(p.uid).second) order.push_back(&p);
  }
  std::sort(order.begin(), order.end(), [](const PendingPod* a, const PendingPod* b) {
    return a->refused_ms != b->refused_ms ? a->refused_ms < b->refused_ms : a->uid < b->uid;
  });

  std::unordered_map<std::string_view, std::string_view> holds;
  NodeTable table = BuildTable(set, snap, policy, now_ms, uids, &holds);
  QueueBook book(set, statuses);
  Planner planner(book, table, fit, now_ms);
  for (const NodeTable::Gone& g : table.terminating) planner.Terminating(g.queue, g.bytes, g.nonpreemptible);
  std::vector<uint32_t> all_nodes;

  for (const PendingPod* pp : order) {
    const PendingPod& p = *pp;
    if (plans.size() >= max_plans) {
      why(p, "plan limit reached (" + std::to_string(max_plans) + " per pass)");
      continue;
    }
    if (p.demand.total <= 0 || p.demand.per_gpu <= 0 || p.demand.gpu_count < 1) {
      why(p, "wants no VRAM");
      continue;
    }
    if (p.demand.victim) {
      why(p, "a designated victim never preempts");
      continue;
    }
    Pending pod;
    pod.p = &p;
    pod.queue = set.QueueOf(p.ns);
    if (pod.queue < 0) {
      why(p, "no valid queue serves namespace " + p.ns);
      continue;
    }
    if (auto it = holds.find(p.uid); it != holds.end()) {
      why(p, "already holds a reservation on node " + std::string(it->second));
      continue;
    }
    pod.preemptible = IsPreemptible(p.demand.priority, p.demand.priority_class, p.demand.victim, policy);
    pod.ask = Ask{p.demand.per_gpu, p.demand.gpu_count, p.demand.peak_per_gpu, p.demand.victim,
                  PeakDemandOf(p.demand.per_gpu, p.demand.peak_per_gpu, p.demand.victim, fit.max_peak_ratio)};

    // Its nodes (ascending ordinals; unknown names skipped), or every node.
    std::vector<uint32_t> restricted;
    for (const std::string& name : p.nodes) {
      const int n = table.Ordinal(name);
      if (n >= 0) restricted.push_back(static_cast<uint32_t>(n));
    }
    std::sort(restricted.begin(), restricted.end());
    restricted.erase(std::unique(restricted.begin(), restricted.end()), restricted.end());
    const bool is_restricted = !p.nodes.empty();
    if (!is_restricted && all_nodes.empty()) {
      all_nodes.resize(table.nodes.size());
      for (uint32_t i = 0; i < all_nodes.size(); ++i) all_nodes[i] = i;
    }
    const int fits = planner.FitsSomewhere(is_restricted ? restricted : all_nodes, pod.ask);
    if (fits >= 0) {
      planner.Occupy(pod, static_cast<uint32_t>(fits));
      if (fits_on != nullptr) (*fits_on)[p.uid] = table.nodes[static_cast<size_t>(fits)]->name;
      why(p, "fits without evictions (node " + table.nodes[static_cast<size_t>(fits)]->name + ")");
      continue;
    }
    const std::vector<uint32_t>* nodes = is_restricted ? &restricted : nullptr;

    const std::string& qname = set.queues[static_cast<size_t>(pod.queue)].spec.name;
    const int64_t after = AddSat(book.Allocated(pod.queue), p.demand.total);
    const bool entitled = after <= book.FairShare(pod.queue) || after <= book.Deserved(pod.queue);
    std::string reclaim_text;
    if (entitled) {
      const Search s = planner.Find(pod, ReclaimKind::kReclaim, nodes);
      if (!s.found) {
        reclaim_text = NoRoomText(s, "preemptible pod of a queue above its fair share", is_restricted, table);
      } else {
        planner.Commit(pod, s);
        plans.push_back(MakePlan(ReclaimKind::kReclaim, pod, s, table));
        continue;
      }
    } else {
      reclaim_text = "queue " + qname + " would go above its fair share (" + FormatBytes(book.Allocated(pod.queue)) +
                     " allocated + " + FormatBytes(p.demand.total) + " requested > fair share " +
                     FormatBytes(book.FairShare(pod.queue)) + ")";
    }

    const Search s = planner.Find(pod, ReclaimKind::kPriority, nodes);
    if (!s.found) {
      why(p, reclaim_text + "; within queue " + qname + ": " +
                 NoRoomText(s, "lower-priority preemptible pod", is_restricted, table));
      continue;
    }
    planner.Commit(pod, s);
    plans.push_back(MakePlan(ReclaimKind::kPriority, pod, s, table));
  }
  return plans;
}

std::string PreemptVictimsAllowed(const QueueSet& set, std::span<const QueueStatus> statuses, std::string_view ns,
                                  int32_t priority, int64_t total, std::span<const Entry* const> victims,
                                  const TenancyPolicy& policy, int64_t now_ms) {
  if (set.empty()) return "";
  if (statuses.size() != set.queues.size()) return "queue figures do not match the queues";
  const QueueBook book(set, statuses);
  const int q = set.QueueOf(ns);
  // Every victim gone (a pod named twice counts once), then each judged
  // against that end state.
  std::vector<Leaving> gone;
  std::vector<int> queue_of(victims.size(), -1);
  std::vector<char> repeated(victims.size(), 0);
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < victims.size(); ++i) {
    if (victims[i] == nullptr) return "a victim without a ledger entry";
    if (!seen.insert(victims[i]->pod_uid).second) {
      repeated[i] = 1;
      continue;
    }
    queue_of[i] = set.QueueOf(victims[i]->ns);
    gone.push_back(Leaving{queue_of[i], EntryBytes(*victims[i])});
  }
  for (size_t i = 0; i < victims.size(); ++i) {
    if (repeated[i]) continue;
    const Entry& e = *victims[i];
    const std::string pod = "pod " + PodName(e.ns, e.name);
    if (!IsPreemptible(e, policy)) {
      return pod + " is not preemptible (priority " + std::to_string(e.priority) + ")";
    }
    if (now_ms - e.created_ms < policy.min_runtime_ms) {
      return pod + " is within its minimum runtime (" + std::to_string((now_ms - e.created_ms) / 1000) + " s of " +
             std::to_string(policy.min_runtime_ms / 1000) + " s)";
    }
    const int v = queue_of[i];
    if (v == q) {
      if (e.priority >= priority) {
        return pod + " of the same queue has priority " + std::to_string(e.priority) + ", not below " +
               std::to_string(priority);
      }
      continue;
    }
    const std::string why = CrossQueueRefusal(book, q, v, total, gone);
    if (!why.empty()) return pod + " may not go: " + why;
  }
  return "";
}

}  // namespace vramd::ledger
