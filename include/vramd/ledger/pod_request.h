// How much VRAM a pod asks for, counted exactly as kube-scheduler counts an
// extended resource (EXTENDER-PROTOCOL.md, "Counting a pod's request").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vramd/status.h"

namespace vramd::ledger {

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
  int32_t priority = 0;
  bool operator==(const PodSpecView&) const = default;
};

struct VramRequest {
  int64_t total = 0;         // R: bytes for the whole pod
  int gpu_count = 1;         // GPUs of one node it spreads over
  int64_t per_gpu = 0;       // ceil(total / gpu_count)
  int64_t peak_per_gpu = 0;  // ceil(peak / gpu_count), >= per_gpu
  std::string model;
  bool wants_vram() const { return total > 0; }
};

// Largest gpu-count accepted; more is an error, not a silent clamp.
inline constexpr int kMaxGpuCount = 64;

// R = max(sum of app containers and sidecars, each init container counted with
// the sidecars declared before it) + overhead. For each container, the request
// defaults to the limit when absent. Quantity errors name the container.
Result<VramRequest> ComputeVramRequest(const PodSpecView& pod);

}  // namespace vramd::ledger
