// Decoding Kubernetes Pod, Node and VramQueue objects (API JSON, camelCase)
// into the small structs vramd keeps, and encoding a VramQueue's status
// patch. Used by the REST client for gets, lists and watches, and usable by
// anything else that holds such an object as JSON text.
#pragma once

#include <string>
#include <string_view>

#include "vramd/kube/kube_client.h"
#include "vramd/ledger/queues.h"
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

// Decodes one VramQueue object (group vramd.io, v1alpha1). The object is
// untrusted: any JSON may come from the cluster (another tool's object, an
// older CRD, no CRD schema at all), so this never throws and never fails;
// whatever is wrong lands in QueueSpec::decode_error ("" when the object is
// good), one message per wrong field, each naming the field, joined by "; ".
//   name              ← metadata.name, a DNS subdomain (<= 253 bytes). A name
//                       that is not (the API server lets most names through
//                       for a custom resource) is kept, with a decode error.
//                       Without a readable name (absent, not a string, empty,
//                       longer than 253 bytes, '/', '%' or control characters),
//                       `name` stays "" and decode_error says why: the caller
//                       skips such an object (lists and watches log a warning);
//   uid               ← metadata.uid (a string);
//   created_ms        ← metadata.creationTimestamp (RFC 3339, "Z" or an
//                       offset, fractions of a second allowed), 0 when absent;
//   parent            ← spec.parent, "" or a DNS subdomain (a queue's name);
//   namespaces        ← spec.namespaces, DNS labels (<= 63 bytes), at most
//                       ledger::kMaxQueueNamespaces entries; a repeated one
//                       is kept once (first occurrence, order kept);
//   deserved          ← spec.deserved, required: a quantity ("16Gi") or a
//                       JSON integer of bytes, 0..ledger::kMaxQueueBytes;
//   limit             ← spec.limit, optional (absent or null: no limit), the
//                       same form and range;
//   weight            ← spec.overQuotaWeight, an integer 0..kMaxQueueWeight,
//                       1 when absent or null.
// A JSON number with a fraction is an integer only when it is whole ("2.0").
// Unknown fields are ignored. A deserved quota above the limit is not a
// decode error (ledger::BuildQueueSet judges the queue).
ledger::QueueSpec DecodeQueue(std::string_view object_json);

// The JSON merge-patch (application/merge-patch+json) of a VramQueue's status
// subresource for `st`, as KubeClient::PatchQueueStatus sends it:
//   {"status":{"deserved":"16Gi","limit":"32Gi","allocated":"12Gi",
//    "fairShare":"20Gi","pending":"8Gi","allocatedBytes":N,
//    "fairShareBytes":N,"pendingBytes":N,
//    "conditions":[{"type":"Valid","status":"True"|"False","reason":…,
//                   "message":…,"lastTransitionTime":transition_time}]}}
// Quantities are ledger::FormatBytes text (for `kubectl get vq`; one decimal
// where not exact), the *Bytes fields exact. Without a limit, "limit" is
// null, which a merge patch turns into "no such field" (an earlier limit is
// removed). reason is st.reason ("Valid" or "Invalid" when empty); the
// message is cut to 4 KiB (whole UTF-8 characters); an empty message or
// transition time is left out (kube-apiserver 1.20 turns "" in a patch into
// null, which the schema's string type refuses; the conditions array is
// replaced whole, so nothing stale remains). Bytes that are not UTF-8 become
// U+FFFD: the body is always valid JSON.
std::string QueueStatusPatch(const ledger::QueueStatus& st, std::string_view transition_time);

}  // namespace vramd::kube
