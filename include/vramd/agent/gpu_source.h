// What a node agent reads from the node: GPUs and the processes on them.
// One small interface, one implementation per source (NVML, DRM), each in
// its own file; the agent's loop and the report building know only this.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/status.h"

namespace vramd::agent {

// One process's memory on one GPU, as the source reported it.
struct ProcessUsage {
  int pid = 0;
  int64_t used_bytes = 0;
  // The process ran work on the GPU since the source's previous read (NVML:
  // a utilization sample above 0; DRM: its client's engine time grew). Only
  // meaningful when the reading's activity_known.
  bool active = false;
  bool operator==(const ProcessUsage&) const = default;
};

// One GPU at one moment. `used_bytes` is what is not free on the GPU
// (total − free: every process, the driver's reservations and contexts);
// `processes` lists each process once (a process seen as both compute and
// graphics is listed once, with the larger figure).
struct GpuReading {
  int index = 0;            // the GPU's index on the node (NVML's, or the DRM card order)
  std::string uuid;         // empty when the source has none
  std::string name;         // empty when the source has none
  int64_t total_bytes = 0;
  int64_t used_bytes = 0;
  bool mig = false;         // MIG mode on: reported whole (MIG is out of scope)
  std::string pci_bus_id;   // "0000:3b:00.0" (ledger of dmem regions: agent/enforce.h); "" when unknown
  std::vector<ProcessUsage> processes;
  // Why this GPU's per-process figures are unavailable, "" when `processes`
  // is the whole list: an NVML process list the driver could not give, or
  // gave in a shape that fails validation; DRM fdinfo the agent may not read.
  // Then `processes` is empty: a list that cannot be trusted is attributed to
  // nobody, never in part.
  std::string processes_unavailable;
  // Process lists of this read that failed validation (0, 1 or 2: compute,
  // graphics); the agent sums them into a counter per GPU.
  int invalid_process_lists = 0;
  // Issue 32, evidence for idle eviction: whether `processes[].active` was
  // read (NVML's per-process utilization samples, DRM's engine times), and
  // the GPU's own utilization in percent (NVML), -1 when unknown. A pod is
  // active on a GPU when one of its processes is, or, when per-process
  // activity is unknown, when the GPU is busy at all (report.h).
  bool activity_known = false;
  int utilization_percent = -1;
  bool operator==(const GpuReading&) const = default;
};

// A source of readings. Read() is called from one thread at a time (the
// agent's loop); it answers every GPU it could read, skipping (and logging)
// a GPU that fails alone, and fails as a whole only when nothing can be read
// (kUnavailable: the driver or library went away; the agent reopens later).
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  virtual std::string_view Name() const = 0;  // "nvml", "drm": the report's "source"
  virtual Result<std::vector<GpuReading>> Read() = 0;

  // Issue 34, enforcement through the driver (agent/enforce.h): why this
  // source cannot set a per-cgroup memory limit on GPU `index` ("" when it
  // can), and setting one (soft and hard bytes; soft 0 and hard UINT64_MAX
  // clear it) for the cgroup directory `cgroup_dir`. By default a source
  // cannot.
  virtual std::string MemoryLimitsUnsupported(int /*index*/) const {
    return "the " + std::string(Name()) + " source sets no memory limits";
  }
  virtual Status SetMemoryLimits(int /*index*/, const std::string& /*cgroup_dir*/, uint64_t /*soft*/,
                                 uint64_t /*hard*/) {
    return Internal("the " + std::string(Name()) + " source sets no memory limits");
  }
};

}  // namespace vramd::agent
