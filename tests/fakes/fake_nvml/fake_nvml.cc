// A fake libnvidia-ml.so.1 for the agent's tests: exports the NVML entry
// points vramd-agent uses (C ABI) and serves GPUs and processes from the JSON
// file named by $FAKE_NVML_CONFIG, read at nvmlInit and again whenever the
// file changes (checked at nvmlDeviceGetCount, once per agent pass):
//
//   {"driver": "r550", "init_error": 0, "count_error": 0,
//    "gpus": [{"uuid": "GPU-…", "name": "…", "total": 85520809984, "used": 4294967296,
//              "mig": false, "lost": false,
//              "compute":  [{"pid": 4242, "used": 1073741824}],
//              "graphics": [{"pid": 4243, "used": 1048576}],
//              "errors": {"nvmlDeviceGetUUID": 3, "nvmlDeviceGetMemoryInfo_v2": 25},
//              "insufficient_rounds": 0, "count_beyond_buffer": false,
//              "samples": [{"pid": 4242, "sm": 37, "mem": 5, "enc": 0, "dec": 0, "ts": 1700000000000000}],
//              "utilization": 40}]}
//
// It does NOT include the agent's ABI header (src/agent/nvml_abi.h): it
// writes every struct itself, at the byte offsets of NVML's public header,
// per driver family, so that a test can catch an agent that reads with the
// wrong layout. "driver" picks the family (default "r550"):
//
//   r470  the plain process entry points only (nvmlProcessInfo_v1_t, 16-byte
//         entries); _v2, _v3 and nvmlDeviceGetRunningProcessDetailList answer
//         NVML_ERROR_FUNCTION_NOT_FOUND (this driver does not implement them).
//   r535  plain (16), _v2 (nvmlProcessInfo_v2_t, 24) and _v3 with the R535
//         nvmlProcessInfo_t (32-byte entries: + usedGpuCcProtectedMemory);
//         no nvmlDeviceGetRunningProcessDetailList (FUNCTION_NOT_FOUND).
//   r550  plain (16), _v2 (24), _v3 writing 24-byte entries (byte for byte
//         what _v2 writes: R550 and later drivers, 580 included), and
//         nvmlDeviceGetRunningProcessDetailList (versioned request struct,
//         32-byte nvmlProcessDetail_v1_t entries).
//
// As the real driver, a process's gpuInstanceId and computeInstanceId are
// 0xFFFFFFFF when MIG is off. "lost": every call on that GPU answers
// NVML_ERROR_GPU_IS_LOST. "errors": per entry point (exact name first, then
// the name without _v2/_v3; nvmlDeviceGetRunningProcessDetailList falls back
// to the name of the list it serves, nvmlDeviceGetComputeRunningProcesses or
// nvmlDeviceGetGraphicsRunningProcesses); a process-list call that answers a
// configured error writes a count of 0 (the "zero count with an error"
// shape). "insufficient_rounds": that many process-list calls answer
// INSUFFICIENT_SIZE (with a count one larger than the list) before the list
// is served. "count_beyond_buffer": a misbehaving driver, whose process-list
// calls answer SUCCESS with a count one larger than the room they were given
// (writing only what fits). "used" of a process may be -1:
// NVML_VALUE_NOT_AVAILABLE; a "pid" is served as given (0 or a repeated pid
// included), as an unsigned int.
// Built twice: fake-nvml (every entry point, versioned ones included) and,
// with FAKE_NVML_LEGACY, fake-nvml-legacy (the old unversioned ones only;
// its default family is r470).
// Activity: nvmlDeviceGetProcessUtilization serves "samples" as
// nvmlProcessUtilizationSample_t entries (32 bytes: pid @0, timeStamp @8 in
// CPU microseconds, smUtil @16, memUtil @20, encUtil @24, decUtil @28), only
// those newer than its lastSeenTimeStamp argument (NVML_ERROR_NOT_FOUND when
// none is), with the count/buffer protocol of the process lists. A sample
// without "ts" is stamped with the time of the call (a process running now:
// served on every pass); with one, it is served once. nvmlDeviceGetUtilizationRates
// answers "utilization" (the GPU's percent, 0 by default) as nvmlUtilization_t
// (gpu @0, memory @4). Both take "errors" like every entry point.
// When $FAKE_NVML_CALL_LOG names a file, each call appends its name to it.
// Enforcement (issue 34): nvmlDeviceGetPciInfo_v3 (every family but the
// legacy build) writes nvmlPciInfo_t (68 bytes: busIdLegacy[16] @0, domain
// @16, bus @20, device @24, pciDeviceId @28, pciSubSystemId @32, busId[32]
// @36) from the GPU's "pci" ("00000000:3B:00.0"; default bus 0x10 + index);
// nvmlSystemGetDriverVersion answers "driver_version" (default per family).
// Built a third time, with FAKE_NVML_LIMITS, as fake-nvml-r615 (family
// "r615", the default there: R550's process lists, plus
// nvmlDeviceSetMemoryLimits_v1): it reads nvmlSetMemoryLimits_v1_t (24
// bytes: nameSpace pointer @0, softLimit @8, hardLimit @16) and appends
// "<uuid> <soft> <hard> <nameSpace>" to $FAKE_NVML_LIMITS_LOG. The other
// builds do not export it at all, as drivers before R615 (580 included) do not.
#include <sys/stat.h>
#include <sys/time.h>

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

// NVML's C types, by name only: the fake never looks inside them, it writes
// bytes at the offsets below. (The names match those of the agent's calls,
// which UBSan's -fsanitize=function compares in the sanitizer builds.)
using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlMemory_v1;
struct nvmlMemory_v2;
struct nvmlProcessDetailList_v1;
struct nvmlProcessUtilizationSample;
struct nvmlUtilization;
struct nvmlPciInfo;
struct nvmlSetMemoryLimits_v1;

namespace {

constexpr nvmlReturn_t kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotFound = 6, kInsufficientSize = 7,
                       kFunctionNotFound = 13, kGpuIsLost = 15, kArgumentVersionMismatch = 25, kUnknown = 999;

// ---- Layouts (nvml.h, x86-64 / aarch64 LP64), written byte by byte. ----

// nvmlMemory_t (v1): total @0, free @8, used @16; 24 bytes.
// nvmlMemory_v2_t: version @0 (u32), total @8, reserved @16, free @24, used @32; 40 bytes,
// version = 40 | (2 << 24).
constexpr unsigned int kMemoryV2Version = 40u | (2u << 24);

// A running-process entry: which fields an entry point writes, and its stride.
struct EntryLayout {
  const char* what;
  size_t stride;        // bytes per entry
  bool instance_ids;    // gpuInstanceId @16, computeInstanceId @20 (u32 each)
  bool cc_protected;    // usedGpuCcProtectedMemory @24 (u64)
};
// pid @0 (u32), 4 bytes of padding, usedGpuMemory @8 (u64) in every layout.
constexpr EntryLayout kInfoV1{"nvmlProcessInfo_v1_t", 16, false, false};
constexpr EntryLayout kInfoV2{"nvmlProcessInfo_v2_t", 24, true, false};
constexpr EntryLayout kInfoR535{"nvmlProcessInfo_t (R535)", 32, true, true};
constexpr EntryLayout kDetailV1{"nvmlProcessDetail_v1_t", 32, true, true};

// nvmlProcessDetailList_v1_t: version @0, mode @4, numProcArrayEntries @8
// (u32 each), 4 bytes of padding, procArray @16 (pointer); 24 bytes,
// version = 24 | (1 << 24).
constexpr size_t kDetailListSize = 24;
constexpr unsigned int kDetailListVersion = static_cast<unsigned int>(kDetailListSize) | (1u << 24);
constexpr unsigned int kModeCompute = 0, kModeGraphics = 1, kModeMps = 2;

void Put32(void* base, size_t off, uint32_t v) { std::memcpy(static_cast<unsigned char*>(base) + off, &v, 4); }
void Put64(void* base, size_t off, uint64_t v) { std::memcpy(static_cast<unsigned char*>(base) + off, &v, 8); }
[[maybe_unused]] uint32_t Get32(const void* base, size_t off) {
  uint32_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(base) + off, 4);
  return v;
}
[[maybe_unused]] void* GetPtr(const void* base, size_t off) {
  void* v;
  std::memcpy(&v, static_cast<const unsigned char*>(base) + off, sizeof v);
  return v;
}

enum class Family { kR470, kR535, kR550 };

struct Proc {
  unsigned int pid = 0;
  unsigned long long used = 0;
};
// One nvmlProcessUtilizationSample_t; ts 0: stamped at the call.
struct Sample {
  unsigned int pid = 0;
  unsigned long long ts = 0;
  unsigned int sm = 0, mem = 0, enc = 0, dec = 0;
};
constexpr size_t kSampleStride = 32;

struct Gpu {
  std::string pci;  // "00000000:3B:00.0"
  std::vector<Sample> samples;
  unsigned int utilization = 0;
  std::string uuid, name;
  unsigned long long total = 0, used = 0;
  bool mig = false, lost = false;
  std::vector<Proc> compute, graphics, mps;
  std::map<std::string, int> errors;
  int insufficient_rounds = 0;
  int insufficient_left = 0;
  bool count_beyond_buffer = false;
};

#ifdef FAKE_NVML_LEGACY
constexpr Family kDefaultFamily = Family::kR470;
#elif defined(FAKE_NVML_LIMITS)
constexpr Family kDefaultFamily = Family::kR550;  // "r615": R550's lists and the memory limits
#else
constexpr Family kDefaultFamily = Family::kR550;
#endif

std::mutex mu;
bool initialized = false;
int init_error = 0, count_error = 0;
Family family = kDefaultFamily;
std::string driver_version;
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
    x.pid = static_cast<unsigned int>(p.value("pid", 0LL));
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
    family = kDefaultFamily;
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
  family = kDefaultFamily;
  if (!j.is_object()) return;
  init_error = j.value("init_error", 0);
  count_error = j.value("count_error", 0);
  const std::string driver = j.value("driver", "");
  if (driver == "r470") {
    family = Family::kR470;
  } else if (driver == "r535") {
    family = Family::kR535;
  } else if (driver == "r550") {
    family = Family::kR550;
#ifdef FAKE_NVML_LIMITS
  } else if (driver == "r615") {
    family = Family::kR550;
#endif
  } else if (!driver.empty()) {
    std::fprintf(stderr, "fake NVML: unknown \"driver\" %s (r470, r535, r550; r615 in fake-nvml-r615 only)\n",
                 driver.c_str());
    init_error = count_error = kUnknown;  // loud: a test must not silently run another family
  }
#ifdef FAKE_NVML_LIMITS
  const char* default_version = "615.20.01";
#else
  const char* default_version = family == Family::kR470 ? "470.256.02" : family == Family::kR535 ? "535.230.02" : "580.159.04";
#endif
  driver_version = j.value("driver_version", default_version);
  for (const auto& g : j.value("gpus", nlohmann::json::array())) {
    Gpu x;
    char pci[32];
    std::snprintf(pci, sizeof pci, "00000000:%02X:00.0", 0x10 + static_cast<unsigned>(gpus.size()));
    x.pci = g.value("pci", std::string(pci));
    x.uuid = g.value("uuid", "");
    x.name = g.value("name", "");
    x.total = g.value("total", 0ULL);
    x.used = g.value("used", 0ULL);
    x.mig = g.value("mig", false);
    x.lost = g.value("lost", false);
    x.compute = Procs(g.value("compute", nlohmann::json::array()));
    x.graphics = Procs(g.value("graphics", nlohmann::json::array()));
    x.mps = Procs(g.value("mps", nlohmann::json::array()));
    const nlohmann::json errors = g.value("errors", nlohmann::json::object());
    for (const auto& [k, v] : errors.items()) x.errors[k] = v.get<int>();
    x.insufficient_rounds = x.insufficient_left = g.value("insufficient_rounds", 0);
    x.count_beyond_buffer = g.value("count_beyond_buffer", false);
    for (const auto& s : g.value("samples", nlohmann::json::array())) {
      Sample y;
      y.pid = static_cast<unsigned int>(s.value("pid", 0LL));
      y.ts = s.value("ts", 0ULL);
      y.sm = s.value("sm", 0U);
      y.mem = s.value("mem", 0U);
      y.enc = s.value("enc", 0U);
      y.dec = s.value("dec", 0U);
      x.samples.push_back(y);
    }
    x.utilization = g.value("utilization", 0U);
    gpus.push_back(std::move(x));
  }
}

// The configured error of `fn` (exact name, then without _vN, then `also`), or 0.
int ConfiguredError(const Gpu& g, const std::string& fn, const char* also = nullptr) {
  auto e = g.errors.find(fn);
  if (e == g.errors.end()) {
    size_t v = fn.rfind("_v");
    if (v != std::string::npos) e = g.errors.find(fn.substr(0, v));
  }
  if (e == g.errors.end() && also != nullptr) e = g.errors.find(also);
  return e == g.errors.end() ? 0 : e->second;
}

// The GPU of a handle, or an error: handles are index + 1.
nvmlReturn_t Find(nvmlDevice_t d, const char* fn, Gpu** out, const char* also = nullptr) {
  if (!initialized) return kUninitialized;
  auto i = reinterpret_cast<uintptr_t>(d);
  if (i == 0 || i > gpus.size()) return kInvalidArgument;
  Gpu& g = gpus[i - 1];
  if (g.lost) return kGpuIsLost;
  if (int e = ConfiguredError(g, fn, also); e != 0) return e;
  *out = &g;
  return kSuccess;
}

// Writes list[0..n) into `infos` with `layout`.
void WriteEntries(void* infos, const EntryLayout& layout, const Gpu& g, const std::vector<Proc>& list, size_t n) {
  // Not MIG: the instance IDs are NVML_VALUE_NOT_AVAILABLE as an unsigned int.
  const uint32_t instance = g.mig ? 0u : 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    void* e = static_cast<unsigned char*>(infos) + i * layout.stride;
    std::memset(e, 0, layout.stride);
    Put32(e, 0, list[i].pid);
    Put64(e, 8, list[i].used);
    if (layout.instance_ids) {
      Put32(e, 16, instance);
      Put32(e, 20, instance);
    }
    if (layout.cc_protected) Put64(e, 24, 0);
  }
}

[[maybe_unused]] const std::vector<Proc>* ListOf(const Gpu& g, unsigned int mode) {
  switch (mode) {
    case kModeCompute: return &g.compute;
    case kModeGraphics: return &g.graphics;
    case kModeMps: return &g.mps;
    default: return nullptr;
  }
}

// The count/buffer protocol every process-list entry point shares:
// `*count` is the room in `infos` (entries) on the way in, the number of
// entries on the way out. Caller holds mu.
nvmlReturn_t ServeList(Gpu* g, const std::vector<Proc>& list, const EntryLayout& layout, unsigned int* count,
                       void* infos) {
  if (g->insufficient_left > 0) {
    --g->insufficient_left;
    *count = static_cast<unsigned int>(list.size() + 1);
    return kInsufficientSize;
  }
  const unsigned int room = infos == nullptr ? 0 : *count;
  if (g->count_beyond_buffer) {  // a misbehaving driver: SUCCESS, and a count beyond the room given
    WriteEntries(infos, layout, *g, list, std::min<size_t>(room, list.size()));
    *count = room + 1;
    return kSuccess;
  }
  if (room < list.size()) {
    *count = static_cast<unsigned int>(list.size());
    return list.empty() ? kSuccess : kInsufficientSize;
  }
  WriteEntries(infos, layout, *g, list, list.size());
  *count = static_cast<unsigned int>(list.size());
  return kSuccess;
}

// nvmlDevice{Compute,Graphics}RunningProcesses{,_v2,_v3}.
nvmlReturn_t ServeProcs(nvmlDevice_t d, const char* fn, bool compute, int version, unsigned int* count,
                        void* infos) {
  std::lock_guard<std::mutex> l(mu);
  LogCall(fn);
  if (!initialized) return kUninitialized;
  if (family == Family::kR470 && version >= 2) return kFunctionNotFound;
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, fn, &g); r != kSuccess) {
    if (count != nullptr && r != kGpuIsLost && r != kInvalidArgument) *count = 0;
    return r;
  }
  if (count == nullptr) return kInvalidArgument;
  const EntryLayout& layout = version == 1   ? kInfoV1
                              : version == 2 ? kInfoV2
                              : family == Family::kR535 ? kInfoR535
                                                        : kInfoV2;  // R550+: _v3 writes what _v2 writes
  return ServeList(g, compute ? g->compute : g->graphics, layout, count, infos);
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

unsigned long long NowMicros() {
  struct timeval tv {};
  ::gettimeofday(&tv, nullptr);
  return static_cast<unsigned long long>(tv.tv_sec) * 1000000ULL + static_cast<unsigned long long>(tv.tv_usec);
}

}  // namespace

NVML_EXPORT nvmlReturn_t nvmlInit() { return Init("nvmlInit"); }
// Every driver family (unversioned since R270).
NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample* out,
                                                          unsigned int* count, unsigned long long last_seen) {
  std::lock_guard<std::mutex> l(mu);
  const char* fn = "nvmlDeviceGetProcessUtilization";
  LogCall(fn);
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, fn, &g); r != kSuccess) return r;
  if (count == nullptr) return kInvalidArgument;
  const unsigned long long now = NowMicros();
  std::vector<Sample> newer;
  for (Sample s : g->samples) {
    if (s.ts == 0) s.ts = now;
    if (s.ts > last_seen) newer.push_back(s);
  }
  if (newer.empty()) return kNotFound;
  const unsigned int room = out == nullptr ? 0 : *count;
  *count = static_cast<unsigned int>(newer.size());
  if (room < newer.size()) return kInsufficientSize;
  for (size_t i = 0; i < newer.size(); ++i) {
    void* e = reinterpret_cast<unsigned char*>(out) + i * kSampleStride;
    std::memset(e, 0, kSampleStride);
    Put32(e, 0, newer[i].pid);
    Put64(e, 8, newer[i].ts);
    Put32(e, 16, newer[i].sm);
    Put32(e, 20, newer[i].mem);
    Put32(e, 24, newer[i].enc);
    Put32(e, 28, newer[i].dec);
  }
  return kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization* out) {
  std::lock_guard<std::mutex> l(mu);
  const char* fn = "nvmlDeviceGetUtilizationRates";
  LogCall(fn);
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, fn, &g); r != kSuccess) return r;
  if (out == nullptr) return kInvalidArgument;
  Put32(out, 0, g->utilization);
  Put32(out, 4, 0);
  return kSuccess;
}
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
    case kFunctionNotFound: return "Function Not Found";
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
  Put64(m, 0, g->total);
  Put64(m, 8, g->total - std::min(g->used, g->total));
  Put64(m, 16, g->used);
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
NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int* n, void* p) {
  return ServeProcs(d, "nvmlDeviceGetComputeRunningProcesses", true, 1, n, p);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int* n, void* p) {
  return ServeProcs(d, "nvmlDeviceGetGraphicsRunningProcesses", false, 1, n, p);
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* out, unsigned int length) {
  std::lock_guard<std::mutex> l(mu);
  LogCall("nvmlSystemGetDriverVersion");
  if (!initialized) return kUninitialized;
  if (out == nullptr || length < driver_version.size() + 1) return kInvalidArgument;
  std::memcpy(out, driver_version.c_str(), driver_version.size() + 1);
  return kSuccess;
}

#ifndef FAKE_NVML_LEGACY
// nvmlPciInfo_t, byte by byte (see the top of the file).
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo* pci) {
  std::lock_guard<std::mutex> l(mu);
  const char* fn = "nvmlDeviceGetPciInfo_v3";
  LogCall(fn);
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, fn, &g); r != kSuccess) return r;
  if (pci == nullptr) return kInvalidArgument;
  unsigned char* b = reinterpret_cast<unsigned char*>(pci);
  std::memset(b, 0, 68);
  unsigned int domain = 0, bus = 0, device = 0;
  std::sscanf(g->pci.c_str(), "%x:%x:%x", &domain, &bus, &device);
  std::string legacy = g->pci.size() > 4 ? g->pci.substr(4) : g->pci;  // "0000:3B:00.0"
  std::memcpy(b, legacy.c_str(), std::min<size_t>(legacy.size(), 15));
  Put32(b, 16, domain);
  Put32(b, 20, bus);
  Put32(b, 24, device);
  Put32(b, 28, 0x233010DE);  // H100 SXM5's device and vendor ID
  Put32(b, 32, 0x16C110DE);
  std::memcpy(b + 36, g->pci.c_str(), std::min<size_t>(g->pci.size(), 31));
  return kSuccess;
}
#endif

#ifdef FAKE_NVML_LIMITS
// R615: the limits of a cgroup on a GPU (nvmlSetMemoryLimits_v1_t, byte by byte).
NVML_EXPORT nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t d, nvmlSetMemoryLimits_v1* limits) {
  std::lock_guard<std::mutex> l(mu);
  const char* fn = "nvmlDeviceSetMemoryLimits_v1";
  LogCall(fn);
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, fn, &g); r != kSuccess) return r;
  if (limits == nullptr) return kInvalidArgument;
  const char* ns = static_cast<const char*>(GetPtr(limits, 0));
  uint64_t soft = 0, hard = 0;
  std::memcpy(&soft, reinterpret_cast<const unsigned char*>(limits) + 8, 8);
  std::memcpy(&hard, reinterpret_cast<const unsigned char*>(limits) + 16, 8);
  if (ns == nullptr || *ns != '/') return kInvalidArgument;  // "Full path to sysfs cgroup file name"
  if (const char* path = std::getenv("FAKE_NVML_LIMITS_LOG"); path != nullptr && *path != '\0') {
    if (FILE* f = std::fopen(path, "a")) {
      std::fprintf(f, "%s %llu %llu %s\n", g->uuid.c_str(), static_cast<unsigned long long>(soft),
                   static_cast<unsigned long long>(hard), ns);
      std::fclose(f);
    }
  }
  return kSuccess;
}
#endif

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
  if (Get32(m, 0) != kMemoryV2Version) return kArgumentVersionMismatch;
  // As the real one: a reserve the driver keeps is neither used nor free.
  unsigned long long used = std::min(g->used, g->total);
  unsigned long long reserved = std::min<unsigned long long>(used, 1ULL << 20);
  Put64(m, 8, g->total);
  Put64(m, 16, reserved);
  Put64(m, 24, g->total - used);
  Put64(m, 32, used - reserved);
  return kSuccess;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int* n, void* p) {
  return ServeProcs(d, "nvmlDeviceGetComputeRunningProcesses_v2", true, 2, n, p);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int* n, void* p) {
  return ServeProcs(d, "nvmlDeviceGetGraphicsRunningProcesses_v2", false, 2, n, p);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* n, void* p) {
  return ServeProcs(d, "nvmlDeviceGetComputeRunningProcesses_v3", true, 3, n, p);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int* n, void* p) {
  return ServeProcs(d, "nvmlDeviceGetGraphicsRunningProcesses_v3", false, 3, n, p);
}
// R550+: the list of one mode through a versioned request struct.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t d, nvmlProcessDetailList_v1* plist) {
  std::lock_guard<std::mutex> l(mu);
  const char* fn = "nvmlDeviceGetRunningProcessDetailList";
  LogCall(fn);
  if (!initialized) return kUninitialized;
  if (family != Family::kR550) return kFunctionNotFound;
  if (plist == nullptr) return kInvalidArgument;
  if (Get32(plist, 0) != kDetailListVersion) return kArgumentVersionMismatch;
  const unsigned int mode = Get32(plist, 4);
  const char* kind = mode == kModeCompute    ? "nvmlDeviceGetComputeRunningProcesses"
                     : mode == kModeGraphics ? "nvmlDeviceGetGraphicsRunningProcesses"
                                             : "nvmlDeviceGetMPSComputeRunningProcesses";
  Gpu* g = nullptr;
  if (nvmlReturn_t r = Find(d, fn, &g, kind); r != kSuccess) {
    if (r != kGpuIsLost && r != kInvalidArgument) Put32(plist, 8, 0);
    return r;
  }
  const std::vector<Proc>* list = ListOf(*g, mode);
  if (list == nullptr) return kInvalidArgument;
  unsigned int count = Get32(plist, 8);
  nvmlReturn_t r = ServeList(g, *list, kDetailV1, &count, GetPtr(plist, 16));
  Put32(plist, 8, count);
  return r;
}
#endif
