#include "vramd/kube/decode.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>

#include "kube/json_decode.h"
#include "vramd/ledger/quantity.h"

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

// The controller among metadata.ownerReferences (the one with controller:
// true, with a string kind and uid of at most kMaxOwnerField bytes). Anything
// else leaves both empty: the pod then counts as bare, which only keeps it
// from vramd's own evictions (the API server validates owner references, so
// this is hostile or corrupt input, not a user's mistake).
void ControllerOf(const json& metadata, std::string& kind, std::string& uid) {
  const json* refs = Member(metadata, "ownerReferences");
  if (refs == nullptr || !refs->is_array()) return;
  for (const json& r : *refs) {
    if (!r.is_object()) continue;
    const json* controller = Member(r, "controller");
    if (controller == nullptr || !controller->is_boolean() || !controller->get<bool>()) continue;
    const json* k = Member(r, "kind");
    const json* u = Member(r, "uid");
    if (k == nullptr || u == nullptr || !k->is_string() || !u->is_string()) return;
    const std::string& ks = k->get_ref<const std::string&>();
    const std::string& us = u->get_ref<const std::string&>();
    if (ks.empty() || us.empty() || ks.size() > ledger::kMaxOwnerField || us.size() > ledger::kMaxOwnerField) return;
    kind = ks;
    uid = us;
    return;
  }
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
  if (const json* ts = Member(*md, "deletionTimestamp"); ts != nullptr) {
    pod.deleting = true;
    if (ts->is_string()) pod.deletion_ms = ParseRfc3339Ms(ts->get_ref<const std::string&>()).value_or(0);
  }
  std::map<std::string, std::string> labels;
  if (Status s = StringMapMember(*md, "labels", "metadata.labels", labels); !s.ok()) return s;
  ControllerOf(*md, pod.spec.owner_kind, pod.spec.owner_uid);

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

  FinishPod(labels, &pod);
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

// ---- VramQueue ----------------------------------------------------------

constexpr size_t kMaxSubdomainBytes = 253;
constexpr size_t kMaxLabelBytes = 63;
constexpr size_t kMaxQuotedBytes = 64;
constexpr size_t kMaxConditionMessageBytes = 4096;

// Cuts `s` to at most `max` bytes without splitting a UTF-8 sequence.
std::string_view CutUtf8(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut);
}

// A value from the cluster quoted in a message: at most 64 bytes, control
// characters shown as '?'.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : CutUtf8(s, kMaxQuotedBytes)) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  out += s.size() > kMaxQuotedBytes ? "\"..." : "\"";
  return out;
}

bool IsAlnumLower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 1123 label, as Kubernetes names a namespace: [a-z0-9]([-a-z0-9]*[a-z0-9])?, <= 63.
bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > kMaxLabelBytes || !IsAlnumLower(s.front()) || !IsAlnumLower(s.back())) return false;
  for (char c : s) {
    if (!IsAlnumLower(c) && c != '-') return false;
  }
  return true;
}

// RFC 1123 subdomain (an object's name): labels joined by '.', <= 253 bytes.
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > kMaxSubdomainBytes) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || !IsAlnumLower(label.front()) || !IsAlnumLower(label.back())) return false;
    for (char c : label) {
      if (!IsAlnumLower(c) && c != '-') return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// A name vramd can use to address an object (status patches, logs, metrics):
// 1..253 bytes, no '/', '%' or control characters, not "." or "..".
bool IsObjectName(std::string_view s) {
  if (s.empty() || s.size() > kMaxSubdomainBytes || s == "." || s == "..") return false;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '/' || c == '%') return false;
  }
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

}  // namespace

void FinishPod(const std::map<std::string, std::string>& labels, PodInfo* pod) {
  pod->spec.gang = ledger::GangKey(labels, pod->annotations);
  pod->spec.uid = pod->uid;
  pod->spec.ns = pod->ns;
  pod->spec.name = pod->name;
  pod->spec.gpu_count = Annotation(pod->annotations, kGpuCountAnnotation);
  pod->spec.vram_peak = Annotation(pod->annotations, kVramPeakAnnotation);
  pod->spec.model = Annotation(pod->annotations, kModelAnnotation).value_or("");
  pod->spec.disposable = Annotation(pod->annotations, ledger::kDisposableAnnotation);
  pod->spec.idle_ttl = Annotation(pod->annotations, ledger::kIdleTtlAnnotation);
  pod->spec.evictable = Annotation(pod->annotations, ledger::kEvictableAnnotation);
}

// "2026-11-24T20:12:21Z", "2026-11-24T20:12:21.5+01:00": milliseconds since
// the epoch (fractions beyond milliseconds dropped); nullopt when malformed.
std::optional<int64_t> ParseRfc3339Ms(std::string_view s) {
  auto digits = [&](size_t at, size_t n) -> std::optional<int64_t> {
    if (at + n > s.size()) return std::nullopt;
    int64_t v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
      s[16] != ':') {
    return std::nullopt;
  }
  auto year = digits(0, 4), month = digits(5, 2), day = digits(8, 2);
  auto hour = digits(11, 2), minute = digits(14, 2), second = digits(17, 2);
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  static constexpr int kDaysIn[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (*month < 1 || *month > 12 || *day < 1 || *day > kDaysIn[*month - 1] || *hour > 23 || *minute > 59 ||
      *second > 60) {
    return std::nullopt;
  }
  size_t i = 19;
  int64_t ms = 0;
  if (s[i] == '.') {
    size_t start = ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (i - start < 3) ms = ms * 10 + (s[i] - '0');
      ++i;
    }
    if (i == start) return std::nullopt;
    for (size_t k = i - start; k < 3; ++k) ms *= 10;
  }
  int64_t offset_min = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    auto oh = digits(i + 1, 2), om = digits(i + 4, 2);
    if (!oh || !om || i + 3 >= s.size() || s[i + 3] != ':' || *oh > 23 || *om > 59) return std::nullopt;
    offset_min = (s[i] == '-' ? -1 : 1) * (*oh * 60 + *om);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const int64_t days = DaysFromCivil(*year, *month, *day);
  const int64_t secs = days * 86400 + *hour * 3600 + *minute * 60 + *second - offset_min * 60;
  return secs * 1000 + ms;
}

namespace {

// The messages of a queue's wrong fields.
class FieldErrors {
 public:
  void Add(const std::string& path, const std::string& what) {
    if (!text_.empty()) text_ += "; ";
    text_ += path + ": " + what;
  }
  void Type(const std::string& path, const char* want, const json& got) {
    Add(path, std::string("expected ") + want + ", got " + got.type_name());
  }
  std::string text() && { return std::move(text_); }

 private:
  std::string text_;
};

// A JSON number that is a whole number (an integer, or a float without a
// fraction) within int64; nullopt otherwise.
std::optional<int64_t> WholeNumber(const json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// spec.deserved / spec.limit: a quantity string or a JSON integer of bytes,
// 0..kMaxQueueBytes. nullopt (an error added) when wrong.
std::optional<int64_t> QueueBytes(const json& v, const std::string& path, FieldErrors& errs) {
  int64_t bytes = 0;
  if (v.is_string()) {
    Result<int64_t> parsed = ledger::ParseBytes(v.get_ref<const std::string&>());
    if (!parsed.ok()) {
      errs.Add(path, parsed.status().message());
      return std::nullopt;
    }
    bytes = *parsed;
  } else if (v.is_number()) {
    std::optional<int64_t> n = WholeNumber(v);
    const double d = v.get<double>();
    if (!n && d < 0) {
      errs.Add(path, v.dump() + " is negative");
      return std::nullopt;
    }
    if (!n && (v.is_number_unsigned() || !std::isfinite(d) || d >= 9.2e18)) {
      errs.Add(path, v.dump() + " is above the maximum of " + ledger::FormatBytes(ledger::kMaxQueueBytes));
      return std::nullopt;
    }
    if (!n) {
      errs.Add(path, v.dump() + " is not a whole number of bytes");
      return std::nullopt;
    }
    if (*n < 0) {
      errs.Add(path, v.dump() + " is negative");
      return std::nullopt;
    }
    bytes = *n;
  } else {
    errs.Type(path, "a quantity (string or integer)", v);
    return std::nullopt;
  }
  if (bytes > ledger::kMaxQueueBytes) {
    errs.Add(path, (v.is_string() ? Quote(v.get_ref<const std::string&>()) : v.dump()) + " is above the maximum of " +
                       ledger::FormatBytes(ledger::kMaxQueueBytes) + " (" + std::to_string(ledger::kMaxQueueBytes) +
                       " bytes)");
    return std::nullopt;
  }
  return bytes;
}

void DecodeQueueMetadata(const json& obj, ledger::QueueSpec& q, FieldErrors& errs) {
  const json* md = Member(obj, "metadata");
  if (md == nullptr) return errs.Add("metadata", "missing");
  if (!md->is_object()) return errs.Type("metadata", "object", *md);
  const json* name = Member(*md, "name");
  if (name == nullptr) {
    errs.Add("metadata.name", "missing");
  } else if (!name->is_string()) {
    errs.Type("metadata.name", "string", *name);
  } else if (!IsObjectName(name->get_ref<const std::string&>())) {
    errs.Add("metadata.name", Quote(name->get_ref<const std::string&>()) + " is not an object name");
  } else {
    // The API server checks little more than a path segment for a custom
    // resource's name: keep the object (its status can say what is wrong).
    q.name = name->get_ref<const std::string&>();
    if (!IsDnsSubdomain(q.name)) {
      errs.Add("metadata.name", Quote(q.name) + " is not a DNS subdomain (lowercase letters, digits, '-', '.')");
    }
  }
  if (const json* uid = Member(*md, "uid"); uid != nullptr) {
    if (uid->is_string()) {
      q.uid = uid->get_ref<const std::string&>();
    } else {
      errs.Type("metadata.uid", "string", *uid);
    }
  }
  if (const json* ts = Member(*md, "creationTimestamp"); ts != nullptr) {
    std::optional<int64_t> ms = ts->is_string() ? ParseRfc3339Ms(ts->get_ref<const std::string&>()) : std::nullopt;
    if (!ts->is_string()) {
      errs.Type("metadata.creationTimestamp", "string", *ts);
    } else if (!ms) {
      errs.Add("metadata.creationTimestamp", Quote(ts->get_ref<const std::string&>()) + " is not an RFC 3339 time");
    } else {
      q.created_ms = *ms;
    }
  }
}

void DecodeQueueNamespaces(const json& spec, ledger::QueueSpec& q, FieldErrors& errs) {
  const json* arr = Member(spec, "namespaces");
  if (arr == nullptr) return;
  if (!arr->is_array()) return errs.Type("spec.namespaces", "array", *arr);
  if (arr->size() > ledger::kMaxQueueNamespaces) {
    return errs.Add("spec.namespaces", std::to_string(arr->size()) + " entries, more than the maximum of " +
                                           std::to_string(ledger::kMaxQueueNamespaces));
  }
  std::set<std::string_view> seen;
  std::vector<std::string> out;
  out.reserve(arr->size());
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& ns = (*arr)[i];
    const std::string path = "spec.namespaces[" + std::to_string(i) + "]";
    if (!ns.is_string()) return errs.Type(path, "string", ns);
    const std::string& name = ns.get_ref<const std::string&>();
    if (!IsDnsLabel(name)) return errs.Add(path, Quote(name) + " is not a namespace name (a DNS label)");
    if (seen.insert(name).second) out.push_back(name);
  }
  q.namespaces = std::move(out);
}

void DecodeQueueSpec(const json& obj, ledger::QueueSpec& q, FieldErrors& errs) {
  const json* spec = Member(obj, "spec");
  if (spec == nullptr) return errs.Add("spec", "missing (spec.deserved is required)");
  if (!spec->is_object()) return errs.Type("spec", "object", *spec);
  if (const json* parent = Member(*spec, "parent"); parent != nullptr) {
    if (!parent->is_string()) {
      errs.Type("spec.parent", "string", *parent);
    } else if (!parent->get_ref<const std::string&>().empty() &&
               !IsDnsSubdomain(parent->get_ref<const std::string&>())) {
      errs.Add("spec.parent", Quote(parent->get_ref<const std::string&>()) + " is not a queue name (a DNS subdomain)");
    } else {
      q.parent = parent->get_ref<const std::string&>();
    }
  }
  DecodeQueueNamespaces(*spec, q, errs);
  if (const json* deserved = Member(*spec, "deserved"); deserved == nullptr) {
    errs.Add("spec.deserved", "missing (a quantity such as 16Gi)");
  } else if (std::optional<int64_t> b = QueueBytes(*deserved, "spec.deserved", errs)) {
    q.deserved = *b;
  }
  if (const json* limit = Member(*spec, "limit"); limit != nullptr) {
    if (std::optional<int64_t> b = QueueBytes(*limit, "spec.limit", errs)) q.limit = *b;
  }
  if (const json* w = Member(*spec, "overQuotaWeight"); w != nullptr) {
    std::optional<int64_t> n = w->is_number() ? WholeNumber(*w) : std::nullopt;
    if (!w->is_number()) {
      errs.Type("spec.overQuotaWeight", "integer", *w);
    } else if (!n || *n < 0 || *n > ledger::kMaxQueueWeight) {
      errs.Add("spec.overQuotaWeight",
               w->dump() + " is not an integer from 0 to " + std::to_string(ledger::kMaxQueueWeight));
    } else {
      q.weight = *n;
    }
  }
}

ledger::QueueSpec QueueFromJsonUnchecked(const json& obj) {
  ledger::QueueSpec q;
  FieldErrors errs;
  if (!obj.is_object()) {
    errs.Add("object", std::string("expected a JSON object, got ") + obj.type_name());
  } else {
    DecodeQueueMetadata(obj, q, errs);
    DecodeQueueSpec(obj, q, errs);
  }
  q.decode_error = std::move(errs).text();
  return q;
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

ledger::QueueSpec QueueFromJson(const json& obj) {
  try {
    return QueueFromJsonUnchecked(obj);
  } catch (const json::exception& e) {  // not expected: every access is type-checked
    ledger::QueueSpec q;
    q.decode_error = std::string("object: ") + e.what();
    return q;
  }
}

Result<ledger::QueueSpec> QueueWithName(const json& obj) {
  ledger::QueueSpec q = QueueFromJson(obj);
  if (q.name.empty()) return InvalidArgument(q.decode_error);
  return q;
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

ledger::QueueSpec DecodeQueue(std::string_view text) {
  json obj = ParseOrDiscard(text);
  if (obj.is_discarded()) {
    ledger::QueueSpec q;
    q.decode_error = "object: not valid JSON";
    return q;
  }
  return QueueFromJson(obj);
}

std::string QueueStatusPatch(const ledger::QueueStatus& st, std::string_view transition_time) {
  std::string reason = st.reason.empty() ? (st.valid ? "Valid" : "Invalid") : st.reason;
  json condition = {
      {"type", "Valid"},
      {"status", st.valid ? "True" : "False"},
      {"reason", std::move(reason)},
  };
  // Empty strings are left out: kube-apiserver 1.20 (the testbed's) turns ""
  // in a patch into null, which a string field of the schema refuses.
  if (!st.message.empty()) condition["message"] = std::string(CutUtf8(st.message, kMaxConditionMessageBytes));
  if (!transition_time.empty()) condition["lastTransitionTime"] = std::string(transition_time);
  json status = {
      {"deserved", ledger::FormatBytes(st.deserved)},
      {"limit", st.limit ? json(ledger::FormatBytes(*st.limit)) : json(nullptr)},
      {"allocated", ledger::FormatBytes(st.allocated)},
      {"fairShare", ledger::FormatBytes(st.fair_share)},
      {"pending", ledger::FormatBytes(st.pending)},
      {"allocatedBytes", st.allocated},
      {"fairShareBytes", st.fair_share},
      {"pendingBytes", st.pending},
      {"conditions", json::array({std::move(condition)})},
  };
  return json{{"status", std::move(status)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace vramd::kube
