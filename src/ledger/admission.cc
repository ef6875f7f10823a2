#include "vramd/ledger/admission.h"

namespace vramd::ledger {
namespace {

constexpr const char* kDefaultScheduler = "default-scheduler";

std::optional<std::string> Annotation(const AdmissionPod& pod, const char* key) {
  auto it = pod.annotations.find(key);
  if (it == pod.annotations.end()) return std::nullopt;
  return it->second;
}

}  // namespace

std::optional<std::string> ValidateAdmission(const AdmissionRequest& in, const AdmissionPolicy& policy) {
  const AdmissionPod& pod = in.pod;
  // The request and the vramd.io/* annotations filter reads: refused now
  // rather than found Pending later.
  Result<VramRequest> req = ComputeVramRequest(pod.spec, policy.victim_classes);
  if (!req.ok()) {
    // An UPDATE that leaves an unreadable request exactly as unreadable as it
    // was (a pod created before its namespace was labelled; a controller that
    // changes a label or removes a finalizer) did not make it so: refusing it
    // would leave the pod un-updatable, stuck Terminating behind a finalizer.
    // Filter still refuses to place such a pod.
    bool as_before = false;
    if (!in.create && in.old) {
      Result<VramRequest> before = ComputeVramRequest(in.old->spec, policy.victim_classes);
      as_before = !before.ok() && before.status().message() == req.status().message();
    }
    if (!as_before) return "invalid VRAM request: " + req.status().message();
  }
  // Placement is vramd's to write (at bind): nobody else adds or changes it.
  if (policy.vramd_users.count(in.username) == 0) {
    for (const char* key : kPlacementAnnotations) {
      std::optional<std::string> now = Annotation(pod, key);
      std::optional<std::string> before = in.old ? Annotation(*in.old, key) : std::nullopt;
      if (now && now != before) {
        return std::string("annotation ") + key + " is written by vramd when it binds the pod; " + in.username +
               " may not set it";
      }
    }
  }
  // A pod created on a node with a VRAM request would hold VRAM vramd never granted.
  if (in.create && req.ok() && req->wants_vram() && !pod.node_name.empty() && !in.namespace_may_bind_directly) {
    return "spec.nodeName with a " + pod.spec.ns + " pod requesting VRAM bypasses vramd (its VRAM would be "
           "used without being granted); leave nodeName empty, or an admin labels the namespace " +
           (policy.opt_out_label.empty() ? std::string("with the opt-out label") : policy.opt_out_label);
  }
  return std::nullopt;
}

AdmissionMutation MutateAdmission(const AdmissionRequest& in, const AdmissionPolicy& policy) {
  AdmissionMutation m;
  if (!in.create) return m;
  const AdmissionPod& pod = in.pod;
  Result<VramRequest> req = ComputeVramRequest(pod.spec, policy.victim_classes);
  if (!req.ok() || !req->wants_vram()) return m;
  if (!policy.scheduler_name.empty() && pod.node_name.empty() &&
      (pod.scheduler_name.empty() || pod.scheduler_name == kDefaultScheduler) &&
      pod.scheduler_name != policy.scheduler_name) {
    m.scheduler_name = policy.scheduler_name;
    m.added.push_back("schedulerName");
  }
  if (!policy.runtime_class.empty() && pod.runtime_class.empty()) {
    m.runtime_class = policy.runtime_class;
    m.added.push_back("runtimeClassName");
  }
  struct Var {
    const char* name;
    const char* value;
    const char* field_path;
  };
  static constexpr Var kVars[] = {
      {"NVIDIA_VISIBLE_DEVICES", "", "metadata.annotations['vramd.io/gpu-uuids']"},
      {"CUDA_DEVICE_ORDER", "PCI_BUS_ID", ""},
      {"VRAMD_GPUS", "", "metadata.annotations['vramd.io/gpus']"},
      {"POD_UID", "", "metadata.uid"},
  };
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    const AdmissionContainer& c = pod.containers[i];
    for (const Var& v : kVars) {
      if (c.env.count(v.name)) continue;  // never overwrite what the user set
      m.env.push_back(AddedEnv{i, v.name, v.value, v.field_path});
      m.added.push_back("env:" + c.name + "/" + v.name);
    }
  }
  return m;
}

}  // namespace vramd::ledger
