// Enforcement (issue 34 part B): the VRAM a pod was granted is the VRAM it
// can allocate, where the node can enforce it. Pure rules shared by vramd
// and its node agent; the agent applies them (agent/enforce.h), vramd
// decides what to apply and shows what was (ledger/model.h Gpu::enforcement).
//
//   vramd → agent  the answer to each usage report carries the node's mode
//                  and one limit per pod and GPU (DesiredLimits): soft = the
//                  pod's request per GPU, hard = its peak (vramd.io/vram-peak)
//                  or its request;
//   agent → vramd  the next report carries, per GPU, the backend the agent
//                  chose (dmem, nvml or none, and why) and per pod the state:
//                  enforced, dry-run (what would be written was logged),
//                  accounted (nothing enforces it here: the reason), failed
//                  (a write was refused, the pod's cgroup is missing: the
//                  reason).
// Standard library only; no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vramd/ledger/model.h"
#include "vramd/status.h"

namespace vramd::ledger {

// enforce.mode: off (the agent writes nothing and reports nothing),
// dry-run (it finds each pod's cgroup and backend and logs what it would
// write), on (it writes the limits).
enum class EnforceMode { kOff, kDryRun, kOn };
const char* EnforceModeName(EnforceMode m);  // "off", "dry-run", "on"
bool ParseEnforceMode(std::string_view s, EnforceMode* out);

// One pod's limit on one GPU.
struct PodLimit {
  std::string uid;
  int index = 0;
  int64_t soft = 0;  // the request per GPU (dmem.min, NVML's soft limit)
  int64_t hard = 0;  // the peak per GPU, or the request (dmem.max, NVML's hard limit)
  bool operator==(const PodLimit&) const = default;
};

// The limits of every pod with an entry on `node` (holds are room, not
// pods: none), one per GPU of the entry, sorted by (uid, index). An entry
// without GPUs or bytes has none.
std::vector<PodLimit> DesiredLimits(const Node& node);

// enforce.node_modes: comma-separated KEY=VALUE:MODE; the first rule whose
// label the node carries gives its mode, else enforce.mode.
using NodeModeRules = std::vector<std::pair<std::pair<std::string, std::string>, EnforceMode>>;
Result<NodeModeRules> ParseNodeModeRules(std::string_view text);
EnforceMode ModeForNode(const std::map<std::string, std::string>& labels, const NodeModeRules& rules,
                        EnforceMode fallback);

inline constexpr size_t kMaxEnforceReason = 256;

// Whether `s` may be a reason: at most kMaxEnforceReason printable ASCII.
bool IsEnforceReason(std::string_view s);

// Checks a GPU's enforcement as an agent reported it (ledger::GpuUsage):
// a backend of "dmem", "nvml" or "none", reasons IsEnforceReason, pod UIDs
// canonical and once each, a failed or accounted pod with a reason.
// kInvalidArgument naming the first offence.
Status CheckGpuEnforcement(int index, const GpuEnforcement& e);

// One pod's state over its GPUs: the worst that a GPU reports (failed, then
// accounted, then dry-run, then enforced) with its reason; nullopt when no
// GPU of the node reports the pod.
std::optional<PodEnforcement> PodEnforcementOn(const Node& node, std::string_view uid);

// "enforced", "dry-run: <reason>", "accounted only: <reason>",
// "failed: <reason>": what vramctl and the Event say.
std::string DescribeEnforcement(const PodEnforcement& e);

}  // namespace vramd::ledger
