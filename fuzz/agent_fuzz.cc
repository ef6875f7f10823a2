// Fuzzes what vramd-agent parses from /proc and /sys (cgroup files, DRM
// fdinfo blocks, sysfs byte counts) and the report built from readings.
// Properties:
//  - no parser crashes;
//  - a pod UID found in a cgroup file is canonical: 36 characters, lower-case
//    hex with dashes at 8, 13, 18 and 23;
//  - a DRM client's VRAM bytes and a sysfs count are never negative;
//  - a report built from any readings (figures taken from the input) never
//    carries a negative figure or one above its GPU's total, and its JSON
//    is one object.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "vramd/agent/cgroup.h"
#include "vramd/agent/drm.h"
#include "vramd/agent/report.h"

namespace {

bool Canonical(const std::string& uid) {
  if (uid.size() != 36) return false;
  for (size_t i = 0; i < 36; ++i) {
    char c = uid[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (c == '-')) return false;
    if (!dash && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

int64_t Take(std::string_view* in) {
  int64_t v = 0;
  size_t n = std::min<size_t>(8, in->size());
  std::memcpy(&v, in->data(), n);
  in->remove_prefix(n);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vramd::agent;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  if (auto uid = PodUidFromCgroupFile(text)) FUZZ_CHECK_MSG(Canonical(*uid), *uid);
  if (auto c = ParseDrmFdinfo(text)) FUZZ_CHECK(c->vram_bytes >= 0);
  if (auto b = ParseDrmMemory(text)) FUZZ_CHECK(*b >= 0);
  if (auto b = ParseSysfsBytes(text)) FUZZ_CHECK(*b >= 0);

  // Readings from the bytes: up to 4 GPUs with up to 8 processes each.
  std::string_view in = text;
  std::vector<GpuReading> readings;
  PodOfPid pods;
  while (in.size() >= 24 && readings.size() < 4) {
    GpuReading g;
    g.index = static_cast<int>(readings.size());
    g.total_bytes = Take(&in);
    g.used_bytes = Take(&in);
    int n = static_cast<int>(static_cast<uint64_t>(Take(&in)) % 9);
    for (int i = 0; i < n && in.size() >= 8; ++i) {
      int64_t v = Take(&in);
      int pid = static_cast<int>(static_cast<uint64_t>(v) % 16);
      g.processes.push_back({pid, v});
      if (pid % 3 == 0) pods[pid] = "0f1c2d3e-aaaa-bbbb-cccc-00000000000" + std::to_string(pid % 10);
    }
    readings.push_back(std::move(g));
  }
  Report r = BuildReport("vramd-agent/fuzz", "nvml", readings, pods);
  for (const GpuReport& g : r.gpus) {
    FUZZ_CHECK(g.total_bytes >= 0);
    FUZZ_CHECK(g.used_bytes >= 0 && g.used_bytes <= g.total_bytes);
    FUZZ_CHECK(g.outside_pods_bytes >= 0 && g.outside_pods_bytes <= g.total_bytes);
    for (const PodUsage& p : g.pods) FUZZ_CHECK(p.used_bytes >= 0 && p.used_bytes <= g.total_bytes);
  }
  std::string json = ReportJson(r);
  FUZZ_CHECK(json.front() == '{' && json.back() == '}');
  return 0;
}
