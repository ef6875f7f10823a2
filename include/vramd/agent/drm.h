// AMD (amdgpu) and other DRM drivers: per GPU, sysfs
//   <sys>/class/drm/card<N>/device/mem_info_vram_total, mem_info_vram_used
// (bytes, amdgpu), the PCI address from the `device` link, and per process
// the kernel's DRM client usage statistics in <proc>/PID/fdinfo/<fd>
// (docs.kernel.org, "DRM client usage stats"): drm-driver, drm-pdev,
// drm-client-id, drm-resident-vram (or the legacy drm-memory-vram, or
// drm-total-vram), values in bytes or with a KiB / MiB unit. A client (one
// open of the device) can be shared by many fds and processes: it is counted
// once, by (pdev, client id), for the lowest pid that holds it.
// Activity (issue 32, for idle eviction): a client's busy time, the sum of
// its drm-engine-<engine> nanoseconds (and drm-cycles-<engine>, the drivers
// that count cycles); a client whose busy time grew since the source's
// previous read ran work on the GPU.
// Permission: /proc/PID/fd and fdinfo need PTRACE_MODE_READ (the process's
// own user, or CAP_SYS_PTRACE). When the kernel denies them for any process,
// whether it holds DRM fds cannot be known: every card's per-process figures
// are then unavailable (GpuReading::processes_unavailable says why and how to
// fix it), and the agent logs it once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vramd/agent/gpu_source.h"

namespace vramd::agent {

// One DRM client as an fdinfo file describes it.
struct DrmClient {
  std::string driver;
  std::string pdev;      // PCI address, "0000:03:00.0"
  uint64_t client_id = 0;
  int64_t vram_bytes = 0;
  bool has_busy = false;  // the file has drm-engine-* (or drm-cycles-*) keys
  uint64_t busy = 0;      // their sum (saturating)
  bool operator==(const DrmClient&) const = default;
};

// Each client's busy time at one read, by (pdev, client id).
using DrmBusy = std::map<std::pair<std::string, uint64_t>, uint64_t>;

// The DRM client of one fdinfo file's text, or nullopt when the file is not
// a DRM fd or lacks drm-pdev / drm-client-id (older kernels). A missing VRAM
// key is 0 bytes (a client with no VRAM).
std::optional<DrmClient> ParseDrmFdinfo(std::string_view text);

// "1024 KiB" → 1048576; bytes when no unit; KiB, MiB, GiB. nullopt otherwise.
std::optional<int64_t> ParseDrmMemory(std::string_view value);

// A sysfs byte count ("17163091968\n"), or nullopt.
std::optional<int64_t> ParseSysfsBytes(std::string_view text);

// One DRM card with VRAM figures.
struct DrmCard {
  int card = 0;          // N of cardN
  std::string pdev;      // PCI address (basename of the device link)
  std::string name;      // device/product_name when present
  std::string uuid;      // device/unique_id when present
  int64_t total_bytes = 0;
  int64_t used_bytes = 0;
};

// The readings: cards in card order (index 0, 1, …), each client counted
// once and added to its (lowest) pid's usage on the card of its pdev;
// clients of unknown pdevs are ignored. With `previous` (the busy times of
// the last read; null on the first), a card's activity is known when each of
// its clients has busy keys, and a pid is active when one of its clients'
// busy time grew (or the client is new since then and has any). Pure.
std::vector<GpuReading> CombineDrm(std::vector<DrmCard> cards,
                                   const std::vector<std::pair<int, DrmClient>>& clients,
                                   const DrmBusy* previous = nullptr);

// The busy times of `clients`, for the next CombineDrm.
DrmBusy BusyOf(const std::vector<std::pair<int, DrmClient>>& clients);

// The DRM source over a sysfs and a proc root ("/sys", "/proc").
class DrmSource final : public GpuSource {
 public:
  DrmSource(std::string sys_root, std::string proc_root);
  std::string_view Name() const override { return "drm"; }
  Result<std::vector<GpuReading>> Read() override;

  // The cards with VRAM figures under sys_root (none: not a DRM VRAM node).
  static std::vector<DrmCard> ReadCards(const std::string& sys_root);

 private:
  std::string sys_root_;
  std::string proc_root_;
  bool fdinfo_denied_ = false;  // the last pass met a process it may not inspect (logged once)
  std::optional<DrmBusy> busy_;  // the clients' busy times at the last read
};

}  // namespace vramd::agent
