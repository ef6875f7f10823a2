#include "vramd/app/api.h"

#include <spdlog/spdlog.h>

#include <cmath>

#include "vramd/kube/decode.h"
#include "vramd/ledger/fit.h"
#include "vramd/ledger/metrics.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/quantity.h"
#include "vramd/metrics/ledger_metrics.h"
#include "vramd/parse.h"

namespace vramd::app {
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

http::Reply JsonReply(int status, const json& j) {
  http::Reply r;
  r.status = status;
  r.body = j.dump();
  return r;
}

http::Reply ExtenderReply(const extender::Response& resp) {
  http::Reply r;
  r.status = resp.status;
  r.body = resp.body;
  return r;
}

}  // namespace

Result<std::map<int, int64_t>> DecodeUsage(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("body is not valid JSON");
  if (!j.is_object() || !j.contains("gpus")) {
    return InvalidArgument("body must be {\"gpus\": {\"<index>\": <bytes or quantity>, ...}}");
  }
  const json& g = j["gpus"];
  if (!g.is_object() || g.empty()) return InvalidArgument("gpus must be a non-empty object of index -> bytes");
  std::map<int, int64_t> out;
  for (auto it = g.begin(); it != g.end(); ++it) {
    const std::string& k = it.key();
    std::optional<int> parsed = k.size() > 4 ? std::nullopt : ParseSmallInt(k, 9999);
    if (!parsed) return InvalidArgument("GPU index \"" + k.substr(0, 16) + "\" is not a whole number");
    const int idx = *parsed;
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
    if (!out.emplace(idx, bytes).second) {
      return InvalidArgument("GPU index " + std::to_string(idx) + " is given more than once");
    }
  }
  return out;
}

// Per node of the ledger: would this pod fit now, and if not, why.
static http::Reply Explain(const kube::PodInfo& pod, store::LedgerStore* store, const ledger::Policy& policy,
                           int64_t now) {
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(pod.spec);
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
        break;
      case ledger::Verdict::kUnresolvable:
        row["verdict"] = "never_fits";
        row["reason"] = d.reason;
        break;
    }
    arr.push_back(std::move(row));
  }
  out["fits_on"] = fits;
  out["nodes"] = std::move(arr);
  return JsonReply(200, out);
}

json NodeView(const ledger::Node& node, int64_t now_ms, int64_t usage_max_age_ms) {
  std::vector<ledger::Vectors> vec = ledger::GpuVectors(node, now_ms, usage_max_age_ms);
  json gpus = json::array();
  for (size_t i = 0; i < vec.size(); ++i) {
    const ledger::Gpu& g = node.gpus[i];
    json gj = VectorsJson(vec[i]);
    gj["index"] = g.index;
    gj["uuid"] = g.uuid;
    gj["usage_fresh"] = ledger::UsageFresh(g.used_ts_ms, now_ms, usage_max_age_ms);
    gj["usage_reported_ms"] = g.used_ts_ms;
    gpus.push_back(std::move(gj));
  }
  json pods = json::array();
  for (const ledger::Entry& e : node.entries) {
    pods.push_back(json{{"uid", e.pod_uid},
                        {"namespace", e.ns},
                        {"name", e.name},
                        {"gpus", e.gpus},
                        {"vram_per_gpu_bytes", e.per_gpu},
                        {"peak_per_gpu_bytes", e.peak_per_gpu},
                        {"model", e.model},
                        {"state", ledger::EntryStateName(e.state)},
                        {"created_ms", e.created_ms}});
  }
  json out = VectorsJson(ledger::SumVectors(vec));
  out["name"] = node.name;
  out["gpus"] = std::move(gpus);
  out["pods"] = std::move(pods);
  return out;
}

void RegisterRoutes(http::Server& server, const ApiServices& svc) {
  extender::Extender* ext = svc.extender;
  server.Route("POST", "/scheduler/filter", "filter",
               [ext](const http::Request& r) { return ExtenderReply(ext->Filter(r.body)); });
  server.Route("POST", "/scheduler/prioritize", "prioritize",
               [ext](const http::Request& r) { return ExtenderReply(ext->Prioritize(r.body)); });
  server.Route("POST", "/scheduler/bind", "bind",
               [ext](const http::Request& r) { return ExtenderReply(ext->Bind(r.body)); });
  server.Route("POST", "/scheduler/preempt", "preempt",
               [ext](const http::Request& r) { return ExtenderReply(ext->Preempt(r.body)); });

  server.Route("GET", "/healthz", "healthz", [](const http::Request&) {
    http::Reply r;
    r.content_type = "text/plain";
    r.body = "ok\n";
    return r;
  });

  store::LedgerStore* store = svc.store;
  auto readiness = svc.readiness;
  server.Route("GET", "/readyz", "readyz", [store, readiness](const http::Request&) {
    json details = json::object();
    bool ready = true;
    Status ping = store->Ping();
    details["valkey"] = ping.ok() ? "ok" : ping.message();
    if (!ping.ok()) ready = false;
    if (readiness) readiness(details, &ready);
    details["ready"] = ready;
    return JsonReply(ready ? 200 : 503, details);
  });

  const Clock* clock = svc.clock;
  int64_t max_age = svc.usage_max_age_ms;
  metrics::Registry* registry = svc.registry;
  registry->AddCollector([store, clock, max_age](metrics::TextWriter& w) {
    Result<ledger::SnapshotPtr> snap = store->Snapshot();
    w.Header("vramd_ledger_up", "1 when the VRAM ledger could be read from Valkey at this scrape.", "gauge");
    w.Sample("vramd_ledger_up", {}, snap.ok() ? 1 : 0);
    if (!snap.ok()) return;
    w.Header("vramd_ledger_epoch", "The ledger's epoch counter (moves on every write).", "gauge");
    w.Sample("vramd_ledger_epoch", {}, static_cast<double>((*snap)->epoch));
    w.Header("vramd_ledger_nodes", "Nodes in the ledger.", "gauge");
    w.Sample("vramd_ledger_nodes", {}, static_cast<double>((*snap)->nodes.size()));
    metrics::WriteLedgerMetrics(**snap, clock->NowMs(), max_age, w);
  });
  server.Route("GET", "/metrics", "metrics", [registry](const http::Request&) {
    http::Reply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = registry->Render();
    return r;
  });

  server.Route("GET", "/v1/nodes", "v1_nodes", [store, clock, max_age](const http::Request&) {
    Result<ledger::SnapshotPtr> snap = store->Snapshot();
    if (!snap.ok()) return http::ErrorReply(503, "VRAM ledger unavailable: " + snap.status().message());
    std::vector<const ledger::Node*> nodes;
    for (const auto& [name, n] : (*snap)->nodes) nodes.push_back(&n);
    std::sort(nodes.begin(), nodes.end(), [](auto* a, auto* b) { return a->name < b->name; });
    json arr = json::array();
    int64_t now = clock->NowMs();
    for (const ledger::Node* n : nodes) arr.push_back(NodeView(*n, now, max_age));
    return JsonReply(200, json{{"epoch", (*snap)->epoch}, {"nodes", std::move(arr)}});
  });
  server.Route("GET", "/v1/nodes/{node}", "v1_node", [store, clock, max_age](const http::Request& r) {
    Result<ledger::SnapshotPtr> snap = store->Snapshot();
    if (!snap.ok()) return http::ErrorReply(503, "VRAM ledger unavailable: " + snap.status().message());
    const ledger::Node* n = (*snap)->Find(r.params.at("node"));
    if (n == nullptr) return http::ErrorReply(404, "node " + r.params.at("node") + " is not in the ledger");
    return JsonReply(200, NodeView(*n, clock->NowMs(), max_age));
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
    Result<kube::PodInfo> pod = kube->GetPod(ns == r.query.end() ? "default" : ns->second, name->second);
    if (!pod.ok()) {
      return http::ErrorReply(pod.status().code() == Code::kNotFound ? 404 : 503, pod.status().message());
    }
    return Explain(*pod, store, policy, clock->NowMs());
  });
  server.Route("POST", "/v1/explain", "v1_explain", [=](const http::Request& r) {
    Result<kube::PodInfo> pod = kube::DecodePod(r.body, resource);
    if (!pod.ok()) return http::ErrorReply(400, "body must be a Pod object: " + pod.status().message());
    return Explain(*pod, store, policy, clock->NowMs());
  });

  std::string token = svc.api_token;
  server.Route("PUT", "/v1/nodes/{node}/usage", "v1_usage", [store, token](const http::Request& r) {
    if (!http::BearerMatches(r.authorization, token)) {
      return http::ErrorReply(401, "a valid bearer token is required");
    }
    Result<std::map<int, int64_t>> usage = DecodeUsage(r.body);
    if (!usage.ok()) return http::ErrorReply(400, usage.status().message());
    const std::string& name = r.params.at("node");
    Result<ledger::SnapshotPtr> snap = store->Snapshot();
    if (!snap.ok()) return http::ErrorReply(503, "VRAM ledger unavailable: " + snap.status().message());
    const ledger::Node* n = (*snap)->Find(name);
    if (n == nullptr) return http::ErrorReply(404, "node " + name + " is not in the ledger");
    for (const auto& entry : *usage) {
      const int idx = entry.first;  // (clang 14 cannot capture a structured binding)
      bool known = std::any_of(n->gpus.begin(), n->gpus.end(), [&](const ledger::Gpu& g) { return g.index == idx; });
      if (!known) return http::ErrorReply(400, "node " + name + " has no GPU " + std::to_string(idx));
    }
    if (Status s = store->PushUsage(name, *usage); !s.ok()) {
      return http::ErrorReply(s.code() == Code::kUnavailable ? 503 : 500, s.message());
    }
    return JsonReply(200, json{{"node", name}, {"updated_gpus", usage->size()}});
  });
}

}  // namespace vramd::app
