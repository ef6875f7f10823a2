// Decoding Kubernetes Pod and Node objects (API JSON, camelCase) into the
// small structs vramd keeps. Used by the REST client for gets, lists and
// watches, and usable by anything else that holds a Pod as JSON text.
#pragma once

#include <string>
#include <string_view>

#include "vramd/kube/kube_client.h"
#include "vramd/status.h"

namespace vramd::kube {

// Decodes one Pod object. `resource` is the extended resource vramd accounts
// ("vramd.io/vram"); PodInfo::spec gets, for it:
//   containers[i]      ← spec.containers[i].resources.{requests,limits}[resource]
//   init_containers[i] ← spec.initContainers[i] likewise, sidecar = (restartPolicy == "Always")
//   overhead           ← spec.overhead[resource]
//   gpu_count, vram_peak, model ← annotations vramd.io/gpu-count, vramd.io/vram-peak, vramd.io/model
//   disposable         ← annotation vramd.io/disposable
//   priority           ← spec.priority (a 32-bit integer)
//   priority_class     ← spec.priorityClassName (at most ledger::kMaxPriorityClassName bytes)
//   uid, ns, name      ← metadata
// Quantities are kept as text exactly as sent; a JSON number is accepted and
// turned into its decimal text (1073741824 → "1073741824"). Absent and null
// fields take their defaults; only metadata.name is required.
// Errors (kInvalidArgument, never an exception): text that is not JSON, a
// non-object, a missing name, or a field of the wrong JSON type; the message
// names the field ("spec.containers[1].resources.limits: expected object, got array").
Result<PodInfo> DecodePod(std::string_view json, const std::string& resource);

// Decodes one Node object: metadata name (required), uid, labels,
// annotations, resourceVersion. Errors as for DecodePod.
Result<NodeInfo> DecodeNode(std::string_view json);

}  // namespace vramd::kube
