// The reconcile decision, pure: given the ledger snapshot, the cluster's pods
// and the binds in flight, what must change so the ledger equals the truth.
// DESIGN.md §4; the phantom-capacity rule lives here.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "vramd/kube/kube_client.h"
#include "vramd/ledger/model.h"

namespace vramd::reconcile {

enum class ActionKind {
  kReadd,            // orphan: a running pod has no entry; write it (no capacity check)
  kMarkBound,        // a reserved entry whose pod is bound there
  kMarkTerminating,  // the pod has a deletionTimestamp: keep its VRAM, mark the entry
  kRelease,          // free the entry
};
const char* ActionKindName(ActionKind k);

enum class ReleaseCause {
  kNone,
  kPodGone,           // the pod object no longer exists
  kTerminalPhase,     // Succeeded or Failed
  kStaleReservation,  // reserved at bind, never showed up bound within the grace period
  kWrongNode,         // the pod is bound elsewhere
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
};

struct PlanResult {
  std::vector<Action> actions;
  std::map<std::string, int64_t> phantom_bytes;  // per node: VRAM held by terminating pods
  int orphans = 0;
  int stale = 0;
  int gone = 0;
  int terminal = 0;
};

// `pods` are all pods vramd knows of (any phase); only those that request
// VRAM (spec) matter. `in_flight` holds UIDs whose bind is in progress on
// some replica: their reservations are never released.
PlanResult Plan(const ledger::Snapshot& snap, const std::vector<kube::PodInfo>& pods,
                const std::set<std::string>& in_flight, const PlanOptions& opts);

// The GPUs and bytes a bound pod holds according to its annotations
// (vramd.io/gpus, vramd.io/vram-per-gpu). False when absent or malformed.
bool GpusFromAnnotations(const std::map<std::string, std::string>& annotations, std::vector<int>* gpus,
                         int64_t* per_gpu);

}  // namespace vramd::reconcile
