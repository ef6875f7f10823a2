#include "http/json_views.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "vramd/ledger/enforcement.h"
#include "vramd/ledger/metrics.h"
#include "vramd/ledger/placement.h"

namespace vramd::http {
namespace {

using nlohmann::json;

json Ratio(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return v;
}

json VectorsJson(const ledger::Vectors& v) {
  ledger::SixMetrics m = ledger::ComputeMetrics(v);
  return json{{"capacity_bytes", v.capacity},
              {"allocated_bytes", v.allocated},
              {"used_bytes", v.used},
              {"metrics",
               {{"over_subscription", Ratio(m.over_subscription)},
                {"utilization", Ratio(m.utilization)},
                {"saturation", Ratio(m.saturation)},
                {"headroom_bytes", m.headroom},
                {"potential_bytes", m.potential},
                {"risk", Ratio(m.risk)}}}};
}

}  // namespace

Reply JsonReply(int status, const json& j) {
  Reply r;
  r.status = status;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

json NodeView(const ledger::Node& node, int64_t now_ms, int64_t usage_max_age_ms, double max_peak_ratio,
              const PodScope& scope) {
  std::vector<ledger::Vectors> vec = ledger::GpuVectors(node, now_ms, usage_max_age_ms);
  const std::vector<ledger::GpuPeak> peaks = ledger::GpuPeaks(node);
  json gpus = json::array();
  for (size_t i = 0; i < vec.size(); ++i) {
    const ledger::Gpu& g = node.gpus[i];
    json gj = VectorsJson(vec[i]);
    gj["index"] = g.index;
    gj["uuid"] = g.uuid;
    gj["usage_fresh"] = ledger::UsageFresh(g.used_ts_ms, now_ms, usage_max_age_ms);
    gj["usage_reported_ms"] = g.used_ts_ms;
    gj["peak_bytes"] = peaks[i].peak;
    gj["victim_bytes"] = peaks[i].victim;
    gj["burst_safe"] = ledger::BurstSafe(g.capacity, peaks[i], max_peak_ratio);
    // From the node agent's last report (0 and [] without one).
    gj["reported_total_bytes"] = g.total;
    gj["outside_pods_bytes"] = g.outside_pods;
    gj["untracked_bytes"] = g.untracked;
    // Why per-pod figures are empty, when the agent says it cannot have them.
    if (!g.processes_unavailable.empty()) gj["processes_unavailable"] = g.processes_unavailable;
    if (g.invalid_process_lists > 0) gj["invalid_process_lists"] = g.invalid_process_lists;
    // Issue 34: what enforces the pods' limits on this GPU, as its agent said.
    if (!g.enforcement.backend.empty()) {
      gj["enforcement"] = json{{"backend", g.enforcement.backend}, {"reason", g.enforcement.reason}};
    }
    json untracked = json::array();  // pods the agent saw that hold no VRAM here in the ledger
    for (const ledger::PodUsage& p : g.pods) {
      bool tracked = std::any_of(node.entries.begin(), node.entries.end(),
                                 [&](const ledger::Entry& e) { return e.pod_uid == p.uid; });
      if (!tracked) untracked.push_back(json{{"uid", scope.all ? json(p.uid) : json(nullptr)}, {"used_bytes", p.used}});
    }
    gj["untracked_pods"] = std::move(untracked);
    gpus.push_back(std::move(gj));
  }
  json pods = json::array();
  for (const ledger::Entry& e : node.entries) {
    // Whether the pod's VRAM is enforced, accounted only or failed (why);
    // null until the node's agent reports it (enforce.mode off, no agent).
    json enforcement = nullptr;
    if (e.state != ledger::EntryState::kHold) {
      if (std::optional<ledger::PodEnforcement> pe = ledger::PodEnforcementOn(node, e.pod_uid)) {
        // The worst over its GPUs, and each GPU's own state.
        json per_gpu = json::object();
        for (const ledger::Gpu& g : node.gpus) {
          for (const ledger::PodEnforcement& p : g.enforcement.pods) {
            if (p.uid == e.pod_uid) per_gpu[std::to_string(g.index)] = ledger::EnforceStateName(p.state);
          }
        }
        enforcement = json{{"state", ledger::EnforceStateName(pe->state)},
                           {"reason", pe->reason},
                           {"summary", ledger::DescribeEnforcement(*pe)},
                           {"gpus", std::move(per_gpu)}};
      }
    }
    if (!scope.Shows(e.ns)) {
      pods.push_back(json{{"hidden", true},
                          {"gpus", e.gpus},
                          {"vram_per_gpu_bytes", e.per_gpu},
                          {"peak_per_gpu_bytes", e.peak_per_gpu},
                          {"state", ledger::EntryStateName(e.state)},
                          {"priority", e.priority},
                          {"used_per_gpu_bytes", e.used},
                          {"enforcement", std::move(enforcement)}});
      continue;
    }
    pods.push_back(json{{"uid", e.pod_uid},
                        {"namespace", e.ns},
                        {"name", e.name},
                        {"gpus", e.gpus},
                        {"vram_per_gpu_bytes", e.per_gpu},
                        {"peak_per_gpu_bytes", e.peak_per_gpu},
                        {"model", e.model},
                        {"state", ledger::EntryStateName(e.state)},
                        {"created_ms", e.created_ms},
                        {"priority", e.priority},
                        {"priority_class", e.priority_class},
                        {"victim", e.victim},
                        {"used_per_gpu_bytes", e.used},
                        {"usage_reported_ms", e.used_ts_ms},
                        {"active_in_report", e.busy},
                        {"last_active_ms", e.last_active_ms},
                        {"idle_ttl_ms", e.idle_ttl_ms},
                        {"owner_kind", e.owner_kind},
                        {"owner_uid", e.owner_uid},
                        {"evictable", e.evictable},
                        {"gang", e.gang},
                        {"enforcement", std::move(enforcement)}});
  }
  json out = VectorsJson(ledger::SumVectors(vec));
  out["name"] = node.name;
  out["gpus"] = std::move(gpus);
  out["pods"] = std::move(pods);
  return out;
}

json QueuesView(std::span<const ledger::QueueStatus> statuses) {
  std::vector<const ledger::QueueStatus*> sorted;
  sorted.reserve(statuses.size());
  for (const ledger::QueueStatus& s : statuses) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  json arr = json::array();
  for (const ledger::QueueStatus* s : sorted) {
    arr.push_back(json{{"name", s->name},
                       {"parent", s->parent},
                       {"valid", s->valid},
                       {"reason", s->reason},
                       {"message", s->message},
                       {"deserved_bytes", s->deserved},
                       {"limit_bytes", s->limit ? json(*s->limit) : json(nullptr)},
                       {"weight", s->weight},
                       {"allocated_bytes", s->allocated},
                       {"allocated_nonpreemptible_bytes", s->allocated_nonpreemptible},
                       {"pending_bytes", s->pending},
                       {"fair_share_bytes", s->fair_share},
                       {"synthetic", s->synthetic}});
  }
  return json{{"queues", std::move(arr)}};
}

json QueueExplainView(const ledger::TenancyView& view, const ledger::Admission& admission, bool preemptible) {
  json out = {{"name", nullptr},         {"allocated_bytes", nullptr}, {"fair_share_bytes", nullptr},
              {"deserved_bytes", nullptr}, {"limit_bytes", nullptr},     {"preemptible", preemptible},
              {"admitted", admission.ok},  {"reason", admission.ok ? std::string() : admission.reason}};
  if (admission.queue < 0 || static_cast<size_t>(admission.queue) >= view.statuses.size()) return out;
  const ledger::QueueStatus& s = view.statuses[admission.queue];
  out["name"] = s.name;
  out["allocated_bytes"] = s.allocated;
  out["fair_share_bytes"] = s.fair_share;
  out["deserved_bytes"] = s.deserved;
  if (s.limit) out["limit_bytes"] = *s.limit;
  return out;
}

size_t CountJsonItems(std::string_view text, size_t stop_after) {
  size_t n = 1;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == ',' || c == ':' || c == '[' || c == '{') {
      if (++n > stop_after) return stop_after + 1;
    }
  }
  return n;
}

}  // namespace vramd::http
