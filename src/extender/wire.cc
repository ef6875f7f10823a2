#include "vramd/extender/wire.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <unordered_map>

namespace vramd::extender {
namespace od = simdjson::ondemand;

namespace {

bool KeyIs(std::string_view key, std::string_view want) {
  // Go decodes the extender's PascalCase keys case-insensitively; do the same.
  if (key.size() != want.size()) return false;
  for (size_t i = 0; i < key.size(); ++i) {
    char a = key[i], b = want[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = static_cast<char>(b - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
}

Status Bad(const std::string& where, simdjson::error_code e) {
  return InvalidArgument("invalid extender request: " + where + ": " + simdjson::error_message(e));
}

Status BadType(const std::string& where, const char* want) {
  return InvalidArgument("invalid extender request: " + where + " must be " + want);
}

// A quantity may be a string (the API's form) or, leniently, a bare number.
Status ReadQuantity(od::value v, const std::string& where, std::optional<std::string>* out) {
  od::json_type t;
  if (auto e = v.type().get(t)) return Bad(where, e);
  if (t == od::json_type::string) {
    std::string_view s;
    if (auto e = v.get_string().get(s)) return Bad(where, e);
    *out = std::string(s);
    return Status::Ok();
  }
  if (t == od::json_type::number) {
    std::string_view raw = v.raw_json_token();
    while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
      raw.remove_suffix(1);
    }
    *out = std::string(raw);
    return Status::Ok();
  }
  if (t == od::json_type::null) return Status::Ok();
  return BadType(where, "a quantity string");
}

// Reads map[resource]quantity and keeps the configured resource's amount.
Status ReadResourceMap(od::value v, const std::string& resource, const std::string& where,
                       std::optional<std::string>* out) {
  od::json_type t;
  if (auto e = v.type().get(t)) return Bad(where, e);
  if (t == od::json_type::null) return Status::Ok();
  if (t != od::json_type::object) return BadType(where, "an object");
  od::object obj;
  if (auto e = v.get_object().get(obj)) return Bad(where, e);
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return Bad(where, e);
    if (key == resource) {
      if (Status s = ReadQuantity(field.value(), where + "[" + resource + "]", out); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

Status ReadContainers(od::value v, const std::string& resource, const char* where_base, bool init,
                      std::vector<ledger::ContainerAmount>* out) {
  od::json_type t;
  if (auto e = v.type().get(t)) return Bad(where_base, e);
  if (t == od::json_type::null) return Status::Ok();
  if (t != od::json_type::array) return BadType(where_base, "an array");
  od::array arr;
  if (auto e = v.get_array().get(arr)) return Bad(where_base, e);
  size_t idx = 0;
  for (auto elem : arr) {
    std::string where = std::string(where_base) + "[" + std::to_string(idx++) + "]";
    od::object c;
    if (elem.get_object().get(c) != simdjson::SUCCESS) return BadType(where, "an object");
    ledger::ContainerAmount amount;
    for (auto field : c) {
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return Bad(where, e);
      if (key == "resources") {
        od::value rv = field.value();
        od::json_type rt;
        if (auto e = rv.type().get(rt)) return Bad(where + ".resources", e);
        if (rt == od::json_type::null) continue;
        od::object res;
        if (rv.get_object().get(res) != simdjson::SUCCESS) return BadType(where + ".resources", "an object");
        for (auto rf : res) {
          std::string_view rkey;
          if (auto e = rf.unescaped_key().get(rkey)) return Bad(where, e);
          if (rkey == "limits") {
            if (Status s = ReadResourceMap(rf.value(), resource, where + ".resources.limits", &amount.limit); !s.ok())
              return s;
          } else if (rkey == "requests") {
            if (Status s = ReadResourceMap(rf.value(), resource, where + ".resources.requests", &amount.request);
                !s.ok())
              return s;
          }
        }
      } else if (init && key == "restartPolicy") {
        std::string_view rp;
        if (field.value().get_string().get(rp) == simdjson::SUCCESS) amount.sidecar = rp == "Always";
      }
    }
    out->push_back(std::move(amount));
  }
  return Status::Ok();
}

// The controller among metadata.ownerReferences, as kube/decode.cc reads it:
// the first entry with controller true, its kind and uid strings (1 to
// kMaxOwnerField bytes); anything else leaves the pod bare (the API server
// validates owner references: this is not a user's mistake to report).
void ReadController(od::value v, ledger::PodSpecView* pod) {
  od::array refs;
  if (v.get_array().get(refs) != simdjson::SUCCESS) return;
  for (auto maybe_ref : refs) {
    od::object ref;
    if (maybe_ref.get_object().get(ref) != simdjson::SUCCESS) continue;
    bool controller = false;
    std::string_view kind, uid;
    for (auto f : ref) {
      std::string_view key;
      if (f.unescaped_key().get(key) != simdjson::SUCCESS) return;
      if (key == "controller") {
        if (f.value().get_bool().get(controller) != simdjson::SUCCESS) controller = false;
      } else if (key == "kind") {
        if (f.value().get_string().get(kind) != simdjson::SUCCESS) kind = {};
      } else if (key == "uid") {
        if (f.value().get_string().get(uid) != simdjson::SUCCESS) uid = {};
      }
    }
    if (!controller) continue;
    if (!kind.empty() && !uid.empty() && kind.size() <= ledger::kMaxOwnerField && uid.size() <= ledger::kMaxOwnerField) {
      pod->owner_kind = std::string(kind);
      pod->owner_uid = std::string(uid);
    }
    return;
  }
}

Status ReadMetadata(od::value v, ledger::PodSpecView* pod) {
  od::object md;
  if (v.get_object().get(md) != simdjson::SUCCESS) return BadType("Pod.metadata", "an object");
  // GangKey's labels and annotation, read as they come (any order).
  std::map<std::string, std::string> gang_labels, gang_annotations;
  for (auto field : md) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return Bad("Pod.metadata", e);
    if (key == "name" || key == "namespace" || key == "uid") {
      std::string_view s;
      if (field.value().get_string().get(s) != simdjson::SUCCESS) return BadType("Pod.metadata." + std::string(key), "a string");
      if (key == "name") pod->name = std::string(s);
      else if (key == "namespace") pod->ns = std::string(s);
      else pod->uid = std::string(s);
    } else if (key == "annotations") {
      od::value av = field.value();
      od::json_type t;
      if (auto e = av.type().get(t)) return Bad("Pod.metadata.annotations", e);
      if (t == od::json_type::null) continue;
      od::object ann;
      if (av.get_object().get(ann) != simdjson::SUCCESS) return BadType("Pod.metadata.annotations", "an object");
      for (auto a : ann) {
        std::string_view akey;
        if (auto e = a.unescaped_key().get(akey)) return Bad("Pod.metadata.annotations", e);
        if (akey == ledger::kGangAnnotation) {
          std::string_view val;
          if (a.value().get_string().get(val) == simdjson::SUCCESS) gang_annotations[std::string(akey)] = val;
          continue;
        }
        if (akey != "vramd.io/gpu-count" && akey != "vramd.io/vram-peak" && akey != "vramd.io/model" &&
            akey != ledger::kDisposableAnnotation && akey != ledger::kIdleTtlAnnotation &&
            akey != ledger::kEvictableAnnotation) {
          continue;
        }
        std::string_view val;
        if (a.value().get_string().get(val) != simdjson::SUCCESS) {
          return BadType("Pod.metadata.annotations[" + std::string(akey) + "]", "a string");
        }
        if (akey == "vramd.io/gpu-count") pod->gpu_count = std::string(val);
        else if (akey == "vramd.io/vram-peak") pod->vram_peak = std::string(val);
        else if (akey == "vramd.io/model") pod->model = std::string(val);
        else if (akey == ledger::kIdleTtlAnnotation) pod->idle_ttl = std::string(val);
        else if (akey == ledger::kEvictableAnnotation) pod->evictable = std::string(val);
        else pod->disposable = std::string(val);
      }
    } else if (key == "labels") {
      od::object labels;
      if (field.value().get_object().get(labels) != simdjson::SUCCESS) continue;  // null or odd: no gang
      for (auto l : labels) {
        std::string_view lkey, val;
        if (l.unescaped_key().get(lkey) != simdjson::SUCCESS) break;
        if (std::find(std::begin(ledger::kGangLabels), std::end(ledger::kGangLabels), lkey) ==
            std::end(ledger::kGangLabels)) {
          continue;
        }
        if (l.value().get_string().get(val) == simdjson::SUCCESS) gang_labels[std::string(lkey)] = val;
      }
    } else if (key == "ownerReferences") {
      ReadController(field.value(), pod);
    }
  }
  if (!gang_labels.empty() || !gang_annotations.empty()) pod->gang = ledger::GangKey(gang_labels, gang_annotations);
  return Status::Ok();
}

Status ReadSpec(od::value v, const std::string& resource, ledger::PodSpecView* pod) {
  od::object spec;
  if (v.get_object().get(spec) != simdjson::SUCCESS) return BadType("Pod.spec", "an object");
  for (auto field : spec) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return Bad("Pod.spec", e);
    if (key == "containers") {
      if (Status s = ReadContainers(field.value(), resource, "Pod.spec.containers", false, &pod->containers); !s.ok())
        return s;
    } else if (key == "initContainers") {
      if (Status s = ReadContainers(field.value(), resource, "Pod.spec.initContainers", true, &pod->init_containers);
          !s.ok())
        return s;
    } else if (key == "overhead") {
      if (Status s = ReadResourceMap(field.value(), resource, "Pod.spec.overhead", &pod->overhead); !s.ok()) return s;
    } else if (key == "priority") {
      // As the Kubernetes decoder (kube/decode.cc) reads it: a 32-bit integer or null.
      od::value pv = field.value();
      od::json_type pt;
      if (auto e = pv.type().get(pt)) return Bad("Pod.spec.priority", e);
      if (pt == od::json_type::null) continue;
      int64_t p = 0;
      if (pv.get_int64().get(p) != simdjson::SUCCESS || p < std::numeric_limits<int32_t>::min() ||
          p > std::numeric_limits<int32_t>::max()) {
        return BadType("Pod.spec.priority", "a 32-bit integer");
      }
      pod->priority = static_cast<int32_t>(p);
    } else if (key == "priorityClassName") {
      od::value cv = field.value();
      od::json_type ct;
      if (auto e = cv.type().get(ct)) return Bad("Pod.spec.priorityClassName", e);
      if (ct == od::json_type::null) continue;
      std::string_view name;
      if (cv.get_string().get(name) != simdjson::SUCCESS) return BadType("Pod.spec.priorityClassName", "a string");
      if (name.size() > ledger::kMaxPriorityClassName) {
        return InvalidArgument("invalid extender request: Pod.spec.priorityClassName is longer than " +
                               std::to_string(ledger::kMaxPriorityClassName) + " bytes");
      }
      pod->priority_class = std::string(name);
    }
  }
  return Status::Ok();
}

Status ReadPod(od::value v, const std::string& resource, ledger::PodSpecView* pod) {
  od::json_type t;
  if (auto e = v.type().get(t)) return Bad("Pod", e);
  if (t == od::json_type::null) return InvalidArgument("invalid extender request: Pod is null");
  od::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) return BadType("Pod", "an object");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return Bad("Pod", e);
    if (key == "metadata") {
      if (Status s = ReadMetadata(field.value(), pod); !s.ok()) return s;
    } else if (key == "spec") {
      if (Status s = ReadSpec(field.value(), resource, pod); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

}  // namespace

struct ArgsDecoder::Impl {
  od::parser parser;
  od::parser node_parser;  // for the names inside raw Node objects (non-cache mode)
  simdjson::padded_string body;
  std::vector<std::string> node_name_storage;  // names from Node objects (rare path)
};

ArgsDecoder::ArgsDecoder() : impl_(std::make_unique<Impl>()) {}
ArgsDecoder::~ArgsDecoder() = default;

Status ArgsDecoder::Decode(std::string_view body, const std::string& resource, ExtenderArgs* out) {
  *out = ExtenderArgs{};
  Impl& im = *impl_;
  im.node_name_storage.clear();
  // simdjson needs SIMDJSON_PADDING readable bytes after the document.
  // (A default-constructed padded_string has no buffer: an empty first body
  // must allocate one too.)
  if (im.body.data() == nullptr || im.body.size() < body.size() || im.body.size() > body.size() * 4 + 4096) {
    im.body = simdjson::padded_string(body.size());
  }
  if (!body.empty()) std::memcpy(im.body.data(), body.data(), body.size());
  std::memset(im.body.data() + body.size(), ' ', im.body.size() - body.size());

  od::document doc;
  if (auto e = im.parser.iterate(im.body.data(), body.size(), im.body.size() + simdjson::SIMDJSON_PADDING).get(doc)) {
    return Bad("body", e);
  }
  od::object top;
  if (auto e = doc.get_object().get(top)) {
    if (e == simdjson::TRAILING_CONTENT) {
      return InvalidArgument("invalid extender request: trailing content after the JSON object");
    }
    if (e == simdjson::INCORRECT_TYPE) return InvalidArgument("invalid extender request: body must be a JSON object");
    return Bad("body", e);
  }
  bool have_pod = false, have_names = false, have_nodes = false;
  for (auto field : top) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return Bad("body", e);
    if (KeyIs(key, "Pod")) {
      if (Status s = ReadPod(field.value(), resource, &out->pod); !s.ok()) return s;
      have_pod = true;
    } else if (KeyIs(key, "NodeNames")) {
      od::value v = field.value();
      od::json_type t;
      if (auto e = v.type().get(t)) return Bad("NodeNames", e);
      if (t == od::json_type::null) continue;
      od::array arr;
      if (v.get_array().get(arr) != simdjson::SUCCESS) return BadType("NodeNames", "an array of strings or null");
      for (auto elem : arr) {
        std::string_view name;
        if (elem.get_string().get(name) != simdjson::SUCCESS) return BadType("NodeNames[]", "a string");
        out->node_names.push_back(name);
      }
      have_names = true;
    } else if (KeyIs(key, "NodeNameToMetaVictims")) {
      od::value v = field.value();
      od::json_type t;
      if (auto e = v.type().get(t)) return Bad("NodeNameToMetaVictims", e);
      if (t == od::json_type::null) continue;
      od::object obj;
      if (v.get_object().get(obj) != simdjson::SUCCESS) return BadType("NodeNameToMetaVictims", "an object or null");
      std::string_view raw;
      if (auto e = obj.raw_json().get(raw)) return Bad("NodeNameToMetaVictims", e);
      out->meta_victims = raw;
    } else if (KeyIs(key, "Nodes")) {
      od::value v = field.value();
      od::json_type t;
      if (auto e = v.type().get(t)) return Bad("Nodes", e);
      if (t == od::json_type::null) continue;
      od::object nodes;
      if (v.get_object().get(nodes) != simdjson::SUCCESS) return BadType("Nodes", "a NodeList object or null");
      for (auto nf : nodes) {
        std::string_view nkey;
        if (auto e = nf.unescaped_key().get(nkey)) return Bad("Nodes", e);
        if (nkey != "items") continue;
        od::value iv = nf.value();
        od::json_type it;
        if (auto e = iv.type().get(it)) return Bad("Nodes.items", e);
        if (it == od::json_type::null) continue;
        od::array items;
        if (iv.get_array().get(items) != simdjson::SUCCESS) return BadType("Nodes.items", "an array");
        for (auto item : items) {
          od::object nobj;
          if (item.get_object().get(nobj) != simdjson::SUCCESS) return BadType("Nodes.items[]", "an object");
          std::string_view raw;
          if (auto e = nobj.raw_json().get(raw)) return Bad("Nodes.items[]", e);
          out->node_objects.push_back(raw);
        }
        have_nodes = true;
      }
    }
  }
  {
    const char* loc = nullptr;  // at the end of the document there is no location
    if (doc.current_location().get(loc) == simdjson::SUCCESS) {
      return InvalidArgument("invalid extender request: trailing content after the JSON object");
    }
  }
  if (!have_pod) return InvalidArgument("invalid extender request: missing Pod");
  if (!have_names && !have_nodes && out->meta_victims.empty()) {
    return InvalidArgument("invalid extender request: neither NodeNames nor Nodes.items is set");
  }
  if (!have_names && have_nodes) {
    // Non-cache mode: names come from each Node's metadata.name.
    out->cache_mode = false;
    im.node_name_storage.reserve(out->node_objects.size());
    for (std::string_view raw : out->node_objects) {
      simdjson::padded_string p(raw);
      od::document nd;
      std::string_view name;
      if (im.node_parser.iterate(p).get(nd) != simdjson::SUCCESS ||
          nd["metadata"]["name"].get_string().get(name) != simdjson::SUCCESS) {
        return InvalidArgument("invalid extender request: a Nodes.items entry has no metadata.name");
      }
      im.node_name_storage.emplace_back(name);
    }
    for (const std::string& n : im.node_name_storage) out->node_names.emplace_back(n);
  }
  return Status::Ok();
}

Result<BindArgs> DecodeBindArgs(std::string_view body) {
  simdjson::padded_string p(body);
  // One parser per thread, reused: a new one allocates its buffers (and its
  // 1,024-deep stack) on every bind, 1.6 % of vramd's CPU (issue 36).
  thread_local od::parser parser;
  od::document doc;
  if (auto e = parser.iterate(p).get(doc)) return Bad("body", e);
  od::object top;
  if (doc.get_object().get(top) != simdjson::SUCCESS) {
    return InvalidArgument("invalid bind request: body must be a JSON object");
  }
  BindArgs a;
  for (auto field : top) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return Bad("body", e);
    std::string* dst = nullptr;
    if (KeyIs(key, "PodName")) dst = &a.pod_name;
    else if (KeyIs(key, "PodNamespace")) dst = &a.pod_namespace;
    else if (KeyIs(key, "PodUID")) dst = &a.pod_uid;
    else if (KeyIs(key, "Node")) dst = &a.node;
    if (dst == nullptr) continue;
    std::string_view s;
    if (field.value().get_string().get(s) != simdjson::SUCCESS) return BadType(std::string(key), "a string");
    *dst = std::string(s);
  }
  if (a.pod_name.empty() || a.pod_namespace.empty() || a.pod_uid.empty() || a.node.empty()) {
    return InvalidArgument("invalid bind request: PodName, PodNamespace, PodUID and Node are required");
  }
  return a;
}

namespace {

// Nodes that fail alike share one reason text (the same view; Filter's
// reasons are grouped): it is escaped once and then copied from where it was
// first written.
class ReasonWriter {
 public:
  // `"name":"reason"` entries of `m`, each after a comma unless *first.
  void Entries(const std::vector<std::pair<std::string_view, std::string_view>>& m, bool* first, std::string* out) {
    for (const auto& [name, why] : m) {
      if (!*first) out->push_back(',');
      *first = false;
      AppendJsonString(name, out);
      out->push_back(':');
      if (why.data() == last_ && why.size() == last_size_) {
        out->append(out->data() + written_at_, written_len_);  // std::string copes with the overlap
        continue;
      }
      written_at_ = out->size();
      AppendJsonString(why, out);
      written_len_ = out->size() - written_at_;
      last_ = why.data();
      last_size_ = why.size();
    }
  }

 private:
  const char* last_ = nullptr;
  size_t last_size_ = 0, written_at_ = 0, written_len_ = 0;
};

}  // namespace

void WriteFilterResult(const ledger::FilterResult& r, const ExtenderArgs& args, std::string* out) {
  out->reserve(out->size() + 64 + r.fits.size() * 24 + (r.failed.size() + r.unresolvable.size()) * 96);
  if (args.cache_mode) {
    *out += "{\"NodeNames\":[";
    for (size_t i = 0; i < r.fits.size(); ++i) {
      if (i) out->push_back(',');
      AppendJsonString(r.fits[i], out);
    }
    *out += "],\"Nodes\":null,";
  } else {
    // Return the kept Node objects verbatim, in input order.
    std::unordered_map<std::string_view, std::string_view> by_name;
    for (size_t i = 0; i < args.node_names.size() && i < args.node_objects.size(); ++i) {
      by_name.emplace(args.node_names[i], args.node_objects[i]);
    }
    *out += "{\"NodeNames\":null,\"Nodes\":{\"metadata\":{},\"items\":[";
    bool first = true;
    for (std::string_view name : r.fits) {
      auto it = by_name.find(name);
      if (it == by_name.end()) continue;
      if (!first) out->push_back(',');
      first = false;
      out->append(it->second);
    }
    *out += "]},";
  }
  // Unresolvable nodes go in both maps: kube-scheduler 1.20 reads only
  // FailedNodes (so the pod's event shows why), and newer schedulers let
  // FailedAndUnresolvableNodes take precedence for a node listed in both.
  *out += "\"FailedNodes\":{";
  ReasonWriter reasons;
  bool first = true;
  reasons.Entries(r.failed, &first, out);
  reasons.Entries(r.unresolvable, &first, out);
  *out += "},\"FailedAndUnresolvableNodes\":{";
  first = true;
  reasons.Entries(r.unresolvable, &first, out);
  *out += "},\"Error\":\"\"}";
}

void WriteFilterError(std::string_view error, std::string* out) {
  *out += "{\"NodeNames\":null,\"Nodes\":null,\"FailedNodes\":{},\"FailedAndUnresolvableNodes\":{},\"Error\":";
  AppendJsonString(error, out);
  out->push_back('}');
}

void WriteHostPriorities(const std::vector<ledger::HostScore>& scores, std::string* out) {
  out->reserve(out->size() + 2 + scores.size() * 40);
  out->push_back('[');
  for (size_t i = 0; i < scores.size(); ++i) {
    if (i) out->push_back(',');
    *out += "{\"Host\":";
    AppendJsonString(scores[i].host, out);
    *out += ",\"Score\":";
    *out += std::to_string(scores[i].score);
    out->push_back('}');
  }
  out->push_back(']');
}

void WriteBindResult(std::string_view error, std::string* out) {
  *out += "{\"Error\":";
  AppendJsonString(error, out);
  out->push_back('}');
}

}  // namespace vramd::extender
