#include "vramd/agent/nvml_source.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "agent/nvml_abi.h"

namespace vramd::agent {
namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kFunctionNotFound = 13;
constexpr nvmlReturn_t kGpuIsLost = 15;
constexpr nvmlReturn_t kArgumentVersionMismatch = 25;
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned int kMigEnabled = 1;                   // NVML_DEVICE_MIG_ENABLE
constexpr unsigned int kStringBuffer = 96;  // NVML_DEVICE_{UUID,NAME}_V2_BUFFER_SIZE

// NVML_STRUCT_VERSION(Memory, 2) and (ProcessDetailList, 1): the struct's size | (version << 24).
constexpr unsigned int kMemoryV2Version = static_cast<unsigned int>(sizeof(nvmlMemory_v2)) | (2u << 24);
constexpr unsigned int kDetailListV1Version =
    static_cast<unsigned int>(sizeof(nvmlProcessDetailList_v1)) | (1u << 24);

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using MemoryV1Fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v1*);
using MemoryV2Fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2*);
using StringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using MigFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using ErrorStringFn = const char* (*)(nvmlReturn_t);
// The array's entry type depends on the entry point (and, for _v3, on the
// driver): the agent passes raw storage of the layout it chose.
using ProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, void*);
using DetailListFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessDetailList_v1*);
using ProcessUtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample*, unsigned int*,
                                              unsigned long long);
using UtilizationRatesFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization*);
using PciInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo*);
using SetMemoryLimitsFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlSetMemoryLimits_v1*);
using DriverVersionFn = nvmlReturn_t (*)(char*, unsigned int);

// The two lists the agent reads per GPU.
enum Kind : int { kCompute = 0, kGraphics = 1 };  // = nvmlProcessMode_t's compute and graphics
constexpr const char* kKindName[] = {"compute", "graphics"};

// The entry points that read a list, best first. _v3 is not among them: its
// entries are 32 bytes on R535-era drivers and 24 on R550 and later, with
// nothing to tell which.
enum Level : int { kDetailList = 0, kV2 = 1, kPlain = 2, kLevels = 3 };
constexpr const char* kEntryPoint[kLevels][2] = {
    {"nvmlDeviceGetRunningProcessDetailList(compute)", "nvmlDeviceGetRunningProcessDetailList(graphics)"},
    {"nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses_v2"},
    {"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"},
};

// One entry as read, whatever the layout.
struct RawProcess {
  unsigned int pid;
  unsigned long long used;
};

// What one list read gave: the call's answer, the room the buffer had and
// the count the driver answered (raw, before any check), and the entries.
struct ListRead {
  nvmlReturn_t r = kSuccess;
  Level level = kPlain;
  unsigned int room = 0;
  unsigned int count = 0;
  std::vector<RawProcess> entries;
};

// Why a successful list cannot be trusted, "" when it can: a count beyond
// the room given (the driver wrote, or claims, more than asked), a pid of 0
// (or above INT_MAX), a pid twice in one list, a figure above the GPU's
// total (NVML_VALUE_NOT_AVAILABLE is allowed: that process is not counted).
// A list read with the wrong entry layout fails here: the misread entries
// carry usage halves as pids, instance IDs as figures.
std::string ValidateList(const ListRead& l, unsigned long long total_bytes) {
  if (l.count > l.room) {
    return std::to_string(l.count) + " entries for room for " + std::to_string(l.room) +
           ": more entries than asked";
  }
  int bad_pid = 0, repeated = 0, too_large = 0;
  std::set<unsigned int> seen;
  for (const RawProcess& p : l.entries) {
    if (p.pid == 0 || p.pid > static_cast<unsigned int>(INT_MAX)) {
      ++bad_pid;
    } else if (!seen.insert(p.pid).second) {
      ++repeated;
    }
    if (p.used != kValueNotAvailable && p.used > total_bytes) ++too_large;
  }
  if (bad_pid == 0 && repeated == 0 && too_large == 0) return {};
  std::vector<std::string> parts;
  if (bad_pid) parts.push_back(std::to_string(bad_pid) + " with a pid of 0 or above 2^31-1");
  if (repeated) parts.push_back(std::to_string(repeated) + " repeated pid");
  if (too_large) {
    parts.push_back(std::to_string(too_large) + " above the GPU's " + std::to_string(total_bytes) + " bytes");
  }
  std::string why = std::to_string(l.count) + " entries for room for " + std::to_string(l.room) + ": ";
  for (size_t i = 0; i < parts.size(); ++i) why += (i ? ", " : "") + parts[i];
  return why;
}

// Reads the lists through the best entry point the library has and
// implements. Entry points that answer FUNCTION_NOT_FOUND (or, for the
// versioned request, ARGUMENT_VERSION_MISMATCH) are given up for good, with
// one log line; NOT_SUPPORTED falls through to the next one for that call
// only (a GPU may support an older call and not a newer one); buffers are
// kept between passes.
class ProcessLists {
 public:
  DetailListFn detail = nullptr;
  ProcessesFn v2[2] = {nullptr, nullptr};
  ProcessesFn plain[2] = {nullptr, nullptr};

  bool available() const { return detail || v2[0] || v2[1] || plain[0] || plain[1]; }

  // The list of `kind` on `d`: r is SUCCESS (entries filled), NOT_SUPPORTED
  // (no entry point gives it), or the error of the last entry point tried.
  ListRead Read(nvmlDevice_t d, Kind kind) {
    ListRead out;
    out.r = kNotSupported;
    for (int level = first_; level < kLevels; ++level) {
      if (!Has(static_cast<Level>(level), kind)) continue;
      out = ReadWith(static_cast<Level>(level), d, kind);
      if (out.r == kFunctionNotFound || (level == kDetailList && out.r == kArgumentVersionMismatch)) {
        GiveUp(static_cast<Level>(level), out.r);
        continue;
      }
      if (out.r == kNotSupported) continue;
      if (out.r == kSuccess && !announced_[level]) {
        announced_[level] = true;
        spdlog::info("NVML: process lists read through {}", LevelName(static_cast<Level>(level)));
      }
      return out;
    }
    return out;
  }

  // The error text of `r` (nvmlErrorString), set by the source.
  std::function<std::string(nvmlReturn_t)> error;

 private:
  bool Has(Level level, Kind kind) const {
    switch (level) {
      case kDetailList: return detail != nullptr;
      case kV2: return v2[kind] != nullptr;
      default: return plain[kind] != nullptr;
    }
  }

  static const char* LevelName(Level level) {
    return level == kDetailList ? "nvmlDeviceGetRunningProcessDetailList"
           : level == kV2       ? "nvmlDevice{Compute,Graphics}RunningProcesses_v2"
                                : "nvmlDevice{Compute,Graphics}RunningProcesses";
  }

  void GiveUp(Level level, nvmlReturn_t r) {
    if (level < first_) return;
    first_ = level + 1;
    spdlog::info("NVML: this driver does not implement {} ({}): reading process lists through the next entry point",
                 LevelName(level), error ? error(r) : std::to_string(r));
  }

  ListRead ReadWith(Level level, nvmlDevice_t d, Kind kind) {
    switch (level) {
      case kDetailList:
        return Fetch(level, &detail_buf_, [&](unsigned int* count, nvmlProcessDetail_v1* buf) {
          nvmlProcessDetailList_v1 list{};
          list.version = kDetailListV1Version;
          list.mode = static_cast<unsigned int>(kind);
          list.numProcArrayEntries = *count;
          list.procArray = buf;
          nvmlReturn_t r = detail(d, &list);
          *count = list.numProcArrayEntries;
          return r;
        });
      case kV2:
        return Fetch(level, &v2_buf_, [&](unsigned int* count, nvmlProcessInfo_v2* buf) {
          return v2[kind](d, count, buf);
        });
      default:
        return Fetch(level, &plain_buf_, [&](unsigned int* count, nvmlProcessInfo_v1* buf) {
          return plain[kind](d, count, buf);
        });
    }
  }

  // The count/buffer protocol: the list can grow between the call that
  // answers INSUFFICIENT_SIZE (with the count it needs) and the next one: a
  // few rounds, each with room for what was asked plus slack.
  template <typename Info, typename Call>
  static ListRead Fetch(Level level, std::vector<Info>* buf, Call call) {
    ListRead out;
    out.level = level;
    if (buf->empty()) buf->resize(64);
    for (int round = 0; round < 4; ++round) {
      std::fill(buf->begin(), buf->end(), Info{});  // nothing of an earlier read can be taken for an entry
      out.room = static_cast<unsigned int>(buf->size());
      out.count = out.room;
      out.r = call(&out.count, buf->data());
      if (out.r == kSuccess) {
        const size_t n = std::min<size_t>(out.count, buf->size());  // never read past the buffer
        out.entries.reserve(n);
        for (size_t i = 0; i < n; ++i) out.entries.push_back({(*buf)[i].pid, (*buf)[i].usedGpuMemory});
        return out;
      }
      // INSUFFICIENT_SIZE with a count of 0 says nothing of the room needed:
      // an error like any other (a bigger buffer would not be answered better).
      if (out.r != kInsufficientSize || out.count == 0) return out;
      size_t want = std::max<size_t>(static_cast<size_t>(out.count) + out.count / 4 + 8, buf->size() * 2);
      buf->resize(std::min<size_t>(want, 1 << 16));
    }
    return out;
  }

  int first_ = kDetailList;  // entry points before it were given up
  bool announced_[kLevels] = {};  // "read through" logged once per entry point
  std::vector<nvmlProcessDetail_v1> detail_buf_;
  std::vector<nvmlProcessInfo_v2> v2_buf_;
  std::vector<nvmlProcessInfo_v1> plain_buf_;
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
    lists_.detail = Sym<DetailListFn>("nvmlDeviceGetRunningProcessDetailList");
    lists_.v2[kCompute] = Sym<ProcessesFn>("nvmlDeviceGetComputeRunningProcesses_v2");
    lists_.v2[kGraphics] = Sym<ProcessesFn>("nvmlDeviceGetGraphicsRunningProcesses_v2");
    lists_.plain[kCompute] = Sym<ProcessesFn>("nvmlDeviceGetComputeRunningProcesses");
    lists_.plain[kGraphics] = Sym<ProcessesFn>("nvmlDeviceGetGraphicsRunningProcesses");
    lists_.error = [this](nvmlReturn_t r) { return Error(r); };
    process_utilization_ = Sym<ProcessUtilizationFn>("nvmlDeviceGetProcessUtilization");
    utilization_rates_ = Sym<UtilizationRatesFn>("nvmlDeviceGetUtilizationRates");
    pci_info_ = Sym<PciInfoFn>("nvmlDeviceGetPciInfo_v3");
    set_memory_limits_ = Sym<SetMemoryLimitsFn>("nvmlDeviceSetMemoryLimits_v1");
    driver_version_ = Sym<DriverVersionFn>("nvmlSystemGetDriverVersion");
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
    if (!lists_.available()) {
      spdlog::warn("NVML: {} has no running-processes entry point: GPUs without per-pod usage", library);
    }
    nvmlReturn_t r = init_();
    if (r != kSuccess) {
      shutdown_ = nullptr;
      return Unavailable("nvmlInit failed: " + Error(r));
    }
    return Status::Ok();
  }

  // Issue 34: NVML's per-cgroup memory limits (R615+ drivers).
  std::string MemoryLimitsUnsupported(int /*index*/) const override {
    if (set_memory_limits_) return {};
    return "driver " + DriverVersion() + "older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)";
  }

  Status SetMemoryLimits(int index, const std::string& cgroup_dir, uint64_t soft, uint64_t hard) override {
    if (!set_memory_limits_) return Internal(MemoryLimitsUnsupported(index));
    nvmlDevice_t d = nullptr;
    if (nvmlReturn_t r = handle_(static_cast<unsigned int>(index), &d); r != kSuccess) {
      return Internal("nvmlDeviceGetHandleByIndex: " + Error(r));
    }
    nvmlSetMemoryLimits_v1 limits{};
    limits.nameSpace = cgroup_dir.c_str();
    limits.softLimit = soft;
    limits.hardLimit = hard;
    if (nvmlReturn_t r = set_memory_limits_(d, &limits); r != kSuccess) {
      return Internal("nvmlDeviceSetMemoryLimits_v1: " + Error(r));
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

  // "580.159.04 " (with the space), or "" when NVML does not say.
  std::string DriverVersion() const {
    char text[kStringBuffer] = {};
    if (!driver_version_ || driver_version_(text, sizeof text) != kSuccess) return {};
    std::string v(text, strnlen(text, sizeof text));
    return v.empty() ? v : v + " ";
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
    if (pci_info_) {
      nvmlPciInfo pci{};
      nvmlReturn_t r = pci_info_(d, &pci);
      if (r == kGpuIsLost) return "nvmlDeviceGetPciInfo_v3: " + Error(r);
      if (r == kSuccess) g->pci_bus_id.assign(pci.busId, strnlen(pci.busId, sizeof pci.busId));
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
    if (lists_.available()) {
      if (std::string lost = ReadProcesses(d, g); !lost.empty()) return lost;
    }
    ReadActivity(d, g);
    return {};
  }

  // Issue 32: which of g's processes ran work since the last pass
  // (nvmlDeviceGetProcessUtilization: samples newer than the last one seen
  // on this GPU; a process with any utilization above 0 is active), and the
  // GPU's own utilization. Anything that fails leaves activity unknown
  // (logged when it starts and ends): no evidence is never "idle".
  void ReadActivity(nvmlDevice_t d, GpuReading* g) {
    if (utilization_rates_) {
      nvmlUtilization u{};
      if (utilization_rates_(d, &u) == kSuccess && u.gpu <= 100) g->utilization_percent = static_cast<int>(u.gpu);
    }
    if (!process_utilization_ || !g->processes_unavailable.empty()) return;
    std::string problem = ReadProcessActivity(d, g);
    std::string& last = activity_problems_[g->index];
    if (!problem.empty() && last.empty()) {
      spdlog::warn("NVML: GPU {}: per-process utilization unavailable ({}); its pods' activity is {}", g->index,
                   problem,
                   g->utilization_percent >= 0 ? "the GPU's own utilization" : "unknown (never taken for idleness)");
    } else if (problem.empty() && !last.empty()) {
      spdlog::info("NVML: GPU {}: per-process utilization is read again", g->index);
    }
    last = std::move(problem);
  }

  // Fills g->processes[].active and g->activity_known, or answers why not.
  std::string ReadProcessActivity(nvmlDevice_t d, GpuReading* g) {
    unsigned long long& last_seen = last_sample_us_[g->index];
    if (utilization_buf_.empty()) utilization_buf_.resize(64);
    for (int round = 0; round < 4; ++round) {
      std::fill(utilization_buf_.begin(), utilization_buf_.end(), nvmlProcessUtilizationSample{});
      const auto room = static_cast<unsigned int>(utilization_buf_.size());
      unsigned int count = room;
      nvmlReturn_t r = process_utilization_(d, utilization_buf_.data(), &count, last_seen);
      if (r == kNotFound) {  // no sample newer than the last one seen: nothing ran
        g->activity_known = true;
        return {};
      }
      if (r == kInsufficientSize && count > 0) {
        size_t want = std::max<size_t>(static_cast<size_t>(count) + count / 4 + 8, utilization_buf_.size() * 2);
        utilization_buf_.resize(std::min<size_t>(want, 1 << 16));
        continue;
      }
      if (r != kSuccess) return "nvmlDeviceGetProcessUtilization: " + Error(r);
      if (count > room) {
        return std::to_string(count) + " samples for room for " + std::to_string(room) + ": more samples than asked";
      }
      std::set<int> active;
      unsigned long long newest = last_seen;
      int bad = 0;
      for (unsigned int i = 0; i < count; ++i) {
        const nvmlProcessUtilizationSample& x = utilization_buf_[i];
        // A sample read with the wrong layout carries timestamps as pids and
        // utilizations far above 100: the whole answer is refused.
        if (x.pid == 0 || x.pid > static_cast<unsigned int>(INT_MAX) || x.smUtil > 100 || x.memUtil > 100 ||
            x.encUtil > 100 || x.decUtil > 100) {
          ++bad;
          continue;
        }
        newest = std::max(newest, x.timeStamp);
        if (x.smUtil + x.memUtil + x.encUtil + x.decUtil > 0) active.insert(static_cast<int>(x.pid));
      }
      if (bad > 0) {
        return std::to_string(bad) + " of " + std::to_string(count) +
               " samples with a pid of 0 or above 2^31-1, or a utilization above 100";
      }
      last_seen = newest;
      for (ProcessUsage& p : g->processes) p.active = active.count(p.pid) > 0;
      g->activity_known = true;
      return {};
    }
    return "nvmlDeviceGetProcessUtilization: the samples kept outgrowing the buffer";
  }

  // Fills g->processes from the compute and graphics lists, or says in
  // g->processes_unavailable why they cannot be had; answers why the GPU must
  // be skipped (it is lost), or "".
  std::string ReadProcesses(nvmlDevice_t d, GpuReading* g) {
    std::map<int, int64_t> procs;
    std::string unavailable;
    for (Kind kind : {kCompute, kGraphics}) {
      ListRead l = lists_.Read(d, kind);
      if (l.r == kGpuIsLost) return "running processes: " + Error(l.r);
      ListState& state = list_state_[{g->index, kind}];
      std::string problem;
      if (l.r == kSuccess) {
        std::string why = ValidateList(l, static_cast<unsigned long long>(g->total_bytes));
        if (!why.empty()) {
          ++g->invalid_process_lists;
          problem = std::string("the ") + kKindName[kind] + " process list of " + kEntryPoint[l.level][kind] +
                    " fails validation (" + why + ")";
        } else {
          for (const RawProcess& p : l.entries) {
            if (p.used == kValueNotAvailable) continue;  // not visible to us: not counted
            int64_t bytes = static_cast<int64_t>(std::min<unsigned long long>(p.used, INT64_MAX));
            int64_t& slot = procs[static_cast<int>(p.pid)];
            slot = std::max(slot, bytes);
          }
        }
      } else if (l.r != kNotSupported) {  // NOT_SUPPORTED: this GPU has no such list, an empty one
        problem = std::string("the ") + kKindName[kind] + " process list: " + kEntryPoint[l.level][kind] + ": " +
                  Error(l.r) + " (count " + std::to_string(l.count) + ", room " + std::to_string(l.room) + ")";
      }
      // Logged once when it starts (with the raw counts) and when it ends, not every pass.
      if (!problem.empty() && state.problem.empty()) {
        spdlog::warn("NVML: GPU {}: {}; its processes are not attributed (per-process figures unavailable)",
                     g->index, problem);
      } else if (problem.empty() && !state.problem.empty()) {
        spdlog::info("NVML: GPU {}: the {} process list is read again", g->index, kKindName[kind]);
      }
      state.problem = problem;
      if (!problem.empty() && unavailable.empty()) unavailable = problem;
    }
    if (!unavailable.empty()) {
      // A list that cannot be trusted is attributed to nobody, and with it
      // the other: a part of the processes would make the rest "free".
      g->processes_unavailable = std::move(unavailable);
      return {};
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
  struct ListState {
    std::string problem;  // the last pass's, "" when the list was read and valid
  };
  ProcessLists lists_;
  ProcessUtilizationFn process_utilization_ = nullptr;
  UtilizationRatesFn utilization_rates_ = nullptr;
  PciInfoFn pci_info_ = nullptr;
  SetMemoryLimitsFn set_memory_limits_ = nullptr;
  DriverVersionFn driver_version_ = nullptr;
  std::vector<nvmlProcessUtilizationSample> utilization_buf_;
  std::map<int, unsigned long long> last_sample_us_;      // per GPU index: the newest sample seen
  std::map<int, std::string> activity_problems_;          // per GPU index: "" when read
  std::map<std::pair<int, int>, ListState> list_state_;  // (GPU index, kind)
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
