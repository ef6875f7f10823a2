// The ledger's value types: what vramd knows about nodes, GPUs and the VRAM
// reservations on them. Standard library only; no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vramd::ledger {

// Lifecycle of a ledger entry.
//  kReserved:    written by bind before the Binding exists.
//  kBound:       the pod is bound to the node (seen by bind success or reconcile).
//  kTerminating: the pod has a deletionTimestamp; its VRAM stays held (phantom rule).
//  kHold:        room an eviction made, held for the pending pod `pod_uid` until
//                `hold_until_ms` (issue 32): spent for every other pod; the
//                holder's own bind takes it (reserve.lua), reconcile ends it
//                when the holder binds elsewhere, ends or the hold expires.
//                Never a victim, never a pod's memory (no phantom rule).
enum class EntryState { kReserved, kBound, kTerminating, kHold };
const char* EntryStateName(EntryState s);
bool ParseEntryState(std::string_view s, EntryState* out);

// One pod's reservation on one node: the same amount on each chosen GPU.
// The fields after `created_ms` record facts about the pod for the features
// built on the ledger (burstable VRAM, designated victims, the pressure
// watchdog, idle eviction, quotas); no placement decision reads them yet.
// Each has a default that means "not known", which is also what an entry
// written before the field existed reads as.
struct Entry {
  std::string pod_uid;
  std::string ns;                // the pod's namespace
  std::string name;
  std::vector<int> gpus;         // GPU indices on the node, ascending
  int64_t per_gpu = 0;           // bytes reserved on each GPU in `gpus`
  int64_t peak_per_gpu = 0;      // burst ceiling per GPU from vramd.io/vram-peak
                                 // (>= per_gpu); 0 means per_gpu
  std::string model;             // vramd.io/model, may be empty
  EntryState state = EntryState::kReserved;
  int64_t created_ms = 0;        // when the reservation was made (server time)

  int32_t priority = 0;          // the pod's spec.priority (0 when it has none)
  bool victim = false;           // designated victim (DESIGN.md §7): first to go
                                 // under pressure, never preempts others; see
                                 // ledger::IsDesignatedVictim (pod_request.h)
  std::string priority_class;    // the pod's spec.priorityClassName, may be empty
  int64_t used = 0;              // the pod's own observed usage, bytes per GPU
                                 // (its largest figure over `gpus`); see used_ts_ms.
                                 // The store fills it from the node's last agent
                                 // report (0 when the report names the pod nowhere)
  int64_t used_ts_ms = 0;        // when `used` was reported; 0 = never (or only
                                 // old-format reports, which carry no per-pod figures)
  int64_t last_active_ms = 0;    // last sign of GPU activity (a GPU-lock call or
                                 // a change of usage); 0 = none seen since created_ms
  bool busy = false;             // the report of used_ts_ms says the pod ran work on
                                 // one of its GPUs (PodUsage::active); filled with `used`
  int64_t idle_ttl_ms = 0;       // vramd.io/idle-ttl: idle eviction after this long
                                 // without activity; 0 = never idle-evicted
  // Who recreates the pod (issue 32): its controller, metadata.ownerReferences
  // with controller: true (kind, uid). Empty: a bare pod, or an entry written
  // before vramd recorded it; vramd's own evictions take neither
  // (EvictionExemption, protection.h) unless the pod opted in (`evictable`).
  std::string owner_kind;
  std::string owner_uid;
  bool evictable = false;        // vramd.io/evictable: "true"
  std::string gang;              // GangKey (pod_request.h): the pods that must go
                                 // together, "" = none
  int64_t hold_until_ms = 0;     // kHold: when the hold ends (server ms); else 0
  bool operator==(const Entry&) const = default;
};

// One pod's figure in a node agent's usage report (ledger/usage.h).
struct PodUsage {
  std::string uid;   // the pod's metadata.uid
  int64_t used = 0;  // bytes its processes hold on the GPU
  bool active = false;  // its processes ran work on the GPU since the agent's last read (issue 32)
  bool operator==(const PodUsage&) const = default;
};

// Issue 34 part B (ledger/enforcement.h): what the node agent reported of
// one pod's VRAM limit on one GPU.
enum class EnforceState { kEnforced, kDryRun, kAccounted, kFailed };
const char* EnforceStateName(EnforceState s);  // "enforced", "dry-run", "accounted", "failed"
bool ParseEnforceState(std::string_view s, EnforceState* out);

struct PodEnforcement {
  std::string uid;
  EnforceState state = EnforceState::kAccounted;
  std::string reason;  // why accounted or failed; what dry-run would write; "" when enforced
  bool operator==(const PodEnforcement&) const = default;
};

// One GPU's enforcement as its agent last reported it. Empty backend: the
// agent reported none (enforcement off, or an agent before issue 34).
struct GpuEnforcement {
  std::string backend;               // "dmem", "nvml", "none"
  std::string reason;                // backend "none": why nothing can enforce on this GPU
  std::vector<PodEnforcement> pods;  // sorted by UID
  bool operator==(const GpuEnforcement&) const = default;
};

struct Gpu {
  int index = 0;
  std::string uuid;              // empty when unknown: the capacity source's,
                                 // else the one the node agent reported
  int64_t capacity = 0;          // C: physical VRAM minus reserve, bytes
  int64_t used = 0;              // last usage report, bytes (see used_ts_ms)
  int64_t used_ts_ms = 0;        // when `used` was reported; 0 = never
  // From the same report (the agent's; an old-format report leaves them 0):
  int64_t total = 0;             // physical VRAM the agent measured; 0 = not reported
  int64_t outside_pods = 0;      // bytes of processes that belong to no pod
  int64_t untracked = 0;         // sum of `pods` figures whose UID has no entry on
                                 // this node (a pod vramd does not account, or a
                                 // zombie whose pod is gone); included in `used`
  std::vector<PodUsage> pods;    // per-pod figures, sorted by UID
  std::string processes_unavailable;  // the report's reason for having no per-process figures
  int64_t invalid_process_lists = 0;  // the agent's count of refused process lists
  GpuEnforcement enforcement;         // the agent's last report of pods' limits here
};

struct Node {
  std::string name;
  std::vector<Gpu> gpus;         // sorted by index
  std::vector<Entry> entries;    // reservations on this node
  std::map<std::string, int64_t> models;  // model -> last time it was placed here (ms)
};

struct PlacementIndex;  // placement.h

// An immutable view of the whole ledger at one epoch. Shared read-only
// between threads (held by shared_ptr<const Snapshot>).
struct Snapshot {
  uint64_t epoch = 0;
  // False while the ledger is being rebuilt from the cluster after its store
  // lost data (a flush, a restart without persistence, a failover to a stale
  // replica): entries of bound pods may be missing, so nothing may be granted
  // from it (DESIGN.md §7; the store's seal, LedgerStore::ReadSeal).
  bool sealed = true;
  // Why it is unsealed (store::kUnsealedEpoch, kUnsealedRestarted; "" for a
  // new or emptied store). Meaningless while sealed.
  std::string unseal_reason;
  std::unordered_map<std::string, Node> nodes;
  // Optional compact copy of what Filter and Prioritize read, built by
  // ledger::IndexSnapshot once `nodes` is complete (the store does so before
  // sharing a snapshot). Changing `nodes` afterwards requires indexing again.
  // Not copyable (a copy could not keep the index): see Clone.
  std::shared_ptr<const PlacementIndex> index;

  Snapshot() = default;
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
  Snapshot(Snapshot&&) = default;
  Snapshot& operator=(Snapshot&&) = default;

  // A deep copy of epoch, seal and nodes without the index (the index points
  // into this snapshot's nodes): change the copy, then index it
  // (IndexSnapshot, or ReindexSnapshot with nodes_moved).
  Snapshot Clone() const {
    Snapshot c;
    c.epoch = epoch;
    c.sealed = sealed;
    c.unseal_reason = unseal_reason;
    c.nodes = nodes;
    return c;
  }

  const Node* Find(std::string_view name) const;
};

using SnapshotPtr = std::shared_ptr<const Snapshot>;

// The three vectors of one GPU at a point in time.
struct Vectors {
  int64_t capacity = 0;    // C
  int64_t allocated = 0;   // A
  int64_t used = 0;        // U (equals A when no fresh usage report exists)
};

// Per-GPU allocation sums of a node's entries, indexed by position in node.gpus.
std::vector<int64_t> AllocatedPerGpu(const Node& node);

// The vectors of each GPU of `node` (same order as node.gpus). Usage older
// than `usage_max_age_ms` at `now_ms` (or never reported) falls back to A
// (fit.h's GpuVectors with usage counted).
std::vector<Vectors> GpuVectors(const Node& node, int64_t now_ms, int64_t usage_max_age_ms);

// Node vectors are the sums of its GPUs' vectors.
Vectors SumVectors(const std::vector<Vectors>& gpus);

}  // namespace vramd::ledger
