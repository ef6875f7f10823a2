#include "vramd/kube/decode.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "kube/json_decode.h"

namespace vramd::kube {
namespace {

using nlohmann::json;

constexpr const char* kGpuCountAnnotation = "vramd.io/gpu-count";
constexpr const char* kVramPeakAnnotation = "vramd.io/vram-peak";
constexpr const char* kModelAnnotation = "vramd.io/model";

Status TypeError(const std::string& path, const char* want, const json& got) {
  return InvalidArgument(path + ": expected " + want + ", got " + got.type_name());
}

// The member `key` of `obj`, or nullptr when absent or null. `obj` must be an object.
const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Optional object member: nullptr when absent/null, error when not an object.
Result<const json*> ObjectMember(const json& obj, const char* key, const std::string& path) {
  const json* v = Member(obj, key);
  if (v != nullptr && !v->is_object()) return TypeError(path, "object", *v);
  return v;
}

Result<const json*> ArrayMember(const json& obj, const char* key, const std::string& path) {
  const json* v = Member(obj, key);
  if (v != nullptr && !v->is_array()) return TypeError(path, "array", *v);
  return v;
}

// Optional string member: leaves `out` unchanged when absent/null.
Status StringMember(const json& obj, const char* key, const std::string& path, std::string& out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_string()) return TypeError(path, "string", *v);
  out = v->get_ref<const std::string&>();
  return Status::Ok();
}

// A map of string to string (labels, annotations).
Status StringMapMember(const json& obj, const char* key, const std::string& path,
                       std::map<std::string, std::string>& out) {
  Result<const json*> m = ObjectMember(obj, key, path);
  if (!m.ok()) return m.status();
  if (*m == nullptr) return Status::Ok();
  for (const auto& [k, v] : (*m)->items()) {
    if (!v.is_string()) return TypeError(path + "[" + k + "]", "string", v);
    out.emplace(k, v.get_ref<const std::string&>());
  }
  return Status::Ok();
}

// A quantity: its text as sent, or the decimal text of a JSON number.
Result<std::optional<std::string>> QuantityMember(const json& obj, const std::string& key,
                                                  const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::string>();
  const json& v = *it;
  if (v.is_string()) return std::optional<std::string>(v.get_ref<const std::string&>());
  if (v.is_number_unsigned()) return std::optional<std::string>(std::to_string(v.get<uint64_t>()));
  if (v.is_number_integer()) return std::optional<std::string>(std::to_string(v.get<int64_t>()));
  if (v.is_number_float()) {
    double d = v.get<double>();
    // Whole numbers in int64 range print without a fraction; anything else
    // keeps its JSON spelling, which the quantity parser then judges.
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
      return std::optional<std::string>(std::to_string(static_cast<int64_t>(d)));
    }
    return std::optional<std::string>(v.dump());
  }
  return TypeError(path, "quantity (string or number)", v);
}

// The configured resource out of a `resources.requests`-like map.
Result<std::optional<std::string>> ResourceIn(const json& parent, const char* key, const std::string& resource,
                                              const std::string& path) {
  Result<const json*> m = ObjectMember(parent, key, path);
  if (!m.ok()) return m.status();
  if (*m == nullptr) return std::optional<std::string>();
  return QuantityMember(**m, resource, path + "[" + resource + "]");
}

Result<ledger::ContainerAmount> DecodeContainer(const json& c, const std::string& resource,
                                                const std::string& path, bool init) {
  if (!c.is_object()) return TypeError(path, "object", c);
  ledger::ContainerAmount out;
  Result<const json*> res = ObjectMember(c, "resources", path + ".resources");
  if (!res.ok()) return res.status();
  if (*res != nullptr) {
    auto req = ResourceIn(**res, "requests", resource, path + ".resources.requests");
    if (!req.ok()) return req.status();
    auto lim = ResourceIn(**res, "limits", resource, path + ".resources.limits");
    if (!lim.ok()) return lim.status();
    out.request = std::move(*req);
    out.limit = std::move(*lim);
  }
  if (init) {
    std::string restart_policy;
    if (Status s = StringMember(c, "restartPolicy", path + ".restartPolicy", restart_policy); !s.ok()) return s;
    out.sidecar = (restart_policy == "Always");
  }
  return out;
}

Status DecodeContainers(const json& spec, const char* key, const std::string& resource, bool init,
                        std::vector<ledger::ContainerAmount>& out) {
  const std::string base = std::string("spec.") + key;
  Result<const json*> arr = ArrayMember(spec, key, base);
  if (!arr.ok()) return arr.status();
  if (*arr == nullptr) return Status::Ok();
  out.reserve((*arr)->size());
  for (size_t i = 0; i < (*arr)->size(); ++i) {
    auto c = DecodeContainer((**arr)[i], resource, base + "[" + std::to_string(i) + "]", init);
    if (!c.ok()) return c.status();
    out.push_back(std::move(*c));
  }
  return Status::Ok();
}

Status DecodePriority(const json& spec, int32_t& out) {
  const json* v = Member(spec, "priority");
  if (v == nullptr) return Status::Ok();
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(kMax)) return InvalidArgument("spec.priority: " + v->dump() + " is out of range");
    out = static_cast<int32_t>(u);
    return Status::Ok();
  }
  if (v->is_number_integer()) {
    int64_t i = v->get<int64_t>();
    if (i < kMin || i > kMax) return InvalidArgument("spec.priority: " + v->dump() + " is out of range");
    out = static_cast<int32_t>(i);
    return Status::Ok();
  }
  return TypeError("spec.priority", "integer", *v);
}

// The metadata fields Pods and Nodes share. Requires a non-empty name.
Status DecodeMetadata(const json& obj, std::string& name, std::string& uid, std::string& resource_version,
                      std::map<std::string, std::string>& annotations, const json*& metadata) {
  if (!obj.is_object()) return InvalidArgument(std::string("expected a JSON object, got ") + obj.type_name());
  Result<const json*> md = ObjectMember(obj, "metadata", "metadata");
  if (!md.ok()) return md.status();
  if (*md == nullptr) return InvalidArgument("metadata: missing");
  metadata = *md;
  if (Status s = StringMember(*metadata, "name", "metadata.name", name); !s.ok()) return s;
  if (name.empty()) return InvalidArgument("metadata.name: missing");
  if (Status s = StringMember(*metadata, "uid", "metadata.uid", uid); !s.ok()) return s;
  if (Status s = StringMember(*metadata, "resourceVersion", "metadata.resourceVersion", resource_version); !s.ok()) {
    return s;
  }
  return StringMapMember(*metadata, "annotations", "metadata.annotations", annotations);
}

std::optional<std::string> Annotation(const std::map<std::string, std::string>& a, const char* key) {
  auto it = a.find(key);
  if (it == a.end()) return std::nullopt;
  return it->second;
}

Result<PodInfo> PodFromJsonUnchecked(const json& obj, const std::string& resource) {
  PodInfo pod;
  const json* md = nullptr;
  if (Status s = DecodeMetadata(obj, pod.name, pod.uid, pod.resource_version, pod.annotations, md); !s.ok()) {
    return s;
  }
  if (Status s = StringMember(*md, "namespace", "metadata.namespace", pod.ns); !s.ok()) return s;
  pod.deleting = Member(*md, "deletionTimestamp") != nullptr;

  Result<const json*> spec = ObjectMember(obj, "spec", "spec");
  if (!spec.ok()) return spec.status();
  if (*spec != nullptr) {
    const json& sp = **spec;
    if (Status s = StringMember(sp, "nodeName", "spec.nodeName", pod.node_name); !s.ok()) return s;
    if (Status s = StringMember(sp, "schedulerName", "spec.schedulerName", pod.scheduler_name); !s.ok()) return s;
    if (Status s = DecodeContainers(sp, "containers", resource, false, pod.spec.containers); !s.ok()) return s;
    if (Status s = DecodeContainers(sp, "initContainers", resource, true, pod.spec.init_containers); !s.ok()) {
      return s;
    }
    auto overhead = ResourceIn(sp, "overhead", resource, "spec.overhead");
    if (!overhead.ok()) return overhead.status();
    pod.spec.overhead = std::move(*overhead);
    if (Status s = DecodePriority(sp, pod.spec.priority); !s.ok()) return s;
    if (Status s = StringMember(sp, "priorityClassName", "spec.priorityClassName", pod.spec.priority_class); !s.ok()) {
      return s;
    }
    if (pod.spec.priority_class.size() > ledger::kMaxPriorityClassName) {
      return InvalidArgument("spec.priorityClassName: longer than " + std::to_string(ledger::kMaxPriorityClassName) +
                             " bytes");
    }
  }

  Result<const json*> status = ObjectMember(obj, "status", "status");
  if (!status.ok()) return status.status();
  if (*status != nullptr) {
    if (Status s = StringMember(**status, "phase", "status.phase", pod.phase); !s.ok()) return s;
  }

  pod.spec.uid = pod.uid;
  pod.spec.ns = pod.ns;
  pod.spec.name = pod.name;
  pod.spec.gpu_count = Annotation(pod.annotations, kGpuCountAnnotation);
  pod.spec.vram_peak = Annotation(pod.annotations, kVramPeakAnnotation);
  pod.spec.model = Annotation(pod.annotations, kModelAnnotation).value_or("");
  pod.spec.disposable = Annotation(pod.annotations, ledger::kDisposableAnnotation);
  pod.spec.idle_ttl = Annotation(pod.annotations, ledger::kIdleTtlAnnotation);
  return pod;
}

Result<NodeInfo> NodeFromJsonUnchecked(const json& obj) {
  NodeInfo node;
  const json* md = nullptr;
  if (Status s = DecodeMetadata(obj, node.name, node.uid, node.resource_version, node.annotations, md); !s.ok()) {
    return s;
  }
  if (Status s = StringMapMember(*md, "labels", "metadata.labels", node.labels); !s.ok()) return s;
  return node;
}

json ParseOrDiscard(std::string_view text) {
  return json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
}

}  // namespace

Result<PodInfo> PodFromJson(const json& obj, const std::string& resource) {
  try {
    return PodFromJsonUnchecked(obj, resource);
  } catch (const json::exception& e) {  // not expected: every access is type-checked
    return InvalidArgument(e.what());
  }
}

Result<NodeInfo> NodeFromJson(const json& obj) {
  try {
    return NodeFromJsonUnchecked(obj);
  } catch (const json::exception& e) {
    return InvalidArgument(e.what());
  }
}

std::string ResourceVersionOf(const json& obj) {
  if (!obj.is_object()) return "";
  const json* md = Member(obj, "metadata");
  if (md == nullptr || !md->is_object()) return "";
  const json* rv = Member(*md, "resourceVersion");
  return rv != nullptr && rv->is_string() ? rv->get<std::string>() : "";
}

std::string ObjectRef(const json& obj) {
  if (!obj.is_object()) return "?";
  const json* md = Member(obj, "metadata");
  if (md == nullptr || !md->is_object()) return "?";
  const json* name = Member(*md, "name");
  const json* ns = Member(*md, "namespace");
  std::string out;
  if (ns != nullptr && ns->is_string()) out = ns->get<std::string>() + "/";
  out += name != nullptr && name->is_string() ? name->get<std::string>() : "?";
  return out;
}

Result<PodInfo> DecodePod(std::string_view text, const std::string& resource) {
  json obj = ParseOrDiscard(text);
  if (obj.is_discarded()) return InvalidArgument("pod: not valid JSON");
  Result<PodInfo> pod = PodFromJson(obj, resource);
  if (!pod.ok()) return InvalidArgument("pod: " + pod.status().message());
  return pod;
}

Result<NodeInfo> DecodeNode(std::string_view text) {
  json obj = ParseOrDiscard(text);
  if (obj.is_discarded()) return InvalidArgument("node: not valid JSON");
  Result<NodeInfo> node = NodeFromJson(obj);
  if (!node.ok()) return InvalidArgument("node: " + node.status().message());
  return node;
}

}  // namespace vramd::kube
