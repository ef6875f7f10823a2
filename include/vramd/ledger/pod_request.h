// How much VRAM a pod asks for, counted exactly as kube-scheduler counts an
// extended resource (EXTENDER-PROTOCOL.md, "Counting a pod's request").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/ledger/model.h"
#include "vramd/status.h"

namespace vramd::ledger {

// Pod annotation that makes a pod a designated victim where no priority
// class says so (DESIGN.md §7); the value "true" (any case) does.
inline constexpr const char* kDisposableAnnotation = "vramd.io/disposable";
// Pod annotation giving the pod's idle TTL (ParseIdleTtl), read by idle eviction.
inline constexpr const char* kIdleTtlAnnotation = "vramd.io/idle-ttl";
// Priority classes whose pods are designated victims unless configured
// otherwise (DESIGN.md §7).
inline constexpr std::string_view kDefaultVictimClasses[] = {"vramd-disposable"};
// A priority class name is a DNS subdomain: at most 253 bytes. The pod
// decoders reject a longer spec.priorityClassName.
inline constexpr size_t kMaxPriorityClassName = 253;

// The resource amounts of one container for the configured resource name,
// as quantity strings exactly as found in the pod spec.
struct ContainerAmount {
  std::optional<std::string> request;
  std::optional<std::string> limit;
  bool sidecar = false;  // init container with restartPolicy: Always (1.28+)
  bool operator==(const ContainerAmount&) const = default;
};

// The parts of a pod that decide its VRAM request. Decoders (extender wire,
// Kubernetes watch) fill this; the functions below are pure.
struct PodSpecView {
  std::string uid;
  std::string ns;
  std::string name;
  std::vector<ContainerAmount> containers;
  std::vector<ContainerAmount> init_containers;
  std::optional<std::string> overhead;       // spec.overhead[resource]
  std::optional<std::string> gpu_count;      // annotation vramd.io/gpu-count
  std::optional<std::string> vram_peak;      // annotation vramd.io/vram-peak
  std::string model;                         // annotation vramd.io/model
  std::optional<std::string> disposable;     // annotation vramd.io/disposable
  std::optional<std::string> idle_ttl;       // annotation vramd.io/idle-ttl
  int32_t priority = 0;                      // spec.priority (0 when absent)
  std::string priority_class;                // spec.priorityClassName (<= kMaxPriorityClassName)
  bool operator==(const PodSpecView&) const = default;
};

// A pod's demand: what it asks of one node, and the facts about the pod that
// its ledger entry records (RecordDemand).
struct VramRequest {
  int64_t total = 0;         // R: bytes for the whole pod
  int gpu_count = 1;         // GPUs of one node it spreads over
  int64_t per_gpu = 0;       // ceil(total / gpu_count)
  int64_t peak_per_gpu = 0;  // ceil(peak / gpu_count), >= per_gpu
  std::string model;
  std::string ns;              // the pod's namespace
  int32_t priority = 0;        // spec.priority
  std::string priority_class;  // spec.priorityClassName, may be empty
  bool victim = false;         // IsDesignatedVictim with the default classes
  int64_t idle_ttl_ms = 0;     // vramd.io/idle-ttl (0: none)
  bool wants_vram() const { return total > 0; }
};
using Demand = VramRequest;

// Longest vramd.io/idle-ttl accepted: 30 days.
inline constexpr int64_t kMaxIdleTtlMs = 30LL * 24 * 3600 * 1000;

// Parses a vramd.io/idle-ttl value: a Go-style duration, one or more
// <number><unit> parts with the units h, m, s and ms ("90s", "10m", "1h30m",
// "1.5h", "500ms"); a number may have a decimal fraction. The result is in
// whole milliseconds (a fraction of a millisecond is dropped) and must be
// > 0 and <= kMaxIdleTtlMs. A sign, whitespace, another unit (ns, us, d),
// a missing unit or number, zero and anything longer than 30 days are errors
// whose message says why (without the annotation's name). Pure.
Result<int64_t> ParseIdleTtl(std::string_view text);

// Largest gpu-count accepted; more is an error, not a silent clamp.
inline constexpr int kMaxGpuCount = 64;

// R = max(sum of app containers and sidecars, each init container counted with
// the sidecars declared before it) + overhead. For each container, the request
// defaults to the limit when absent. Quantity errors name the container.
// The demand also carries the pod's namespace, priority, priority class,
// model, idle TTL and whether it is a designated victim (kDefaultVictimClasses).
// A malformed idle TTL is an error: annotation vramd.io/idle-ttl="<value>": <why>.
Result<VramRequest> ComputeVramRequest(const PodSpecView& pod);
// The same with designated victims decided by `victim_classes` (config
// burst.victim_classes) instead of kDefaultVictimClasses: every path that
// computes a demand for placement or the ledger (extender filter,
// prioritize, bind, preempt; reconcile's re-add; explain) uses this one.
Result<VramRequest> ComputeVramRequest(const PodSpecView& pod, const std::vector<std::string>& victim_classes);

// Whether the pod is a designated victim: its priority class is one of
// `victim_classes`, or it carries kDisposableAnnotation with the value "true"
// (ASCII case ignored; any other value, or none, says nothing).
bool IsDesignatedVictim(const PodSpecView& pod,
                        std::span<const std::string_view> victim_classes = kDefaultVictimClasses);
bool IsDesignatedVictim(const PodSpecView& pod, const std::vector<std::string>& victim_classes);

// Writes into `e` what the demand says about the pod: model, peak_per_gpu,
// priority, priority_class, victim and idle_ttl_ms (and ns when `e` has none). Every path
// that creates an entry for a pod (bind, reconcile's re-add) goes through it,
// so an entry records what its demand said. Leaves uid, name, GPUs, amount,
// state and times to the caller.
void RecordDemand(const VramRequest& d, Entry* e);

}  // namespace vramd::ledger
