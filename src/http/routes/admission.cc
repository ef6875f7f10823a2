// POST /admission/{validate,validate-direct-bind,mutate}: vramd's admission
// webhook (issue 34, part A). Decodes the AdmissionReview (admission.k8s.io
// v1 and v1beta1), asks the pure rules (ledger/admission.h, and for a
// VramQueue the leader's own validation, ledger::BuildQueueSet) and answers
// an AdmissionReview with the same uid: allowed or the refusal's message, and
// for a mutation a JSON patch. A body that is not an AdmissionReview is a
// 400; a request vramd has no rule for is allowed (the webhook's rules
// decide what is sent).
#include <algorithm>

#include "http/json_views.h"
#include "vramd/http/routes.h"
#include "vramd/kube/decode.h"
#include "vramd/kube/secrets.h"
#include "vramd/ledger/admission.h"

namespace vramd::http {
namespace {

using nlohmann::json;

// The request of an AdmissionReview, or why the body is not one.
struct Review {
  std::string api_version;
  json request;
};

Result<Review> DecodeReview(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("body is not a JSON object");
  auto av = j.find("apiVersion");
  std::string api = av != j.end() && av->is_string() ? av->get<std::string>() : "";
  if (api != "admission.k8s.io/v1" && api != "admission.k8s.io/v1beta1") {
    return InvalidArgument("apiVersion must be admission.k8s.io/v1 or v1beta1");
  }
  auto kind = j.find("kind");
  if (kind == j.end() || *kind != "AdmissionReview") return InvalidArgument("kind must be AdmissionReview");
  auto req = j.find("request");
  if (req == j.end() || !req->is_object()) return InvalidArgument("an AdmissionReview without a request");
  auto uid = req->find("uid");
  if (uid == req->end() || !uid->is_string() || uid->get<std::string>().empty()) {
    return InvalidArgument("request.uid is required");
  }
  return Review{api, std::move(*req)};
}

std::string Str(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Reply Answer(const Review& r, bool allowed, const std::string& message, const json& patch = nullptr) {
  json resp = {{"uid", r.request["uid"]}, {"allowed", allowed}};
  if (!allowed) resp["status"] = {{"code", 403}, {"reason", "Forbidden"}, {"message", message}};
  if (!patch.is_null() && !patch.empty()) {
    resp["patchType"] = "JSONPatch";
    resp["patch"] = kube::Base64(patch.dump());
  }
  return JsonReply(200, json{{"apiVersion", r.api_version}, {"kind", "AdmissionReview"}, {"response", resp}});
}

// The admission view of a Pod object; kInvalidArgument when it is no Pod.
Result<ledger::AdmissionPod> DecodeAdmissionPod(const json& obj, const std::string& ns, const std::string& resource) {
  if (!obj.is_object()) return InvalidArgument("the object is not a Pod");
  json copy = obj;
  // A pod being created may not carry its namespace yet (the request's), nor
  // its name (generateName: the API server picks it after admission).
  if (!ns.empty()) copy["metadata"]["namespace"] = ns;
  if (!copy["metadata"].contains("name")) copy["metadata"]["name"] = Str(copy["metadata"], "generateName") + "(generated)";
  Result<kube::PodInfo> info = kube::DecodePod(copy.dump(), resource);
  if (!info.ok()) return InvalidArgument("the Pod cannot be read: " + info.status().message());
  ledger::AdmissionPod pod;
  pod.scheduler_name = info->scheduler_name;
  pod.node_name = info->node_name;
  pod.annotations = info->annotations;
  pod.spec = info->spec;
  const json& spec = obj.contains("spec") && obj["spec"].is_object() ? obj["spec"] : json::object();
  pod.runtime_class = Str(spec, "runtimeClassName");
  if (auto cs = spec.find("containers"); cs != spec.end() && cs->is_array()) {
    for (const json& c : *cs) {
      ledger::AdmissionContainer ac;
      if (c.is_object()) {
        ac.name = Str(c, "name");
        if (auto env = c.find("env"); env != c.end() && env->is_array()) {
          ac.has_env = true;
          for (const json& e : *env) {
            if (e.is_object()) ac.env.insert(Str(e, "name"));
          }
        }
      }
      pod.containers.push_back(std::move(ac));
    }
  }
  return pod;
}

// The JSON patch (RFC 6902) of a mutation, on the pod as sent.
json PatchOf(const ledger::AdmissionMutation& m, const ledger::AdmissionPod& pod, bool has_annotations) {
  json ops = json::array();
  if (m.scheduler_name) ops.push_back({{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", *m.scheduler_name}});
  if (m.runtime_class) ops.push_back({{"op", "add"}, {"path", "/spec/runtimeClassName"}, {"value", *m.runtime_class}});
  std::vector<bool> created(pod.containers.size(), false);
  for (const ledger::AddedEnv& e : m.env) {
    json var = {{"name", e.name}};
    if (e.field_path.empty()) var["value"] = e.value;
    else var["valueFrom"] = {{"fieldRef", {{"fieldPath", e.field_path}}}};
    const std::string base = "/spec/containers/" + std::to_string(e.container) + "/env";
    if (!pod.containers[e.container].has_env && !created[e.container]) {
      ops.push_back({{"op", "add"}, {"path", base}, {"value", json::array({var})}});
      created[e.container] = true;
    } else {
      ops.push_back({{"op", "add"}, {"path", base + "/-"}, {"value", var}});
    }
  }
  if (ops.empty()) return ops;
  std::string added;
  for (const std::string& a : m.added) added += (added.empty() ? "" : ",") + a;
  // "/" in the annotation's key is "~1" in a JSON pointer.
  if (has_annotations) {
    ops.push_back({{"op", "add"}, {"path", "/metadata/annotations/vramd.io~1admission-added"}, {"value", added}});
  } else {
    ops.push_back({{"op", "add"}, {"path", "/metadata/annotations"},
                   {"value", {{ledger::kAdmissionAddedAnnotation, added}}}});
  }
  return ops;
}

Reply Admit(const AdmissionServices& svc, const Request& r, bool mutate, bool direct_bind_allowed) {
  Result<Review> review = DecodeReview(r.body);
  if (!review.ok()) return ErrorReply(400, "not an AdmissionReview: " + review.status().message());
  const json& req = review->request;
  const json kind = req.value("kind", json::object());
  const std::string op = Str(req, "operation");
  const std::string ns = Str(req, "namespace");
  if (kind.value("kind", "") == ledger::kQueueKind && !mutate) {
    if (op != "CREATE" && op != "UPDATE") return Answer(*review, true, "");
    ledger::QueueSpec spec = kube::DecodeQueue(req.value("object", json::object()).dump());
    std::vector<ledger::QueueSpec> specs;
    if (svc.queues) {
      if (ledger::QueueSetPtr set = svc.queues()) {
        for (const ledger::Queue& q : set->queues) {
          if (!q.synthetic && q.spec.name != spec.name) specs.push_back(q.spec);
        }
      }
    }
    specs.push_back(spec);
    ledger::QueueSet set = ledger::BuildQueueSet(std::move(specs), svc.tenancy_policy);
    int i = set.Find(spec.name);
    if (i >= 0 && !set.queues[i].valid) {
      return Answer(*review, false, "VramQueue " + spec.name + ": " + set.queues[i].reason + ": " +
                                        set.queues[i].message);
    }
    return Answer(*review, true, "");
  }
  if (kind.value("kind", "") != "Pod" || (op != "CREATE" && op != "UPDATE") || !Str(req, "subResource").empty()) {
    return Answer(*review, true, "");
  }
  Result<ledger::AdmissionPod> pod = DecodeAdmissionPod(req.value("object", json()), ns, svc.resource_name);
  // Validation refuses what it cannot read; the mutation leaves it alone.
  if (!pod.ok()) return Answer(*review, mutate, pod.status().message());
  ledger::AdmissionRequest in;
  in.create = op == "CREATE";
  in.pod = std::move(*pod);
  if (!in.create) {
    Result<ledger::AdmissionPod> old = DecodeAdmissionPod(req.value("oldObject", json()), ns, svc.resource_name);
    if (old.ok()) in.old = std::move(*old);
  }
  in.username = Str(req.value("userInfo", json::object()), "username");
  in.namespace_may_bind_directly = direct_bind_allowed;
  if (!mutate) {
    std::optional<std::string> refusal = ledger::ValidateAdmission(in, svc.policy);
    return Answer(*review, !refusal, refusal.value_or(""));
  }
  ledger::AdmissionMutation m = ledger::MutateAdmission(in, svc.policy);
  const json& meta = req.value("object", json::object()).value("metadata", json::object());
  const bool has_annotations = meta.contains("annotations") && meta["annotations"].is_object();
  return Answer(*review, true, "", PatchOf(m, in.pod, has_annotations));
}

}  // namespace

void RegisterAdmissionRoutes(Server& server, AdmissionServices svc) {
  // A Pod's AdmissionReview is its object (and the old one) plus a little:
  // bounded like POST /v1/explain's Pod.
  const RouteLimits limits{.max_body_bytes = 1 << 20};
  server.Route("POST", "/admission/validate", "admission_validate",
               [svc](const Request& r) { return Admit(svc, r, /*mutate=*/false, /*direct_bind_allowed=*/false); },
               limits);
  server.Route("POST", "/admission/validate-direct-bind", "admission_validate",
               [svc](const Request& r) { return Admit(svc, r, /*mutate=*/false, /*direct_bind_allowed=*/true); },
               limits);
  server.Route("POST", "/admission/mutate", "admission_mutate",
               [svc](const Request& r) { return Admit(svc, r, /*mutate=*/true, /*direct_bind_allowed=*/false); },
               limits);
}

}  // namespace vramd::http
