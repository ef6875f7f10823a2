#include "vramd/ledger/usage.h"

#include <algorithm>

#include "vramd/ledger/capacity.h"
#include "vramd/ledger/enforcement.h"

namespace vramd::ledger {
namespace {

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool IsUuidChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
         c == ':' || c == '.';
}

std::string GpuName(int index) { return "GPU " + std::to_string(index); }

Status CheckFigure(int index, std::string_view what, int64_t bytes, int64_t total) {
  if (bytes < 0) return InvalidArgument(GpuName(index) + ": " + std::string(what) + " is negative");
  if (bytes > kMaxBytesPerGpu) {
    return InvalidArgument(GpuName(index) + ": " + std::string(what) + " " + std::to_string(bytes) +
                           " is above 1 PiB, not a GPU's memory");
  }
  if (total > 0 && bytes > total) {
    return InvalidArgument(GpuName(index) + ": " + std::string(what) + " " + std::to_string(bytes) +
                           " is larger than total_bytes " + std::to_string(total));
  }
  return Status::Ok();
}

}  // namespace

bool IsCanonicalPodUid(std::string_view uid) {
  if (uid.size() != 36) return false;
  for (size_t i = 0; i < uid.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? uid[i] != '-' : !IsLowerHex(uid[i])) return false;
  }
  return true;
}

Status CheckUsageReport(const UsageReport& report) {
  if (report.version != 1 && report.version != 2) {
    return InvalidArgument("version " + std::to_string(report.version) + " is not 1 or 2");
  }
  if (report.gpus.empty()) return InvalidArgument("the report names no GPU");
  if (report.gpus.size() > static_cast<size_t>(kMaxReportGpus)) {
    return InvalidArgument("the report names more than " + std::to_string(kMaxReportGpus) + " GPUs");
  }
  size_t figures = 0;
  std::vector<std::string_view> uids;
  for (size_t i = 0; i < report.gpus.size(); ++i) {
    const GpuUsage& g = report.gpus[i];
    if (g.index < 0 || g.index > kMaxReportGpuIndex) {
      return InvalidArgument("GPU index " + std::to_string(g.index) + " is not from 0 to " +
                             std::to_string(kMaxReportGpuIndex));
    }
    if (i > 0 && report.gpus[i - 1].index >= g.index) {
      return report.gpus[i - 1].index == g.index
                 ? InvalidArgument("GPU index " + std::to_string(g.index) + " is given more than once")
                 : InvalidArgument("GPU indices are not in ascending order");
    }
    if (g.uuid.size() > kMaxUuidLength || !std::all_of(g.uuid.begin(), g.uuid.end(), IsUuidChar)) {
      return InvalidArgument(GpuName(g.index) + ": uuid is longer than " + std::to_string(kMaxUuidLength) +
                             " characters or has a character outside A-Z a-z 0-9 - _ : .");
    }
    if (Status s = CheckFigure(g.index, "total_bytes", g.total, 0); !s.ok()) return s;
    if (Status s = CheckFigure(g.index, "used_bytes", g.used, g.total); !s.ok()) return s;
    if (Status s = CheckFigure(g.index, "outside_pods_bytes", g.outside_pods, g.total); !s.ok()) return s;
    if (g.processes_unavailable.size() > kMaxUnavailableReason ||
        !std::all_of(g.processes_unavailable.begin(), g.processes_unavailable.end(),
                     [](char c) { return c >= 0x20 && c < 0x7f; })) {
      return InvalidArgument(GpuName(g.index) + ": processes_unavailable is longer than " +
                             std::to_string(kMaxUnavailableReason) + " characters or not printable ASCII");
    }
    if (g.invalid_process_lists < 0 || g.invalid_process_lists > (int64_t{1} << 40)) {
      return InvalidArgument(GpuName(g.index) + ": invalid_process_lists must be a whole number from 0 to 2^40");
    }
    if (!g.enforcement.backend.empty() || !g.enforcement.pods.empty()) {
      if (Status s = CheckGpuEnforcement(g.index, g.enforcement); !s.ok()) return s;
    }
    figures += g.pods.size() + g.enforcement.pods.size();
    if (figures > kMaxReportPodFigures) {
      return InvalidArgument("the report has more than " + std::to_string(kMaxReportPodFigures) +
                             " per-pod figures");
    }
    uids.clear();
    for (const PodUsage& p : g.pods) {
      if (!IsCanonicalPodUid(p.uid)) {
        return InvalidArgument(GpuName(g.index) + ": pod uid \"" + p.uid.substr(0, 40) +
                               "\" is not a canonical UID (36 lower-case hex digits and dashes, 8-4-4-4-12)");
      }
      if (Status s = CheckFigure(g.index, "used_bytes of pod " + p.uid, p.used, g.total); !s.ok()) return s;
      uids.push_back(p.uid);
    }
    std::sort(uids.begin(), uids.end());
    if (auto dup = std::adjacent_find(uids.begin(), uids.end()); dup != uids.end()) {
      return InvalidArgument(GpuName(g.index) + ": pod uid " + std::string(*dup) + " is given more than once");
    }
  }
  return Status::Ok();
}

Status CheckReportAgainstNode(const UsageReport& report, const Node& node) {
  for (const GpuUsage& g : report.gpus) {
    const bool known = std::any_of(node.gpus.begin(), node.gpus.end(),
                                   [&](const ledger::Gpu& have) { return have.index == g.index; });
    if (!known) return InvalidArgument("node " + node.name + " has no GPU " + std::to_string(g.index));
  }
  return Status::Ok();
}

}  // namespace vramd::ledger
