// The ledger's value types: what vramd knows about nodes, GPUs and the VRAM
// reservations on them. Standard library only; no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace vramd::ledger {

// Lifecycle of a ledger entry.
//  kReserved:    written by bind before the Binding exists.
//  kBound:       the pod is bound to the node (seen by bind success or reconcile).
//  kTerminating: the pod has a deletionTimestamp; its VRAM stays held (phantom rule).
enum class EntryState { kReserved, kBound, kTerminating };
const char* EntryStateName(EntryState s);
bool ParseEntryState(std::string_view s, EntryState* out);

// One pod's reservation on one node: the same amount on each chosen GPU.
struct Entry {
  std::string pod_uid;
  std::string ns;
  std::string name;
  std::vector<int> gpus;         // GPU indices on the node, ascending
  int64_t per_gpu = 0;           // bytes reserved on each GPU in `gpus`
  int64_t peak_per_gpu = 0;      // burst ceiling per GPU (>= per_gpu); 0 means per_gpu
  std::string model;             // vramd.io/model, may be empty
  EntryState state = EntryState::kReserved;
  int64_t created_ms = 0;        // when the reservation was made (server time)
};

struct Gpu {
  int index = 0;
  std::string uuid;              // empty when unknown
  int64_t capacity = 0;          // C: physical VRAM minus reserve, bytes
  int64_t used = 0;              // last usage report, bytes (see used_ts_ms)
  int64_t used_ts_ms = 0;        // when `used` was reported; 0 = never
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
  std::unordered_map<std::string, Node> nodes;
  // Optional compact copy of what Filter and Prioritize read, built by
  // ledger::IndexSnapshot once `nodes` is complete (the store does so before
  // sharing a snapshot). Changing `nodes` afterwards requires indexing again.
  // A copy of a snapshot starts without one (the copy may then be changed).
  std::shared_ptr<const PlacementIndex> index;

  Snapshot() = default;
  Snapshot(const Snapshot& o) : epoch(o.epoch), sealed(o.sealed), nodes(o.nodes) {}
  Snapshot& operator=(const Snapshot& o) {
    epoch = o.epoch;
    sealed = o.sealed;
    nodes = o.nodes;
    index.reset();
    return *this;
  }
  Snapshot(Snapshot&&) = default;
  Snapshot& operator=(Snapshot&&) = default;

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
