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

}  // namespace

std::optional<std::string> PodUidFromCgroupPath(std::string_view path) {
  // The innermost pod segment wins (there is only one in every known shape).
  std::optional<std::string> found;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view seg = path.substr(0, slash);
    if (auto uid = PodOfSegment(seg)) found = std::move(uid);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return found;
}

std::optional<std::string> PodUidFromCgroupFile(std::string_view text) {
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
    if (auto uid = PodUidFromCgroupPath(line.substr(b + 1))) return uid;
  }
  return std::nullopt;
}

}  // namespace vramd::agent
