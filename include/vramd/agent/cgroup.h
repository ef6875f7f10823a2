// PID → pod: the pod UID in a process's cgroup paths (/proc/PID/cgroup).
// Pure functions over the file's text; the shapes they know:
//   cgroupfs driver   /kubepods/pod<uid>/<container>             (Guaranteed)
//                     /kubepods/burstable/pod<uid>/<container>   (and besteffort)
//   systemd driver    /kubepods.slice/kubepods-burstable.slice/
//                       kubepods-burstable-pod<uid, '_' for '-'>.slice/
//                       cri-containerd-<id>.scope | crio-<id>.scope | docker-<id>.scope
//                     (kind's kubelet.slice/kubelet-kubepods-… nesting too)
//   cgroup v1 ("N:controllers:/path", one line per hierarchy) and v2 ("0::/path"),
//   and paths relative to the reader's cgroup namespace ("0::/../../kubepods-…").
// A pod segment is "pod" + a UID (8-4-4-4-12 hex, '-' or '_'), alone or after
// a '-', optionally followed by ".slice"; the UID is answered in canonical
// form (lower case, dashes), as the pod's metadata.uid. Static pods' hash
// "UIDs" (32 hex digits) do not match the API's metadata.uid and are not pods here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace vramd::agent {

// The pod UID in one cgroup path, or nullopt.
std::optional<std::string> PodUidFromCgroupPath(std::string_view path);

// The pod UID named by the text of a /proc/PID/cgroup file (the first line
// that names one), or nullopt: the process belongs to no pod.
std::optional<std::string> PodUidFromCgroupFile(std::string_view text);

}  // namespace vramd::agent
