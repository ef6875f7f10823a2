// Runtime protection decisions (issue 15): the pressure watchdog's victim,
// idle tracking, the idle-eviction set, and the rate limits on acting. Pure:
// no I/O, no clock, no logging; `now_ms` is a parameter. The leader feeds
// these from a snapshot each pass and acts on what they return (Eviction API,
// Events, metrics) elsewhere.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vramd/ledger/model.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/pod_request.h"

namespace vramd::ledger {

// ---- The pressure watchdog ----------------------------------------------

// Priority classes that are protected whatever the configuration says, and
// the priority at and above which a pod is protected (Kubernetes' system
// classes are 2,000,000,000 and 2,000,001,000).
inline constexpr std::string_view kSystemClusterCritical = "system-cluster-critical";
inline constexpr std::string_view kSystemNodeCritical = "system-node-critical";
inline constexpr int32_t kSystemPriorityFloor = 2'000'000'000;

// A terminating pod's room (its use on the GPU for the watchdog, its
// reservation for idle eviction) is relief on its way until its
// deletionTimestamp (PodInfo::deletion_ms) plus this; a pod still there after
// that is stuck (a finalizer, a node gone) and counts nothing (issue 32).
inline constexpr int64_t kTerminatingReliefMarginMs = 30'000;

struct WatchdogPolicy {
  int64_t floor_bytes = 1536LL << 20;  // pressure when physical free < floor
  double floor_percent = 0;            // > 0: the floor is this % of the GPU's physical total instead
  std::vector<std::string> protected_classes;  // never victims, in any namespace
  // The namespaces where system-cluster-critical, system-node-critical and a
  // priority >= 2e9 protect a pod (issue 33: Kubernetes lets any namespace
  // use the system classes, so a tenant's pod would be unevictable anywhere).
  std::vector<std::string> system_namespaces{"kube-system"};
  int64_t usage_max_age_ms = 60'000;   // GPU report / pod usage older than this: stale
  int64_t min_over_budget_bytes = 0;   // over budget only by more than this (config default 512Mi)
  int64_t terminating_margin_ms = kTerminatingReliefMarginMs;
};

enum class VictimReason { kDesignatedVictim, kOverBudget };
// "designated-victim" | "over-budget".
const char* VictimReasonName(VictimReason r);

struct WatchdogVictim {
  std::string pod_uid, ns, name;
  VictimReason reason = VictimReason::kOverBudget;
  int64_t used = 0;      // the pod's observed usage (Entry::used)
  int64_t declared = 0;  // max(per_gpu, peak_per_gpu): the peak when declared, else the request
  int32_t priority = 0;
};

struct GpuPressure {
  std::string node;
  int gpu = 0;         // Gpu::index
  std::string cause;   // "over budget or untracked (U > A)", "peak above capacity (P > C)", or "" (none)
  int64_t total = 0;   // physical total: Gpu::total when reported, else Gpu::capacity
  int64_t used = 0;    // Gpu::used (the fresh report)
  int64_t free = 0;    // total - used (may be negative)
  int64_t floor = 0;   // WatchdogFloor
  int64_t report_ms = 0;  // Gpu::used_ts_ms: which report this pressure was seen in (PressureStreaks)
  int64_t deficit = 0;    // floor - free: what the victims must free
  // The victims, as one action: CoverDeficit(candidates, deficit) (the
  // fewest that cover the deficit). `victim` is the first of them.
  std::optional<WatchdogVictim> victim;
  std::vector<WatchdogVictim> victims;
  // Every pod on this GPU that may go, in preference order (designated
  // victims that use memory here, then the pods over their budget here); the
  // caller falls through to the next when one is blocked (a
  // PodDisruptionBudget) by calling CoverDeficit again without it.
  std::vector<WatchdogVictim> candidates;
  std::string no_victim;  // why there is none (when !victim), e.g.
                          // "no designated victim and no pod over its budget"
};

// Whether a pod of this namespace, class and priority may never be a
// victim: its class is one of `protected_classes`, or, in one of
// `system_namespaces` only, its class is system-cluster-critical or
// system-node-critical or its priority is at least kSystemPriorityFloor.
bool IsProtected(std::string_view ns, std::string_view priority_class, int32_t priority,
                 const std::vector<std::string>& protected_classes,
                 const std::vector<std::string>& system_namespaces);

// The floor of a GPU whose physical total is `total`: floor_percent % of it
// (rounded down) when floor_percent > 0, else floor_bytes.
int64_t WatchdogFloor(int64_t total, const WatchdogPolicy& policy);

// What a pod declared it may use per GPU: max(per_gpu, peak_per_gpu).
inline int64_t DeclaredBytes(const Entry& e) { return e.peak_per_gpu > e.per_gpu ? e.peak_per_gpu : e.per_gpu; }

// Over-budget bytes of an entry: used − declared when its usage is fresh
// (UsageFresh(used_ts_ms, now_ms, usage_max_age_ms)) and above, else 0.
int64_t OverBudgetBytes(const Entry& e, int64_t now_ms, int64_t usage_max_age_ms);

// Every GPU with a fresh report (UsageFresh(Gpu::used_ts_ms)) whose physical
// free (total − used) is below its floor, sorted by node name then GPU index,
// each with its victims among the entries holding that GPU: the fewest
// candidates that cover the deficit (CoverDeficit), as one action. Pressure
// alone is no reason to act (issue 32); the watchdog acts only for a cause:
//  - U > A on that GPU (its report's used above what its pods reserved:
//    someone over budget, or bytes vramd does not account), or
//  - P > C (peak demand above capacity: burstable pods may grow into it).
// Without one: no victim, "no cause: ..." (a full GPU used within its
// reservations is the reserve's business, not a runaway's). When no pod is
// over its budget on the GPU and the bytes outside vramd's pods (outside_pods
// + untracked) cover the deficit (floor − free), nobody is chosen either, not
// even a designated victim: the pressure is not vramd's pods' doing.
// A pod's usage is measured on THIS GPU (its figure in Gpu::pods, 0 when the
// report does not name it), never its largest figure across GPUs. The
// candidates, in preference order:
//  1. designated victims (Entry::victim) that use something here (evicting
//     one that uses nothing frees nothing): lowest priority, then largest use,
//     then uid;
//  2. then the pods over budget here: their use above DeclaredBytes by more
//     than min_over_budget_bytes, most over first; ties: lower priority, then
//     uid.
// Never a protected pod (IsProtected), never one whose usage is stale or
// never reported, never a terminating entry. Without a victim, `no_victim`
// says why:
//  "no cause: used U is within the A its pods reserved (capacity C)"
//  "the pressure is outside vramd's pods: O outside pods + Z untracked >= the deficit D, and no pod is over its budget"
//  "no pod holds this GPU"
//  "every pod on this GPU is already terminating"
//  "every pod on this GPU is protected or its usage is stale (N protected, M stale[, T terminating])"
//  "no designated victim[ that uses memory] and no pod over its budget[ (skipped: N protected,
//   M stale[, T terminating])]"
//
// Terminating pods (issue 32): `deleting` maps the uid of a pod being
// deleted to its deletionTimestamp (PodInfo::deletion_ms). Until then plus
// terminating_margin_ms, its use on the GPU is relief on its way: it is taken
// off the deficit, and when it covers the deficit nobody is chosen ("relief on
// its way: R from N terminating pod(s) covers the deficit D"). A pod past that
// (stuck: a finalizer, a node gone) or without a known time counts nothing.
std::vector<GpuPressure> PlanWatchdog(const Snapshot& snap, const WatchdogPolicy& policy, int64_t now_ms,
                                      const std::unordered_map<std::string, int64_t>* deleting = nullptr);

// The victims for a deficit (issue 32), as positions in `candidates`
// (ascending): the FEWEST candidates not in `excluded` whose use on the GPU
// (WatchdogVictim::used) adds up to at least `deficit`, and among sets of
// that size the one earliest in the candidates' (preference) order. When no
// set covers the deficit, the first candidate not excluded alone: relief, not
// a purge (the pressure is partly not theirs). Nothing when `deficit` <= 0
// or every candidate is excluded. The caller that evicted some of a set and
// was refused one calls it again with the deficit less what was evicted and
// the evicted and refused pods excluded.
std::vector<size_t> CoverDeficit(const std::vector<WatchdogVictim>& candidates, int64_t deficit,
                                 const std::set<std::string>& excluded);

// Pressure that persists (issue 32): one report below the floor is a spike
// the watchdog does not act on. Per GPU, the number of consecutive distinct
// usage reports (GpuPressure::report_ms) the watchdog saw under pressure with
// a cause; it acts only once that reaches watchdog.pressure_reports. A pure
// value type: the leader keeps one and feeds it every pass.
class PressureStreaks {
 public:
  // One watchdog pass: `pressure` is PlanWatchdog's answer. A GPU in it with
  // a cause counts its report once (a pass that sees the same report again
  // counts nothing); every other GPU (without a cause, no longer under
  // pressure, or whose report went stale) starts again from 0 and is
  // forgotten.
  void Observe(const std::vector<GpuPressure>& pressure);
  // Consecutive reports under pressure with a cause (0 when none).
  int Reports(const std::string& node, int gpu) const;
  size_t size() const { return streaks_.size(); }

 private:
  struct Streak {
    int64_t last_report_ms = 0;
    int reports = 0;
  };
  std::unordered_map<std::string, Streak> streaks_;  // "<node>\n<gpu>"
};

// Takes the entry of `uid` off `node` with its share of each of its GPUs'
// reported usage (its figure in Gpu::pods): what evicting the pod frees, its
// A, P, V and its own part of U. Nothing when the node holds no such entry.
// Idle eviction's simulation and the preempt verb use it.
void RemoveFromNode(Node* node, const std::string& uid);

// ---- Who vramd's own evictions may take at all (issue 32) -----------------

// Live entries (not terminating) per gang, keyed "<ns>/<gang>": a gang's
// size as the ledger knows it.
using GangSizes = std::unordered_map<std::string, int>;
GangSizes CountGangs(const Snapshot& snap);
// The key CountGangs uses for e ("" when e is in no gang).
std::string GangOf(const Entry& e);

// Why reclaim, priority preemption and idle eviction never take this pod, or
// "" when they may (one rule for all three; the watchdog answers pressure and
// has its own, IsProtected):
//  - "room held for a pending pod": a hold (EntryState::kHold) runs nothing;
//  - "bare pod": no controller (owner_kind empty: a pod nothing recreates,
//    or an entry written before vramd recorded owners, until reconcile
//    refreshes it) and no opt-in (vramd.io/evictable "true", or a designated
//    victim);
//  - "rank of gang G (N live pods)": a pod of a gang with other live members.
//    A gang goes whole or not at all; vramd does not plan whole-gang
//    evictions, so it takes none of a gang of several (a gang of one is
//    taken as any pod).
std::string EvictionExemption(const Entry& e, const GangSizes& gangs);

// ---- Idle tracking --------------------------------------------------------

struct IdleObservation {
  int64_t ref_used = 0;        // the pod's usage when it was last active
  int64_t last_active_ms = 0;  // when it was last active
  int64_t observed_ms = 0;     // now_ms of the last Observe call for the pod
};

// When each pod that may be idle-evicted was last active. A pure value type:
// the leader keeps one and feeds it every entry each pass.
class IdleTracker {
 public:
  IdleTracker(int64_t usage_change_bytes, int64_t usage_max_age_ms);

  // Per entry with idle_ttl_ms > 0 (others are ignored): a first sighting,
  // usage that is missing or stale (not UsageFresh(used_ts_ms, now_ms,
  // usage_max_age_ms): no evidence is not idleness), a fresh report that
  // says the pod ran work (Entry::busy: NVML utilization, DRM engine time),
  // a usage change of more than usage_change_bytes against the reference
  // taken at the last activity, or a lock activity time (lock_ms, 0 = none) later than the
  // last activity counts as activity. The activity time is now_ms
  // (first sighting, usage change) or lock_ms (lock), whichever is later; the
  // reference becomes the entry's current usage.
  void Observe(const Entry& e, int64_t lock_ms, int64_t now_ms);
  // Drops the uids not in `keep_uids`.
  void Forget(const std::set<std::string>& keep_uids);
  // Drops the uids whose last Observe call was before `since_ms`: after a
  // pass that observed every entry at now_ms, ForgetUnobserved(now_ms) forgets
  // the pods that are gone (or lost their TTL) without building a set of the
  // others.
  void ForgetUnobserved(int64_t since_ms);
  // When the pod was last active; 0 when it was never observed.
  int64_t LastActive(const std::string& uid) const;
  // The observation of `uid`, or null.
  const IdleObservation* Find(const std::string& uid) const;
  size_t size() const { return seen_.size(); }

 private:
  int64_t usage_change_bytes_;
  int64_t usage_max_age_ms_;
  std::unordered_map<std::string, IdleObservation> seen_;
};

// How long the entry has been idle at now_ms, or -1 when it is not idle: it
// has no TTL, is terminating, was never observed, or its idle time is shorter
// than its idle_ttl_ms.
int64_t IdleFor(const Entry& e, const IdleTracker& tracker, int64_t now_ms);

enum class IdleMode { kOnDemand, kAlways };
// "on-demand" | "always".
const char* IdleModeName(IdleMode m);
bool ParseIdleMode(std::string_view s, IdleMode* out);

// A pod vramd refused for room (from its filter refusals).
struct PendingPod {
  std::string uid, ns, name;
  VramRequest demand;
  std::vector<std::string> nodes;  // nodes where vramd refused it for room (filter), may be many
  int64_t refused_ms = 0;
};

// The hold (EntryState::kHold, issue 32) for the room evicting `victims`
// (pod UIDs) on `node` makes for `pod`: the GPUs and bytes per GPU it would
// take there once they are gone (their entries and their share of the
// usage reports removed; DecideNode's choice), with pod_uid, ns and name the
// pod's. nullopt when it would not fit there even then. Pure.
std::optional<Entry> RoomMadeFor(const Node& node, const std::vector<std::string>& victims, const PendingPod& pod,
                                 const Policy& policy, int64_t now_ms);

struct IdleEviction {
  std::string node, pod_uid, ns, name;
  int64_t idle_ms = 0;
  std::string for_uid, for_ns, for_name;  // the pending pod it makes room for (empty in kAlways)
};

// Most idle pods of one node considered for one pending pod (the longest
// idle), and most DecideNode trials spent searching the fewest of them before
// settling for a small set found greedily (longest idle first, then pruned).
inline constexpr size_t kMaxIdleCandidatesPerNode = 16;
inline constexpr int kMaxIdleTrialsPerNode = 256;

// kAlways: every entry idle for at least its TTL (IdleFor >= 0), longest idle
// first (ties: node, uid); `pending` is not read.
// kOnDemand: for each pending pod (oldest refusal first, ties uid) that wants
// VRAM, on its nodes (unknown ones skipped), the fewest idle pods (then the
// longest idle, compared in idle order) whose removal makes the pod fit under
// DecideNode (the fit rule and every other placement rule), simulated on a
// copy of the node without them (their reservations and their share of the
// GPUs' reported usage gone). The node needing the fewest evictions wins
// (ties: node name). An idle pod is used for at most one pending pod; a
// pending pod that already fits on one of its nodes gets none ("fits": Filter
// on the nodes no earlier decision changed, the same rule through the
// snapshot's index, DecideNode on the others). The caller passes pods that
// are still pending (the pod watch); one found holding an entry on a node
// searched for idle pods (bound since its refusal) gets none. Later pending
// pods see the nodes as the earlier ones left them (evictions done, the
// earlier pod placed). The evictions come out grouped by pending pod, in idle
// order.
//
// Terminating pods (issue 32), kOnDemand: `deleting` as for PlanWatchdog. A
// pending pod that fits one of its nodes once the terminating pods there
// within their deletion time plus kTerminatingReliefMarginMs are gone gets
// no idle eviction: the room is on its way (and is then taken by it for the
// pods after it).
std::vector<IdleEviction> PlanIdle(const Snapshot& snap, const IdleTracker& tracker,
                                   const std::vector<PendingPod>& pending, IdleMode mode, const Policy& policy,
                                   int64_t now_ms, const std::unordered_map<std::string, int64_t>* deleting = nullptr);

}  // namespace vramd::ledger
