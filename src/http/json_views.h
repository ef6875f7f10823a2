// The JSON views the routes answer with (private to src/http): nlohmann's
// json stays inside this component.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "vramd/http/server.h"
#include "vramd/ledger/model.h"

namespace vramd::http {

// A reply with `j` as its JSON body.
Reply JsonReply(int status, const nlohmann::json& j);

// The JSON view of a node: vectors, the six metrics, per GPU and per pod.
// Ratios that are infinite are rendered as the string "+Inf".
// Per GPU also the peak rule's figures (ledger/fit.h): peak_bytes (P),
// victim_bytes (V) and burst_safe (PeakOk under `max_peak_ratio`).
nlohmann::json NodeView(const ledger::Node& node, int64_t now_ms, int64_t usage_max_age_ms,
                        double max_peak_ratio = 1.5);

}  // namespace vramd::http
