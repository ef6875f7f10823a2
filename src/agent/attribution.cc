#include "vramd/agent/attribution.h"

#include <set>

#include "agent/read_file.h"
#include "vramd/agent/cgroup.h"

namespace vramd::agent {

ProcAttribution::ProcAttribution(std::string proc_root) : proc_root_(std::move(proc_root)) {}

PodOfPid ProcAttribution::Attribute(const std::vector<GpuReading>& readings) const {
  PodOfPid pods;
  std::set<int> seen;
  std::string text;
  for (const GpuReading& g : readings) {
    for (const ProcessUsage& p : g.processes) {
      if (!seen.insert(p.pid).second) continue;
      if (!ReadSmallFile(proc_root_ + "/" + std::to_string(p.pid) + "/cgroup", &text)) continue;
      if (auto uid = PodUidFromCgroupFile(text)) pods.emplace(p.pid, std::move(*uid));
    }
  }
  return pods;
}

}  // namespace vramd::agent
