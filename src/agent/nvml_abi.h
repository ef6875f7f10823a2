// NVML's ABI, as its public header (nvml.h) defines it: the few types the
// agent's dlopen'ed entry points take, declared here so that nothing of the
// driver is needed to build. The agent's own: the fake NVML of the tests
// (tests/fakes/fake_nvml) writes these layouts itself, byte by byte, per
// driver family, and never includes this file, so a layout wrong here fails
// the tests. Types at global scope with NVML's names (UBSan's
// -fsanitize=function compares the type of a call through a pointer with the
// callee's; the fake declares the same names).
//
// The running-process entries: one struct per entry point is NOT a given.
//   nvmlDevice{Compute,Graphics}RunningProcesses       nvmlProcessInfo_v1_t, 16 bytes
//   …RunningProcesses_v2                                nvmlProcessInfo_v2_t, 24 bytes, every driver
//   …RunningProcesses_v3                                32 bytes on R535-era drivers (+
//       usedGpuCcProtectedMemory), 24 bytes (the _v2 layout) on R550 and later: the agent
//       never calls it
//   nvmlDeviceGetRunningProcessDetailList (R550+)       nvmlProcessDetailList_v1_t request,
//       versioned, with nvmlProcessDetail_v1_t entries, 32 bytes
//
// Activity (issue 32: idle eviction counts it):
//   nvmlDeviceGetProcessUtilization      nvmlProcessUtilizationSample_t entries, 32 bytes
//       (pid @0, timeStamp @8 in CPU microseconds, smUtil @16, memUtil @20, encUtil @24,
//       decUtil @28); samples newer than the lastSeenTimeStamp argument; the same
//       count/buffer protocol as the process lists, NOT_FOUND when no sample is newer
//   nvmlDeviceGetUtilizationRates        nvmlUtilization_t, 8 bytes (gpu @0, memory @4, percent)
//
// Enforcement (issue 34):
//   nvmlDeviceGetPciInfo_v3              nvmlPciInfo_t, 68 bytes (busIdLegacy[16] @0, domain @16,
//       bus @20, device @24, pciDeviceId @28, pciSubSystemId @32, busId[32] @36:
//       "00000000:3B:00.0"): the GPU's PCI address, for its dmem region
//   nvmlDeviceSetMemoryLimits_v1         nvmlSetMemoryLimits_v1_t, 24 bytes (nameSpace @0: the
//       cgroup directory's full path, softLimit @8, hardLimit @16; soft 0 and hard
//       NVML_DEVICE_MEMORY_LIMIT_MAX clear): R615 drivers and later; absent before
//   nvmlSystemGetDriverVersion           a string ("580.159.04"), to say which driver lacks it
#pragma once

#include <cstddef>

using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

struct nvmlMemory_v1 {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlMemory_v2 {  // nvmlMemory_v2_t; used excludes `reserved`
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlProcessInfo_v1 {  // the plain entry points
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
struct nvmlProcessInfo_v2 {  // _v2 (and what R550+ drivers write through _v3)
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct nvmlProcessDetail_v1 {  // nvmlDeviceGetRunningProcessDetailList's entries
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
};
struct nvmlProcessDetailList_v1 {  // nvmlProcessDetailList_t
  unsigned int version;              // sizeof | (1 << 24): NVML_STRUCT_VERSION(ProcessDetailList, 1)
  unsigned int mode;                 // 0 compute, 1 graphics, 2 MPS compute
  unsigned int numProcArrayEntries;  // in: room in procArray; out: entries (or the count needed)
  nvmlProcessDetail_v1* procArray;
};

struct nvmlProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long timeStamp;  // CPU time, microseconds
  unsigned int smUtil;           // percent of the sample period, each
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};
struct nvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;        // percent of the last sample period a kernel ran
  unsigned int memory;     // percent of it memory was read or written
};

static_assert(sizeof(nvmlMemory_v1) == 24 && sizeof(nvmlMemory_v2) == 40);
static_assert(sizeof(nvmlProcessInfo_v1) == 16 && offsetof(nvmlProcessInfo_v1, usedGpuMemory) == 8);
static_assert(sizeof(nvmlProcessInfo_v2) == 24 && offsetof(nvmlProcessInfo_v2, gpuInstanceId) == 16);
static_assert(sizeof(nvmlProcessDetail_v1) == 32 && offsetof(nvmlProcessDetail_v1, usedGpuCcProtectedMemory) == 24);
static_assert(sizeof(nvmlProcessDetailList_v1) == 24 && offsetof(nvmlProcessDetailList_v1, procArray) == 16);
static_assert(sizeof(nvmlProcessUtilizationSample) == 32 && offsetof(nvmlProcessUtilizationSample, timeStamp) == 8 &&
              offsetof(nvmlProcessUtilizationSample, smUtil) == 16 && offsetof(nvmlProcessUtilizationSample, decUtil) == 28);
static_assert(sizeof(nvmlUtilization) == 8);

struct nvmlPciInfo {  // nvmlPciInfo_t (the _v3 entry point's)
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
struct nvmlSetMemoryLimits_v1 {  // nvmlSetMemoryLimits_v1_t
  const char* nameSpace;          // the cgroup's directory, full path
  unsigned long long softLimit;   // bytes
  unsigned long long hardLimit;   // bytes
};
static_assert(sizeof(nvmlPciInfo) == 68 && offsetof(nvmlPciInfo, domain) == 16 && offsetof(nvmlPciInfo, busId) == 36);
static_assert(sizeof(nvmlSetMemoryLimits_v1) == 24 && offsetof(nvmlSetMemoryLimits_v1, softLimit) == 8 &&
              offsetof(nvmlSetMemoryLimits_v1, hardLimit) == 16);
