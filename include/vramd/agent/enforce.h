// Issue 34 part B: the agent makes the VRAM a pod was granted the VRAM it
// can allocate, where the node can (ledger/enforcement.h has the contract).
//
// vramd's answer to each report names the node's mode and, per pod and GPU,
// a soft limit (the request) and a hard one (the peak, else the request).
// Each pass the agent applies the latest answer to the GPUs it just read:
//
//   1. the pod's cgroup: the kubelet's pod directory under the cgroup v2
//      root (PodCgroupCandidates: systemd and cgroupfs drivers, the three
//      QoS classes, kind's kubelet.slice nesting); on a cgroup v1 or hybrid
//      host, under the unified, memory, pids or systemd hierarchy (found, so
//      the report says "no cgroup v2", not that the pod is missing);
//   2. the backend, per GPU (ChooseBackend): "dmem" when the root's
//      cgroup.controllers has dmem and its dmem.capacity lists a region for
//      the GPU's PCI address (nvidia/<pci>/vidmem, drm/<pci>/vram0); else
//      "nvml" when the source can set limits (NVML's
//      nvmlDeviceSetMemoryLimits_v1, R615+ drivers); else "none", with why
//      (each backend's reason, joined). MIG GPUs: neither backend limits a
//      MIG instance: "none", saying so;
//   3. mode on: dmem writes "<region> <hard>" to the pod's dmem.max and
//      "<region> <soft>" to its dmem.min (enabling +dmem in the ancestors'
//      cgroup.subtree_control when the pod's directory lacks the files);
//      nvml sets (cgroup path, soft, hard). A limit is written again only
//      when it changed or failed; a pod whose order is gone while its
//      cgroup remains is cleared (dmem "max" / "0"; NVML soft 0, hard
//      UINT64_MAX); a cgroup that is gone took its limits with it.
//      Mode dry-run: steps 1 and 2, and a log line of what would be written.
//
// The state per pod and GPU (ledger::PodEnforcement): enforced; dry-run
// (what would be written); accounted (backend none: its reason, or "pod
// cgroup not found yet" for a pod not started); failed (the write refused,
// or no cgroup for a pod whose processes are on the GPU).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vramd/agent/gpu_source.h"
#include "vramd/ledger/enforcement.h"
#include "vramd/status.h"

namespace vramd::agent {

// What vramd asked in its answer to the last report.
struct EnforceOrders {
  ledger::EnforceMode mode = ledger::EnforceMode::kOff;
  std::vector<ledger::PodLimit> limits;
};

// The "enforce" member of vramd's answer ({"mode", "limits": [{"uid",
// "index", "soft", "hard"}]}); an answer without one (a vramd before issue
// 34) is mode off. kInvalidArgument for a malformed one (nothing is applied
// then): a mode not off/dry-run/on, a UID not canonical, an index outside
// 0..9999, a soft above hard or a figure negative or above 1 PiB, more than
// 10,000 limits.
Result<EnforceOrders> DecodeEnforceOrders(std::string_view body);

// "00000000:3B:00.0" (NVML) or "0000:3b:00.0" (sysfs) → "0000:3b:00.0"; ""
// for text that is not a PCI address.
std::string NormalizePciAddress(std::string_view text);

// The root's dmem.capacity ("<region> <bytes>" per line) as region → bytes;
// malformed lines are skipped.
std::map<std::string, int64_t> ParseDmemCapacity(std::string_view text);

// The region of `regions` for a GPU at PCI address `pci` (normalized): the
// one whose second segment is the address ("drm/0000:03:00.0/vram0",
// "nvidia/0000:3b:00.0/vidmem"); "" when none or `pci` is empty.
std::string DmemRegionFor(const std::map<std::string, int64_t>& regions, std::string_view pci);

// The pod's cgroup directory, relative to the cgroup v2 root, as the
// kubelet makes it for each driver and QoS class (the UID canonical).
std::vector<std::string> PodCgroupCandidates(std::string_view uid);

// The cgroup v2 root as the agent found it.
struct CgroupHost {
  bool v2 = false;                             // the root has cgroup.controllers
  std::string controllers;                     // its text, e.g. "cpuset cpu io memory hugetlb pids"
  bool dmem = false;                           // dmem is one of them
  std::map<std::string, int64_t> dmem_regions;  // the root's dmem.capacity
};
CgroupHost ReadCgroupHost(const std::string& cgroup_root);

// One GPU as the backend choice sees it.
struct GpuTarget {
  int index = 0;
  std::string pci;               // normalized; "" unknown
  bool mig = false;
  std::string driver_unsupported;  // GpuSource::MemoryLimitsUnsupported; "" when the driver can
};

struct BackendChoice {
  std::string backend;  // "dmem", "nvml", "none"
  std::string region;   // dmem: the region
  std::string reason;   // none: why (both backends' reasons)
  bool operator==(const BackendChoice&) const = default;
};
BackendChoice ChooseBackend(const CgroupHost& host, const GpuTarget& gpu);

// The text written to dmem.max and dmem.min for a limit, and to clear one.
std::string DmemLine(std::string_view region, int64_t bytes);
std::string DmemClearMaxLine(std::string_view region);
std::string DmemClearMinLine(std::string_view region);

// Applies orders each pass; keeps what it applied (the loop's thread only).
class Enforcer {
 public:
  explicit Enforcer(std::string cgroup_root) : root_(std::move(cgroup_root)) {}

  // Applies `orders` to the GPUs of `readings` through `source` (NVML's
  // limits) and the cgroup tree; `busy` holds the UIDs of pods with
  // processes on the GPUs now. Answers, per GPU index read, the enforcement
  // for the next report (nothing with mode off: off clears what this agent
  // applied and reports nothing).
  std::map<int, ledger::GpuEnforcement> Apply(const EnforceOrders& orders, const std::vector<GpuReading>& readings,
                                              GpuSource* source, const std::set<std::string>& busy);

  const std::string& root() const { return root_; }

 private:
  struct Applied {
    std::string backend;
    std::string region;  // dmem
    std::string dir;     // the pod's cgroup, absolute
    int64_t soft = 0;
    int64_t hard = 0;
    bool operator==(const Applied&) const = default;
  };
  // The pod's cgroup directory (absolute), or "" when none exists.
  std::string FindPodCgroup(const std::string& uid) const;
  Status WriteDmem(const Applied& a, bool clear);
  Status EnableDmem(const std::string& dir);
  void Clear(const std::pair<std::string, int>& key, const Applied& a, GpuSource* source);

  std::string root_;
  std::map<std::pair<std::string, int>, Applied> applied_;  // (uid, GPU index) → written
  std::map<std::pair<std::string, int>, std::string> logged_;  // dry-run lines logged, once each
};

}  // namespace vramd::agent
