#include "vramd/ledger/model.h"

#include <algorithm>

#include "vramd/ledger/fit.h"

namespace vramd::ledger {

const char* EntryStateName(EntryState s) {
  switch (s) {
    case EntryState::kReserved: return "reserved";
    case EntryState::kBound: return "bound";
    case EntryState::kTerminating: return "terminating";
    case EntryState::kHold: return "hold";
  }
  return "reserved";
}

bool ParseEntryState(std::string_view s, EntryState* out) {
  if (s == "reserved") *out = EntryState::kReserved;
  else if (s == "bound") *out = EntryState::kBound;
  else if (s == "terminating") *out = EntryState::kTerminating;
  else if (s == "hold") *out = EntryState::kHold;
  else return false;
  return true;
}

const Node* Snapshot::Find(std::string_view name) const {
  auto it = nodes.find(std::string(name));
  return it == nodes.end() ? nullptr : &it->second;
}

std::vector<int64_t> AllocatedPerGpu(const Node& node) {
  std::vector<int64_t> alloc(node.gpus.size(), 0);
  for (const Entry& e : node.entries) {
    for (int g : e.gpus) {
      // node.gpus is sorted by index; indices are usually 0..n-1.
      auto it = std::lower_bound(node.gpus.begin(), node.gpus.end(), g,
                                 [](const Gpu& gpu, int idx) { return gpu.index < idx; });
      if (it != node.gpus.end() && it->index == g) alloc[it - node.gpus.begin()] += e.per_gpu;
    }
  }
  return alloc;
}

std::vector<Vectors> GpuVectors(const Node& node, int64_t now_ms, int64_t usage_max_age_ms) {
  return GpuVectors(node, now_ms, FitPolicy{true, usage_max_age_ms});
}

Vectors SumVectors(const std::vector<Vectors>& gpus) {
  Vectors sum;
  for (const Vectors& v : gpus) {
    sum.capacity += v.capacity;
    sum.allocated += v.allocated;
    sum.used += v.used;
  }
  return sum;
}

}  // namespace vramd::ledger
