#include "vramd/agent/attribution.h"

#include <spdlog/spdlog.h>

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
      if (!ReadSmallFile(proc_root_ + "/" + std::to_string(p.pid) + "/cgroup", &text)) {
        // Gone since the GPU was read (or never visible here): its pod is unknown.
        pods.emplace(p.pid, kNotAttributed);
        continue;
      }
      CgroupPod pod = PodOfCgroupFile(text);
      if (pod.kind == CgroupPod::kPod) {
        pods.emplace(p.pid, std::move(pod.uid));
      } else if (pod.kind == CgroupPod::kAmbiguous) {
        spdlog::debug("pid {}: its cgroup lines name two pods: not attributed", p.pid);
        pods.emplace(p.pid, kNotAttributed);
      }
    }
  }
  return pods;
}

}  // namespace vramd::agent
