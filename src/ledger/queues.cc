// Queues, fair shares and queue admission: see include/vramd/ledger/queues.h.
#include "vramd/ledger/queues.h"

#include <algorithm>
#include <limits>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "vramd/ledger/quantity.h"

namespace vramd::ledger {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Byte sums saturate instead of overflowing (a broken ledger must not make
// the arithmetic undefined); every operand here is >= 0.
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kInt64Max : r;
}

// ---- BuildQueueSet ----------------------------------------------------------

void Invalidate(Queue* q, const char* reason, std::string message) {
  q->valid = false;
  q->reason = reason;
  q->message = std::move(message);
}

std::string Prefix(const Queue& q) { return "queue " + q.spec.name + ": "; }

// At most `max` names of `names`, comma-separated, then "and N more".
std::string NameList(const std::vector<std::string>& names, size_t max = 5) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max; ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  if (names.size() > max) out += " and " + std::to_string(names.size() - max) + " more";
  return out;
}

// The checks of one object on its own (reason "Invalid"); empty when it passes.
std::string OwnProblem(const QueueSpec& s) {
  static const std::string kMaxText = FormatBytes(kMaxQueueBytes);
  if (!s.decode_error.empty()) return s.decode_error;
  if (s.deserved < 0 || s.deserved > kMaxQueueBytes) {
    return "deserved " + std::to_string(s.deserved) + " bytes is out of range (0 to " + kMaxText + ")";
  }
  if (s.limit && (*s.limit < 0 || *s.limit > kMaxQueueBytes)) {
    return "limit " + std::to_string(*s.limit) + " bytes is out of range (0 to " + kMaxText + ")";
  }
  if (s.weight < 0 || s.weight > kMaxQueueWeight) {
    return "overQuotaWeight " + std::to_string(s.weight) + " is out of range (0 to " +
           std::to_string(kMaxQueueWeight) + ")";
  }
  if (s.namespaces.size() > kMaxQueueNamespaces) {
    return "names " + std::to_string(s.namespaces.size()) + " namespaces (at most " +
           std::to_string(kMaxQueueNamespaces) + ")";
  }
  for (const std::string& ns : s.namespaces) {
    if (ns.empty()) return "names an empty namespace";
  }
  if (s.limit && s.deserved > *s.limit) {
    return "deserved " + FormatBytes(s.deserved) + " is above its limit " + FormatBytes(*s.limit);
  }
  return {};
}

// Marks the members of every cycle of parent links (`link[i]`: index of i's
// parent, -1 none) in `in_cycle`, and returns each cycle's members in link
// order, starting at its first member by index. O(n).
std::vector<std::vector<int>> FindCycles(const std::vector<int>& link) {
  const size_t n = link.size();
  std::vector<int> state(n, 0);  // 0 unseen, 1 on the current path, 2 done
  std::vector<std::vector<int>> cycles;
  std::vector<int> path;
  for (size_t start = 0; start < n; ++start) {
    if (state[start] != 0) continue;
    path.clear();
    int i = static_cast<int>(start);
    while (i >= 0 && state[static_cast<size_t>(i)] == 0) {
      state[static_cast<size_t>(i)] = 1;
      path.push_back(i);
      i = link[static_cast<size_t>(i)];
    }
    if (i >= 0 && state[static_cast<size_t>(i)] == 1) {  // back on this path: a cycle from i
      auto from = std::find(path.begin(), path.end(), i);
      std::vector<int> cycle(from, path.end());
      std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
      cycles.push_back(std::move(cycle));
    }
    for (int j : path) state[static_cast<size_t>(j)] = 2;
  }
  return cycles;
}

// Orders queues for namespace claims: older first, then by name.
bool OlderThan(const Queue& a, const Queue& b) {
  if (a.spec.created_ms != b.spec.created_ms) return a.spec.created_ms < b.spec.created_ms;
  return a.spec.name < b.spec.name;
}

// ---- FairShares -------------------------------------------------------------

using u128 = unsigned __int128;

// floor(a * b / c) and whether it has a fraction; a, b >= 0, c > 0, and the
// result fits in int64 because a * b / c <= a (callers pass b <= c).
std::pair<int64_t, bool> MulDiv(int64_t a, int64_t b, u128 c) {
  const u128 p = static_cast<u128>(a) * static_cast<u128>(b);
  return {static_cast<int64_t>(p / c), p % c != 0};
}

// Shares `amount` among `members` (siblings) by the rule in queues.h: the
// deserved part (capped by `cap`, scaled down in proportion when it does not
// fit), then weighted water-filling up to `cap`. Adds to `out`.
void Split(const QueueSet& set, std::vector<int> members, int64_t amount, const std::vector<int64_t>& cap,
           std::vector<int64_t>* out) {
  if (members.empty() || amount <= 0) return;
  auto weight = [&](int i) { return set.queues[static_cast<size_t>(i)].spec.weight; };
  // Remainder order: largest weight first, then name (indices follow names).
  std::sort(members.begin(), members.end(), [&](int a, int b) {
    return weight(a) != weight(b) ? weight(a) > weight(b) : a < b;
  });
  std::vector<int64_t>& share = *out;

  // 1. Deserved, capped by demand and limit.
  u128 base_sum = 0;
  for (int i : members) {
    base_sum += static_cast<u128>(std::min(set.queues[static_cast<size_t>(i)].spec.deserved, cap[static_cast<size_t>(i)]));
  }
  int64_t rest = amount;
  if (base_sum <= static_cast<u128>(amount)) {
    for (int i : members) {
      const int64_t b = std::min(set.queues[static_cast<size_t>(i)].spec.deserved, cap[static_cast<size_t>(i)]);
      share[static_cast<size_t>(i)] += b;
      rest -= b;
    }
  } else {  // more quota than there is: in proportion, then the remainder
    std::vector<char> frac(members.size(), 0);
    for (size_t k = 0; k < members.size(); ++k) {
      const size_t i = static_cast<size_t>(members[k]);
      const auto [b, f] = MulDiv(std::min(set.queues[i].spec.deserved, cap[i]), amount, base_sum);
      share[i] += b;
      rest -= b;
      frac[k] = f;
    }
    for (size_t k = 0; k < members.size() && rest > 0; ++k) {
      if (frac[k]) {
        ++share[static_cast<size_t>(members[k])];
        --rest;
      }
    }
    return;  // nothing is left for over-quota
  }

  // 2. Water-filling by weight among the queues that want more. A queue is
  // filled up to its demand when that need is within its weighted part of
  // what is left (need <= rest * w / W); filling it only raises the level
  // for the others, so taking those queues lowest need/weight first is
  // exact and O(k log k).
  struct Want {
    int q;
    int64_t need, weight;
    size_t order;  // position in `members` (the remainder order)
  };
  std::vector<Want> wants;
  wants.reserve(members.size());
  u128 total_weight = 0;
  for (size_t k = 0; k < members.size(); ++k) {
    const size_t i = static_cast<size_t>(members[k]);
    const int64_t need = cap[i] - share[i];
    if (need > 0 && set.queues[i].spec.weight > 0) {
      wants.push_back({members[k], need, set.queues[i].spec.weight, k});
      total_weight += static_cast<u128>(set.queues[i].spec.weight);
    }
  }
  std::sort(wants.begin(), wants.end(), [](const Want& a, const Want& b) {
    const u128 l = static_cast<u128>(a.need) * static_cast<u128>(b.weight);
    const u128 r = static_cast<u128>(b.need) * static_cast<u128>(a.weight);
    return l != r ? l < r : a.order < b.order;
  });
  size_t next = 0;
  while (next < wants.size() && rest > 0 &&
         static_cast<u128>(wants[next].need) * total_weight <=
             static_cast<u128>(rest) * static_cast<u128>(wants[next].weight)) {
    share[static_cast<size_t>(wants[next].q)] += wants[next].need;
    rest -= wants[next].need;
    total_weight -= static_cast<u128>(wants[next].weight);
    ++next;
  }
  if (next == wants.size() || rest <= 0) return;
  // The others get rest * w / W each (less than their need), then the
  // remainder one byte each in the remainder order.
  std::vector<Want> open(wants.begin() + static_cast<std::ptrdiff_t>(next), wants.end());
  std::sort(open.begin(), open.end(), [](const Want& a, const Want& b) { return a.order < b.order; });
  std::vector<char> frac(open.size(), 0);
  int64_t given = 0;
  for (size_t k = 0; k < open.size(); ++k) {
    const auto [part, f] = MulDiv(rest, open[k].weight, total_weight);
    share[static_cast<size_t>(open[k].q)] += part;
    given += part;
    frac[k] = f;
  }
  rest -= given;
  for (size_t k = 0; k < open.size() && rest > 0; ++k) {
    if (frac[k]) {
      ++share[static_cast<size_t>(open[k].q)];
      --rest;
    }
  }
}

}  // namespace

QueueSet BuildQueueSet(std::vector<QueueSpec> specs, const TenancyPolicy& policy) {
  QueueSet set;
  // Unique names (a repeated one keeps the first), sorted by name.
  std::stable_sort(specs.begin(), specs.end(), [](const QueueSpec& a, const QueueSpec& b) { return a.name < b.name; });
  specs.erase(std::unique(specs.begin(), specs.end(),
                          [](const QueueSpec& a, const QueueSpec& b) { return a.name == b.name; }),
              specs.end());
  set.objects = specs.size();
  set.queues.reserve(specs.size() + 1);
  for (QueueSpec& s : specs) {
    Queue q;
    q.spec = std::move(s);
    set.queues.push_back(std::move(q));
  }
  const std::string& def = policy.default_queue;
  if (!def.empty()) {
    auto at = std::lower_bound(set.queues.begin(), set.queues.end(), def,
                               [](const Queue& q, const std::string& name) { return q.spec.name < name; });
    if (at == set.queues.end() || at->spec.name != def) {
      Queue d;
      d.spec.name = def;
      d.synthetic = true;
      d.unmanaged = true;
      d.message = "the default queue (no VramQueue object of this name): it serves every namespace no queue names";
      set.queues.insert(at, std::move(d));
    }
  }
  std::vector<Queue>& qs = set.queues;
  const size_t n = qs.size();
  auto index_of = [&](const std::string& name) -> int {
    auto at = std::lower_bound(qs.begin(), qs.end(), name,
                               [](const Queue& q, const std::string& nm) { return q.spec.name < nm; });
    return at != qs.end() && at->spec.name == name ? static_cast<int>(at - qs.begin()) : -1;
  };

  // 1. Each object on its own.
  for (Queue& q : qs) {
    if (q.synthetic) continue;
    if (q.spec.name.empty()) {
      Invalidate(&q, "Invalid", "a VramQueue without a name");
      continue;
    }
    std::string problem = OwnProblem(q.spec);
    if (!problem.empty()) Invalidate(&q, "Invalid", Prefix(q) + problem);
  }

  // 2. Parent links: cycles first (whatever else is wrong with their members).
  std::vector<int> link(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (!qs[i].synthetic && !qs[i].spec.parent.empty()) link[i] = index_of(qs[i].spec.parent);
  }
  for (const std::vector<int>& cycle : FindCycles(link)) {
    std::vector<std::string> names;
    for (int i : cycle) names.push_back(qs[static_cast<size_t>(i)].spec.name);
    for (size_t k = 0; k < cycle.size(); ++k) {
      Queue& q = qs[static_cast<size_t>(cycle[k])];
      if (!q.valid) continue;
      std::string path;
      const size_t shown = std::min<size_t>(cycle.size(), 8);
      for (size_t m = 0; m < shown; ++m) path += names[(k + m) % cycle.size()] + " -> ";
      if (shown < cycle.size()) path += "... -> ";
      path += q.spec.name;
      Invalidate(&q, "Cycle",
                 cycle.size() == 1 ? Prefix(q) + "it names itself as its parent"
                                   : Prefix(q) + "its parents form a cycle: " + path);
    }
  }

  // 3. The parent of each child: exists, is valid on its own, is top-level.
  // Judged on the validity after steps 1-2 so the order does not matter.
  std::vector<char> valid_before(n);
  for (size_t i = 0; i < n; ++i) valid_before[i] = qs[i].valid;
  for (size_t i = 0; i < n; ++i) {
    Queue& q = qs[i];
    if (!q.valid || q.spec.parent.empty()) continue;
    const int p = link[i];
    if (p < 0) {
      Invalidate(&q, "ParentNotFound", Prefix(q) + "parent " + q.spec.parent + " does not exist");
      continue;
    }
    const Queue& parent = qs[static_cast<size_t>(p)];
    if (parent.synthetic) {
      Invalidate(&q, "ParentNotFound",
                 Prefix(q) + "parent " + q.spec.parent +
                     " is the default queue vramd made (no VramQueue object of that name); it cannot have children");
    } else if (!valid_before[static_cast<size_t>(p)]) {
      Invalidate(&q, "ParentInvalid", Prefix(q) + "parent " + q.spec.parent + " is invalid (" + parent.reason + ")");
    } else if (!parent.spec.parent.empty()) {
      Invalidate(&q, "TooDeep",
                 Prefix(q) + "parent " + q.spec.parent + " has a parent itself (" + parent.spec.parent +
                     "); queues have two levels (department -> project)");
    }
  }

  // 4. A parent serves namespaces only through its children.
  std::vector<std::vector<int>> kids(n);
  for (size_t i = 0; i < n; ++i) {
    if (qs[i].valid && link[i] >= 0) kids[static_cast<size_t>(link[i])].push_back(static_cast<int>(i));
  }
  for (size_t p = 0; p < n; ++p) {
    Queue& parent = qs[p];
    if (kids[p].empty() || !parent.valid || parent.spec.namespaces.empty()) continue;
    std::vector<std::string> names;
    for (int c : kids[p]) names.push_back(qs[static_cast<size_t>(c)].spec.name);
    Invalidate(&parent, "ParentServesNamespaces",
               Prefix(parent) + "it has child queues (" + NameList(names) + ") and names namespaces (" +
                   NameList(parent.spec.namespaces) +
                   "); a parent serves namespaces only through its children: move them to a child");
    for (int c : kids[p]) {
      Queue& child = qs[static_cast<size_t>(c)];
      Invalidate(&child, "ParentInvalid", Prefix(child) + "parent " + parent.spec.name + " is invalid (" +
                                              parent.reason + ")");
    }
  }

  // 5. A child's quotas within its parent's.
  for (size_t i = 0; i < n; ++i) {
    Queue& q = qs[i];
    if (!q.valid || link[i] < 0) continue;
    const Queue& parent = qs[static_cast<size_t>(link[i])];
    if (q.spec.deserved > parent.spec.deserved) {
      Invalidate(&q, "ExceedsParent",
                 Prefix(q) + "deserved " + FormatBytes(q.spec.deserved) + " is above the deserved " +
                     FormatBytes(parent.spec.deserved) + " of its parent " + parent.spec.name);
    } else if (q.spec.limit && parent.spec.limit && *q.spec.limit > *parent.spec.limit) {
      Invalidate(&q, "ExceedsParent",
                 Prefix(q) + "limit " + FormatBytes(*q.spec.limit) + " is above the limit " +
                     FormatBytes(*parent.spec.limit) + " of its parent " + parent.spec.name);
    }
  }

  // 6. Namespaces: each to one valid leaf queue, the oldest (then by name).
  std::vector<char> has_child(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (qs[i].valid && link[i] >= 0) has_child[static_cast<size_t>(link[i])] = 1;
  }
  std::vector<int> leaves;
  for (size_t i = 0; i < n; ++i) {
    if (qs[i].valid && !has_child[i] && !qs[i].spec.namespaces.empty()) leaves.push_back(static_cast<int>(i));
  }
  std::sort(leaves.begin(), leaves.end(),
            [&](int a, int b) { return OlderThan(qs[static_cast<size_t>(a)], qs[static_cast<size_t>(b)]); });
  for (int i : leaves) {
    Queue& q = qs[static_cast<size_t>(i)];
    std::vector<std::string> taken;
    int holder = -1;
    for (const std::string& ns : q.spec.namespaces) {
      auto it = set.by_namespace.find(ns);
      if (it != set.by_namespace.end() && it->second != i) {
        if (holder < 0) holder = it->second;
        taken.push_back(ns);
      }
    }
    if (taken.empty()) {
      for (const std::string& ns : q.spec.namespaces) set.by_namespace.emplace(ns, i);
      continue;
    }
    const Queue& h = qs[static_cast<size_t>(holder)];
    const bool same_age = h.spec.created_ms == q.spec.created_ms;
    Invalidate(&q, "NamespaceConflict",
               Prefix(q) + (taken.size() == 1 ? "namespace " : "namespaces ") + NameList(taken) +
                   (taken.size() == 1 ? " is" : " are") + " already served by queue " + h.spec.name +
                   (same_age ? " (created at the same time, first by name)" : " (created earlier)") +
                   "; a namespace belongs to one queue");
  }

  // 7. The links of the valid queues and the default queue.
  for (size_t i = 0; i < n; ++i) {
    if (qs[i].valid && link[i] >= 0) {
      qs[i].parent = link[i];
      qs[static_cast<size_t>(link[i])].children.push_back(static_cast<int>(i));
    }
  }
  const int d = def.empty() ? -1 : index_of(def);
  set.default_queue = d >= 0 && qs[static_cast<size_t>(d)].valid && qs[static_cast<size_t>(d)].children.empty() ? d : -1;
  return set;
}

std::vector<QueueUsage> QueueUsageOf(const QueueSet& set, const Snapshot& snap,
                                     std::span<const PendingPod> pending, const TenancyPolicy& policy) {
  std::vector<QueueUsage> usage(set.queues.size());
  if (usage.empty()) return usage;
  auto queue_of = [&](const std::string& ns) {
    auto it = set.by_namespace.find(ns);
    return it != set.by_namespace.end() ? it->second : set.default_queue;
  };
  // Room held for a pending pod (issue 32) is that pod's pending demand,
  // counted below while it is pending: not twice. A hold whose pod is not
  // pending (bound into it, its bound mark not written yet: issue 36; or no
  // longer refused) is room taken all the same: allocated.
  std::unordered_set<std::string_view> waiting;
  for (const PendingPod& p : pending) waiting.insert(p.uid);
  for (const auto& [name, node] : snap.nodes) {
    for (const Entry& e : node.entries) {
      if (e.state == EntryState::kHold && waiting.contains(e.pod_uid)) continue;
      const int64_t bytes = EntryBytes(e);
      if (bytes <= 0) continue;
      const int q = queue_of(e.ns);
      if (q < 0) continue;
      QueueUsage& u = usage[static_cast<size_t>(q)];
      u.allocated = SatAdd(u.allocated, bytes);
      if (!IsPreemptible(e, policy)) u.allocated_nonpreemptible = SatAdd(u.allocated_nonpreemptible, bytes);
    }
  }
  for (const PendingPod& p : pending) {
    if (p.demand.total <= 0) continue;
    const int q = queue_of(p.ns);
    if (q >= 0) usage[static_cast<size_t>(q)].pending = SatAdd(usage[static_cast<size_t>(q)].pending, p.demand.total);
  }
  // Two levels: children hold no children, so one pass adds them up.
  for (size_t i = 0; i < set.queues.size(); ++i) {
    const int p = set.queues[i].parent;
    if (p < 0 || !set.queues[i].valid) continue;
    QueueUsage& to = usage[static_cast<size_t>(p)];
    to.allocated = SatAdd(to.allocated, usage[i].allocated);
    to.allocated_nonpreemptible = SatAdd(to.allocated_nonpreemptible, usage[i].allocated_nonpreemptible);
    to.pending = SatAdd(to.pending, usage[i].pending);
  }
  return usage;
}

std::vector<int64_t> FairShares(const QueueSet& set, std::span<const QueueUsage> usage, int64_t capacity) {
  const size_t n = set.queues.size();
  std::vector<int64_t> share(n, 0);
  // Capped demand: a leaf's allocated + pending, a parent's what its
  // children can use (a child of weight 0 no more than its deserved); each
  // capped by the queue's limit.
  std::vector<int64_t> cap(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Queue& q = set.queues[i];
    if (!q.valid || !q.children.empty()) continue;
    if (i < usage.size()) cap[i] = SatAdd(std::max<int64_t>(usage[i].allocated, 0), std::max<int64_t>(usage[i].pending, 0));
    if (q.spec.limit) cap[i] = std::min(cap[i], std::max<int64_t>(*q.spec.limit, 0));
  }
  std::vector<int> top;
  for (size_t i = 0; i < n; ++i) {
    const Queue& q = set.queues[i];
    if (!q.valid) continue;
    if (!q.children.empty()) {
      for (int c : q.children) {
        const Queue& child = set.queues[static_cast<size_t>(c)];
        const int64_t usable = child.spec.weight > 0 ? cap[static_cast<size_t>(c)]
                                                     : std::min(cap[static_cast<size_t>(c)], child.spec.deserved);
        cap[i] = SatAdd(cap[i], usable);
      }
      if (q.spec.limit) cap[i] = std::min(cap[i], std::max<int64_t>(*q.spec.limit, 0));
    }
    if (q.parent < 0) top.push_back(static_cast<int>(i));
  }
  Split(set, std::move(top), capacity, cap, &share);
  for (size_t i = 0; i < n; ++i) {
    const Queue& q = set.queues[i];
    if (q.valid && !q.children.empty()) Split(set, q.children, share[i], cap, &share);
  }
  return share;
}

std::vector<QueueStatus> QueueStatuses(const QueueSet& set, std::span<const QueueUsage> usage,
                                       std::span<const int64_t> fair_shares) {
  std::vector<QueueStatus> out;
  out.reserve(set.queues.size());
  for (size_t i = 0; i < set.queues.size(); ++i) {
    const Queue& q = set.queues[i];
    QueueStatus st;
    st.name = q.spec.name;
    st.parent = q.spec.parent;
    st.valid = q.valid;
    st.synthetic = q.synthetic;
    st.reason = q.reason;
    st.message = q.message;
    st.deserved = q.spec.deserved;
    st.limit = q.spec.limit;
    st.weight = q.spec.weight;
    if (i < usage.size()) {
      st.allocated = usage[i].allocated;
      st.allocated_nonpreemptible = usage[i].allocated_nonpreemptible;
      st.pending = usage[i].pending;
    }
    if (i < fair_shares.size()) st.fair_share = fair_shares[i];
    out.push_back(std::move(st));
  }
  return out;
}

TenancyView ComputeTenancy(QueueSetPtr set, const Snapshot& snap, std::span<const PendingPod> pending,
                           const TenancyPolicy& policy) {
  TenancyView view;
  view.set = set ? std::move(set) : std::make_shared<const QueueSet>(BuildQueueSet({}, policy));
  view.policy = policy;
  int64_t capacity = 0;
  for (const auto& [name, node] : snap.nodes) {
    for (const Gpu& g : node.gpus) {
      if (g.capacity > 0) capacity = SatAdd(capacity, g.capacity);
    }
  }
  view.usage = QueueUsageOf(*view.set, snap, pending, policy);
  view.fair_shares = FairShares(*view.set, view.usage, capacity);
  view.statuses = QueueStatuses(*view.set, view.usage, view.fair_shares);
  return view;
}

bool AdmissionNeedsUsage(const QueueSet& set, std::string_view ns, bool preemptible) {
  if (set.empty()) return false;
  const int qi = set.QueueOf(ns);
  if (qi < 0) return false;
  const Queue& q = set.queues[static_cast<size_t>(qi)];
  if (q.unmanaged || !q.valid) return false;
  if (!preemptible || q.spec.limit) return true;
  return q.parent >= 0 && set.queues[static_cast<size_t>(q.parent)].spec.limit.has_value();
}

Admission AdmitToQueue(const QueueSet& set, std::span<const QueueUsage> usage, std::string_view ns, int64_t total,
                       bool preemptible, int64_t own_bytes) {
  Admission a;
  if (set.queues.empty()) return a;
  a.queue = set.QueueOf(ns);
  if (set.empty() || a.queue < 0) return a;
  const Queue& q = set.queues[static_cast<size_t>(a.queue)];
  if (q.unmanaged || !q.valid) return a;
  own_bytes = std::max<int64_t>(own_bytes, 0);
  if (total <= own_bytes) return a;  // it takes nothing it does not hold already
  auto held = [&](int i, bool nonpreemptible) {
    if (static_cast<size_t>(i) >= usage.size()) return int64_t{0};
    const int64_t v = nonpreemptible ? usage[static_cast<size_t>(i)].allocated_nonpreemptible
                                     : usage[static_cast<size_t>(i)].allocated;
    return std::max<int64_t>(v - own_bytes, 0);
  };
  const int levels[2] = {a.queue, q.parent};
  // Hard limits: the queue's, then its parent's.
  for (int i : levels) {
    if (i < 0) continue;
    const Queue& x = set.queues[static_cast<size_t>(i)];
    if (!x.spec.limit) continue;
    const int64_t alloc = held(i, false);
    if (total > *x.spec.limit - alloc) {  // alloc + total > limit, without overflow
      a.ok = false;
      a.reason = "queue " + q.spec.name + (i == a.queue ? "" : "'s parent " + x.spec.name) + " at its limit: " +
                 FormatBytes(alloc) + " allocated + " + FormatBytes(total) + " requested > limit " +
                 FormatBytes(*x.spec.limit);
      return a;
    }
  }
  if (preemptible) return a;
  // Non-preemptible VRAM only within the deserved quota: the queue's, then its parent's.
  for (int i : levels) {
    if (i < 0) continue;
    const Queue& x = set.queues[static_cast<size_t>(i)];
    const int64_t in_use = held(i, true);
    if (total > x.spec.deserved - in_use) {
      a.ok = false;
      if (i == a.queue) {
        a.reason = "queue " + q.spec.name + ": non-preemptible pods may use only its deserved " +
                   FormatBytes(x.spec.deserved) + " (" + FormatBytes(in_use) + " in use, " + FormatBytes(total) +
                   " requested); make the pod preemptible or raise the queue's deserved";
      } else {
        a.reason = "queue " + q.spec.name + ": non-preemptible pods may use only the deserved " +
                   FormatBytes(x.spec.deserved) + " of its parent " + x.spec.name + " (" + FormatBytes(in_use) +
                   " in use there, " + FormatBytes(total) + " requested); make the pod preemptible or raise " +
                   x.spec.name + "'s deserved";
      }
      return a;
    }
  }
  return a;
}

}  // namespace vramd::ledger
