// Admission of pods (issue 34, part A): what vramd's validating and mutating
// webhook decide for a pod that is created or updated. Pure and table-tested;
// src/http/routes/admission.cc decodes the AdmissionReview and encodes the
// answer (a JSON patch for the mutation).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "vramd/ledger/pod_request.h"

namespace vramd::ledger {

// Annotations only vramd writes (at bind): a pod that carries them is placed.
inline constexpr const char* kPlacementAnnotations[] = {"vramd.io/gpus", "vramd.io/vram-per-gpu",
                                                         "vramd.io/gpu-uuids"};
// What the mutating webhook added, comma-separated ("schedulerName",
// "runtimeClassName", "env:<container>/<NAME>").
inline constexpr const char* kAdmissionAddedAnnotation = "vramd.io/admission-added";

struct AdmissionContainer {
  std::string name;
  std::set<std::string> env;  // the names its env list sets
  bool has_env = false;       // an env list is present (a patch adds to it, or creates it)
};

// What admission needs of a pod (decoded by the adapter).
struct AdmissionPod {
  std::string scheduler_name;               // spec.schedulerName ("" when absent)
  std::string node_name;                    // spec.nodeName
  std::string runtime_class;                // spec.runtimeClassName
  std::map<std::string, std::string> annotations;
  PodSpecView spec;                         // requests and vramd.io/* annotations, as filter reads them
  std::vector<AdmissionContainer> containers;
};

struct AdmissionRequest {
  bool create = true;                       // CREATE; false: UPDATE
  AdmissionPod pod;
  std::optional<AdmissionPod> old;          // UPDATE: the object before
  std::string username;                     // who sends it (userInfo.username)
  bool namespace_may_bind_directly = false; // the admin's opt-out label on the namespace
};

struct AdmissionPolicy {
  std::vector<std::string> victim_classes{"vramd-disposable"};
  std::set<std::string> vramd_users;        // usernames that may write placement annotations
  std::string scheduler_name;               // set on VRAM pods that left the default; "" = never
  std::string runtime_class;                // set on VRAM pods without one; "" = never
  std::string opt_out_label;                // named in the refusal of spec.nodeName
};

// nullopt: allowed. Otherwise why not, in the words filter would use:
//  - an invalid VRAM request or vramd.io/* annotation: "invalid VRAM request: ..."
//    (on UPDATE only when the update made it so or changed why: an object that
//    was already unreadable stays updatable, e.g. its finalizers removable);
//  - placement annotations added or changed by anyone but vramd;
//  - spec.nodeName on a pod created with a VRAM request (it would bypass vramd's
//    accounting) unless the namespace opted out.
// A pod that asks for no VRAM and carries no vramd.io/* annotation is always allowed.
std::optional<std::string> ValidateAdmission(const AdmissionRequest& in, const AdmissionPolicy& policy);

// One environment variable the mutation adds to a container: a fixed value,
// or a downward-API field path (metadata.uid, metadata.annotations['...']).
struct AddedEnv {
  size_t container = 0;
  std::string name;
  std::string value;       // when field_path is empty
  std::string field_path;
};

struct AdmissionMutation {
  std::optional<std::string> scheduler_name;
  std::optional<std::string> runtime_class;
  std::vector<AddedEnv> env;
  std::vector<std::string> added;  // kAdmissionAddedAnnotation's items
  bool empty() const { return !scheduler_name && !runtime_class && env.empty(); }
};

// The mutation of a created pod that requests VRAM (nothing otherwise, and
// nothing on UPDATE: a running pod's spec is immutable): schedulerName when
// the pod left the default, the runtime class when it has none, and per
// container NVIDIA_VISIBLE_DEVICES (vramd.io/gpu-uuids), CUDA_DEVICE_ORDER
// (PCI_BUS_ID), VRAMD_GPUS (vramd.io/gpus), POD_UID (metadata.uid), each only
// where the container does not set it already.
AdmissionMutation MutateAdmission(const AdmissionRequest& in, const AdmissionPolicy& policy);

}  // namespace vramd::ledger
