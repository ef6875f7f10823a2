// NVIDIA GPUs through NVML, loaded at run time with dlopen (no link-time
// dependency on the driver). Versioned entry points are resolved newest
// first with a fallback (nvmlInit_v2 → nvmlInit, …_v2 handles and counts,
// nvmlDeviceGetMemoryInfo_v2 → nvmlDeviceGetMemoryInfo). Per GPU: index,
// UUID, name, total and used (total − free) memory, MIG mode, and the
// compute and graphics processes with their memory, and their activity
// (nvmlDeviceGetProcessUtilization: each process with a utilization sample
// above 0 since the last pass; nvmlDeviceGetUtilizationRates: the GPU's own).
//
// The process lists: one struct per entry point is not a given (the _v3
// entry point writes 32-byte entries on R535-era drivers and 24-byte ones on
// R550 and later), so the agent never calls _v3. It reads them through
// nvmlDeviceGetRunningProcessDetailList (R550+, a versioned request struct)
// where the library has and implements it, else _v2 (24-byte entries on
// every driver that has it), else the plain entry point (16 bytes); an entry
// point the driver answers FUNCTION_NOT_FOUND (or, for the versioned
// request, ARGUMENT_VERSION_MISMATCH) is given up for the next, NOT_SUPPORTED
// falls to the next for that call. What comes back is validated: a count no
// larger than the room given, every pid above 0 (and at most INT_MAX) and
// once per list, every figure at most the GPU's total or
// NVML_VALUE_NOT_AVAILABLE (not counted). A list that fails, or a call that
// fails (an error with a count of 0 included), leaves the GPU without
// processes and with GpuReading::processes_unavailable saying why (logged
// once, with the raw counts, when it starts; again when it ends); a list that
// fails validation also counts in GpuReading::invalid_process_lists. Never
// a part of a list: a list that cannot be trusted is attributed to nobody.
//
// A GPU that fails alone (GPU_IS_LOST, …) is skipped with a warning; a
// process list that is not supported is empty; a list that grew between calls
// (INSUFFICIENT_SIZE) is read again with a larger buffer. MIG mode on: the
// GPU is reported whole, with a warning (MIG instances are out of scope).
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
