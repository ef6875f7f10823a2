// Pod, Node and VramQueue decoding from an already parsed nlohmann::json
// value, shared by the public text decoders (vramd/kube/decode.h), list pages
// and watch events. Private to src/kube. None of these throw.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

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

// metadata.resourceVersion of an object or list; "" when absent or not a string.
std::string ResourceVersionOf(const nlohmann::json& obj);

// "namespace/name" (or "name", or "?") of an object, for log lines about an
// object that failed to decode.
std::string ObjectRef(const nlohmann::json& obj);

}  // namespace vramd::kube
