// NVIDIA GPUs through NVML, loaded at run time with dlopen (no link-time
// dependency on the driver). Versioned entry points are resolved newest
// first with a fallback (nvmlInit_v2 → nvmlInit, …_v2 handles and counts,
// nvmlDeviceGetMemoryInfo_v2 → nvmlDeviceGetMemoryInfo, running processes
// _v3 → _v2 → plain, each with its own struct layout). Per GPU: index, UUID,
// name, total and used (total − free) memory, MIG mode, and the compute and
// graphics processes with their memory. A GPU that fails alone
// (GPU_IS_LOST, …) is skipped with a warning; a process list that is not
// supported is empty; a list that grew between calls (INSUFFICIENT_SIZE) is
// read again with a larger buffer. MIG mode on: the GPU is reported whole,
// with a warning (MIG instances are out of scope).
#pragma once

#include <memory>
#include <string>

#include "vramd/agent/gpu_source.h"

namespace vramd::agent {

// Loads `library` ("libnvidia-ml.so.1", or a path) and initializes NVML.
// kNotFound: the library cannot be loaded or lacks a required entry point;
// kUnavailable: nvmlInit failed (e.g. the driver is not loaded). The source
// shuts NVML down and unloads the library when destroyed.
Result<std::unique_ptr<GpuSource>> OpenNvml(const std::string& library);

}  // namespace vramd::agent
