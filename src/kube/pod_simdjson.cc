#include "kube/pod_simdjson.h"

#include <simdjson.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>

#include "kube/json_decode.h"
#include "vramd/ledger/pod_request.h"

namespace vramd::kube {
namespace {

namespace dom = simdjson::dom;
using Type = dom::element_type;

// The last member `key` of `o` (the reference decoder keeps the last of
// duplicate keys), or nullopt when absent or JSON null (as its Member()).
std::optional<dom::element> Member(dom::object o, std::string_view key) {
  std::optional<dom::element> out;
  for (dom::key_value_pair kv : o) {
    if (kv.key == key) out = kv.value;
  }
  if (out && out->type() == Type::NULL_VALUE) return std::nullopt;
  return out;
}

// An optional object member: false when present and not an object.
bool ObjectMember(dom::object o, std::string_view key, std::optional<dom::object>* out) {
  std::optional<dom::element> v = Member(o, key);
  out->reset();
  if (!v) return true;
  dom::object obj;
  if (v->get_object().get(obj) != simdjson::SUCCESS) return false;
  *out = obj;
  return true;
}

// An optional string member: `out` unchanged when absent; false when present
// and not a string.
bool StringMember(dom::object o, std::string_view key, std::string* out) {
  std::optional<dom::element> v = Member(o, key);
  if (!v) return true;
  std::string_view s;
  if (v->get_string().get(s) != simdjson::SUCCESS) return false;
  out->assign(s);
  return true;
}

// Labels, annotations: every value a string.
bool StringMapMember(dom::object o, std::string_view key, std::map<std::string, std::string>* out) {
  std::optional<dom::object> m;
  if (!ObjectMember(o, key, &m)) return false;
  if (!m) return true;
  for (dom::key_value_pair kv : *m) {
    std::string_view v;
    if (kv.value.get_string().get(v) != simdjson::SUCCESS) return false;
    (*out)[std::string(kv.key)] = std::string(v);
  }
  return true;
}

// The configured resource's quantity in a requests/limits/overhead map. Only
// the API's own form, a string: a number is left to the reference decoder.
bool ResourceIn(dom::object parent, std::string_view key, const std::string& resource,
                std::optional<std::string>* out) {
  std::optional<dom::object> m;
  if (!ObjectMember(parent, key, &m)) return false;
  if (!m) return true;
  std::optional<dom::element> q = Member(*m, resource);
  if (!q) return true;
  std::string_view s;
  if (q->get_string().get(s) != simdjson::SUCCESS) return false;
  *out = std::string(s);
  return true;
}

bool Containers(dom::object spec, std::string_view key, const std::string& resource, bool init,
                std::vector<ledger::ContainerAmount>* out) {
  std::optional<dom::element> v = Member(spec, key);
  if (!v) return true;
  dom::array arr;
  if (v->get_array().get(arr) != simdjson::SUCCESS) return false;
  out->reserve(arr.size());
  for (dom::element e : arr) {
    dom::object c;
    if (e.get_object().get(c) != simdjson::SUCCESS) return false;
    ledger::ContainerAmount amount;
    std::optional<dom::object> res;
    if (!ObjectMember(c, "resources", &res)) return false;
    if (res && (!ResourceIn(*res, "requests", resource, &amount.request) ||
                !ResourceIn(*res, "limits", resource, &amount.limit))) {
      return false;
    }
    if (init) {
      std::string restart_policy;
      if (!StringMember(c, "restartPolicy", &restart_policy)) return false;
      amount.sidecar = restart_policy == "Always";
    }
    out->push_back(std::move(amount));
  }
  return true;
}

bool Priority(dom::object spec, int32_t* out) {
  std::optional<dom::element> v = Member(spec, "priority");
  if (!v) return true;
  int64_t i = 0;
  if (v->type() == Type::INT64) {
    i = v->get_int64().value_unsafe();
  } else if (v->type() == Type::UINT64) {
    const uint64_t u = v->get_uint64().value_unsafe();
    if (u > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return false;
    i = static_cast<int64_t>(u);
  } else {
    return false;
  }
  if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max()) return false;
  *out = static_cast<int32_t>(i);
  return true;
}

// As the reference's ControllerOf: the first reference with controller true,
// its kind and uid strings of 1..kMaxOwnerField bytes; anything odd leaves
// both empty.
void ControllerOf(dom::object metadata, ledger::PodSpecView* spec) {
  std::optional<dom::element> refs = Member(metadata, "ownerReferences");
  dom::array arr;
  if (!refs || refs->get_array().get(arr) != simdjson::SUCCESS) return;
  for (dom::element e : arr) {
    dom::object r;
    if (e.get_object().get(r) != simdjson::SUCCESS) continue;
    std::optional<dom::element> controller = Member(r, "controller");
    bool is_controller = false;
    if (!controller || controller->get_bool().get(is_controller) != simdjson::SUCCESS || !is_controller) continue;
    std::optional<dom::element> k = Member(r, "kind");
    std::optional<dom::element> u = Member(r, "uid");
    std::string_view ks, us;
    if (!k || !u || k->get_string().get(ks) != simdjson::SUCCESS || u->get_string().get(us) != simdjson::SUCCESS) {
      return;
    }
    if (ks.empty() || us.empty() || ks.size() > ledger::kMaxOwnerField || us.size() > ledger::kMaxOwnerField) return;
    spec->owner_kind = std::string(ks);
    spec->owner_uid = std::string(us);
    return;
  }
}

bool Pod(dom::element el, const std::string& resource, PodInfo* out) {
  dom::object obj;
  if (el.get_object().get(obj) != simdjson::SUCCESS) return false;
  PodInfo pod;
  std::optional<dom::object> md;
  if (!ObjectMember(obj, "metadata", &md) || !md) return false;
  if (!StringMember(*md, "name", &pod.name) || pod.name.empty()) return false;
  if (!StringMember(*md, "uid", &pod.uid) || !StringMember(*md, "resourceVersion", &pod.resource_version) ||
      !StringMapMember(*md, "annotations", &pod.annotations) || !StringMember(*md, "namespace", &pod.ns)) {
    return false;
  }
  if (std::optional<dom::element> ts = Member(*md, "deletionTimestamp")) {
    pod.deleting = true;
    std::string_view t;
    if (ts->get_string().get(t) == simdjson::SUCCESS) pod.deletion_ms = ParseRfc3339Ms(t).value_or(0);
  }
  std::map<std::string, std::string> labels;
  if (!StringMapMember(*md, "labels", &labels)) return false;
  ControllerOf(*md, &pod.spec);

  std::optional<dom::object> spec;
  if (!ObjectMember(obj, "spec", &spec)) return false;
  if (spec) {
    if (!StringMember(*spec, "nodeName", &pod.node_name) ||
        !StringMember(*spec, "schedulerName", &pod.scheduler_name) ||
        !Containers(*spec, "containers", resource, false, &pod.spec.containers) ||
        !Containers(*spec, "initContainers", resource, true, &pod.spec.init_containers) ||
        !ResourceIn(*spec, "overhead", resource, &pod.spec.overhead) || !Priority(*spec, &pod.spec.priority) ||
        !StringMember(*spec, "priorityClassName", &pod.spec.priority_class) ||
        pod.spec.priority_class.size() > ledger::kMaxPriorityClassName) {
      return false;
    }
  }
  std::optional<dom::object> status;
  if (!ObjectMember(obj, "status", &status)) return false;
  if (status && !StringMember(*status, "phase", &pod.phase)) return false;
  FinishPod(labels, &pod);
  *out = std::move(pod);
  return true;
}

}  // namespace

struct FastPodDecoder::Impl {
  dom::parser parser;
};

FastPodDecoder::FastPodDecoder() : impl_(std::make_unique<Impl>()) {}
FastPodDecoder::~FastPodDecoder() = default;

bool FastPodDecoder::DecodeEvent(std::string_view line, const std::string& resource, WatchEvent<PodInfo>* out) {
  dom::element doc;
  if (impl_->parser.parse(line.data(), line.size(), /*realloc_if_needed=*/true).get(doc) != simdjson::SUCCESS) {
    return false;
  }
  dom::object ev;
  if (doc.get_object().get(ev) != simdjson::SUCCESS) return false;
  std::optional<dom::element> type = Member(ev, "type");
  std::optional<dom::element> object = Member(ev, "object");
  std::string_view t;
  if (!type || !object || type->get_string().get(t) != simdjson::SUCCESS) return false;
  if (t == "ADDED") {
    out->type = WatchEventType::kAdded;
  } else if (t == "MODIFIED") {
    out->type = WatchEventType::kModified;
  } else if (t == "DELETED") {
    out->type = WatchEventType::kDeleted;
  } else {
    return false;  // BOOKMARK, ERROR, unknown: the reference path
  }
  return Pod(*object, resource, &out->object);
}

bool FastPodDecoder::DecodePod(std::string_view text, const std::string& resource, PodInfo* out) {
  dom::element doc;
  if (impl_->parser.parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(doc) != simdjson::SUCCESS) {
    return false;
  }
  return Pod(doc, resource, out);
}

}  // namespace vramd::kube
