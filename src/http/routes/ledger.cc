// The ledger's /v1 views: GET /v1/nodes[/{node}], GET|POST /v1/explain (would
// this pod fit, per node, and why not; its queue), GET /v1/queues,
// PUT /v1/nodes/{node}/usage.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include <spdlog/spdlog.h>

#include "http/json_views.h"
#include "vramd/http/routes.h"
#include "vramd/kube/decode.h"
#include "vramd/ledger/enforcement.h"
#include "vramd/ledger/fit.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/quantity.h"
#include "vramd/ledger/queues.h"
#include "vramd/parse.h"

namespace vramd::http {

using nlohmann::json;

namespace {

// The old report: {"gpus": {"<index>": bytes or quantity string}}.
Result<ledger::UsageReport> DecodeOldUsage(const json& g) {
  if (g.empty()) return InvalidArgument("gpus must be a non-empty object of index -> bytes");
  ledger::UsageReport out;
  out.version = 1;
  for (auto it = g.begin(); it != g.end(); ++it) {
    const std::string& k = it.key();
    std::optional<int> parsed = k.size() > 4 ? std::nullopt : ParseSmallInt(k, 9999);
    if (!parsed) return InvalidArgument("GPU index \"" + k.substr(0, 16) + "\" is not a whole number");
    int64_t bytes = 0;
    if (it->is_number_integer()) {  // signed or unsigned
      // 2^63..2^64-1 parse as unsigned: read as int64_t they look negative.
      if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return InvalidArgument("usage of GPU " + k + " is larger than 2^63-1 bytes");
      }
      if (!it->is_number_unsigned() && it->get<int64_t>() < 0) {
        return InvalidArgument("usage of GPU " + k + " is negative");
      }
      bytes = it->get<int64_t>();
    } else if (it->is_string()) {
      Result<int64_t> b = ledger::ParseBytes(it->get<std::string>());
      if (!b.ok()) return InvalidArgument("usage of GPU " + k + ": " + b.status().message());
      bytes = *b;
    } else {
      return InvalidArgument("usage of GPU " + k + " must be a byte count or a quantity string");
    }
    ledger::GpuUsage u;
    u.index = *parsed;
    u.used = bytes;
    out.gpus.push_back(std::move(u));
  }
  std::sort(out.gpus.begin(), out.gpus.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  for (size_t i = 1; i < out.gpus.size(); ++i) {
    if (out.gpus[i - 1].index == out.gpus[i].index) {
      return InvalidArgument("GPU index " + std::to_string(out.gpus[i].index) + " is given more than once");
    }
  }
  return out;
}

// A whole number of bytes from 0 to 2^63-1 (the ledger's bounds are checked after).
Result<int64_t> Bytes(const json& v, const std::string& what) {
  if (!v.is_number_integer()) {
    return InvalidArgument(what + " must be a whole number of bytes" +
                           (v.is_number_float() ? " (not a fraction, exponent or NaN)" : ""));
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return InvalidArgument(what + " is larger than 2^63-1 bytes");
  }
  const int64_t b = v.get<int64_t>();
  if (!v.is_number_unsigned() && b < 0) return InvalidArgument(what + " is negative");
  return b;
}

// An optional string member of at most `max` characters ("" when absent).
Result<std::string> OptString(const json& obj, const char* key, const std::string& where, size_t max) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return InvalidArgument(where + std::string(key) + " must be a string");
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() > max) return InvalidArgument(where + std::string(key) + " is longer than " + std::to_string(max));
  return s;
}

// A GPU's "enforcement" (issue 34): {"backend": "dmem"|"nvml"|"none",
// "reason": "...", "pods": [{"uid", "state", "reason"}]}; the pods are
// sorted here, CheckUsageReport checks the rest.
Status DecodeEnforcement(const json& e, const std::string& where, ledger::GpuEnforcement* out, size_t* figures) {
  if (!e.is_object()) return InvalidArgument(where + "enforcement must be an object {backend, reason, pods}");
  Result<std::string> backend = OptString(e, "backend", where + "enforcement.", 16);
  if (!backend.ok()) return backend.status();
  Result<std::string> reason = OptString(e, "reason", where + "enforcement.", ledger::kMaxEnforceReason);
  if (!reason.ok()) return reason.status();
  out->backend = std::move(*backend);
  out->reason = std::move(*reason);
  auto pods = e.find("pods");
  if (pods == e.end() || pods->is_null()) return Status::Ok();
  if (!pods->is_array()) return InvalidArgument(where + "enforcement.pods must be an array");
  *figures += pods->size();
  if (*figures > ledger::kMaxReportPodFigures) {
    return InvalidArgument("the report has more than " + std::to_string(ledger::kMaxReportPodFigures) +
                           " per-pod figures");
  }
  for (const json& p : *pods) {
    if (!p.is_object()) return InvalidArgument(where + "each of enforcement.pods must be an object {uid, state, reason}");
    Result<std::string> uid = OptString(p, "uid", where + "enforcement pod ", 64);
    if (!uid.ok()) return uid.status();
    Result<std::string> state = OptString(p, "state", where + "enforcement pod " + *uid + " ", 16);
    if (!state.ok()) return state.status();
    ledger::PodEnforcement pe;
    pe.uid = std::move(*uid);
    if (!ledger::ParseEnforceState(*state, &pe.state)) {
      return InvalidArgument(where + "enforcement pod " + pe.uid.substr(0, 40) +
                             ": state must be enforced, dry-run, accounted or failed");
    }
    Result<std::string> why = OptString(p, "reason", where + "enforcement pod " + pe.uid.substr(0, 40) + " ",
                                        ledger::kMaxEnforceReason);
    if (!why.ok()) return why.status();
    pe.reason = std::move(*why);
    out->pods.push_back(std::move(pe));
  }
  std::sort(out->pods.begin(), out->pods.end(), [](const auto& a, const auto& b) { return a.uid < b.uid; });
  return Status::Ok();
}

// The agent's report: {"version": 2, "gpus": [{...}, ...]}.
Result<ledger::UsageReport> DecodeReportV2(const json& j) {
  ledger::UsageReport out;
  if (auto v = j.find("version"); v != j.end()) {
    if (!v->is_number_integer() || v->get<int64_t>() != 2) {
      return InvalidArgument("version must be 2 when gpus is an array (the old report has gpus as an object)");
    }
  }
  Result<std::string> agent = OptString(j, "agent", "", 128);
  if (!agent.ok()) return agent.status();
  Result<std::string> source = OptString(j, "source", "", 64);
  if (!source.ok()) return source.status();
  out.agent = std::move(*agent);
  out.source = std::move(*source);
  const json& gpus = j["gpus"];
  if (gpus.empty()) return InvalidArgument("gpus must be a non-empty array of GPU objects");
  if (gpus.size() > static_cast<size_t>(ledger::kMaxReportGpus)) {
    return InvalidArgument("the report names more than " + std::to_string(ledger::kMaxReportGpus) + " GPUs");
  }
  out.gpus.reserve(gpus.size());
  size_t figures = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const json& g = gpus[i];
    std::string where = "gpus[" + std::to_string(i) + "]";
    if (!g.is_object()) return InvalidArgument(where + " must be an object");
    ledger::GpuUsage u;
    auto idx = g.find("index");
    if (idx == g.end() || !idx->is_number_integer() || idx->get<int64_t>() < 0 ||
        idx->get<int64_t>() > ledger::kMaxReportGpuIndex) {
      return InvalidArgument(where + ".index must be a whole number from 0 to " +
                             std::to_string(ledger::kMaxReportGpuIndex));
    }
    u.index = static_cast<int>(idx->get<int64_t>());
    where = "GPU " + std::to_string(u.index) + ": ";
    for (const auto& [key, field, required] :
         {std::tuple{"total_bytes", &u.total, true}, std::tuple{"used_bytes", &u.used, true},
          std::tuple{"outside_pods_bytes", &u.outside_pods, false}}) {
      auto f = g.find(key);
      if (f == g.end() || f->is_null()) {
        if (required) return InvalidArgument(where + key + " is required");
        continue;
      }
      Result<int64_t> b = Bytes(*f, where + key);
      if (!b.ok()) return b.status();
      *field = *b;
    }
    if (u.total == 0) return InvalidArgument(where + "total_bytes must be above 0");
    Result<std::string> uuid = OptString(g, "uuid", where, ledger::kMaxUuidLength);
    if (!uuid.ok()) return uuid.status();
    u.uuid = std::move(*uuid);
    if (Result<std::string> name = OptString(g, "name", where, 256); !name.ok()) return name.status();
    if (auto mig = g.find("mig"); mig != g.end() && !mig->is_boolean() && !mig->is_null()) {
      return InvalidArgument(where + "mig must be true or false");
    }
    if (auto util = g.find("utilization_percent"); util != g.end() && !util->is_null()) {
      // Informational (the agent already folds it into its pods' "active").
      if (!util->is_number_integer() || util->get<int64_t>() < 0 || util->get<int64_t>() > 100) {
        return InvalidArgument(where + "utilization_percent must be a whole number from 0 to 100");
      }
    }
    Result<std::string> unavailable = OptString(g, "processes_unavailable", where, ledger::kMaxUnavailableReason);
    if (!unavailable.ok()) return unavailable.status();
    u.processes_unavailable = std::move(*unavailable);
    if (auto n = g.find("invalid_process_lists"); n != g.end() && !n->is_null()) {
      if (!n->is_number_integer() || n->get<int64_t>() < 0) {
        return InvalidArgument(where + "invalid_process_lists must be a whole number from 0");
      }
      u.invalid_process_lists = n->get<int64_t>();
    }
    if (auto pods = g.find("pods"); pods != g.end() && !pods->is_null()) {
      if (!pods->is_array()) return InvalidArgument(where + "pods must be an array");
      figures += pods->size();
      if (figures > ledger::kMaxReportPodFigures) {
        return InvalidArgument("the report has more than " + std::to_string(ledger::kMaxReportPodFigures) +
                               " per-pod figures");
      }
      u.pods.reserve(pods->size());
      for (const json& p : *pods) {
        if (!p.is_object()) return InvalidArgument(where + "each of pods must be an object {uid, used_bytes}");
        auto uid = p.find("uid");
        if (uid == p.end() || !uid->is_string()) return InvalidArgument(where + "a pod's uid must be a string");
        auto used = p.find("used_bytes");
        if (used == p.end()) return InvalidArgument(where + "a pod's used_bytes is required");
        const std::string& uid_text = uid->get_ref<const std::string&>();
        Result<int64_t> b = Bytes(*used, where + "used_bytes of pod " + uid_text.substr(0, 40));
        if (!b.ok()) return b.status();
        bool active = false;
        if (auto a = p.find("active"); a != p.end() && !a->is_null()) {
          if (!a->is_boolean()) return InvalidArgument(where + "active of pod " + uid_text.substr(0, 40) + " must be true or false");
          active = a->get<bool>();
        }
        u.pods.push_back({uid_text, *b, active});
      }
    }
    if (auto e = g.find("enforcement"); e != g.end() && !e->is_null()) {
      Status s = DecodeEnforcement(*e, where, &u.enforcement, &figures);
      if (!s.ok()) return s;
    }
    out.gpus.push_back(std::move(u));
  }
  std::sort(out.gpus.begin(), out.gpus.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  return out;
}

}  // namespace

Result<ledger::UsageReport> DecodeUsageReport(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("body is not valid JSON");
  if (!j.is_object() || !j.contains("gpus")) {
    return InvalidArgument(
        "body must be {\"version\": 2, \"gpus\": [{\"index\", \"total_bytes\", \"used_bytes\", ...}]} or the old "
        "{\"gpus\": {\"<index>\": <bytes or quantity>, ...}}");
  }
  const json& g = j["gpus"];
  Result<ledger::UsageReport> out = g.is_array()    ? DecodeReportV2(j)
                                    : g.is_object() ? DecodeOldUsage(g)
                                                    : Result<ledger::UsageReport>(InvalidArgument(
                                                          "gpus must be an array of GPU objects (or, in the old "
                                                          "report, a non-empty object of index -> bytes)"));
  if (!out.ok()) return out;
  if (Status s = ledger::CheckUsageReport(*out); !s.ok()) return s;
  return out;
}

// Issue 34: what the node's agent is to apply, in the answer to its report:
// {"mode": "off"|"dry-run"|"on", "limits": [{"uid", "index", "soft", "hard"}]}
// (ledger::DesiredLimits of the node as this replica's watched snapshot has
// it; none for a node not in the ledger, or with mode off).
static json EnforceOrders(const ledger::Node* n, ledger::EnforceMode mode) {
  json limits = json::array();
  if (n != nullptr && mode != ledger::EnforceMode::kOff) {
    for (const ledger::PodLimit& l : ledger::DesiredLimits(*n)) {
      limits.push_back(json{{"uid", l.uid}, {"index", l.index}, {"soft", l.soft}, {"hard", l.hard}});
    }
  }
  return json{{"mode", ledger::EnforceModeName(mode)}, {"limits", std::move(limits)}};
}

// A Warning Event on each pod the report says enforcement failed for, when
// the node's previous report did not (one Event per failure, not per pass);
// at most kMaxEnforcementEvents per report. A pod without an entry here is
// not vramd's to speak of.
static void PostEnforcementFailures(kube::KubeClient& kube, const ledger::Node& before,
                                    const ledger::UsageReport& report) {
  constexpr int kMaxEnforcementEvents = 5;
  int posted = 0;
  for (const ledger::GpuUsage& g : report.gpus) {
    for (const ledger::PodEnforcement& p : g.enforcement.pods) {
      if (p.state != ledger::EnforceState::kFailed || posted >= kMaxEnforcementEvents) continue;
      std::optional<ledger::PodEnforcement> was = ledger::PodEnforcementOn(before, p.uid);
      if (was && was->state == ledger::EnforceState::kFailed) continue;
      auto e = std::find_if(before.entries.begin(), before.entries.end(),
                            [&](const ledger::Entry& x) { return x.pod_uid == p.uid; });
      if (e == before.entries.end() || e->state == ledger::EntryState::kHold) continue;
      kube::PodInfo pod;
      pod.name = e->name;
      pod.ns = e->ns;
      pod.uid = e->pod_uid;
      ++posted;
      Status s = kube.PostPodEvent(pod, "Warning", "VramEnforcementFailed",
                                   "vramd-agent on " + before.name + " could not enforce this pod's VRAM limit on GPU " +
                                       std::to_string(g.index) + " (" + g.enforcement.backend + "): " + p.reason);
      if (!s.ok()) spdlog::warn("event for pod {}/{}: {}", pod.ns, pod.name, s.message());
    }
  }
}

// Where a node agent's fresh report exists: what the pods on the node hold
// (their reported usage, largest first) and what no tracked pod explains
// (untracked pods, processes outside pods) — why U may be above A. Null
// without such a report.
static json PodUsageView(const ledger::Node& n, int64_t now, int64_t usage_max_age_ms, const PodScope& scope) {
  json gpus = json::array();
  for (const ledger::Gpu& g : n.gpus) {
    if (g.total == 0 || !ledger::UsageFresh(g.used_ts_ms, now, usage_max_age_ms)) continue;
    gpus.push_back(json{{"gpu", g.index},
                        {"used_bytes", g.used},
                        {"untracked_bytes", g.untracked},
                        {"outside_pods_bytes", g.outside_pods}});
  }
  if (gpus.empty()) return nullptr;
  std::vector<const ledger::Entry*> entries;
  for (const ledger::Entry& e : n.entries) {
    if (ledger::UsageFresh(e.used_ts_ms, now, usage_max_age_ms)) entries.push_back(&e);
  }
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->used > b->used; });
  json pods = json::array();
  for (const ledger::Entry* e : entries) {
    if (!scope.Shows(e->ns)) {
      pods.push_back(json{{"hidden", true}, {"vram_per_gpu_bytes", e->per_gpu}, {"used_per_gpu_bytes", e->used}});
      continue;
    }
    pods.push_back(json{{"namespace", e->ns},
                        {"name", e->name},
                        {"vram_per_gpu_bytes", e->per_gpu},
                        {"used_per_gpu_bytes", e->used}});
  }
  return json{{"gpus", std::move(gpus)}, {"pods", std::move(pods)}};
}

using TenancyFn = std::function<std::optional<ledger::TenancyView>()>;

// The pod's queue, when queues are on and VramQueue objects exist: would the
// queue admit the pod now (ledger::AdmitToQueue, as filter asks it, with
// nothing of its own counted), and where the queue stands. Null otherwise
// (queues off, no objects, or the queue state unreadable now).
static json ExplainQueue(const ledger::VramRequest& req, const std::string& ns, const TenancyFn& tenancy) {
  if (!tenancy) return nullptr;
  std::optional<ledger::TenancyView> view = tenancy();
  if (!view || view->set == nullptr || view->set->empty()) return nullptr;
  if (view->usage.size() != view->set->queues.size()) return nullptr;  // not a computed view
  const bool preemptible = ledger::IsPreemptible(req.priority, req.priority_class, req.victim, view->policy);
  ledger::Admission a = ledger::AdmitToQueue(*view->set, view->usage, ns, req.total, preemptible, 0);
  return QueueExplainView(*view, a, preemptible);
}

// Filter's grouped reasons over the nodes where the pod does not fit, most
// nodes first: what kube-scheduler's event says when it asks about them all
// ("0/N nodes are available: 2500 no GPU with 38Gi free (best: 10Gi), ...").
static json GroupedReasons(const ledger::FilterResult& r) {
  std::map<std::string_view, int> counts;
  for (const auto& [node, why] : r.failed) ++counts[why];
  for (const auto& [node, why] : r.unresolvable) ++counts[why];
  std::vector<std::pair<std::string_view, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  json arr = json::array();
  for (const auto& [why, n] : sorted) arr.push_back(json{{"nodes", n}, {"reason", why}});
  return arr;
}

// Per node of the ledger: would this pod fit now, and if not, why (the
// node's own figures); and the grouped reasons Filter gives.
static http::Reply Explain(const kube::PodInfo& pod, store::LedgerStore* store, const ledger::Policy& policy,
                           int64_t usage_max_age_ms, int64_t now, const TenancyFn& tenancy, const PodScope& scope) {
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(pod.spec, policy.victim_classes);
  json out = {{"pod", {{"namespace", pod.ns}, {"name", pod.name}, {"uid", pod.uid}}}};
  if (!req.ok()) {
    out["error"] = "invalid VRAM request: " + req.status().message();
    return JsonReply(200, out);
  }
  out["request"] = {{"total_bytes", req->total},
                    {"gpu_count", req->gpu_count},
                    {"per_gpu_bytes", req->per_gpu},
                    {"peak_per_gpu_bytes", req->peak_per_gpu},
                    {"model", req->model}};
  if (!pod.node_name.empty()) out["bound_to"] = pod.node_name;
  if (json q = ExplainQueue(*req, pod.ns, tenancy); !q.is_null()) out["queue"] = std::move(q);
  Result<ledger::SnapshotPtr> snap = store->Snapshot();
  if (!snap.ok()) return http::ErrorReply(503, "VRAM ledger unavailable: " + snap.status().message());
  std::vector<const ledger::Node*> nodes;
  for (const auto& [name, n] : (*snap)->nodes) nodes.push_back(&n);
  std::sort(nodes.begin(), nodes.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::vector<std::string_view> names;
  for (const ledger::Node* n : nodes) names.push_back(n->name);
  std::vector<ledger::HostScore> scores = ledger::Prioritize(**snap, names, *req, policy, now);
  json arr = json::array();
  int fits = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    ledger::NodeDecision d = ledger::DecideNode(nodes[i], nodes[i]->name, *req, policy, now);
    json row = {{"node", nodes[i]->name}};
    switch (d.verdict) {
      case ledger::Verdict::kFits:
        ++fits;
        row["verdict"] = "fits";
        row["gpus"] = d.choice.gpus;
        row["score"] = scores[i].score;
        break;
      case ledger::Verdict::kNoRoomNow:
        row["verdict"] = "no_room_now";
        row["reason"] = d.reason;
        if (json usage = PodUsageView(*nodes[i], now, usage_max_age_ms, scope); !usage.is_null()) row["usage"] = usage;
        break;
      case ledger::Verdict::kUnresolvable:
        row["verdict"] = "never_fits";
        row["reason"] = d.reason;
        break;
    }
    arr.push_back(std::move(row));
  }
  out["fits_on"] = fits;
  out["reasons"] = GroupedReasons(ledger::Filter(**snap, names, *req, policy, now));
  out["nodes"] = std::move(arr);
  return JsonReply(200, out);
}

// POST /v1/explain: a Pod object. Kubernetes keeps a pod's annotations
// under 256 KiB; a pod's JSON has about one value or key per 10 bytes (the
// extender fixtures: 1.7-3.2 KB pods with 170-350), so 512
// KiB of it stays under 65,536. nlohmann's tree of that many takes up to
// ~10 MiB (distinct keys of empty objects, measured), so 2 requests at once
// per listener.
constexpr size_t kExplainMaxBodyBytes = 512 << 10;
constexpr size_t kExplainMaxJsonItems = 65536;
constexpr int kExplainMaxConcurrent = 2;

// The caller's PodScope: everything for the shared token or with identities
// off; for an identity, the namespaces where it may get pods (cluster-wide
// when it may get them everywhere), each asked once per request.
static PodScope ScopeOf(const std::shared_ptr<Authenticator>& auth, const Caller& who) {
  if (auth->PodsVisible(who, "")) return PodScope{};
  auto seen = std::make_shared<std::map<std::string, bool>>();
  return PodScope{.all = false, .visible = [auth, who, seen](const std::string& ns) {
                    auto it = seen->find(ns);
                    if (it == seen->end()) it = seen->emplace(ns, auth->PodsVisible(who, ns)).first;
                    return it->second;
                  }};
}

// Identify and MayRead; nullopt with `*refused` set when the caller may not read.
static std::optional<PodScope> ReaderScope(const std::shared_ptr<Authenticator>& auth, const http::Request& r,
                                           http::Reply* refused, Caller* caller = nullptr) {
  Result<Caller> who = auth->Identify(r.authorization);
  if (!who.ok()) {
    *refused = AuthErrorReply(who.status());
    return std::nullopt;
  }
  if (Verdict v = MayRead(auth->options(), *who); !v.allowed()) {
    *refused = http::ErrorReply(v.status, v.message);
    return std::nullopt;
  }
  if (caller != nullptr) *caller = *who;
  return ScopeOf(auth, *who);
}

static std::shared_ptr<Authenticator> AuthOf(const ApiServices& svc) {
  if (svc.auth) return svc.auth;
  return std::make_shared<Authenticator>(SharedTokenOnly(svc.api_token), nullptr, svc.clock);
}

void RegisterLedgerRoutes(Server& server, const ApiServices& svc) {
  std::shared_ptr<Authenticator> auth = AuthOf(svc);
  store::LedgerStore* store = svc.store;
  const Clock* clock = svc.clock;
  int64_t max_age = svc.usage_max_age_ms;
  const double ratio = svc.policy.max_peak_ratio;  // burst_safe (ledger::BurstSafe)
  server.Route("GET", "/v1/nodes", "v1_nodes", [auth, store, clock, max_age, ratio](const http::Request& r) {
    http::Reply refused;
    std::optional<PodScope> scope = ReaderScope(auth, r, &refused);
    if (!scope) return refused;
    Result<ledger::SnapshotPtr> snap = store->Snapshot();
    if (!snap.ok()) return http::ErrorReply(503, "VRAM ledger unavailable: " + snap.status().message());
    std::vector<const ledger::Node*> nodes;
    for (const auto& [name, n] : (*snap)->nodes) nodes.push_back(&n);
    std::sort(nodes.begin(), nodes.end(), [](auto* a, auto* b) { return a->name < b->name; });
    json arr = json::array();
    int64_t now = clock->NowMs();
    for (const ledger::Node* n : nodes) arr.push_back(NodeView(*n, now, max_age, ratio, *scope));
    return JsonReply(200, json{{"epoch", (*snap)->epoch}, {"nodes", std::move(arr)}});
  });
  server.Route("GET", "/v1/nodes/{node}", "v1_node", [auth, store, clock, max_age, ratio](const http::Request& r) {
    http::Reply refused;
    std::optional<PodScope> scope = ReaderScope(auth, r, &refused);
    if (!scope) return refused;
    Result<ledger::SnapshotPtr> snap = store->Snapshot();
    if (!snap.ok()) return http::ErrorReply(503, "VRAM ledger unavailable: " + snap.status().message());
    const ledger::Node* n = (*snap)->Find(r.params.at("node"));
    if (n == nullptr) return http::ErrorReply(404, "node " + r.params.at("node") + " is not in the ledger");
    return JsonReply(200, NodeView(*n, clock->NowMs(), max_age, ratio, *scope));
  });

  TenancyFn tenancy = svc.tenancy;
  server.Route("GET", "/v1/queues", "v1_queues", [tenancy](const http::Request&) {
    if (!tenancy) return http::ErrorReply(404, "queues are off (no VramQueue support in this deployment)");
    std::optional<ledger::TenancyView> view = tenancy();
    if (!view) return http::ErrorReply(503, "the queues cannot be read now (VramQueue watch or ledger not ready)");
    return JsonReply(200, QueuesView(view->statuses));
  });

  kube::KubeClient* kube = svc.kube;
  std::string resource = svc.resource_name;
  ledger::Policy policy = svc.policy;
  server.Route("GET", "/v1/explain", "v1_explain", [=](const http::Request& r) {
    auto ns = r.query.find("namespace");
    auto name = r.query.find("pod");
    if (name == r.query.end() || name->second.empty()) {
      return http::ErrorReply(400, "use GET /v1/explain?namespace=NS&pod=NAME, or POST a Pod object");
    }
    if (kube == nullptr) return http::ErrorReply(400, "standalone mode: POST the Pod object to /v1/explain");
    http::Reply refused;
    Caller who;
    std::optional<PodScope> scope = ReaderScope(auth, r, &refused, &who);
    if (!scope) return refused;
    const std::string pod_ns = ns == r.query.end() ? "default" : ns->second;
    // vramd reads the pod with its own right only for a caller who may read
    // it too (no confused deputy): its namespace's pods, or that one pod (an
    // RBAC rule with resourceNames).
    if (!scope->Shows(pod_ns) && !auth->PodVisible(who, pod_ns, name->second)) {
      return http::ErrorReply(403, "you may not get pods in namespace " + pod_ns + ", so vramd explains none there");
    }
    Result<kube::PodInfo> pod = kube->GetPod(pod_ns, name->second);
    if (!pod.ok()) {
      return http::ErrorReply(pod.status().code() == Code::kNotFound ? 404 : 503, pod.status().message());
    }
    return Explain(*pod, store, policy, max_age, clock->NowMs(), tenancy, *scope);
  });
  // POST /v1/explain needs a reader's credential only when identities are
  // on (the other pods it names are scoped as GET's), and its body is decoded into a JSON
  // tree (kube::DecodePod): the body, the tree and the requests decoded at
  // once are bounded (kExplain*), so that no client can make vramd hold more
  // than a few MiB for it (issue 30).
  server.Route(
      "POST", "/v1/explain", "v1_explain",
      [=](const http::Request& r) {
        if (CountJsonItems(r.body, kExplainMaxJsonItems) > kExplainMaxJsonItems) {
          return http::ErrorReply(413, "body has more than " + std::to_string(kExplainMaxJsonItems) +
                                           " JSON values and keys; a Pod object has far fewer");
        }
        http::Reply refused;
        std::optional<PodScope> scope = ReaderScope(auth, r, &refused);
        if (!scope) return refused;
        Result<kube::PodInfo> pod = kube::DecodePod(r.body, resource);
        if (!pod.ok()) return http::ErrorReply(400, "body must be a Pod object: " + pod.status().message());
        return Explain(*pod, store, policy, max_age, clock->NowMs(), tenancy, *scope);
      },
      RouteLimits{.max_body_bytes = kExplainMaxBodyBytes, .max_concurrent = kExplainMaxConcurrent});

  auto in_cluster = svc.node_in_cluster;
  auto enforce_mode = svc.enforce_mode;
  server.Route("PUT", "/v1/nodes/{node}/usage", "v1_usage", [auth, store, in_cluster, enforce_mode, kube](const http::Request& r) {
    const std::string& name = r.params.at("node");
    Result<Caller> who = auth->Identify(r.authorization);
    if (!who.ok()) return AuthErrorReply(who.status());
    if (Verdict v = MayReportUsage(auth->options(), *who, name); !v.allowed()) {
      return http::ErrorReply(v.status, v.message);
    }
    Result<ledger::UsageReport> report = DecodeUsageReport(r.body);
    if (!report.ok()) return http::ErrorReply(400, report.status().message());
    // The watched view is enough to refuse early; the store's script checks
    // the node and its GPUs again atomically.
    Result<ledger::SnapshotPtr> snap = store->WatchedSnapshot();
    if (!snap.ok()) return http::ErrorReply(503, "VRAM ledger unavailable: " + snap.status().message());
    const ledger::Node* n = (*snap)->Find(name);
    bool cluster = false;
    if (n != nullptr) {
      if (Status s = ledger::CheckReportAgainstNode(*report, *n); !s.ok()) return http::ErrorReply(400, s.message());
    } else if (in_cluster && report->version >= 2) {  // the old report has no totals to add a node from
      std::optional<bool> known = in_cluster(name);
      if (!known) return http::ErrorReply(503, "the node list is not synced yet; try again");
      cluster = *known;
    }
    Status s = store->PushReport(name, *report, cluster);
    if (s.code() == Code::kNotFound) {
      return http::ErrorReply(400, "node " + name + " is not in the ledger" +
                                       (in_cluster ? ", nor a GPU node of the cluster (a node with one of "
                                                    "node_sync.agent_capacity_labels)"
                                                  : ""));
    }
    if (s.code() == Code::kInvalidArgument) return http::ErrorReply(400, s.message());
    if (!s.ok()) return http::ErrorReply(s.code() == Code::kUnavailable ? 503 : 500, s.message());
    json reply{{"node", name}, {"updated_gpus", report->gpus.size()}, {"version", report->version}};
    if (n != nullptr && kube != nullptr) PostEnforcementFailures(*kube, *n, *report);
    if (enforce_mode) reply["enforce"] = EnforceOrders(n, enforce_mode(name));
    return JsonReply(200, reply);
  });
}

}  // namespace vramd::http
