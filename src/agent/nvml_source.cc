#include "vramd/agent/nvml_source.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "agent/nvml_abi.h"

namespace vramd::agent {
namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kGpuIsLost = 15;
constexpr nvmlReturn_t kArgumentVersionMismatch = 25;
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned int kMigEnabled = 1;                   // NVML_DEVICE_MIG_ENABLE
constexpr unsigned int kStringBuffer = 96;  // NVML_DEVICE_{UUID,NAME}_V2_BUFFER_SIZE

// NVML_STRUCT_VERSION(Memory, 2): the struct's size | (2 << 24).
constexpr unsigned int kMemoryV2Version = static_cast<unsigned int>(sizeof(nvmlMemory_v2)) | (2u << 24);

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using MemoryV1Fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v1*);
using MemoryV2Fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2*);
using StringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using MigFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using ErrorStringFn = const char* (*)(nvmlReturn_t);
template <typename Info>
using ProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, Info*);

// One kind of process list (compute or graphics) through the newest entry
// point the library has, with a buffer kept between passes.
struct ProcessLister {
  ProcessesFn<nvmlProcessInfo_v3> v3 = nullptr;
  ProcessesFn<nvmlProcessInfo_v2> v2 = nullptr;
  ProcessesFn<nvmlProcessInfo_v1> v1 = nullptr;
  std::vector<nvmlProcessInfo_v3> buf3;
  std::vector<nvmlProcessInfo_v2> buf2;
  std::vector<nvmlProcessInfo_v1> buf1;

  bool available() const { return v3 || v2 || v1; }

  // Adds (pid, bytes) to *out, keeping the larger figure for a pid seen twice.
  nvmlReturn_t List(nvmlDevice_t d, std::map<int, int64_t>* out) {
    if (v3) return ListWith(v3, &buf3, d, out);
    if (v2) return ListWith(v2, &buf2, d, out);
    if (v1) return ListWith(v1, &buf1, d, out);
    return kNotSupported;
  }

  template <typename Info>
  static nvmlReturn_t ListWith(ProcessesFn<Info> fn, std::vector<Info>* buf, nvmlDevice_t d,
                               std::map<int, int64_t>* out) {
    if (buf->empty()) buf->resize(64);
    // The list can grow between the call that reports the size and the
    // next one: a few rounds, each with room for what was asked plus slack.
    for (int round = 0; round < 4; ++round) {
      unsigned int count = static_cast<unsigned int>(buf->size());
      nvmlReturn_t r = fn(d, &count, buf->data());
      if (r == kSuccess) {
        for (unsigned int i = 0; i < std::min<size_t>(count, buf->size()); ++i) {
          const Info& p = (*buf)[i];
          if (p.usedGpuMemory == kValueNotAvailable) continue;  // not visible to us: not counted
          int64_t bytes = static_cast<int64_t>(std::min<unsigned long long>(p.usedGpuMemory, INT64_MAX));
          int64_t& slot = (*out)[static_cast<int>(p.pid)];
          slot = std::max(slot, bytes);
        }
        return kSuccess;
      }
      if (r != kInsufficientSize) return r;
      size_t want = std::max<size_t>(static_cast<size_t>(count) + count / 4 + 8, buf->size() * 2);
      buf->resize(std::min<size_t>(want, 1 << 16));
    }
    return kInsufficientSize;
  }
};

class NvmlSource final : public GpuSource {
 public:
  explicit NvmlSource(void* lib) : lib_(lib) {}
  ~NvmlSource() override {
    if (shutdown_) shutdown_();
    dlclose(lib_);
  }

  std::string_view Name() const override { return "nvml"; }

  // Resolves the entry points and calls nvmlInit.
  Status Init(const std::string& library) {
    init_ = Sym<InitFn>("nvmlInit_v2", "nvmlInit");
    shutdown_ = Sym<ShutdownFn>("nvmlShutdown");
    count_ = Sym<CountFn>("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    handle_ = Sym<HandleFn>("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    memory_v1_ = Sym<MemoryV1Fn>("nvmlDeviceGetMemoryInfo");
    memory_v2_ = Sym<MemoryV2Fn>("nvmlDeviceGetMemoryInfo_v2");
    uuid_ = Sym<StringFn>("nvmlDeviceGetUUID");
    name_ = Sym<StringFn>("nvmlDeviceGetName");
    mig_ = Sym<MigFn>("nvmlDeviceGetMigMode");
    error_string_ = Sym<ErrorStringFn>("nvmlErrorString");
    compute_.v3 = Sym<ProcessesFn<nvmlProcessInfo_v3>>("nvmlDeviceGetComputeRunningProcesses_v3");
    compute_.v2 = Sym<ProcessesFn<nvmlProcessInfo_v2>>("nvmlDeviceGetComputeRunningProcesses_v2");
    compute_.v1 = Sym<ProcessesFn<nvmlProcessInfo_v1>>("nvmlDeviceGetComputeRunningProcesses");
    graphics_.v3 = Sym<ProcessesFn<nvmlProcessInfo_v3>>("nvmlDeviceGetGraphicsRunningProcesses_v3");
    graphics_.v2 = Sym<ProcessesFn<nvmlProcessInfo_v2>>("nvmlDeviceGetGraphicsRunningProcesses_v2");
    graphics_.v1 = Sym<ProcessesFn<nvmlProcessInfo_v1>>("nvmlDeviceGetGraphicsRunningProcesses");
    std::string missing;
    if (!init_) missing += " nvmlInit";
    if (!shutdown_) missing += " nvmlShutdown";
    if (!count_) missing += " nvmlDeviceGetCount";
    if (!handle_) missing += " nvmlDeviceGetHandleByIndex";
    if (!memory_v1_ && !memory_v2_) missing += " nvmlDeviceGetMemoryInfo";
    if (!missing.empty()) {
      shutdown_ = nullptr;  // never initialized
      return NotFound(library + " is not a usable NVML library: it lacks" + missing);
    }
    if (!compute_.available() && !graphics_.available()) {
      spdlog::warn("NVML: {} has no running-processes entry point: GPUs without per-pod usage", library);
    }
    nvmlReturn_t r = init_();
    if (r != kSuccess) {
      shutdown_ = nullptr;
      return Unavailable("nvmlInit failed: " + Error(r));
    }
    return Status::Ok();
  }

  Result<std::vector<GpuReading>> Read() override {
    unsigned int count = 0;
    if (nvmlReturn_t r = count_(&count); r != kSuccess) {
      return Unavailable("nvmlDeviceGetCount failed: " + Error(r));
    }
    std::vector<GpuReading> out;
    out.reserve(std::min(count, 64u));
    std::set<int> problems;
    for (unsigned int i = 0; i < count; ++i) {
      GpuReading g;
      g.index = static_cast<int>(i);
      std::string problem = ReadGpu(i, &g);
      if (problem.empty()) {
        out.push_back(std::move(g));
        continue;
      }
      // Logged when it starts or changes, not every pass.
      auto& last = gpu_problems_[g.index];
      if (last != problem) spdlog::warn("NVML: GPU {} skipped: {}", g.index, problem);
      last = problem;
      problems.insert(g.index);
    }
    for (auto it = gpu_problems_.begin(); it != gpu_problems_.end();) {
      if (problems.count(it->first)) {
        ++it;
        continue;
      }
      spdlog::info("NVML: GPU {} is read again", it->first);
      it = gpu_problems_.erase(it);
    }
    return out;
  }

 private:
  template <typename Fn>
  Fn Sym(const char* name, const char* fallback = nullptr) {
    void* p = dlsym(lib_, name);
    if (p == nullptr && fallback != nullptr) p = dlsym(lib_, fallback);
    return reinterpret_cast<Fn>(p);
  }

  std::string Error(nvmlReturn_t r) const {
    const char* text = error_string_ ? error_string_(r) : nullptr;
    std::string s = text ? text : "NVML error";
    return s + " (" + std::to_string(r) + ")";
  }

  // Fills *g for GPU i; answers why it must be skipped, or "".
  std::string ReadGpu(unsigned int i, GpuReading* g) {
    nvmlDevice_t d = nullptr;
    if (nvmlReturn_t r = handle_(i, &d); r != kSuccess) return "nvmlDeviceGetHandleByIndex: " + Error(r);
    if (nvmlReturn_t r = ReadMemory(d, g); r != kSuccess) return "nvmlDeviceGetMemoryInfo: " + Error(r);
    char text[kStringBuffer];
    if (uuid_) {
      text[0] = '\0';
      nvmlReturn_t r = uuid_(d, text, sizeof text);
      if (r == kGpuIsLost) return "nvmlDeviceGetUUID: " + Error(r);
      if (r == kSuccess) g->uuid.assign(text, strnlen(text, sizeof text));
    }
    if (name_) {
      text[0] = '\0';
      nvmlReturn_t r = name_(d, text, sizeof text);
      if (r == kGpuIsLost) return "nvmlDeviceGetName: " + Error(r);
      if (r == kSuccess) g->name.assign(text, strnlen(text, sizeof text));
    }
    if (mig_) {
      unsigned int current = 0, pending = 0;
      nvmlReturn_t r = mig_(d, &current, &pending);
      if (r == kGpuIsLost) return "nvmlDeviceGetMigMode: " + Error(r);
      g->mig = r == kSuccess && current == kMigEnabled;
    }
    if (g->mig && mig_warned_.insert(g->index).second) {
      spdlog::warn("NVML: GPU {} ({}) is in MIG mode: reported whole, per-instance usage is not supported",
                   g->index, g->uuid);
    }
    std::map<int, int64_t> procs;
    for (ProcessLister* l : {&compute_, &graphics_}) {
      if (!l->available()) continue;
      nvmlReturn_t r = l->List(d, &procs);
      if (r == kGpuIsLost) return "running processes: " + Error(r);
      if (r != kSuccess && r != kNotSupported) {
        spdlog::debug("NVML: GPU {}: running processes: {}", g->index, Error(r));
      }
    }
    g->processes.reserve(procs.size());
    for (const auto& [pid, bytes] : procs) g->processes.push_back({pid, bytes});
    return {};
  }

  nvmlReturn_t ReadMemory(nvmlDevice_t d, GpuReading* g) {
    if (memory_v2_) {
      nvmlMemory_v2 m{};
      m.version = kMemoryV2Version;
      nvmlReturn_t r = memory_v2_(d, &m);
      if (r == kSuccess) return SetMemory(m.total, m.free, g);
      // A library that has the entry point but not this struct version
      // (or a GPU that does not support it): the v1 call from now on.
      if ((r == kArgumentVersionMismatch || r == kNotSupported) && memory_v1_) {
        memory_v2_ = nullptr;
      } else {
        return r;
      }
    }
    nvmlMemory_v1 m{};
    nvmlReturn_t r = memory_v1_(d, &m);
    if (r == kSuccess) return SetMemory(m.total, m.free, g);
    return r;
  }

  // used = total − free: every byte pods cannot have, the driver's reserve included.
  static nvmlReturn_t SetMemory(unsigned long long total, unsigned long long free, GpuReading* g) {
    total = std::min<unsigned long long>(total, INT64_MAX);
    g->total_bytes = static_cast<int64_t>(total);
    g->used_bytes = static_cast<int64_t>(total - std::min(free, total));
    return kSuccess;
  }

  void* lib_;
  InitFn init_ = nullptr;
  ShutdownFn shutdown_ = nullptr;
  CountFn count_ = nullptr;
  HandleFn handle_ = nullptr;
  MemoryV1Fn memory_v1_ = nullptr;
  MemoryV2Fn memory_v2_ = nullptr;
  StringFn uuid_ = nullptr;
  StringFn name_ = nullptr;
  MigFn mig_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
  ProcessLister compute_;
  ProcessLister graphics_;
  std::map<int, std::string> gpu_problems_;
  std::set<int> mig_warned_;
};

}  // namespace

Result<std::unique_ptr<GpuSource>> OpenNvml(const std::string& library) {
  dlerror();
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return NotFound("cannot load the NVML library " + library + ": " + (why ? why : "unknown error"));
  }
  auto source = std::make_unique<NvmlSource>(lib);
  if (Status s = source->Init(library); !s.ok()) return s;
  return std::unique_ptr<GpuSource>(std::move(source));
}

}  // namespace vramd::agent
