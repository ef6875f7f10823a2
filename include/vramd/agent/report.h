// The agent's report (PUT /v1/nodes/{node}/usage, version 2), built from the
// readings and the pods of their processes. Pure and table-tested.
//
// Per GPU: total and used bytes as read; each pod's bytes are the sum of its
// processes' on that GPU; "outside pods" the sum of the processes that belong
// to no pod; a process that cannot be placed (kNotAttributed: gone, or in two
// pods' cgroups) counts nowhere. Every figure is capped at the GPU's total
// (per-process figures and the GPU's own can disagree for a moment), so a
// report never carries used > total. Pods are sorted by UID, GPUs by index.
// A GPU whose per-process figures are unavailable (the reading says why)
// carries no pods and no outside-pods figure, and says so.
// Activity (issue 32): a pod is active on a GPU when one of its processes
// ran work there since the last read (the reading's activity_known) or, when
// the source has no per-process activity for the GPU, when the GPU's own
// utilization is above 0 (every pod on a busy GPU is active: evidence
// against idleness is taken generously, never for it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/agent/attribution.h"
#include "vramd/agent/gpu_source.h"
#include "vramd/ledger/model.h"

namespace vramd::agent {

struct PodUsage {
  std::string uid;
  int64_t used_bytes = 0;
  bool active = false;
  bool operator==(const PodUsage&) const = default;
};

struct GpuReport {
  int index = 0;
  std::string uuid;
  std::string name;
  int64_t total_bytes = 0;
  int64_t used_bytes = 0;
  int64_t outside_pods_bytes = 0;
  bool mig = false;
  std::vector<PodUsage> pods;
  std::string processes_unavailable;  // why there are no per-process figures; "" when there are
  int64_t invalid_process_lists = 0;  // process lists that failed validation (the agent: since it started)
  int utilization_percent = -1;       // the GPU's own, -1 when unknown
  ledger::GpuEnforcement enforcement;  // issue 34 (agent/enforce.h); empty backend: none to report
  bool operator==(const GpuReport&) const = default;
};

struct Report {
  std::string agent;   // "vramd-agent/<version>"
  std::string source;  // "nvml", "drm"
  std::vector<GpuReport> gpus;
};

Report BuildReport(std::string_view agent, std::string_view source, const std::vector<GpuReading>& readings,
                   const PodOfPid& pods);

// The JSON body: {"version":2,"agent":…,"source":…,"gpus":[{"index":…,…}]};
// "uuid" and "name" only when known; "outside_pods_bytes" and "pods" only
// when the per-process figures are available (a pod's "active": true when
// it is), else "processes_unavailable":
// "<why>"; "invalid_process_lists": N only when N > 0 (vramd shows both per
// GPU: /v1/nodes, vramd_gpu_processes_unavailable, _invalid_process_lists);
// "utilization_percent" when known; "enforcement": {"backend", "reason",
// "pods": [{"uid", "state", "reason"?}]} when the agent applied vramd's
// orders this pass (agent/enforce.h).
std::string ReportJson(const Report& report);

}  // namespace vramd::agent
