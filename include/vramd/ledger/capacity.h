// Where a node's per-GPU capacity comes from (DESIGN.md §2): the first source
// that exists wins — the config file's static entry, the node annotation
// vramd.io/capacity ("80Gi,80Gi"), or NVIDIA GPU Feature Discovery labels
// nvidia.com/gpu.count × nvidia.com/gpu.memory (MiB per GPU). The last
// source, the physical totals a node agent reported (PUT
// /v1/nodes/{node}/usage), is not node metadata: reconcile::NodeSync reads it
// from the store and applies the same reserve (CapacityAfterReserve).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vramd/status.h"

namespace vramd::ledger {

inline constexpr const char* kCapacityAnnotation = "vramd.io/capacity";
inline constexpr const char* kGfdCountLabel = "nvidia.com/gpu.count";
inline constexpr const char* kGfdMemoryLabel = "nvidia.com/gpu.memory";

// The most VRAM one GPU may have (capacity) or one pod may be said to hold on
// one GPU (annotations read back by reconcile): 1 PiB, some 10,000 times
// today's largest GPU. The bound keeps every per-GPU and per-node sum far
// from int64 overflow and exact as a Lua number (below 2^53) in the store's
// scripts; anything larger in the cluster's metadata is malformed.
inline constexpr int64_t kMaxBytesPerGpu = int64_t{1} << 50;

struct PhysicalGpus {
  std::string source;            // "config", "annotation", "gfd" or "" (no GPUs)
  std::vector<int64_t> bytes;    // physical VRAM per GPU, index = position
};

// Reads the node's GPUs from its annotations and labels. An empty `bytes`
// with an OK status means the node has no GPUs vramd knows of. Malformed
// values are errors that name the annotation or label: text that is not a
// quantity, negative amounts, a GPU above kMaxBytesPerGpu, more than 1024 GPUs,
// a GFD count or memory label that is not a whole number in range.
Result<PhysicalGpus> GpusFromNodeMetadata(const std::map<std::string, std::string>& labels,
                                          const std::map<std::string, std::string>& annotations);

// Capacity after the per-GPU reserve: physical − max(percent% × physical, min), ≥ 0.
int64_t CapacityAfterReserve(int64_t physical, double reserve_percent, int64_t reserve_min_bytes);

}  // namespace vramd::ledger
