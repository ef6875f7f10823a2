// Which pod each process belongs to, read from a /proc tree (the host's,
// with hostPID; a fake one in tests).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "vramd/agent/gpu_source.h"

namespace vramd::agent {

// pid → pod UID. A pid absent from the map belongs to no pod (its bytes are
// "outside pods"); a pid mapped to kNotAttributed ("") cannot be placed, and
// its bytes count nowhere: it is gone from /proc (it exited after the GPU
// was read; its pod, if any, is unknown), or its cgroup lines name two pods.
using PodOfPid = std::map<int, std::string>;
inline const std::string kNotAttributed;

class ProcAttribution {
 public:
  explicit ProcAttribution(std::string proc_root);  // e.g. "/proc"

  // The pods of every process of `readings` (each pid read once; a pid
  // without a readable /proc/PID/cgroup is kNotAttributed).
  PodOfPid Attribute(const std::vector<GpuReading>& readings) const;

 private:
  std::string proc_root_;
};

}  // namespace vramd::agent
