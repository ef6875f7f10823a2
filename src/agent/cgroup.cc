#include "vramd/agent/cgroup.h"

#include <cctype>

namespace vramd::agent {
namespace {

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// The canonical UID when `s` is exactly 8-4-4-4-12 hex digits separated by
// '-' or '_' (one kind throughout).
std::optional<std::string> CanonicalUid(std::string_view s) {
  if (s.size() != 36) return std::nullopt;
  const char sep = s[8];
  if (sep != '-' && sep != '_') return std::nullopt;
  std::string uid(36, '-');
  for (size_t i = 0; i < 36; ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != sep) return std::nullopt;
      continue;
    }
    if (!IsHex(s[i])) return std::nullopt;
    uid[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  }
  return uid;
}

// "pod<uid>", "kubepods-burstable-pod<uid>.slice", "kubelet-kubepods-pod<uid>.slice".
std::optional<std::string> PodOfSegment(std::string_view seg) {
  if (seg.ends_with(".slice")) seg.remove_suffix(6);
  if (seg.size() < 39) return std::nullopt;
  std::string_view tail = seg.substr(seg.size() - 39);  // "pod" + 36
  if (!tail.starts_with("pod")) return std::nullopt;
  if (seg.size() > 39 && seg[seg.size() - 40] != '-') return std::nullopt;
  return CanonicalUid(tail.substr(3));
}

// The root of the kubelet's pod cgroups: "kubepods" (cgroupfs),
// "kubepods.slice" and its "kubepods-<qos>.slice" (systemd), kind's
// "kubelet.slice"/"kubelet-kubepods…" and "kubelet" (cgroupfs) nesting.
bool IsKubepodsSegment(std::string_view seg) {
  return seg == "kubepods" || seg == "kubepods.slice" || seg == "kubelet.slice" || seg == "kubelet" ||
         seg.starts_with("kubepods-") || seg.starts_with("kubelet-kubepods");
}

// A QoS class's cgroup of the cgroupfs driver.
bool IsQosSegment(std::string_view seg) { return seg == "burstable" || seg == "besteffort"; }

}  // namespace

std::optional<std::string> PodUidFromCgroupPath(std::string_view path) {
  // The path must start under kubepods: its first segment is the kubelet's
  // root (a pod-shaped cgroup elsewhere, e.g. a user's systemd slice, is no
  // pod). A path relative to the reader's cgroup namespace ("/../../x")
  // hides that root: there the first segment after the ".." may also be a
  // QoS class or the pod itself. Then the OUTERMOST pod segment wins: that
  // is the cgroup the kubelet created; a container can only create cgroups
  // below its own, so an inner pod-shaped one is never the pod.
  bool first = true, relative = false;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view seg = path.substr(0, slash);
    path.remove_prefix(slash == std::string_view::npos ? path.size() : slash + 1);
    if (seg.empty()) continue;
    if (first && seg == "..") {
      relative = true;
      continue;
    }
    std::optional<std::string> uid = PodOfSegment(seg);
    if (first) {
      first = false;
      if (!IsKubepodsSegment(seg) && !(relative && (IsQosSegment(seg) || uid))) return std::nullopt;
    }
    if (uid) return uid;
  }
  return std::nullopt;
}

CgroupPod PodOfCgroupFile(std::string_view text) {
  CgroupPod out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    // "hierarchy-id:controllers:path"; the path may itself hold ':' only in
    // theory, so split on the first two.
    size_t a = line.find(':');
    if (a == std::string_view::npos) continue;
    size_t b = line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    std::optional<std::string> uid = PodUidFromCgroupPath(line.substr(b + 1));
    if (!uid) continue;
    if (out.kind == CgroupPod::kNone) {
      out.kind = CgroupPod::kPod;
      out.uid = std::move(*uid);
    } else if (*uid != out.uid) {
      // cgroup v1 hierarchies that name two pods: no way to tell which.
      out.kind = CgroupPod::kAmbiguous;
      out.uid.clear();
      return out;
    }
  }
  return out;
}

std::optional<std::string> PodUidFromCgroupFile(std::string_view text) {
  CgroupPod p = PodOfCgroupFile(text);
  if (p.kind != CgroupPod::kPod) return std::nullopt;
  return std::move(p.uid);
}

}  // namespace vramd::agent
