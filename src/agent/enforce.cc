#include "vramd/agent/enforce.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "agent/read_file.h"
#include "vramd/ledger/capacity.h"
#include "vramd/ledger/usage.h"

namespace vramd::agent {

using nlohmann::json;

namespace {

constexpr size_t kMaxOrders = 10'000;

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Underscored(std::string_view uid) {
  std::string out(uid);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// One write(2) of `text` to an existing file, as cgroup files want it: each
// write is one command to the kernel (O_APPEND changes nothing there; a
// test's plain file keeps every line written, in order).
Status WriteFile(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return Internal("opening " + path + ": " + std::strerror(errno));
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n < 0) return Internal("writing '" + text.substr(0, text.size() - 1) + "' to " + path + ": " + std::strerror(err));
  if (static_cast<size_t>(n) != text.size()) return Internal("short write to " + path);
  return Status::Ok();
}

// A reason vramd takes (ledger::IsEnforceReason): printable ASCII, cut to
// its bound; anything else (a path's odd byte) becomes '?'.
std::string AsReason(std::string s) {
  for (char& c : s) {
    if (c < 0x20 || c >= 0x7f) c = '?';
  }
  if (s.size() > ledger::kMaxEnforceReason) s.resize(ledger::kMaxEnforceReason);
  return s;
}

std::string Gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

Result<EnforceOrders> DecodeEnforceOrders(std::string_view body) {
  EnforceOrders out;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("vramd's answer is not a JSON object");
  auto e = j.find("enforce");
  if (e == j.end() || e->is_null()) return out;  // a vramd before issue 34: off
  if (!e->is_object()) return InvalidArgument("enforce must be an object {mode, limits}");
  auto mode = e->find("mode");
  if (mode == e->end() || !mode->is_string() || !ledger::ParseEnforceMode(mode->get<std::string>(), &out.mode)) {
    return InvalidArgument("enforce.mode must be off, dry-run or on");
  }
  auto limits = e->find("limits");
  if (limits == e->end() || limits->is_null()) return out;
  if (!limits->is_array()) return InvalidArgument("enforce.limits must be an array");
  if (limits->size() > kMaxOrders) return InvalidArgument("enforce.limits has more than 10000 limits");
  for (const json& l : *limits) {
    if (!l.is_object()) return InvalidArgument("each of enforce.limits must be an object {uid, index, soft, hard}");
    ledger::PodLimit p;
    auto uid = l.find("uid");
    if (uid == l.end() || !uid->is_string() || !ledger::IsCanonicalPodUid(uid->get<std::string>())) {
      return InvalidArgument("a limit's uid must be a canonical pod UID");
    }
    p.uid = uid->get<std::string>();
    auto idx = l.find("index");
    if (idx == l.end() || !idx->is_number_integer() || idx->get<int64_t>() < 0 ||
        idx->get<int64_t>() > ledger::kMaxReportGpuIndex) {
      return InvalidArgument("the limit of pod " + p.uid + ": index must be a whole number from 0 to 9999");
    }
    p.index = static_cast<int>(idx->get<int64_t>());
    for (auto [key, field] : {std::pair{"soft", &p.soft}, std::pair{"hard", &p.hard}}) {
      auto f = l.find(key);
      if (f == l.end() || !f->is_number_integer() || f->get<int64_t>() < 0 ||
          f->get<int64_t>() > ledger::kMaxBytesPerGpu) {
        return InvalidArgument("the limit of pod " + p.uid + ": " + key + " must be a byte count from 0 to 1 PiB");
      }
      *field = f->get<int64_t>();
    }
    if (p.soft > p.hard) return InvalidArgument("the limit of pod " + p.uid + ": soft is above hard");
    out.limits.push_back(std::move(p));
  }
  return out;
}

std::string NormalizePciAddress(std::string_view text) {
  // [domain:]bus:device.function, hex; the domain 4 (sysfs) or 8 (NVML) digits.
  const size_t first = text.find(':');
  if (first == std::string_view::npos) return "";
  std::string_view domain = text.substr(0, first);
  std::string_view rest = text.substr(first + 1);
  if (rest.size() != 7 || rest[2] != ':' || rest[5] != '.' || !IsHex(rest[0]) || !IsHex(rest[1]) ||
      !IsHex(rest[3]) || !IsHex(rest[4]) || !(rest[6] >= '0' && rest[6] <= '7')) {
    return "";
  }
  if (domain.empty() || domain.size() > 8 || !std::all_of(domain.begin(), domain.end(), IsHex)) return "";
  unsigned long d = std::stoul(std::string(domain), nullptr, 16);
  if (d > 0xffff) return "";
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04lx", d);
  return std::string(buf) + ":" + Lower(rest);
}

std::map<std::string, int64_t> ParseDmemCapacity(std::string_view text) {
  std::map<std::string, int64_t> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0) continue;
    std::string_view region = line.substr(0, sp);
    std::string_view bytes = line.substr(sp + 1);
    while (!bytes.empty() && bytes.front() == ' ') bytes.remove_prefix(1);
    if (bytes.empty() || bytes.size() > 19 || !std::all_of(bytes.begin(), bytes.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    out[std::string(region)] = std::stoll(std::string(bytes));
  }
  return out;
}

std::string DmemRegionFor(const std::map<std::string, int64_t>& regions, std::string_view pci) {
  if (pci.empty()) return "";
  for (const auto& [region, bytes] : regions) {
    const size_t a = region.find('/');
    if (a == std::string::npos) continue;
    const size_t b = region.find('/', a + 1);
    std::string_view device = std::string_view(region).substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    if (NormalizePciAddress(device) == pci) return region;
  }
  return "";
}

std::vector<std::string> PodCgroupCandidates(std::string_view uid) {
  const std::string u(uid);
  const std::string us = Underscored(uid);
  std::vector<std::string> out = {
      // cgroupfs driver: Guaranteed, Burstable, BestEffort
      "kubepods/pod" + u,
      "kubepods/burstable/pod" + u,
      "kubepods/besteffort/pod" + u,
      // systemd driver
      "kubepods.slice/kubepods-pod" + us + ".slice",
      "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + us + ".slice",
      "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + us + ".slice",
      // kind's kubelet (systemd driver, nested under kubelet.slice)
      "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + us + ".slice",
      "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + us +
          ".slice",
      "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + us +
          ".slice",
  };
  return out;
}

CgroupHost ReadCgroupHost(const std::string& cgroup_root) {
  CgroupHost h;
  std::string text;
  if (!ReadSmallFile(cgroup_root + "/cgroup.controllers", &text, 4096)) return h;
  h.v2 = true;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  h.controllers = text;
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t sp = rest.find(' ');
    if (rest.substr(0, sp) == "dmem") h.dmem = true;
    if (sp == std::string_view::npos) break;
    rest.remove_prefix(sp + 1);
  }
  if (h.dmem) {
    std::string cap;
    if (ReadSmallFile(cgroup_root + "/dmem.capacity", &cap, 64 * 1024)) h.dmem_regions = ParseDmemCapacity(cap);
  }
  return h;
}

BackendChoice ChooseBackend(const CgroupHost& host, const GpuTarget& gpu) {
  if (gpu.mig) {
    return {"none", "",
            "MIG mode: neither the dmem cgroup nor NVML memory limits apply to MIG instances (not supported)"};
  }
  std::string dmem_why;
  if (!host.v2) {
    dmem_why = "no cgroup v2 (dmem needs the unified hierarchy)";
  } else if (!host.dmem) {
    dmem_why = "no dmem controller (cgroup v2 controllers: " + (host.controllers.empty() ? "none" : host.controllers) + ")";
  } else if (gpu.pci.empty()) {
    dmem_why = "the GPU's PCI address is unknown (dmem regions are per device)";
  } else if (std::string region = DmemRegionFor(host.dmem_regions, gpu.pci); !region.empty()) {
    return {"dmem", region, ""};
  } else {
    dmem_why = "dmem.capacity lists no region for " + gpu.pci;
  }
  if (gpu.driver_unsupported.empty()) return {"nvml", "", ""};
  return {"none", "", dmem_why + ", " + gpu.driver_unsupported};
}

std::string DmemLine(std::string_view region, int64_t bytes) {
  return std::string(region) + " " + std::to_string(bytes) + "\n";
}
std::string DmemClearMaxLine(std::string_view region) { return std::string(region) + " max\n"; }
std::string DmemClearMinLine(std::string_view region) { return std::string(region) + " 0\n"; }

std::string Enforcer::FindPodCgroup(const std::string& uid) const {
  // cgroup v2 at the root; a v1 (or hybrid) host keeps the kubelet's pod
  // directories under each hierarchy instead: found there, so that the
  // report says the host cannot enforce (no cgroup v2), not that the pod
  // is missing.
  for (const char* hierarchy : {"", "/unified", "/memory", "/pids", "/systemd"}) {
    for (const std::string& rel : PodCgroupCandidates(uid)) {
      std::string dir = root_ + hierarchy + "/" + rel;
      if (IsDir(dir)) return dir;
    }
  }
  return "";
}

Status Enforcer::EnableDmem(const std::string& dir) {
  // Every ancestor from the root down to the pod's parent delegates dmem.
  std::vector<std::string> chain;
  for (std::string d = dir; d.size() > root_.size();) {
    const size_t slash = d.rfind('/');
    if (slash == std::string::npos || slash < root_.size()) break;
    d = d.substr(0, slash);
    chain.push_back(d);
  }
  std::reverse(chain.begin(), chain.end());
  for (const std::string& d : chain) {
    std::string have;
    ReadSmallFile(d + "/cgroup.subtree_control", &have, 4096);
    if ((" " + have).find(" dmem") != std::string::npos) continue;
    if (Status s = WriteFile(d + "/cgroup.subtree_control", "+dmem\n"); !s.ok()) return s;
  }
  return Status::Ok();
}

Status Enforcer::WriteDmem(const Applied& a, bool clear) {
  if (!clear && !Exists(a.dir + "/dmem.max")) {
    if (Status s = EnableDmem(a.dir); !s.ok()) return s;
    if (!Exists(a.dir + "/dmem.max")) return Internal("the pod's cgroup has no dmem.max after enabling +dmem");
  }
  Status s = WriteFile(a.dir + "/dmem.max", clear ? DmemClearMaxLine(a.region) : DmemLine(a.region, a.hard));
  if (!s.ok()) return s;
  return WriteFile(a.dir + "/dmem.min", clear ? DmemClearMinLine(a.region) : DmemLine(a.region, a.soft));
}

void Enforcer::Clear(const std::pair<std::string, int>& key, const Applied& a, GpuSource* source) {
  if (!IsDir(a.dir)) return;  // the cgroup is gone, and its limits with it
  Status s = a.backend == "dmem" ? WriteDmem(a, /*clear=*/true)
                                 : source->SetMemoryLimits(key.second, a.dir, 0, UINT64_MAX);
  if (s.ok()) {
    spdlog::info("enforce: pod {} GPU {}: limit cleared ({})", key.first, key.second, a.backend);
  } else {
    spdlog::warn("enforce: pod {} GPU {}: clearing the limit failed: {}", key.first, key.second, s.message());
  }
}

std::map<int, ledger::GpuEnforcement> Enforcer::Apply(const EnforceOrders& orders,
                                                      const std::vector<GpuReading>& readings, GpuSource* source,
                                                      const std::set<std::string>& busy) {
  std::map<int, ledger::GpuEnforcement> out;
  std::map<std::pair<std::string, int>, Applied> keep;
  std::map<std::pair<std::string, int>, std::string> logged;  // this pass's dry-run lines
  if (orders.mode != ledger::EnforceMode::kOff) {
    const CgroupHost host = ReadCgroupHost(root_);
    std::map<int, BackendChoice> choice;
    for (const GpuReading& r : readings) {
      GpuTarget t{r.index, NormalizePciAddress(r.pci_bus_id), r.mig, source->MemoryLimitsUnsupported(r.index)};
      BackendChoice c = ChooseBackend(host, t);
      ledger::GpuEnforcement& e = out[r.index];
      e.backend = c.backend;
      e.reason = AsReason(c.reason);
      choice.emplace(r.index, std::move(c));
    }
    std::map<std::string, std::string> dirs;  // uid → its cgroup, looked up once per pass
    for (const ledger::PodLimit& l : orders.limits) {
      auto c = choice.find(l.index);
      if (c == choice.end()) {  // a GPU this pass did not read: what was written stays
        if (auto a = applied_.find({l.uid, l.index}); a != applied_.end()) keep.insert(*a);
        continue;
      }
      ledger::PodEnforcement pe;
      pe.uid = l.uid;
      auto d = dirs.find(l.uid);
      if (d == dirs.end()) d = dirs.emplace(l.uid, FindPodCgroup(l.uid)).first;
      const std::string& dir = d->second;
      const BackendChoice& b = c->second;
      if (dir.empty()) {
        // A pod not started yet (or gone) has no cgroup; one whose processes
        // are on the GPU must have one: not finding it, where a backend could
        // enforce, is a failure.
        const bool running = busy.count(l.uid) > 0;
        pe.state = running && b.backend != "none" ? ledger::EnforceState::kFailed : ledger::EnforceState::kAccounted;
        pe.reason = running ? "the pod's cgroup is not under " + root_ + " (kubelet layouts: docs/agent.md)"
                            : "pod cgroup not found yet (not started on this node)";
        if (b.backend == "none") pe.reason += "; " + b.reason;
      } else if (b.backend == "none") {
        pe.state = ledger::EnforceState::kAccounted;
        pe.reason = b.reason;
      } else {
        Applied want{b.backend, b.region, dir, l.soft, l.hard};
        const auto key = std::make_pair(l.uid, l.index);
        if (orders.mode == ledger::EnforceMode::kDryRun) {
          pe.state = ledger::EnforceState::kDryRun;
          pe.reason = "would set hard " + Gib(l.hard) + ", soft " + Gib(l.soft) + " through " + b.backend +
                      (b.region.empty() ? "" : " (" + b.region + ")");
          std::string line = b.backend == "dmem" ? "dmem.max '" + DmemLine(b.region, l.hard) + "' dmem.min '" +
                                                       DmemLine(b.region, l.soft) + "' in " + dir
                                                 : "nvmlDeviceSetMemoryLimits_v1(" + dir + ", soft " +
                                                       std::to_string(l.soft) + ", hard " + std::to_string(l.hard) + ")";
          line.erase(std::remove(line.begin(), line.end(), '\n'), line.end());
          if (logged_[key] != line) spdlog::info("enforce (dry-run): pod {} GPU {}: would write {}", l.uid, l.index, line);
          logged[key] = line;
        } else if (auto a = applied_.find(key); a != applied_.end() && a->second == want) {
          pe.state = ledger::EnforceState::kEnforced;  // written before, unchanged
          keep.emplace(key, want);
        } else {
          Status s = b.backend == "dmem" ? WriteDmem(want, /*clear=*/false)
                                         : source->SetMemoryLimits(l.index, dir, static_cast<uint64_t>(l.soft),
                                                                   static_cast<uint64_t>(l.hard));
          if (s.ok()) {
            pe.state = ledger::EnforceState::kEnforced;
            keep.emplace(key, want);
            spdlog::info("enforce: pod {} GPU {}: hard {} soft {} through {}", l.uid, l.index, l.hard, l.soft,
                         b.backend);
          } else {
            pe.state = ledger::EnforceState::kFailed;
            pe.reason = s.message();
            spdlog::warn("enforce: pod {} GPU {}: {}", l.uid, l.index, s.message());
          }
        }
      }
      pe.reason = AsReason(pe.reason);
      out[l.index].pods.push_back(std::move(pe));
    }
  }
  // What this agent applied and no order names any more (the pod left the
  // ledger, or mode went off): cleared where the cgroup remains.
  for (const auto& [key, a] : applied_) {
    if (!keep.count(key)) Clear(key, a, source);
  }
  applied_ = std::move(keep);
  logged_ = std::move(logged);  // bounded by this pass's orders
  for (auto& [index, e] : out) {
    std::sort(e.pods.begin(), e.pods.end(), [](const auto& a, const auto& b) { return a.uid < b.uid; });
    // One state per pod and GPU: vramd's orders name each pair once.
    e.pods.erase(std::unique(e.pods.begin(), e.pods.end(), [](const auto& a, const auto& b) { return a.uid == b.uid; }),
                 e.pods.end());
  }
  return out;
}

}  // namespace vramd::agent
