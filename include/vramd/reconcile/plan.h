// The reconcile decision, pure: given the ledger snapshot, the cluster's pods
// and the binds in flight, what must change so the ledger equals the truth.
// DESIGN.md §4; the phantom-capacity rule lives here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "vramd/kube/kube_client.h"
#include "vramd/ledger/model.h"
#include "vramd/status.h"

namespace vramd::reconcile {

enum class ActionKind {
  kReadd,            // orphan: a running pod has no entry; write it (no capacity check)
  kMarkBound,        // a reserved entry whose pod is bound there
  kMarkTerminating,  // the pod has a deletionTimestamp: keep its VRAM, mark the entry
  kRelease,          // free the entry
  kRefresh,          // the entry's eviction facts differ from the pod's: write the pod's (RecordEvictionFacts)
};
const char* ActionKindName(ActionKind k);

enum class ReleaseCause {
  kNone,
  kPodGone,           // the pod object no longer exists
  kTerminalPhase,     // Succeeded or Failed
  kStaleReservation,  // reserved at bind, never showed up bound within the grace period
  kWrongNode,         // the pod is bound elsewhere
  kHoldEnded,         // a hold (EntryState::kHold) whose pod bound, ended, or whose time is up
};
const char* ReleaseCauseName(ReleaseCause c);

struct Action {
  ActionKind kind;
  std::string node;
  ledger::Entry entry;  // for kReadd the full entry; otherwise pod_uid (+ ns/name) identify it
  ReleaseCause cause = ReleaseCause::kNone;
  std::string reason;   // for logs
};

struct PlanOptions {
  int64_t now_ms = 0;
  int64_t grace_ms = 60'000;  // stale-reservation grace; also shields entries of pods the cache has not seen yet
  // UIDs of pods seen deleted by the watch: their entries are freed at once,
  // whatever their age (the grace period only covers pods not seen at all).
  const std::set<std::string>* deleted = nullptr;
  // Config burst.victim_classes: which re-added pods are designated victims
  // (null: ledger::kDefaultVictimClasses).
  const std::vector<std::string>* victim_classes = nullptr;
};

// A bound, non-terminal pod whose VRAM metadata cannot be read: its request
// (containers' vramd.io/vram, vramd.io/gpu-count, vramd.io/vram-peak, overhead)
// is invalid, or its placement annotations (vramd.io/gpus,
// vramd.io/vram-per-gpu) are present but malformed. What the plan does with it:
//  - invalid request: nothing; the pod is not (re-)added, an entry it already
//    holds is kept (released only when the pod is gone or terminal);
//  - malformed placement annotations, valid request: as a pod without them —
//    an orphan is re-added on the GPUs with the most free memory, with the
//    request's bytes (the ledger stays honest about what the pod asked for).
// Either way the rest of the pass goes on. `reason` says what is wrong and
// what was done, for a log line and an Event on the pod.
struct MalformedPod {
  std::string uid;
  std::string ns;
  std::string name;
  std::string node;
  std::string reason;
  bool operator==(const MalformedPod&) const = default;
};

struct PlanResult {
  std::vector<Action> actions;
  std::vector<MalformedPod> malformed;  // in the order of `pods`
  std::map<std::string, int64_t> phantom_bytes;  // per node: VRAM held by terminating pods
  // (node, pod UID) of every assigned, non-terminal pod with a valid VRAM
  // request on a node whose GPUs the ledger knows: the entries the ledger
  // holds once the actions are applied. A rebuild seals the ledger only when
  // all of them exist (LedgerStore::Seal).
  std::vector<std::pair<std::string, std::string>> required;
  int orphans = 0;
  // Orphans whose placement annotations claim other bytes or GPUs than the
  // pod requests (accounted at the request; each is also in `malformed`).
  int annotations_overridden = 0;
  int stale = 0;
  int gone = 0;
  int terminal = 0;
  int refreshed = 0;  // kRefresh actions
  int holds_ended = 0;  // holds released (kHoldEnded)
};

// Why a hold (EntryState::kHold) ends now, or "" while it lasts: it ends
// when its pod is gone (`pod` null), terminal, deleting or bound (to any
// node: the bind of its own node replaces the hold itself), or at
// hold_until_ms; never while the pod's bind is in flight. Pure.
std::string HoldEnds(const ledger::Entry& hold, const kube::PodInfo* pod, bool bind_in_flight, int64_t now_ms);

// `pods` are all pods vramd knows of (any phase); only those that request
// VRAM (spec) matter. `in_flight` holds UIDs whose bind is in progress on
// some replica: their reservations are never released.
PlanResult Plan(const ledger::Snapshot& snap, const std::vector<kube::PodInfo>& pods,
                const std::set<std::string>& in_flight, const PlanOptions& opts);

// Whether some pod may still have a bind in flight: it requests VRAM (a valid
// request), is not bound to a node and has not ended. A bind's Binding carries
// its annotations and the node together, so when a fresh list of the cluster's
// pods holds no such pod, no reservation granted before the store lost data can
// still land after that list: a rebuild may seal without waiting out its quiet
// period (a fresh install, a cluster with no VRAM pod pending).
bool AnyPodAwaitingBind(const std::vector<kube::PodInfo>& pods);

// The watch event of a bind: `after` is `before` assigned to a node and
// nothing else changed but vramd's placement annotations (a Binding sets
// spec.nodeName and its annotations in one update). Pure.
bool OnlyBound(const kube::PodInfo& before, const kube::PodInfo& after);

// Whether the ledger already accounts a pod that was just bound (OnlyBound),
// so that a reconcile pass would find nothing to do for it: the ledger is
// sealed; the pod is not deleting or terminal and has a valid VRAM request;
// its node holds its entry (reserved or bound, not a hold) at the request's
// bytes and GPU count; its placement annotations name that entry's GPUs and
// bytes; and no hold for it is left anywhere (its end needs a pass). A bind
// by vramd meets all of these; a pod bound past vramd (another scheduler, a
// forged annotation) meets none. `victim_classes` as in PlanOptions. Pure.
bool BindAccounted(const ledger::Snapshot& snap, const kube::PodInfo& pod,
                   const std::vector<std::string>* victim_classes = nullptr);

inline constexpr const char* kGpusAnnotation = "vramd.io/gpus";
inline constexpr const char* kVramPerGpuAnnotation = "vramd.io/vram-per-gpu";
inline constexpr const char* kGpuUuidsAnnotation = "vramd.io/gpu-uuids";
// Bounds of what placement annotations may claim (ledger::kMaxBytesPerGpu
// bounds the bytes).
inline constexpr int kMaxGpuIndex = 4096;
inline constexpr int kMaxAnnotatedGpus = ledger::kMaxGpuCount;

struct AnnotatedGpus {
  std::vector<int> gpus;  // ascending, distinct
  int64_t per_gpu = 0;    // bytes on each
};

// The GPUs and bytes a bound pod holds according to its annotations
// (vramd.io/gpus "0,3", vramd.io/vram-per-gpu "1073741824", as bind writes
// them). nullopt when neither annotation is there. kInvalidArgument, with the
// reason, when they are malformed: only one of the two present; an empty
// list, an item that is not a plain decimal index (whitespace, signs, text),
// an index above kMaxGpuIndex, a duplicate index, more than
// kMaxAnnotatedGpus GPUs; bytes that are not plain decimal digits, 0, or above
// ledger::kMaxBytesPerGpu (a 19-digit value past INT64_MAX included). Pure; never throws.
Result<std::optional<AnnotatedGpus>> GpusFromAnnotations(const std::map<std::string, std::string>& annotations);

}  // namespace vramd::reconcile
