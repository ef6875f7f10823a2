#include "vramd/ledger/enforcement.h"

#include <algorithm>

#include "vramd/ledger/usage.h"

namespace vramd::ledger {

const char* EnforceModeName(EnforceMode m) {
  switch (m) {
    case EnforceMode::kOff:
      return "off";
    case EnforceMode::kDryRun:
      return "dry-run";
    case EnforceMode::kOn:
      return "on";
  }
  return "off";
}

bool ParseEnforceMode(std::string_view s, EnforceMode* out) {
  for (EnforceMode m : {EnforceMode::kOff, EnforceMode::kDryRun, EnforceMode::kOn}) {
    if (s == EnforceModeName(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

const char* EnforceStateName(EnforceState s) {
  switch (s) {
    case EnforceState::kEnforced:
      return "enforced";
    case EnforceState::kDryRun:
      return "dry-run";
    case EnforceState::kAccounted:
      return "accounted";
    case EnforceState::kFailed:
      return "failed";
  }
  return "accounted";
}

bool ParseEnforceState(std::string_view s, EnforceState* out) {
  for (EnforceState e : {EnforceState::kEnforced, EnforceState::kDryRun, EnforceState::kAccounted,
                         EnforceState::kFailed}) {
    if (s == EnforceStateName(e)) {
      *out = e;
      return true;
    }
  }
  return false;
}

std::vector<PodLimit> DesiredLimits(const Node& node) {
  std::vector<PodLimit> out;
  for (const Entry& e : node.entries) {
    if (e.state == EntryState::kHold || e.per_gpu <= 0) continue;
    for (int index : e.gpus) {
      out.push_back({e.pod_uid, index, e.per_gpu, std::max(e.per_gpu, e.peak_per_gpu)});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const PodLimit& a, const PodLimit& b) { return std::tie(a.uid, a.index) < std::tie(b.uid, b.index); });
  return out;
}

namespace {

bool IsLabelChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
         c == '.' || c == '/';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

Result<NodeModeRules> ParseNodeModeRules(std::string_view text) {
  NodeModeRules out;
  if (Trim(text).empty()) return out;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = Trim(text.substr(0, comma));
    const size_t eq = item.find('=');
    const size_t colon = item.rfind(':');
    EnforceMode mode{};
    if (eq == std::string_view::npos || eq == 0 || colon == std::string_view::npos || colon < eq ||
        !ParseEnforceMode(item.substr(colon + 1), &mode)) {
      return InvalidArgument("enforce.node_modes: \"" + std::string(item.substr(0, 80)) +
                             "\" is not KEY=VALUE:MODE (MODE off, dry-run or on)");
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1, colon - eq - 1);
    if (key.size() > 316 || value.size() > 63 || !std::all_of(key.begin(), key.end(), IsLabelChar) ||
        !std::all_of(value.begin(), value.end(), IsLabelChar) || value.find('/') != std::string_view::npos) {
      return InvalidArgument("enforce.node_modes: \"" + std::string(item.substr(0, 80)) +
                             "\" is not a node label KEY=VALUE followed by :MODE");
    }
    out.push_back({{std::string(key), std::string(value)}, mode});
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

EnforceMode ModeForNode(const std::map<std::string, std::string>& labels, const NodeModeRules& rules,
                        EnforceMode fallback) {
  for (const auto& [label, mode] : rules) {
    auto it = labels.find(label.first);
    if (it != labels.end() && it->second == label.second) return mode;
  }
  return fallback;
}

bool IsEnforceReason(std::string_view s) {
  return s.size() <= kMaxEnforceReason && std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

Status CheckGpuEnforcement(int index, const GpuEnforcement& e) {
  const std::string gpu = "GPU " + std::to_string(index) + ": enforcement: ";
  if (e.backend != "dmem" && e.backend != "nvml" && e.backend != "none") {
    return InvalidArgument(gpu + "backend \"" + e.backend.substr(0, 20) + "\" is not dmem, nvml or none");
  }
  if (!IsEnforceReason(e.reason)) {
    return InvalidArgument(gpu + "reason is longer than " + std::to_string(kMaxEnforceReason) +
                           " characters or not printable ASCII");
  }
  if (e.backend == "none" && e.reason.empty()) return InvalidArgument(gpu + "backend none needs a reason");
  for (size_t i = 0; i < e.pods.size(); ++i) {
    const PodEnforcement& p = e.pods[i];
    if (!IsCanonicalPodUid(p.uid)) {
      return InvalidArgument(gpu + "pod uid \"" + p.uid.substr(0, 40) + "\" is not a canonical UID");
    }
    if (i > 0 && e.pods[i - 1].uid >= p.uid) {
      return InvalidArgument(gpu + "pods are not sorted by uid, or one is given twice");
    }
    if (!IsEnforceReason(p.reason)) {
      return InvalidArgument(gpu + "the reason of pod " + p.uid + " is longer than " +
                             std::to_string(kMaxEnforceReason) + " characters or not printable ASCII");
    }
    if ((p.state == EnforceState::kFailed || p.state == EnforceState::kAccounted) && p.reason.empty()) {
      return InvalidArgument(gpu + "pod " + p.uid + " is " + EnforceStateName(p.state) + " without a reason");
    }
  }
  return Status::Ok();
}

namespace {

int Severity(EnforceState s) {
  switch (s) {
    case EnforceState::kFailed:
      return 3;
    case EnforceState::kAccounted:
      return 2;
    case EnforceState::kDryRun:
      return 1;
    case EnforceState::kEnforced:
      return 0;
  }
  return 2;
}

}  // namespace

std::optional<PodEnforcement> PodEnforcementOn(const Node& node, std::string_view uid) {
  std::optional<PodEnforcement> worst;
  for (const Gpu& g : node.gpus) {
    auto it = std::lower_bound(g.enforcement.pods.begin(), g.enforcement.pods.end(), uid,
                               [](const PodEnforcement& p, std::string_view u) { return p.uid < u; });
    if (it == g.enforcement.pods.end() || it->uid != uid) continue;
    if (!worst || Severity(it->state) > Severity(worst->state)) worst = *it;
  }
  return worst;
}

std::string DescribeEnforcement(const PodEnforcement& e) {
  switch (e.state) {
    case EnforceState::kEnforced:
      return "enforced";
    case EnforceState::kDryRun:
      return "dry-run: " + e.reason;
    case EnforceState::kAccounted:
      return "accounted only: " + e.reason;
    case EnforceState::kFailed:
      return "failed: " + e.reason;
  }
  return "accounted only: " + e.reason;
}

}  // namespace vramd::ledger
