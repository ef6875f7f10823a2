#include "vramd/ledger/protection.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <functional>
#include <set>
#include <unordered_set>
#include <utility>

#include "vramd/ledger/fit.h"
#include "vramd/ledger/quantity.h"

namespace vramd::ledger {

// ---- The pressure watchdog ----------------------------------------------

const char* VictimReasonName(VictimReason r) {
  return r == VictimReason::kDesignatedVictim ? "designated-victim" : "over-budget";
}

bool IsProtected(std::string_view ns, std::string_view priority_class, int32_t priority,
                 const std::vector<std::string>& protected_classes,
                 const std::vector<std::string>& system_namespaces) {
  const bool system_ns = std::find(system_namespaces.begin(), system_namespaces.end(), ns) != system_namespaces.end();
  if (system_ns && priority >= kSystemPriorityFloor) return true;
  if (priority_class.empty()) return false;
  if (system_ns && (priority_class == kSystemClusterCritical || priority_class == kSystemNodeCritical)) return true;
  return std::find(protected_classes.begin(), protected_classes.end(), priority_class) != protected_classes.end();
}

int64_t WatchdogFloor(int64_t total, const WatchdogPolicy& policy) {
  if (policy.floor_percent > 0) {
    return static_cast<int64_t>(std::floor(static_cast<double>(total) * policy.floor_percent / 100.0));
  }
  return policy.floor_bytes;
}

int64_t OverBudgetBytes(const Entry& e, int64_t now_ms, int64_t usage_max_age_ms) {
  if (!UsageFresh(e.used_ts_ms, now_ms, usage_max_age_ms)) return 0;
  const int64_t declared = std::max<int64_t>(0, DeclaredBytes(e));
  return e.used > declared ? e.used - declared : 0;
}

namespace {

bool HoldsGpu(const Entry& e, int gpu) { return std::find(e.gpus.begin(), e.gpus.end(), gpu) != e.gpus.end(); }

WatchdogVictim VictimOf(const Entry& e, int64_t used_here, VictimReason reason) {
  return WatchdogVictim{e.pod_uid, e.ns, e.name, reason, used_here, DeclaredBytes(e), e.priority};
}

// The pod's figure in the GPU's usage report (0 when the report names it nowhere).
int64_t ReportedShare(const Gpu& g, const std::string& uid) {
  auto it = std::lower_bound(g.pods.begin(), g.pods.end(), uid,
                             [](const PodUsage& u, const std::string& id) { return u.uid < id; });
  return it != g.pods.end() && it->uid == uid ? it->used : 0;
}

// Position of GPU `index` among node.gpus, or -1.
int GpuPos(const Node& node, int index) {
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (node.gpus[i].index == index) return static_cast<int>(i);
  }
  return -1;
}


// Chooses the victims on GPU g (p->gpu) of `node`, or says why there are none.
void ChooseVictim(const Node& node, const Gpu& g, const WatchdogPolicy& policy, int64_t now_ms,
                  const std::unordered_map<std::string, int64_t>* deleting, GpuPressure* p) {
  struct Candidate {
    const Entry* e;
    int64_t used, over;
  };
  std::vector<Candidate> designated, offenders;
  int holders = 0, terminating = 0, protected_count = 0, stale = 0, idle_victims = 0, relieving = 0;
  int64_t relief = 0;     // the use here of terminating pods still within their deletion time
  bool any_over = false;  // a pod over its budget here, protected or not
  auto over_here = [&](const Entry& e) {
    const int64_t used = ReportedShare(g, e.pod_uid), declared = std::max<int64_t>(0, DeclaredBytes(e));
    return used > declared ? used - declared : 0;
  };
  for (const Entry& e : node.entries) {
    if (!HoldsGpu(e, p->gpu) || e.state == EntryState::kHold) continue;  // a hold runs nothing
    ++holders;
    if (e.state == EntryState::kTerminating) {
      ++terminating;
      if (deleting != nullptr) {
        auto it = deleting->find(e.pod_uid);
        const int64_t use = ReportedShare(g, e.pod_uid);
        if (it != deleting->end() && now_ms <= it->second + policy.terminating_margin_ms && use > 0) {
          relief += use;
          ++relieving;
        }
      }
      continue;
    }
    if (UsageFresh(e.used_ts_ms, now_ms, policy.usage_max_age_ms) && over_here(e) > policy.min_over_budget_bytes) {
      any_over = true;
    }
    if (IsProtected(e.ns, e.priority_class, e.priority, policy.protected_classes, policy.system_namespaces)) {
      ++protected_count;
      continue;
    }
    if (!UsageFresh(e.used_ts_ms, now_ms, policy.usage_max_age_ms)) {
      ++stale;
      continue;
    }
    const int64_t used = ReportedShare(g, e.pod_uid), over = over_here(e);
    if (e.victim && used <= 0) ++idle_victims;
    if (e.victim && used > 0) {
      designated.push_back({&e, used, over});
    } else if (over > policy.min_over_budget_bytes) {
      offenders.push_back({&e, used, over});
    }
  }
  // No pod runs over its budget here and the bytes outside vramd's pods
  // cover the deficit: evicting a pod (even a designated victim) would only
  // make room for what is not vramd's to stop.
  const int64_t outside = g.outside_pods + g.untracked;
  p->deficit = p->floor - p->free;
  if (relief > 0 && relief >= p->deficit) {
    p->no_victim = "relief on its way: " + FormatBytes(relief) + " from " + std::to_string(relieving) +
                   " terminating pod(s) covers the deficit " + FormatBytes(p->deficit);
    return;
  }
  p->deficit -= relief;  // what the victims must free
  if (holders > 0 && !any_over && outside > 0 && outside >= p->deficit) {
    p->no_victim = "the pressure is outside vramd's pods: " + FormatBytes(g.outside_pods) + " outside pods + " +
                   FormatBytes(g.untracked) + " untracked >= the deficit " + FormatBytes(p->deficit) +
                   ", and no pod is over its budget";
    return;
  }
  std::sort(designated.begin(), designated.end(), [](const Candidate& a, const Candidate& b) {
    if (a.e->priority != b.e->priority) return a.e->priority < b.e->priority;
    if (a.used != b.used) return a.used > b.used;
    return a.e->pod_uid < b.e->pod_uid;
  });
  std::sort(offenders.begin(), offenders.end(), [](const Candidate& a, const Candidate& b) {
    if (a.over != b.over) return a.over > b.over;
    if (a.e->priority != b.e->priority) return a.e->priority < b.e->priority;
    return a.e->pod_uid < b.e->pod_uid;
  });
  p->candidates.reserve(designated.size() + offenders.size());
  for (const Candidate& c : designated) p->candidates.push_back(VictimOf(*c.e, c.used, VictimReason::kDesignatedVictim));
  for (const Candidate& c : offenders) p->candidates.push_back(VictimOf(*c.e, c.used, VictimReason::kOverBudget));
  if (!p->candidates.empty()) {
    for (size_t i : CoverDeficit(p->candidates, p->deficit, {})) p->victims.push_back(p->candidates[i]);
    if (!p->victims.empty()) {
      p->victim = p->victims.front();
      return;
    }
  }
  std::string counts = std::to_string(protected_count) + " protected, " + std::to_string(stale) + " stale";
  if (terminating > 0) counts += ", " + std::to_string(terminating) + " terminating";
  if (holders == 0) {
    p->no_victim = "no pod holds this GPU";
  } else if (terminating == holders) {
    p->no_victim = "every pod on this GPU is already terminating";
  } else if (protected_count + stale + terminating == holders) {
    p->no_victim = "every pod on this GPU is protected or its usage is stale (" + counts + ")";
  } else {
    p->no_victim = idle_victims > 0 ? "no designated victim that uses memory and no pod over its budget"
                                    : "no designated victim and no pod over its budget";
    if (protected_count + stale + terminating > 0) p->no_victim += " (skipped: " + counts + ")";
  }
}

}  // namespace

std::vector<size_t> CoverDeficit(const std::vector<WatchdogVictim>& candidates, int64_t deficit,
                                 const std::set<std::string>& excluded) {
  std::vector<size_t> open;  // candidates not excluded, in preference order
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!excluded.contains(candidates[i].pod_uid)) open.push_back(i);
  }
  if (deficit <= 0 || open.empty()) return {};
  const auto use = [&](size_t i) { return std::max<int64_t>(0, candidates[i].used); };
  // The fewest that can cover it: the largest uses first.
  std::vector<int64_t> by_use;
  by_use.reserve(open.size());
  for (size_t i : open) by_use.push_back(use(i));
  std::sort(by_use.begin(), by_use.end(), std::greater<>());
  size_t fewest = 0;
  for (int64_t sum = 0; fewest < by_use.size() && sum < deficit; ++fewest) sum += by_use[fewest];
  int64_t all = 0;
  for (int64_t u : by_use) all += u;
  if (all < deficit) return {open.front()};  // nothing covers it: the first alone
  // The earliest set of that size in preference order: take each candidate
  // in turn when the sets that start with what is taken and it can still
  // cover the deficit with the largest of the candidates after it.
  std::vector<size_t> chosen;
  int64_t sum = 0;
  for (size_t k = 0; k < open.size() && chosen.size() < fewest; ++k) {
    const size_t left = fewest - chosen.size() - 1;  // to take after this one
    std::vector<int64_t> rest;
    for (size_t m = k + 1; m < open.size(); ++m) rest.push_back(use(open[m]));
    std::partial_sort(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(std::min(left, rest.size())),
                      rest.end(), std::greater<>());
    int64_t best = sum + use(open[k]);
    for (size_t m = 0; m < left && m < rest.size(); ++m) best += rest[m];
    if (best >= deficit && rest.size() >= left) {
      chosen.push_back(open[k]);
      sum += use(open[k]);
    }
  }
  return chosen;
}

void RemoveFromNode(Node* node, const std::string& uid) {
  auto it = std::find_if(node->entries.begin(), node->entries.end(),
                         [&](const Entry& e) { return e.pod_uid == uid; });
  if (it == node->entries.end()) return;
  for (int index : it->gpus) {
    const int pos = GpuPos(*node, index);
    if (pos < 0) continue;
    Gpu& g = node->gpus[static_cast<size_t>(pos)];
    g.used = std::max<int64_t>(0, g.used - ReportedShare(g, uid));
  }
  node->entries.erase(it);
}

std::vector<GpuPressure> PlanWatchdog(const Snapshot& snap, const WatchdogPolicy& policy, int64_t now_ms,
                                      const std::unordered_map<std::string, int64_t>* deleting) {
  std::vector<GpuPressure> out;
  for (const auto& [name, node] : snap.nodes) {
    std::vector<int64_t> allocated;  // computed for a node with a GPU under pressure only
    std::vector<GpuPeak> peaks;
    for (size_t k = 0; k < node.gpus.size(); ++k) {
      const Gpu& g = node.gpus[k];
      if (!UsageFresh(g.used_ts_ms, now_ms, policy.usage_max_age_ms)) continue;
      const int64_t total = g.total > 0 ? g.total : g.capacity;
      const int64_t floor = WatchdogFloor(total, policy);
      const int64_t free = total - g.used;
      if (free >= floor) continue;
      if (allocated.empty()) {
        allocated = AllocatedPerGpu(node);
        peaks = GpuPeaks(node);
      }
      GpuPressure p;
      p.node = name;
      p.gpu = g.index;
      p.total = total;
      p.used = g.used;
      p.free = free;
      p.floor = floor;
      p.report_ms = g.used_ts_ms;
      const int64_t a = allocated[k], peak = peaks[k].peak;
      if (g.used > a) {
        p.cause = "over budget or untracked (U > A)";
      } else if (peak > g.capacity) {
        p.cause = "peak above capacity (P > C)";
      }
      if (p.cause.empty()) {
        p.no_victim = "no cause: used " + FormatBytes(g.used) + " is within the " + FormatBytes(a) +
                      " its pods reserved (capacity " + FormatBytes(g.capacity) +
                      "): the floor is above the reserve, nothing runs away";
      } else {
        ChooseVictim(node, g, policy, now_ms, deleting, &p);
      }
      out.push_back(std::move(p));
    }
  }
  std::sort(out.begin(), out.end(), [](const GpuPressure& a, const GpuPressure& b) {
    return a.node != b.node ? a.node < b.node : a.gpu < b.gpu;
  });
  return out;
}

namespace {
std::string StreakKey(const std::string& node, int gpu) { return node + '\n' + std::to_string(gpu); }
}  // namespace

void PressureStreaks::Observe(const std::vector<GpuPressure>& pressure) {
  std::unordered_map<std::string, Streak> next;
  next.reserve(pressure.size());
  for (const GpuPressure& p : pressure) {
    if (p.cause.empty()) continue;
    std::string key = StreakKey(p.node, p.gpu);
    Streak s;
    if (auto it = streaks_.find(key); it != streaks_.end()) s = it->second;
    if (s.reports == 0 || p.report_ms != s.last_report_ms) {
      ++s.reports;
      s.last_report_ms = p.report_ms;
    }
    next.emplace(std::move(key), s);
  }
  streaks_ = std::move(next);
}

int PressureStreaks::Reports(const std::string& node, int gpu) const {
  auto it = streaks_.find(StreakKey(node, gpu));
  return it == streaks_.end() ? 0 : it->second.reports;
}

// ---- Who vramd's own evictions may take at all ------------------------------

std::string GangOf(const Entry& e) { return e.gang.empty() ? std::string() : e.ns + "/" + e.gang; }

GangSizes CountGangs(const Snapshot& snap) {
  GangSizes sizes;
  for (const auto& [name, node] : snap.nodes) {
    for (const Entry& e : node.entries) {
      if (!e.gang.empty() && e.state != EntryState::kTerminating) ++sizes[GangOf(e)];
    }
  }
  return sizes;
}

std::string EvictionExemption(const Entry& e, const GangSizes& gangs) {
  if (e.state == EntryState::kHold) return "room held for a pending pod";
  if (e.owner_kind.empty() && !e.evictable && !e.victim) return "bare pod";
  if (!e.gang.empty()) {
    auto it = gangs.find(GangOf(e));
    const int n = it == gangs.end() ? 0 : it->second;
    if (n > 1) return "rank of gang " + e.gang + " (" + std::to_string(n) + " live pods)";
  }
  return "";
}

std::optional<Entry> RoomMadeFor(const Node& node, const std::vector<std::string>& victims, const PendingPod& pod,
                                 const Policy& policy, int64_t now_ms) {
  Node trial = node;
  for (const std::string& uid : victims) RemoveFromNode(&trial, uid);
  std::erase_if(trial.entries, [&](const Entry& e) { return e.pod_uid == pod.uid; });  // an older hold of its own
  const NodeDecision d = DecideNode(&trial, node.name, pod.demand, policy, now_ms);
  if (d.verdict != Verdict::kFits) return std::nullopt;
  Entry hold;
  hold.pod_uid = pod.uid;
  hold.ns = pod.ns;
  hold.name = pod.name;
  hold.gpus = d.choice.gpus;
  hold.per_gpu = pod.demand.per_gpu;
  hold.priority = pod.demand.priority;
  hold.state = EntryState::kHold;
  return hold;
}

// ---- Idle tracking --------------------------------------------------------

IdleTracker::IdleTracker(int64_t usage_change_bytes, int64_t usage_max_age_ms)
    : usage_change_bytes_(usage_change_bytes), usage_max_age_ms_(usage_max_age_ms) {}

void IdleTracker::Observe(const Entry& e, int64_t lock_ms, int64_t now_ms) {
  if (e.idle_ttl_ms <= 0) return;
  auto [it, first] = seen_.try_emplace(e.pod_uid);
  IdleObservation& o = it->second;
  o.observed_ms = now_ms;
  int64_t active = 0;
  if (first || !UsageFresh(e.used_ts_ms, now_ms, usage_max_age_ms_)) {
    // A first sighting, or no fresh figure to compare: missing or stale
    // usage is no evidence of idleness, so the pod counts as active.
    active = now_ms;
  } else {
    // |used - ref| in unsigned arithmetic: exact for any two int64 values.
    const uint64_t a = static_cast<uint64_t>(e.used), b = static_cast<uint64_t>(o.ref_used);
    const uint64_t change = e.used > o.ref_used ? a - b : b - a;
    if (usage_change_bytes_ < 0 || change > static_cast<uint64_t>(usage_change_bytes_)) active = now_ms;
    // The agent saw the pod's processes run work (utilization, engine time).
    if (e.busy) active = now_ms;
  }
  if (lock_ms > 0 && lock_ms > o.last_active_ms) active = std::max(active, lock_ms);
  if (active == 0) return;
  o.ref_used = e.used;
  o.last_active_ms = std::max(o.last_active_ms, active);
}

void IdleTracker::Forget(const std::set<std::string>& keep_uids) {
  std::erase_if(seen_, [&](const auto& kv) { return !keep_uids.contains(kv.first); });
}

void IdleTracker::ForgetUnobserved(int64_t since_ms) {
  std::erase_if(seen_, [&](const auto& kv) { return kv.second.observed_ms < since_ms; });
}

int64_t IdleTracker::LastActive(const std::string& uid) const {
  const IdleObservation* o = Find(uid);
  return o != nullptr ? o->last_active_ms : 0;
}

const IdleObservation* IdleTracker::Find(const std::string& uid) const {
  auto it = seen_.find(uid);
  return it != seen_.end() ? &it->second : nullptr;
}

int64_t IdleFor(const Entry& e, const IdleTracker& tracker, int64_t now_ms) {
  if (e.idle_ttl_ms <= 0 || e.state == EntryState::kTerminating) return -1;
  const int64_t last = tracker.LastActive(e.pod_uid);
  if (last == 0) return -1;
  const int64_t idle = now_ms - last;
  return idle >= e.idle_ttl_ms ? idle : -1;
}

const char* IdleModeName(IdleMode m) { return m == IdleMode::kAlways ? "always" : "on-demand"; }

bool ParseIdleMode(std::string_view s, IdleMode* out) {
  if (s == "on-demand") *out = IdleMode::kOnDemand;
  else if (s == "always") *out = IdleMode::kAlways;
  else return false;
  return true;
}

namespace {

struct IdleCandidate {
  const Entry* entry = nullptr;
  int64_t idle_ms = 0;
};

// Longest idle first, ties by uid.
bool IdleOrder(const IdleCandidate& a, const IdleCandidate& b) {
  return a.idle_ms != b.idle_ms ? a.idle_ms > b.idle_ms : a.entry->pod_uid < b.entry->pod_uid;
}

// A copy of one node on which DecideNode is tried without subsets of its
// idle candidates. The candidates' entries live apart and are moved back in
// for a trial (no copying per trial); the GPUs' reported usage is lowered by
// the removed candidates' shares and restored afterwards.
class NodeTrial {
 public:
  NodeTrial(const Node& base, const std::vector<IdleCandidate>& cands) {
    node_.name = base.name;
    node_.gpus = base.gpus;
    node_.models = base.models;
    std::unordered_set<const Entry*> is_cand;
    for (const IdleCandidate& c : cands) is_cand.insert(c.entry);
    node_.entries.reserve(base.entries.size());
    for (const Entry& e : base.entries) {
      if (!is_cand.contains(&e)) node_.entries.push_back(e);
    }
    for (const IdleCandidate& c : cands) {
      cands_.push_back(*c.entry);
      std::vector<std::pair<size_t, int64_t>> share;
      for (int index : c.entry->gpus) {
        const int pos = GpuPos(base, index);
        if (pos >= 0) share.emplace_back(pos, ReportedShare(base.gpus[static_cast<size_t>(pos)], c.entry->pod_uid));
      }
      shares_.push_back(std::move(share));
    }
    for (const Gpu& g : node_.gpus) base_used_.push_back(g.used);
  }

  // Whether the pod fits once the candidates at `removed` (positions in the
  // candidate list, ascending) are gone.
  bool FitsWithout(const std::vector<size_t>& removed, const VramRequest& req, const Policy& policy,
                   int64_t now_ms) {
    ++trials_;
    size_t r = 0;
    std::vector<size_t> moved;
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (r < removed.size() && removed[r] == i) {
        ++r;
        for (const auto& [pos, bytes] : shares_[i]) {
          node_.gpus[pos].used = std::max<int64_t>(0, node_.gpus[pos].used - bytes);
        }
      } else {
        node_.entries.push_back(std::move(cands_[i]));
        moved.push_back(i);
      }
    }
    const bool fits = DecideNode(&node_, node_.name, req, policy, now_ms).verdict == Verdict::kFits;
    for (size_t k = moved.size(); k-- > 0;) {
      cands_[moved[k]] = std::move(node_.entries.back());
      node_.entries.pop_back();
    }
    for (size_t i = 0; i < node_.gpus.size(); ++i) node_.gpus[i].used = base_used_[i];
    return fits;
  }

  int trials() const { return trials_; }

 private:
  Node node_;
  std::vector<Entry> cands_;
  std::vector<std::vector<std::pair<size_t, int64_t>>> shares_;
  std::vector<int64_t> base_used_;
  int trials_ = 0;
};

// The fewest candidates (positions, ascending; at most max_k) whose removal
// makes `req` fit, preferring the longest idle (combinations in
// lexicographic order of idle rank); empty when none does. Beyond
// kMaxIdleTrialsPerNode trials, a greedy set (longest idle first until it
// fits, then each member dropped again when the rest still suffice).
std::vector<size_t> FewestToEvict(NodeTrial& trial, size_t n, size_t max_k, const VramRequest& req,
                                  const Policy& policy, int64_t now_ms) {
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  if (!trial.FitsWithout(all, req, policy, now_ms)) return {};
  const size_t top = std::min(max_k, n);
  bool exhausted = false;
  for (size_t k = 1; k <= top && !exhausted; ++k) {
    std::vector<size_t> c(k);
    for (size_t i = 0; i < k; ++i) c[i] = i;
    while (true) {
      if (k == n) return c;  // every candidate: known to fit
      if (trial.trials() >= kMaxIdleTrialsPerNode) {
        exhausted = true;
        break;
      }
      if (trial.FitsWithout(c, req, policy, now_ms)) return c;
      // The next combination in lexicographic order.
      size_t i = k;
      while (i > 0 && c[i - 1] == n - k + (i - 1)) --i;
      if (i == 0) break;
      ++c[i - 1];
      for (size_t j = i; j < k; ++j) c[j] = c[j - 1] + 1;
    }
  }
  if (!exhausted) return {};
  std::vector<size_t> set;
  for (size_t i = 0; i < n; ++i) {
    set.push_back(i);
    if (trial.FitsWithout(set, req, policy, now_ms)) break;
  }
  for (size_t k = set.size(); k-- > 0;) {
    std::vector<size_t> less = set;
    less.erase(less.begin() + static_cast<std::ptrdiff_t>(k));
    if (!less.empty() && trial.FitsWithout(less, req, policy, now_ms)) set = std::move(less);
  }
  if (set.size() > max_k) return {};
  return set;
}

// The nodes as earlier decisions of one PlanIdle call left them: changed
// copies over the snapshot.
class NodeView {
 public:
  explicit NodeView(const Snapshot& snap) : snap_(snap) {}
  const Node* Get(const std::string& name) const {
    auto it = changed_.find(name);
    return it != changed_.end() ? &it->second : snap_.Find(name);
  }
  bool Changed(const std::string& name) const { return changed_.contains(name); }
  Node* Mutable(const std::string& name) {
    auto it = changed_.find(name);
    if (it != changed_.end()) return &it->second;
    const Node* n = snap_.Find(name);
    if (n == nullptr) return nullptr;
    return &changed_.emplace(name, *n).first->second;
  }

 private:
  const Snapshot& snap_;
  std::unordered_map<std::string, Node> changed_;
};

std::vector<IdleEviction> PlanAlways(const Snapshot& snap, const IdleTracker& tracker, int64_t now_ms) {
  const GangSizes gangs = CountGangs(snap);
  struct Idle {
    int64_t idle_ms;
    const std::string* node;
    const Entry* entry;
  };
  std::vector<Idle> idle;
  for (const auto& [name, node] : snap.nodes) {
    for (const Entry& e : node.entries) {
      const int64_t ms = IdleFor(e, tracker, now_ms);
      if (ms >= 0 && EvictionExemption(e, gangs).empty()) idle.push_back(Idle{ms, &name, &e});
    }
  }
  std::sort(idle.begin(), idle.end(), [](const Idle& a, const Idle& b) {
    if (a.idle_ms != b.idle_ms) return a.idle_ms > b.idle_ms;
    if (*a.node != *b.node) return *a.node < *b.node;
    return a.entry->pod_uid < b.entry->pod_uid;
  });
  std::vector<IdleEviction> out(idle.size());
  for (size_t i = 0; i < idle.size(); ++i) {
    out[i].node = *idle[i].node;
    out[i].pod_uid = idle[i].entry->pod_uid;
    out[i].ns = idle[i].entry->ns;
    out[i].name = idle[i].entry->name;
    out[i].idle_ms = idle[i].idle_ms;
  }
  return out;
}

}  // namespace

std::vector<IdleEviction> PlanIdle(const Snapshot& snap, const IdleTracker& tracker,
                                   const std::vector<PendingPod>& pending, IdleMode mode, const Policy& policy,
                                   int64_t now_ms, const std::unordered_map<std::string, int64_t>* deleting) {
  if (mode == IdleMode::kAlways) return PlanAlways(snap, tracker, now_ms);

  std::vector<const PendingPod*> order;
  for (const PendingPod& p : pending) {
    if (p.demand.wants_vram() && p.demand.per_gpu > 0 && p.demand.gpu_count >= 1) order.push_back(&p);
  }
  std::stable_sort(order.begin(), order.end(), [](const PendingPod* a, const PendingPod* b) {
    return a->refused_ms != b->refused_ms ? a->refused_ms < b->refused_ms : a->uid < b->uid;
  });

  std::vector<IdleEviction> out;
  std::unordered_set<std::string> taken;  // idle pods already given to a pending pod
  NodeView view(snap);
  const GangSizes gangs = CountGangs(snap);
  // The pending pod placed on a node of `view` (when it fits there).
  auto place = [&](Node* w, const std::string& name, const PendingPod& p) {
    const NodeDecision d = DecideNode(w, name, p.demand, policy, now_ms);
    if (d.verdict != Verdict::kFits) return;
    Entry e;
    e.pod_uid = p.uid;
    e.ns = p.ns;
    e.name = p.name;
    e.gpus = d.choice.gpus;
    e.per_gpu = d.choice.per_gpu;
    e.state = EntryState::kReserved;
    e.created_ms = now_ms;
    RecordDemand(p.demand, &e);
    w->entries.push_back(std::move(e));
  };
  // Whether a terminating entry's room is on its way (kTerminatingReliefMarginMs).
  auto relieving = [&](const Entry& e) {
    if (e.state != EntryState::kTerminating || deleting == nullptr) return false;
    auto it = deleting->find(e.pod_uid);
    return it != deleting->end() && now_ms <= it->second + kTerminatingReliefMarginMs;
  };
  // The nodes holding such entries (one look at the snapshot, and only when
  // some pod is being deleted).
  std::unordered_set<std::string> relief_nodes;
  if (deleting != nullptr && !deleting->empty()) {
    for (const auto& [name, node] : snap.nodes) {
      if (std::any_of(node.entries.begin(), node.entries.end(), relieving)) relief_nodes.insert(name);
    }
  }
  for (const PendingPod* p : order) {
    if (FindHold(snap, p->uid) != nullptr) continue;  // room was made for it already: it waits for its hold
    std::vector<std::string> names = p->nodes;
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());

    // Whether it fits as things are: DecideNode on the nodes earlier
    // decisions changed, Filter (the same rule, through the snapshot's index)
    // on the others.
    bool fits = false;
    std::vector<std::string_view> unchanged;
    for (const std::string& name : names) {
      if (!view.Changed(name)) {
        unchanged.push_back(name);
      } else if (DecideNode(view.Get(name), name, p->demand, policy, now_ms).verdict == Verdict::kFits) {
        fits = true;
        break;
      }
    }
    if (!fits && !unchanged.empty()) fits = !Filter(snap, unchanged, p->demand, policy, now_ms).fits.empty();
    if (fits) continue;
    // Whether it fits once the terminating pods within their deletion time
    // are gone: then that room is on its way; it takes it.
    bool relieved = false;
    for (const std::string& name : names) {
      if (!relief_nodes.contains(name)) continue;
      const Node* node = view.Get(name);
      if (node == nullptr || std::none_of(node->entries.begin(), node->entries.end(), relieving)) continue;
      Node trial = *node;
      std::erase_if(trial.entries, relieving);
      if (DecideNode(&trial, name, p->demand, policy, now_ms).verdict != Verdict::kFits) continue;
      Node* w = view.Mutable(name);
      std::vector<std::string> going;
      for (const Entry& e : w->entries) {
        if (relieving(e)) going.push_back(e.pod_uid);
      }
      for (const std::string& uid : going) RemoveFromNode(w, uid);
      place(w, name, *p);
      relieved = true;
      break;
    }
    if (relieved) continue;

    const std::string* best_node = nullptr;
    std::vector<IdleCandidate> best;
    size_t best_k = SIZE_MAX;
    bool placed = false;  // holds an entry already: bound since its refusal
    for (const std::string& name : names) {
      if (best_k <= 1) break;  // names ascend: a later node would need fewer than one
      const Node* node = view.Get(name);
      if (node == nullptr) continue;
      std::vector<IdleCandidate> cands;
      for (const Entry& e : node->entries) {
        if (e.pod_uid == p->uid) placed = true;
        if (taken.contains(e.pod_uid)) continue;
        const int64_t idle = IdleFor(e, tracker, now_ms);
        if (idle >= 0 && EvictionExemption(e, gangs).empty()) cands.push_back(IdleCandidate{&e, idle});
      }
      if (placed) break;
      if (cands.empty()) continue;
      std::sort(cands.begin(), cands.end(), IdleOrder);
      if (cands.size() > kMaxIdleCandidatesPerNode) cands.resize(kMaxIdleCandidatesPerNode);
      const size_t max_k = best_k == SIZE_MAX ? cands.size() : best_k - 1;
      NodeTrial trial(*node, cands);
      std::vector<size_t> chosen = FewestToEvict(trial, cands.size(), max_k, p->demand, policy, now_ms);
      if (chosen.empty()) continue;
      best_k = chosen.size();
      best_node = &name;
      best.clear();
      for (size_t k : chosen) best.push_back(cands[k]);
    }
    if (placed) continue;
    if (best_node == nullptr) continue;

    // The evictions, then the node as they and the pending pod leave it.
    for (const IdleCandidate& c : best) {
      IdleEviction ev;
      ev.node = *best_node;
      ev.pod_uid = c.entry->pod_uid;
      ev.ns = c.entry->ns;
      ev.name = c.entry->name;
      ev.idle_ms = c.idle_ms;
      ev.for_uid = p->uid;
      ev.for_ns = p->ns;
      ev.for_name = p->name;
      taken.insert(ev.pod_uid);
      out.push_back(std::move(ev));
    }
    Node* w = view.Mutable(*best_node);
    for (const IdleEviction* ev = &out[out.size() - best.size()]; ev != out.data() + out.size(); ++ev) {
      RemoveFromNode(w, ev->pod_uid);
    }
    place(w, *best_node, *p);
  }
  return out;
}

}  // namespace vramd::ledger
