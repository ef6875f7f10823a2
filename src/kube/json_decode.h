// Pod, Node and VramQueue decoding from an already parsed nlohmann::json
// value, shared by the public text decoders (vramd/kube/decode.h), list pages
// and watch events. Private to src/kube. None of these throw.
#pragma once

#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "vramd/kube/kube_client.h"
#include "vramd/status.h"

namespace vramd::kube {

// See DecodePod / DecodeNode for the field mapping and the errors.
Result<PodInfo> PodFromJson(const nlohmann::json& obj, const std::string& resource);
Result<NodeInfo> NodeFromJson(const nlohmann::json& obj);
// See DecodeQueue: never fails; an unreadable name leaves `name` empty.
ledger::QueueSpec QueueFromJson(const nlohmann::json& obj);
// QueueFromJson for lists and watches: kInvalidArgument (the decode_error)
// when the object has no readable name, to be skipped with a warning.
Result<ledger::QueueSpec> QueueWithName(const nlohmann::json& obj);

// The fields of a decoded pod derived from the others: its gang (from
// `labels`, which a PodInfo does not keep, and its annotations), the spec's
// name, namespace and uid, and the vramd.io annotations the request reads.
// Every pod decoder ends with it.
void FinishPod(const std::map<std::string, std::string>& labels, PodInfo* pod);

// "2026-11-24T20:12:21Z", "2026-11-24T20:12:21.5+01:00": milliseconds since
// the epoch (fractions beyond milliseconds dropped); nullopt when malformed.
std::optional<int64_t> ParseRfc3339Ms(std::string_view s);

// metadata.resourceVersion of an object or list; "" when absent or not a string.
std::string ResourceVersionOf(const nlohmann::json& obj);

// "namespace/name" (or "name", or "?") of an object, for log lines about an
// object that failed to decode.
std::string ObjectRef(const nlohmann::json& obj);

}  // namespace vramd::kube
