// NVML's ABI, as its public header (nvml.h) defines it: the few types the
// agent's dlopen'ed entry points take. Declared here so that nothing of the
// driver is needed to build, at global scope and with one name per type so
// that the agent's function-pointer types and the test suite's fake NVML
// (tests/fakes/fake_nvml) are the very same types (UBSan's -fsanitize=function
// checks a call through a pointer against the callee's own type).
#pragma once

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

// The running-process entry, per entry point: the plain one takes v1,
// _v2 takes v2, _v3 takes v3 (nvmlProcessInfo_t since CUDA 12).
struct nvmlProcessInfo_v1 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
struct nvmlProcessInfo_v2 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct nvmlProcessInfo_v3 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
};
static_assert(sizeof(nvmlProcessInfo_v1) == 16 && sizeof(nvmlProcessInfo_v2) == 24 &&
              sizeof(nvmlProcessInfo_v3) == 32);
static_assert(sizeof(nvmlMemory_v1) == 24 && sizeof(nvmlMemory_v2) == 40);
