#include "vramd/agent/drm.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <map>
#include <set>

#include "agent/read_file.h"
#include "vramd/parse.h"

namespace vramd::agent {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string ReadTrimmed(const std::string& path) {
  std::string text;
  if (!ReadSmallFile(path, &text, 4096)) return {};
  return std::string(Trim(text));
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::optional<int64_t> ParseDrmMemory(std::string_view value) {
  value = Trim(value);
  size_t sp = value.find(' ');
  std::string_view number = value.substr(0, sp);
  std::string_view unit = sp == std::string_view::npos ? std::string_view() : Trim(value.substr(sp + 1));
  int64_t scale = 1;
  if (unit.empty()) scale = 1;
  else if (unit == "KiB") scale = int64_t{1} << 10;
  else if (unit == "MiB") scale = int64_t{1} << 20;
  else if (unit == "GiB") scale = int64_t{1} << 30;
  else return std::nullopt;
  std::optional<uint64_t> n = ParseDigits(number, static_cast<uint64_t>(INT64_MAX / scale));
  if (!n) return std::nullopt;
  return static_cast<int64_t>(*n) * scale;
}

std::optional<int64_t> ParseSysfsBytes(std::string_view text) {
  std::optional<uint64_t> n = ParseDigits(Trim(text), static_cast<uint64_t>(INT64_MAX));
  if (!n) return std::nullopt;
  return static_cast<int64_t>(*n);
}

std::optional<DrmClient> ParseDrmFdinfo(std::string_view text) {
  DrmClient c;
  bool has_driver = false, has_pdev = false, has_id = false;
  // Which VRAM key was seen: resident (2) beats the legacy memory (1), which beats total (0).
  int vram_rank = -1;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = Trim(line.substr(0, colon));
    std::string_view value = Trim(line.substr(colon + 1));
    if (!key.starts_with("drm-")) continue;
    if (key == "drm-driver") {
      c.driver = value;
      has_driver = !value.empty();
    } else if (key == "drm-pdev") {
      c.pdev = value;
      has_pdev = !value.empty();
    } else if (key == "drm-client-id") {
      if (auto id = ParseDigits(value)) {
        c.client_id = *id;
        has_id = true;
      }
    } else if ((key.starts_with("drm-engine-") && !key.starts_with("drm-engine-capacity-")) ||
               key.starts_with("drm-cycles-")) {
      // "<n> ns" (engine time) or "<n>" (cycles): only growth matters.
      std::string_view number = value.substr(0, value.find(' '));
      if (auto n = ParseDigits(number)) {
        c.has_busy = true;
        c.busy = c.busy > UINT64_MAX - *n ? UINT64_MAX : c.busy + *n;
      }
    } else {
      int rank = key == "drm-resident-vram" ? 2 : key == "drm-memory-vram" ? 1 : key == "drm-total-vram" ? 0 : -1;
      if (rank > vram_rank) {
        if (auto bytes = ParseDrmMemory(value)) {
          c.vram_bytes = *bytes;
          vram_rank = rank;
        }
      }
    }
  }
  if (!has_driver || !has_pdev || !has_id) return std::nullopt;
  return c;
}

DrmBusy BusyOf(const std::vector<std::pair<int, DrmClient>>& clients) {
  DrmBusy out;
  for (const auto& [pid, c] : clients) {
    if (c.has_busy) out[{c.pdev, c.client_id}] = c.busy;
  }
  return out;
}

std::vector<GpuReading> CombineDrm(std::vector<DrmCard> cards,
                                   const std::vector<std::pair<int, DrmClient>>& clients,
                                   const DrmBusy* previous) {
  std::sort(cards.begin(), cards.end(), [](const DrmCard& a, const DrmCard& b) { return a.card < b.card; });
  std::vector<GpuReading> out;
  std::map<std::string_view, size_t> by_pdev;
  for (const DrmCard& c : cards) {
    GpuReading g;
    g.index = static_cast<int>(out.size());
    g.uuid = c.uuid;
    g.name = c.name;
    g.total_bytes = c.total_bytes;
    g.used_bytes = c.used_bytes;
    g.pci_bus_id = c.pdev;
    g.activity_known = previous != nullptr;
    by_pdev.emplace(c.pdev, out.size());
    out.push_back(std::move(g));
  }
  // Each (pdev, client id) once, for its lowest pid.
  std::map<std::pair<std::string_view, uint64_t>, std::pair<int, const DrmClient*>> owner;
  for (const auto& [pid, c] : clients) {
    auto [it, fresh] = owner.try_emplace({c.pdev, c.client_id}, pid, &c);
    if (!fresh && pid < it->second.first) it->second = {pid, &c};
  }
  struct Figure {
    int64_t bytes = 0;
    bool active = false;
  };
  std::vector<std::map<int, Figure>> per_card(out.size());
  for (const auto& [key, who] : owner) {
    auto card = by_pdev.find(key.first);
    if (card == by_pdev.end()) continue;
    const DrmClient& c = *who.second;
    Figure& f = per_card[card->second][who.first];
    f.bytes += c.vram_bytes;
    if (!c.has_busy) {
      out[card->second].activity_known = false;  // this driver does not say
    } else if (previous != nullptr) {
      auto before = previous->find({c.pdev, c.client_id});
      f.active = f.active || (before == previous->end() ? c.busy > 0 : c.busy > before->second);
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    for (const auto& [pid, f] : per_card[i]) out[i].processes.push_back({pid, f.bytes, f.active});
  }
  return out;
}

DrmSource::DrmSource(std::string sys_root, std::string proc_root)
    : sys_root_(std::move(sys_root)), proc_root_(std::move(proc_root)) {}

std::vector<DrmCard> DrmSource::ReadCards(const std::string& sys_root) {
  std::vector<DrmCard> cards;
  const std::string drm = sys_root + "/class/drm";
  for (const std::string& name : ListDir(drm)) {
    // card0, card1, … (not the connectors card0-DP-1, not renderD128).
    if (!name.starts_with("card") || !AllDigits(std::string_view(name).substr(4))) continue;
    std::optional<int> n = ParseSmallInt(std::string_view(name).substr(4), 1 << 20);
    if (!n) continue;
    const std::string dev = drm + "/" + name + "/device";
    std::optional<int64_t> total = ParseSysfsBytes(ReadTrimmed(dev + "/mem_info_vram_total"));
    std::optional<int64_t> used = ParseSysfsBytes(ReadTrimmed(dev + "/mem_info_vram_used"));
    if (!total || !used) continue;
    DrmCard c;
    c.card = *n;
    c.total_bytes = *total;
    c.used_bytes = *used;
    char target[PATH_MAX];
    ssize_t len = ::readlink(dev.c_str(), target, sizeof target - 1);
    if (len > 0) {
      std::string_view t(target, static_cast<size_t>(len));
      size_t slash = t.rfind('/');
      c.pdev = std::string(slash == std::string_view::npos ? t : t.substr(slash + 1));
    }
    c.name = ReadTrimmed(dev + "/product_name");
    c.uuid = ReadTrimmed(dev + "/unique_id");
    cards.push_back(std::move(c));
  }
  return cards;
}

Result<std::vector<GpuReading>> DrmSource::Read() {
  std::vector<DrmCard> cards = ReadCards(sys_root_);
  if (cards.empty()) return Unavailable("no DRM card with VRAM figures under " + sys_root_ + "/class/drm");
  std::set<std::string> pdevs;
  for (const DrmCard& c : cards) pdevs.insert(c.pdev);
  std::vector<std::pair<int, DrmClient>> clients;
  std::string text;
  char target[PATH_MAX];
  // Processes whose fds the kernel does not let the agent inspect
  // (/proc/PID/fd and fdinfo need PTRACE_MODE_READ: the same user, or
  // CAP_SYS_PTRACE): whether they hold DRM fds cannot be known.
  int denied = 0, denied_pid = 0;
  auto is_denied = [](int e) { return e == EACCES || e == EPERM; };
  for (const std::string& p : ListDir(proc_root_)) {
    if (!AllDigits(p)) continue;
    std::optional<int> pid = ParseSmallInt(p, INT_MAX);
    if (!pid) continue;
    const std::string base = proc_root_ + "/" + p;
    int error = 0;
    std::vector<std::string> fds = ListDir(base + "/fdinfo", &error);
    bool pid_denied = is_denied(error);
    for (const std::string& fd : fds) {
      // Only fds open on a DRM device node: one readlink spares reading the
      // fdinfo of every socket and file.
      ssize_t len = ::readlink((base + "/fd/" + fd).c_str(), target, sizeof target - 1);
      if (len < 0 && is_denied(errno)) {
        pid_denied = true;
        break;
      }
      if (len <= 0 || !std::string_view(target, static_cast<size_t>(len)).starts_with("/dev/dri/")) continue;
      if (!ReadSmallFile(base + "/fdinfo/" + fd, &text, 16 * 1024, &error)) {
        if (is_denied(error)) pid_denied = true;
        continue;
      }
      std::optional<DrmClient> c = ParseDrmFdinfo(text);
      if (c && pdevs.count(c->pdev)) clients.emplace_back(*pid, std::move(*c));
    }
    if (pid_denied && denied++ == 0) denied_pid = *pid;
  }
  std::vector<GpuReading> out = CombineDrm(std::move(cards), clients, busy_ ? &*busy_ : nullptr);
  busy_ = BusyOf(clients);
  if (denied > 0) {
    // Some processes' DRM clients cannot be seen: the per-process figures of
    // every card are incomplete, so none is attributed (a pod whose process
    // is hidden would read as idle).
    const std::string why = "cannot read /proc/PID/fdinfo of " + std::to_string(denied) +
                            " process(es) (permission denied, e.g. pid " + std::to_string(denied_pid) +
                            "): run the agent as root with CAP_SYS_PTRACE";
    for (GpuReading& g : out) {
      g.processes.clear();
      g.processes_unavailable = why;
      g.activity_known = false;
    }
    if (!fdinfo_denied_) {
      spdlog::warn("DRM: {}; per-process figures unavailable, per-pod usage is not reported", why);
    }
  } else if (fdinfo_denied_) {
    spdlog::info("DRM: every process's fdinfo is readable again: per-process figures available");
  }
  fdinfo_denied_ = denied > 0;
  return out;
}

}  // namespace vramd::agent
