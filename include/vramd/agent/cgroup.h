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
//
// Bad input: a path counts only when it starts under the kubelet's root
// (kubepods, kubepods.slice, kind's kubelet.slice; for a path relative to the
// reader's cgroup namespace, its first segment after the "..", which may also
// be a QoS class or the pod), and the OUTERMOST pod segment wins: the cgroup
// the kubelet created. A container can create cgroups only below its own, so
// a pod-shaped cgroup it makes inside never moves it to another pod; a user's
// systemd slice named like a pod is no pod. cgroup v1 lines that name two
// different pods name none (ambiguous).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace vramd::agent {

// The pod UID in one cgroup path, or nullopt.
std::optional<std::string> PodUidFromCgroupPath(std::string_view path);

// What a /proc/PID/cgroup file says of the process's pod.
struct CgroupPod {
  enum Kind { kNone, kPod, kAmbiguous };
  Kind kind = kNone;  // kNone: in no pod; kAmbiguous: its lines name two pods
  std::string uid;    // kPod: the UID, canonical
};
CgroupPod PodOfCgroupFile(std::string_view text);

// The pod UID named by the text of a /proc/PID/cgroup file, or nullopt: the
// process belongs to no pod (or its lines name two: PodOfCgroupFile).
std::optional<std::string> PodUidFromCgroupFile(std::string_view text);

}  // namespace vramd::agent
