// The ledger's /v1 views: GET /v1/nodes[/{node}], GET|POST /v1/explain (would
// this pod fit, per node, and why not), PUT /v1/nodes/{node}/usage.
#include <algorithm>

#include "http/json_views.h"
#include "vramd/http/routes.h"
#include "vramd/kube/decode.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/quantity.h"
#include "vramd/parse.h"

namespace vramd::http {

using nlohmann::json;

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

void RegisterLedgerRoutes(Server& server, const ApiServices& svc) {
  store::LedgerStore* store = svc.store;
  const Clock* clock = svc.clock;
  int64_t max_age = svc.usage_max_age_ms;
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

}  // namespace vramd::http
