// Tenants (issue 16): VRAM queues with a deserved quota, an optional hard
// limit and an over-quota weight, two levels (department -> project), as in
// the Run:ai scheduler guide (../shared/background/runai-scheduler.txt).
// Pure: no I/O, no clock, no logging; `now_ms` is a parameter. The queue
// objects come from the VramQueue custom resource (kube decode, the watcher
// in reconcile); the leader recomputes fair shares every pass, writes the
// objects' status and reclaims; filter and bind admit pods against the
// queues (AdmitToQueue).
//
// Units: bytes (int64) and milliseconds. A pod's VRAM in a queue is its
// whole reservation: Entry::per_gpu x gpus.size() (EntryBytes), or a pending
// pod's `total`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vramd/ledger/model.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/protection.h"

namespace vramd::ledger {

// The custom resource: group vramd.io, version v1alpha1, kind VramQueue,
// plural vramqueues, short name vq, cluster-scoped, status subresource.
inline constexpr const char* kQueueGroup = "vramd.io";
inline constexpr const char* kQueueVersion = "v1alpha1";
inline constexpr const char* kQueuePlural = "vramqueues";
inline constexpr const char* kQueueKind = "VramQueue";

// Bounds vramd enforces on a queue object (and the CRD schema states).
inline constexpr size_t kMaxQueueNamespaces = 1000;   // spec.namespaces entries
inline constexpr int64_t kMaxQueueWeight = 1000000;   // spec.overQuotaWeight
inline constexpr int64_t kMaxQueueBytes = int64_t{1} << 62;  // deserved / limit

// One VramQueue object as decoded (kube::DecodeQueue). A field that could
// not be read leaves `decode_error` set and the queue invalid.
struct QueueSpec {
  std::string name;                     // metadata.name
  std::string uid;                      // metadata.uid (status patches)
  int64_t created_ms = 0;               // metadata.creationTimestamp (ms); the older
                                        // queue keeps a namespace two queues name
  std::string parent;                   // spec.parent; "" = a top-level queue
  std::vector<std::string> namespaces;  // spec.namespaces, each a DNS label
  int64_t deserved = 0;                 // spec.deserved (a quantity), bytes >= 0
  std::optional<int64_t> limit;         // spec.limit, bytes; none = no hard limit
  int64_t weight = 1;                   // spec.overQuotaWeight, 0..kMaxQueueWeight
  std::string decode_error;             // non-empty: why the object could not be read
  bool operator==(const QueueSpec&) const = default;
};

// The configuration of tenancy (config keys queues.*).
struct TenancyPolicy {
  // The queue serving namespaces no valid queue names. When no VramQueue
  // object has this name, BuildQueueSet adds a synthetic one: deserved 0,
  // no limit, weight 1, `unmanaged` (its pods are never refused by
  // AdmitToQueue, but they count in fair shares and reclaim may take back
  // what its preemptible pods hold above its fair share).
  std::string default_queue = "default";
  // Preemptible (may run over quota, may be reclaimed): a designated victim,
  // a pod whose priority class is in `preemptible_classes`, or one whose
  // priority is below `preemptible_below_priority`. The default follows the
  // guide: training (priority < 100) is preemptible, build/interactive/
  // inference (>= 100) is not.
  int32_t preemptible_below_priority = 100;
  std::vector<std::string> preemptible_classes;
  // A preemptible pod running for less than this (now - Entry::created_ms)
  // is not a victim (the guide's guaranteed minimum runtime; the config's
  // default, queues.min_runtime_ms, is 5 minutes).
  int64_t min_runtime_ms = 0;
  // Whether pods of namespaces no VramQueue names (the synthetic default
  // queue) may be victims of reclaim and priority preemption. Off: creating
  // one VramQueue never makes the rest of the cluster evictable (issue 32);
  // a VramQueue object named like default_queue makes them a queue like any.
  bool reclaim_unqueued = false;
};

// A queue after validation.
struct Queue {
  QueueSpec spec;
  bool valid = true;
  bool synthetic = false;      // the default queue made by BuildQueueSet (no object)
  bool unmanaged = false;      // synthetic default queue: AdmitToQueue never refuses its pods
  // The object's condition: reason is "Valid" when valid, else one of
  // "Invalid" (decode_error, deserved > limit), "ParentNotFound", "Cycle",
  // "TooDeep" (a parent that has a parent), "ParentInvalid", "ExceedsParent"
  // (deserved or limit above the parent's deserved / limit),
  // "NamespaceConflict" (a namespace an older valid queue already serves),
  // "ParentServesNamespaces" (a queue with children names namespaces).
  // `message` says it in words with the names and numbers.
  std::string reason = "Valid";
  std::string message;
  int parent = -1;             // index in QueueSet::queues; -1 = top level (or invalid)
  std::vector<int> children;   // indices of valid children
};

// The validated queues: immutable once built, shared between threads.
struct QueueSet {
  std::vector<Queue> queues;  // every object (valid or not), sorted by name,
                              // plus the synthetic default queue when added
  std::unordered_map<std::string, int> by_namespace;  // namespace -> valid leaf queue
  int default_queue = -1;     // index of the default queue (valid; -1 when it is invalid
                              // or a parent with valid children)
  // True when there are no VramQueue objects at all: tenancy then changes nothing
  // (AdmitToQueue admits everything, no reclaim).
  bool empty() const { return objects == 0; }
  size_t objects = 0;         // VramQueue objects in `queues` (not the synthetic one)

  // The queue serving namespace `ns`: the valid queue naming it, else the
  // default queue; -1 when neither exists.
  int QueueOf(std::string_view ns) const {
    auto it = by_namespace.find(std::string(ns));
    return it != by_namespace.end() ? it->second : default_queue;
  }
  // Index by name, -1 when absent.
  int Find(std::string_view name) const {
    for (size_t i = 0; i < queues.size(); ++i)
      if (queues[i].spec.name == name) return static_cast<int>(i);
    return -1;
  }
};
using QueueSetPtr = std::shared_ptr<const QueueSet>;

// Validates `specs` (any order; names unique — a repeated name keeps the
// first) and builds the set. Never fails: each broken object is kept with
// valid = false and its reason; the others keep working. Namespaces of an
// invalid queue fall to the default queue. Pure.
// The checks, in order (the first failure is the reason): the object's own
// fields ("Invalid": decode_error, figures out of range, an empty or more
// than kMaxQueueNamespaces namespaces, deserved > limit); "Cycle" (a queue
// on a loop of parent links, itself included); its parent: "ParentNotFound"
// (also when it names the synthetic default queue, which has no children),
// "ParentInvalid", "TooDeep"; "ParentServesNamespaces" (then its children
// are "ParentInvalid"); "ExceedsParent"; "NamespaceConflict" (among the
// valid leaf queues, oldest created_ms first, then by name).
QueueSet BuildQueueSet(std::vector<QueueSpec> specs, const TenancyPolicy& policy);

// Whether a pod is preemptible under `policy` (designated victims always are).
inline bool IsPreemptible(int32_t priority, std::string_view priority_class, bool victim, const TenancyPolicy& policy) {
  if (victim || priority < policy.preemptible_below_priority) return true;
  for (const auto& c : policy.preemptible_classes)
    if (!priority_class.empty() && c == priority_class) return true;
  return false;
}
inline bool IsPreemptible(const Entry& e, const TenancyPolicy& p) {
  return IsPreemptible(e.priority, e.priority_class, e.victim, p);
}

// A pod's whole reservation in bytes.
inline int64_t EntryBytes(const Entry& e) { return e.per_gpu * static_cast<int64_t>(e.gpus.size()); }

// Pending pods are ledger::PendingPod (protection.h, shared with idle
// eviction): a pod vramd refused (for room, or its queue refused it) that is
// still pending — the filter-refusal log checked against the pod watch. Its
// `demand` carries total, per_gpu, peak_per_gpu, gpu_count, victim, priority,
// priority_class and ns; `nodes` the nodes that failed it for room (empty:
// unknown or refused by its queue: any node); `refused_ms` when it was (last)
// refused (the oldest first).

// What each queue holds and wants, indexed like QueueSet::queues. A parent's
// figures include its children's.
struct QueueUsage {
  // Σ EntryBytes of its pods' entries (every state; room held for a pod
  // among `pending` is that pod's pending demand instead, not counted twice)
  int64_t allocated = 0;
  int64_t allocated_nonpreemptible = 0;  // the part held by non-preemptible pods
  int64_t pending = 0;                   // Σ demand.total of its pending pods
};
std::vector<QueueUsage> QueueUsageOf(const QueueSet& set, const Snapshot& snap, std::span<const PendingPod> pending,
                                     const TenancyPolicy& policy);

// Fair shares, indexed like QueueSet::queues (0 for invalid queues).
// Top-level queues share `capacity` (Σ GPU capacity of the cluster); each
// parent's fair share is then shared among its children the same way:
//  1. each queue gets min(deserved, demand, limit) where demand = allocated +
//     pending (for a parent: the sum of what its children can use, each
//     child's demand capped by its limit, and by its deserved when its weight
//     is 0, as the children cannot take more of the parent's share); when these
//     exceed what is shared, they are scaled down in proportion (more quota
//     than the cluster has);
//  2. the rest is split by weight among the queues whose demand (capped by
//     limit) is not met, each capped at that demand, again and again until
//     nothing is left or nobody wants more (water-filling). Weight 0 gets no
//     over-quota share. Integer bytes: each part is rounded down, and the
//     remainder of a split goes one byte each to the queues whose exact part
//     had a fraction, in order (largest weight first, then name); a split
//     that divides exactly leaves nothing over.
std::vector<int64_t> FairShares(const QueueSet& set, std::span<const QueueUsage> usage, int64_t capacity);

// Everything /v1/queues, the metrics and the objects' status show.
struct QueueStatus {
  std::string name, parent;
  bool valid = true;
  bool synthetic = false;
  std::string reason, message;          // Queue::reason / message
  int64_t deserved = 0;
  std::optional<int64_t> limit;
  int64_t weight = 1;
  int64_t allocated = 0, allocated_nonpreemptible = 0, pending = 0, fair_share = 0;
  bool operator==(const QueueStatus&) const = default;
};
std::vector<QueueStatus> QueueStatuses(const QueueSet& set, std::span<const QueueUsage> usage,
                                       std::span<const int64_t> fair_shares);

// What a replica knows of the queues at one moment (/v1/queues, explain,
// the leader's pass): the set, each queue's usage and status, and the
// policy they were computed with. ComputeTenancy runs QueueUsageOf,
// FairShares (capacity = Σ Gpu::capacity of the snapshot) and QueueStatuses.
struct TenancyView {
  QueueSetPtr set;                    // never null in a computed view
  std::vector<QueueUsage> usage;      // indexed like set->queues
  std::vector<int64_t> fair_shares;   // indexed like set->queues
  std::vector<QueueStatus> statuses;  // indexed like set->queues
  TenancyPolicy policy;
};
TenancyView ComputeTenancy(QueueSetPtr set, const Snapshot& snap, std::span<const PendingPod> pending,
                           const TenancyPolicy& policy);

// Whether a pod may take `total` more bytes in its queue (filter and bind).
// `usage` as QueueUsageOf computed (pending ignored); `own_bytes` is what the
// pod already holds in the ledger (an idempotent bind), not counted twice.
// Refused (ok = false) when the pod would take its queue or its parent above
// a hard limit, or, for a non-preemptible pod, the non-preemptible VRAM of
// its queue or parent above the deserved quota. The reason names the queue
// and the numbers, e.g. "queue team-b at its limit: 30Gi allocated + 8Gi
// requested > limit 32Gi". An empty set, an unmanaged queue, or no queue
// admits everything.
struct Admission {
  bool ok = true;
  int queue = -1;       // the pod's queue (-1: none)
  std::string reason;   // when !ok
};
Admission AdmitToQueue(const QueueSet& set, std::span<const QueueUsage> usage, std::string_view ns, int64_t total,
                       bool preemptible, int64_t own_bytes = 0);
// Whether AdmitToQueue can refuse such a pod at all: false for an empty set,
// no queue, an unmanaged or invalid queue, and a preemptible pod whose queue
// and parent have no limit (it is admitted whatever the usage). Lets the
// verbs skip computing QueueUsageOf (O(entries)) for such pods.
bool AdmissionNeedsUsage(const QueueSet& set, std::string_view ns, bool preemptible);

// ---- Reclaim and priority preemption (the leader) -----------------------

struct ReclaimVictim {
  std::string uid, ns, name, node;
  int queue = -1;
  int64_t bytes = 0;       // EntryBytes
  int32_t priority = 0;
  int64_t created_ms = 0;
};

enum class ReclaimKind {
  kReclaim,   // from other queues above their fair share
  kPriority,  // lower-priority preemptible pods of the pending pod's own queue
};
const char* ReclaimKindName(ReclaimKind k);  // "reclaim" | "priority"

struct ReclaimPlan {
  ReclaimKind kind = ReclaimKind::kReclaim;
  std::string pending_uid, pending_ns, pending_name;
  int queue = -1;                      // the pending pod's queue
  std::string node;                    // where the pending pod fits once the victims are gone
  std::vector<ReclaimVictim> victims;  // all on `node`
};

// Plans room for pending pods, oldest `refused_ms` first, at most `max_plans`
// plans; victims never repeat across plans and the queue figures of one plan
// carry into the next. For a pending pod of queue Q (valid):
//  - kReclaim when allocated(Q) + total <= fair_share(Q) (it is entitled):
//    victims are preemptible pods of other queues V with allocated(V) >
//    fair_share(V), taken most over-share queue first, then lowest priority,
//    then youngest, never taking V (nor its parent) below its fair share,
//    never a pod within min_runtime_ms of created_ms, never a terminating one;
//  - else kPriority: preemptible pods of Q itself with a lower priority than
//    the pending pod (lowest first, then youngest), only when the pod is
//    admitted (AdmitToQueue) once they are gone.
// Never victims, of either kind: pods of the synthetic default queue unless
// policy.reclaim_unqueued, and pods EvictionExemption keeps (protection.h:
// bare pods that did not opt in, ranks of gangs of several).
// A plan is made only when a simulation shows the pending pod fits the node
// (fit.h's rule with the peak rule, `fit`) once its victims' entries are
// removed; the node is chosen among `nodes` of the pending pod (all when
// empty) to need the fewest victim bytes. `why_not`, when not null, receives
// per pending pod without a plan why not (uid -> text). Pure.
// In detail (src/ledger/reclaim.cc): victims are bound entries only (not
// reserved, not terminating); a removed victim takes its entry (A, P, V) and
// its own figure in each GPU's usage report (Gpu::pods) off U; with a victim
// of another department, Q's department must stay within its fair share
// too; an entitled pod whose reclaim finds nothing tries kPriority next (the
// guide's order); every plan needs the pod admitted (limits, in-quota rule)
// with the figures its victims leave. Per node, victims are taken in order
// until the pod fits and is admitted, then each one the others do without
// is dropped (the last taken first); ties between nodes: fewest victims,
// then the node whose victims come first in the order, then node name.
// Terminating entries count as gone (off their node and their queue's
// figures): room on its way is never paid for twice. A pod that fits one of
// its nodes as it is (terminating pods gone) takes that room in the
// simulation and gets no plan (`fits_on`, when not null, receives uid ->
// node: kube-scheduler may not have retried it since the room appeared); so
// do a designated victim, one holding an entry already, or one of no valid
// queue.
std::vector<ReclaimPlan> PlanReclaim(const QueueSet& set, std::span<const QueueStatus> statuses, const Snapshot& snap,
                                     std::span<const PendingPod> pending, const TenancyPolicy& policy,
                                     const FitPolicy& fit, int64_t now_ms, size_t max_plans,
                                     std::unordered_map<std::string, std::string>* why_not = nullptr,
                                     std::unordered_map<std::string, std::string>* fits_on = nullptr);

// The preempt verb: whether evicting `victims` (entries on one node) for a
// pod of namespace `ns` (priority, total) keeps the rules above: each victim
// is preemptible, past its minimum runtime, and either of the pod's queue
// with a lower priority, or of another queue left at or above its fair share
// while the pod's queue stays within its fair share. Empty when allowed,
// else the reason naming the first victim that may not go. An empty set
// allows everything.
std::string PreemptVictimsAllowed(const QueueSet& set, std::span<const QueueStatus> statuses, std::string_view ns,
                                  int32_t priority, int64_t total, std::span<const Entry* const> victims,
                                  const TenancyPolicy& policy, int64_t now_ms);

}  // namespace vramd::ledger
