// Which pod each process belongs to, read from a /proc tree (the host's,
// with hostPID; a fake one in tests).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "vramd/agent/gpu_source.h"

namespace vramd::agent {

// pid → pod UID; a pid absent from the map belongs to no pod (or is gone).
using PodOfPid = std::map<int, std::string>;

class ProcAttribution {
 public:
  explicit ProcAttribution(std::string proc_root);  // e.g. "/proc"

  // The pods of every process of `readings` (each pid read once).
  PodOfPid Attribute(const std::vector<GpuReading>& readings) const;

 private:
  std::string proc_root_;
};

}  // namespace vramd::agent
