// A fake libnvidia-ml.so.1 for the agent's tests: exports the NVML entry
// points vramd-agent uses (C ABI, the layouts of NVML's public header) and
// serves GPUs and processes from the JSON file named by $FAKE_NVML_CONFIG,
// read at nvmlInit and again whenever the file changes (checked at
// nvmlDeviceGetCount, once per agent pass):
//
//   {"init_error": 0, "count_error": 0,
//    "gpus": [{"uuid": "GPU-…", "name": "…", "total": 85520809984, "used": 4294967296,
//              "mig": false, "lost": false,
//              "compute":  [{"pid": 4242, "used": 1073741824}],
//              "graphics": [{"pid": 4243, "used": 1048576}],
//              "errors": {"nvmlDeviceGetUUID": 3, "nvmlDeviceGetMemoryInfo_v2": 25},
//              "insufficient_rounds": 0}]}
//
// "lost": every call on that GPU answers NVML_ERROR_GPU_IS_LOST. "errors":
// per entry point (exact name first, then the name without _v2/_v3).
// "insufficient_rounds": that many process-list calls answer
// INSUFFICIENT_SIZE (with a count one larger than the list) before the
// list is served. "used" of a process may be -1: NVML_VALUE_NOT_AVAILABLE.
// Built twice: fake-nvml (every entry point, versioned ones included) and,
// with FAKE_NVML_LEGACY, fake-nvml-legacy (the old unversioned ones only).
// When $FAKE_NVML_CALL_LOG names a file, each call appends its name to it.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

#include "agent/nvml_abi.h"  // the same types the agent calls through

namespace {

constexpr nvmlReturn_t kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kInsufficientSize = 7,
                       kGpuIsLost = 15, kArgumentVersionMismatch = 25;

struct Proc {
  unsigned int pid = 0;
  unsigned long long used = 0;
};
struct Gpu {
  std::string uuid, name;
  unsigned long long total = 0, used = 0;
  bool mig = false, lost = false;
  std::vector<Proc> compute, graphics;
  std::map<std::string, int> errors;
  int insufficient_rounds = 0;
  int insufficient_left = 0;
};

std::mutex mu;
bool initialized = false;
int init_error = 0, count_error = 0;
std::vector<Gpu> gpus;
struct stat loaded_stat {};

void LogCall(const char* name) {
  const char* path = std::getenv("FAKE_NVML_CALL_LOG");
  if (path == nullptr || *path == '\0') return;
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", name);
    std::fclose(f);
  }
}

std::vector<Proc> Procs(const nlohmann::json& list) {
  std::vector<Proc> out;
  if (!list.is_array()) return out;
  for (const auto& p : list) {
    Proc x;
    x.pid = p.value("pid", 0u);
    long long used = p.value("used", 0LL);
    x.used = used < 0 ? ~0ULL : static_cast<unsigned long long>(used);
    out.push_back(x);
  }
  return out;
}

// (Re)reads the config when `force` or the file changed. Caller holds mu.
void Load(bool force) {
  const char* path = std::getenv("FAKE_NVML_CONFIG");
  struct stat st {};
  if (path == nullptr || ::stat(path, &st) != 0) {
    gpus.clear();
    init_error = count_error = 0;
    return;
  }
  if (!force && st.st_ino == loaded_stat.st_ino && st.st_size == loaded_stat.st_size &&
      st.st_mtim.tv_sec == loaded_stat.st_mtim.tv_sec && st.st_mtim.tv_nsec == loaded_stat.st_mtim.tv_nsec) {
    return;
  }
  loaded_stat = st;
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  gpus.clear();
  if (!j.is_object()) return;
  init_error = j.value("init_error", 0);
  count_error = j.value("count_error", 0);
  for (const auto& g : j.value("gpus", nlohmann::json::array())) {
    Gpu x;
    x.uuid = g.value("uuid", "");
    x.name = g.value("name", "");
    x.total = g.value("total", 0ULL);
    x.used = g.value("used", 0ULL);
    x.mig = g.value("mig", false);
    x.lost = g.value("lost", false);
    x.compute = Procs(g.value("compute", nlohmann::json::array()));
    x.graphics = Procs(g.value("graphics", nlohmann::json::array()));
    const nlohmann::json errors = g.value("errors", nlohmann::json::object());
    for (const auto& [k, v] : errors.items()) x.errors[k] = v.get<int>();
    x.insufficient_rounds = x.insufficient_left = g.value("insufficient_rounds", 0);
    gpus.push_back(std::move(x));
  }
}

// The GPU of a handle, or an error: handles are index + 1.
nvmlReturn_t Find(nvmlDevice_t d, const char* fn, Gpu** out) {
  if (!initialized) return kUninitialized;
  auto i = reinterpret_cast<uintptr_t>(d);
  if (i == 0 || i > gpus.size()) return kInvalidArgument;
  Gpu& g = gpus[i - 1];
  if (g.lost) return kGpuIsLost;
  std::string name = fn;
  auto e = g.errors.find(name);
  if (e == g.errors.end()) {
    size_t v = name.rfind("_v");
    if (v != std::string::npos) e = g.errors.find(name.substr(0, v));
  }
  if (e != g.errors.end() && e->second != 0) return e->second;
  *out = &g;
  return kSuccess;
}

template <typename Info>
nvmlReturn_t ServeProcs(nvmlDevice_t d, const char* fn, bool compute, unsigned int* count, Info* infos) {
  std::lock_guard<std::mutex> l(mu);
  LogCall(fn);
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, fn, &g); r != kSuccess) return r;
  if (count == nullptr) return kInvalidArgument;
  const std::vector<Proc>& list = compute ? g->compute : g->graphics;
  if (g->insufficient_left > 0) {
    --g->insufficient_left;
    *count = static_cast<unsigned int>(list.size() + 1);
    return kInsufficientSize;
  }
  if (*count < list.size() || (infos == nullptr && !list.empty())) {
    *count = static_cast<unsigned int>(list.size());
    return kInsufficientSize;
  }
  *count = static_cast<unsigned int>(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    Info info{};
    info.pid = list[i].pid;
    info.usedGpuMemory = list[i].used;
    infos[i] = info;
  }
  return kSuccess;
}

nvmlReturn_t Init(const char* fn) {
  std::lock_guard<std::mutex> l(mu);
  LogCall(fn);
  Load(true);
  if (init_error != 0) return init_error;
  initialized = true;
  return kSuccess;
}

nvmlReturn_t Count(const char* fn, unsigned int* n) {
  std::lock_guard<std::mutex> l(mu);
  LogCall(fn);
  if (!initialized) return kUninitialized;
  Load(false);
  for (Gpu& g : gpus) g.insufficient_left = g.insufficient_rounds;
  if (count_error != 0) return count_error;
  *n = static_cast<unsigned int>(gpus.size());
  return kSuccess;
}

nvmlReturn_t Handle(const char* fn, unsigned int index, nvmlDevice_t* d) {
  std::lock_guard<std::mutex> l(mu);
  LogCall(fn);
  if (!initialized) return kUninitialized;
  if (index >= gpus.size()) return kInvalidArgument;
  if (gpus[index].lost) return kGpuIsLost;
  *d = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(index + 1));
  return kSuccess;
}

nvmlReturn_t Text(nvmlDevice_t d, const char* fn, bool uuid, char* out, unsigned int length) {
  std::lock_guard<std::mutex> l(mu);
  LogCall(fn);
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, fn, &g); r != kSuccess) return r;
  const std::string& s = uuid ? g->uuid : g->name;
  if (s.size() + 1 > length) return kInsufficientSize;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return kSuccess;
}

}  // namespace

NVML_EXPORT nvmlReturn_t nvmlInit() { return Init("nvmlInit"); }
NVML_EXPORT nvmlReturn_t nvmlShutdown() {
  std::lock_guard<std::mutex> l(mu);
  LogCall("nvmlShutdown");
  if (!initialized) return kUninitialized;
  initialized = false;
  return kSuccess;
}
NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case kSuccess: return "Success";
    case kUninitialized: return "Uninitialized";
    case kInvalidArgument: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case kInsufficientSize: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case kGpuIsLost: return "GPU is lost";
    case kArgumentVersionMismatch: return "Argument version mismatch";
    default: return "Unknown Error";
  }
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* n) { return Count("nvmlDeviceGetCount", n); }
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t* d) {
  return Handle("nvmlDeviceGetHandleByIndex", i, d);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_v1* m) {
  std::lock_guard<std::mutex> l(mu);
  LogCall("nvmlDeviceGetMemoryInfo");
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, "nvmlDeviceGetMemoryInfo", &g); r != kSuccess) return r;
  m->total = g->total;
  m->used = g->used;
  m->free = g->total - std::min(g->used, g->total);
  return kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* out, unsigned int n) {
  return Text(d, "nvmlDeviceGetUUID", true, out, n);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* out, unsigned int n) {
  return Text(d, "nvmlDeviceGetName", false, out, n);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int* current, unsigned int* pending) {
  std::lock_guard<std::mutex> l(mu);
  LogCall("nvmlDeviceGetMigMode");
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, "nvmlDeviceGetMigMode", &g); r != kSuccess) return r;
  *current = *pending = g->mig ? 1 : 0;
  return kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_v1* p) {
  return ServeProcs(d, "nvmlDeviceGetComputeRunningProcesses", true, n, p);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_v1* p) {
  return ServeProcs(d, "nvmlDeviceGetGraphicsRunningProcesses", false, n, p);
}

#ifndef FAKE_NVML_LEGACY
NVML_EXPORT nvmlReturn_t nvmlInit_v2() { return Init("nvmlInit_v2"); }
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) { return Count("nvmlDeviceGetCount_v2", n); }
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  return Handle("nvmlDeviceGetHandleByIndex_v2", i, d);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2* m) {
  std::lock_guard<std::mutex> l(mu);
  LogCall("nvmlDeviceGetMemoryInfo_v2");
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, "nvmlDeviceGetMemoryInfo_v2", &g); r != kSuccess) return r;
  if (m->version != (static_cast<unsigned int>(sizeof(nvmlMemory_v2)) | (2u << 24))) return kArgumentVersionMismatch;
  // As the real one: a reserve the driver keeps is neither used nor free.
  unsigned long long used = std::min(g->used, g->total);
  unsigned long long reserved = std::min<unsigned long long>(used, 1ULL << 20);
  m->total = g->total;
  m->reserved = reserved;
  m->used = used - reserved;
  m->free = g->total - used;
  return kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_v2* p) {
  return ServeProcs(d, "nvmlDeviceGetComputeRunningProcesses_v2", true, n, p);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_v2* p) {
  return ServeProcs(d, "nvmlDeviceGetGraphicsRunningProcesses_v2", false, n, p);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_v3* p) {
  return ServeProcs(d, "nvmlDeviceGetComputeRunningProcesses_v3", true, n, p);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int* n, nvmlProcessInfo_v3* p) {
  return ServeProcs(d, "nvmlDeviceGetGraphicsRunningProcesses_v3", false, n, p);
}
#endif
