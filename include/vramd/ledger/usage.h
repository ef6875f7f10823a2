// A node agent's usage report (PUT /v1/nodes/{node}/usage; the contract is in
// docs/configuration.md "Usage reports"): per GPU the physical total, the
// bytes in use, the UUID, the bytes held by processes outside any pod, and
// the bytes each pod (by UID) holds. Value types and pure checks; the JSON is
// decoded by the HTTP layer (http::DecodeUsageReport), stored by
// store::LedgerStore::PushReport. Standard library only; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/ledger/model.h"
#include "vramd/status.h"

namespace vramd::ledger {

// Bounds that keep one report's work (decode, the store's script, the
// snapshot's decode) small and bounded.
inline constexpr int kMaxReportGpus = 1024;
inline constexpr int kMaxReportGpuIndex = 9999;
inline constexpr size_t kMaxReportPodFigures = 10'000;  // per-pod figures and enforcement states, all GPUs together
inline constexpr size_t kMaxUuidLength = 128;

struct GpuUsage {
  int index = 0;
  std::string uuid;              // empty: not reported
  int64_t total = 0;             // physical VRAM in bytes; 0: not reported (the old report)
  int64_t used = 0;              // bytes in use on the GPU (U), every process counted
  int64_t outside_pods = 0;      // bytes of processes that belong to no pod
  std::vector<PodUsage> pods;    // one figure per pod UID (model.h; UIDs canonical)
  // Why the agent has no per-process figures for this GPU ("" when it has):
  // a process list that failed validation, NVML's error, /proc/PID/fdinfo
  // it may not read. Then `pods` and `outside_pods` say nothing.
  std::string processes_unavailable;
  int64_t invalid_process_lists = 0;  // lists the agent refused since it started
  GpuEnforcement enforcement;         // issue 34: the pods' limits here (empty backend: none reported)
};

inline constexpr size_t kMaxUnavailableReason = 256;

struct UsageReport {
  // 1: the old report {"gpus": {"<index>": bytes}} (used only, no per-pod
  // attribution); 2: the agent's report (per-GPU objects, per-pod figures).
  int version = 2;
  std::string agent;             // e.g. "vramd-agent/0.2.0"; informational
  std::string source;            // e.g. "nvml", "drm"; informational
  std::vector<GpuUsage> gpus;    // ascending by index, at least one
};

// "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab": 8-4-4-4-12 lower-case hex digits,
// as Kubernetes writes metadata.uid.
bool IsCanonicalPodUid(std::string_view uid);

// Every rule a report obeys on its own (no ledger needed); the decoder calls
// it, so a decoded report always passes. kInvalidArgument naming the first
// offending part: no GPU or more than kMaxReportGpus, an index outside
// 0..kMaxReportGpuIndex or given twice, a figure negative or above
// kMaxBytesPerGpu, used, outside_pods or a pod's figure above total (when
// total is reported; a process list read a moment after the memory figure
// may sum above used, so that is accepted), a pod UID not canonical or given
// twice on one GPU,
// more than kMaxReportPodFigures pod figures (enforcement states counted),
// an enforcement that fails CheckGpuEnforcement (ledger/enforcement.h), a UUID longer than
// kMaxUuidLength or with a character outside [A-Za-z0-9-_:.], a version other than 1 or 2.
// Sorts nothing: indices must already ascend (the decoder sorts).
Status CheckUsageReport(const UsageReport& report);

// A report against the node it names, as the ledger holds it: every GPU
// index must be one of the node's. kInvalidArgument otherwise ("node N has
// no GPU I").
Status CheckReportAgainstNode(const UsageReport& report, const Node& node);

}  // namespace vramd::ledger
