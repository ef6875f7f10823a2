// The JSON views the routes answer with (private to src/http): nlohmann's
// json stays inside this component.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "vramd/http/server.h"
#include "vramd/ledger/model.h"
#include "vramd/ledger/queues.h"

namespace vramd::http {

// A reply with `j` as its JSON body. Text that is not UTF-8 (a name from the
// cluster) is written with U+FFFD in place of the bad bytes, never a throw.
Reply JsonReply(int status, const nlohmann::json& j);

// Which pods a reader may see by name (issue 33): all, or those of the
// namespaces `visible` accepts. A hidden pod keeps its figures and loses its
// namespace, name, UID and owner ("hidden": true); the UIDs of pods the
// ledger does not track (their namespace is unknown) are shown to `all` only.
struct PodScope {
  bool all = true;
  std::function<bool(const std::string& ns)> visible;
  bool Shows(const std::string& ns) const { return all || (visible && visible(ns)); }
};

// The JSON view of a node: vectors, the six metrics, per GPU and per pod.
// Ratios that are infinite are rendered as the string "+Inf".
// Per GPU also the peak rule's figures (ledger/fit.h): peak_bytes (P),
// victim_bytes (V) and burst_safe (PeakOk under `max_peak_ratio`).
nlohmann::json NodeView(const ledger::Node& node, int64_t now_ms, int64_t usage_max_age_ms,
                        double max_peak_ratio = 1.5, const PodScope& scope = {});

// GET /v1/queues: {"queues": [{"name", "parent", "valid", "reason",
// "message", "deserved_bytes", "limit_bytes" (null: no limit), "weight",
// "allocated_bytes", "allocated_nonpreemptible_bytes", "pending_bytes",
// "fair_share_bytes", "synthetic"}, ...]}, sorted by name.
nlohmann::json QueuesView(std::span<const ledger::QueueStatus> statuses);

// /v1/explain's "queue": {"name", "allocated_bytes", "fair_share_bytes",
// "deserved_bytes", "limit_bytes" (null: no limit), "preemptible",
// "admitted", "reason" ("" when admitted)} for the pod's queue as `view`
// sees it and `admission` (ledger::AdmitToQueue) judged. A pod with no
// queue (admission.queue -1, or an index `view.statuses` does not have)
// has a null name and null figures.
nlohmann::json QueueExplainView(const ledger::TenancyView& view, const ledger::Admission& admission,
                                bool preemptible);

// At least as many as the values and object keys a parser makes of `text`
// (one, plus each ',', ':', '[' and '{' outside strings), so that a body's
// tree can be bounded before it is built: nlohmann's takes 90 to 160 bytes
// a value whatever the text (37 times the size of "[[[[...]]]]"). Counting
// stops once past `stop_after` (the result is then stop_after + 1). Any
// text, JSON or not.
size_t CountJsonItems(std::string_view text, size_t stop_after);

}  // namespace vramd::http
