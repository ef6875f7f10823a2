// Turning Kubernetes API answers into vramd Status values. Private to src/kube.
#pragma once

#include <string>
#include <string_view>

#include "vramd/status.h"

namespace vramd::kube {

// The `message` of a Kubernetes Status body ({"kind":"Status","message":…});
// otherwise a short printable excerpt of the body (at most 300 bytes); "" for
// an empty body.
std::string ApiMessage(std::string_view body);

// ApiMessage, followed by the messages of the Status's details.causes when it
// lists any: "<message> (<cause>; <cause>)". An eviction refused by a
// PodDisruptionBudget names the budget only in a cause.
std::string ApiMessageWithCauses(std::string_view body);

// Maps a non-2xx HTTP status (or a watch ERROR event's code) to a Status.
// `what` names the call ("bind default/p to n1"); the message reads
// "<what>: HTTP <code>[ (hint)]: <api message>", except for 410, whose message
// starts with "410 Gone: ". Codes: 404 kNotFound; 409, 410 kConflict;
// 400, 422 kInvalidArgument; 401, 403 kInternal (hint: RBAC / credentials);
// 429, 5xx kUnavailable; anything else kInternal.
Status StatusFromHttp(int http_status, std::string_view what, std::string_view api_message);

}  // namespace vramd::kube
