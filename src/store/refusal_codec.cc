#include "store/refusal_codec.h"

#include <limits>

#include "store/entry_codec.h"
#include "vramd/json_string.h"
#include "vramd/ledger/capacity.h"
#include "vramd/ledger/pod_request.h"

namespace vramd::store {
namespace {

namespace od = simdjson::ondemand;

bool Fail(std::string reason, std::string* why) {
  *why = std::move(reason);
  return false;
}

// A JSON integer within [lo, hi].
bool Int(od::value& v, int64_t lo, int64_t hi, int64_t* out) {
  int64_t n = 0;
  if (v.get_int64().get(n) != simdjson::SUCCESS || n < lo || n > hi) return false;
  *out = n;
  return true;
}

}  // namespace

std::string EncodeRefusalBody(const Refusal& r) {
  std::string out = "\"ns\":";
  AppendJsonString(r.ns, &out);
  out += ",\"name\":";
  AppendJsonString(r.name, &out);
  out += ",\"per_gpu\":" + std::to_string(r.per_gpu);
  out += ",\"peak_per_gpu\":" + std::to_string(r.peak_per_gpu);
  out += ",\"gpu_count\":" + std::to_string(r.gpu_count);
  out += r.victim ? ",\"victim\":true" : ",\"victim\":false";
  out += ",\"priority\":" + std::to_string(r.priority);
  if (!r.priority_class.empty()) {
    out += ",\"priority_class\":";
    AppendJsonString(r.priority_class, &out);
  }
  out += ",\"idle_ttl_ms\":" + std::to_string(r.idle_ttl_ms);
  out += ",\"nodes\":[";
  for (size_t i = 0; i < r.nodes.size() && i < kMaxRefusalNodes; ++i) {
    if (i > 0) out += ',';
    AppendJsonString(r.nodes[i], &out);
  }
  out += "]}";
  return out;
}

bool DecodeRefusal(od::parser& parser, std::string_view text, Refusal* r, std::string* why) {
  const simdjson::padded_string padded(text);
  od::document doc;
  od::object obj;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS || doc.get_object().get(obj) != simdjson::SUCCESS) {
    return Fail("not a JSON object", why);
  }
  bool have_ts = false, have_per_gpu = false;
  for (auto maybe_field : obj) {
    od::field field;
    std::string_view key;
    if (std::move(maybe_field).get(field) != simdjson::SUCCESS || field.unescaped_key().get(key) != simdjson::SUCCESS) {
      return Fail("not JSON", why);
    }
    od::value v = field.value();
    int64_t n = 0;
    if (key == "ts_ms") {
      if (!Int(v, 0, kMaxEntryTimeMs, &r->ts_ms)) return Fail("bad \"ts_ms\"", why);
      have_ts = true;
    } else if (key == "ns" || key == "name") {
      std::string_view s;
      if (v.get_string().get(s) != simdjson::SUCCESS) return Fail("bad \"" + std::string(key) + "\"", why);
      (key == "ns" ? r->ns : r->name).assign(s);
    } else if (key == "per_gpu") {
      if (!Int(v, 0, ledger::kMaxBytesPerGpu, &r->per_gpu)) return Fail("bad \"per_gpu\"", why);
      have_per_gpu = true;
    } else if (key == "peak_per_gpu") {
      if (!Int(v, 0, ledger::kMaxBytesPerGpu, &r->peak_per_gpu)) return Fail("bad \"peak_per_gpu\"", why);
    } else if (key == "gpu_count") {
      if (!Int(v, 1, ledger::kMaxGpuCount, &n)) return Fail("bad \"gpu_count\"", why);
      r->gpu_count = static_cast<int>(n);
    } else if (key == "victim") {
      if (v.get_bool().get(r->victim) != simdjson::SUCCESS) return Fail("bad \"victim\"", why);
    } else if (key == "priority") {
      if (!Int(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), &n)) {
        return Fail("bad \"priority\"", why);
      }
      r->priority = static_cast<int32_t>(n);
    } else if (key == "priority_class") {
      std::string_view s;
      if (v.get_string().get(s) != simdjson::SUCCESS || s.size() > ledger::kMaxPriorityClassName) {
        return Fail("bad \"priority_class\"", why);
      }
      r->priority_class.assign(s);
    } else if (key == "idle_ttl_ms") {
      if (!Int(v, 0, ledger::kMaxIdleTtlMs, &r->idle_ttl_ms)) return Fail("bad \"idle_ttl_ms\"", why);
    } else if (key == "nodes") {
      od::array arr;
      if (v.get_array().get(arr) != simdjson::SUCCESS) return Fail("bad \"nodes\"", why);
      r->nodes.clear();
      for (auto maybe_item : arr) {
        std::string_view s;
        if (std::move(maybe_item).get_string().get(s) != simdjson::SUCCESS || r->nodes.size() >= kMaxRefusalNodes) {
          return Fail("bad \"nodes\"", why);
        }
        r->nodes.emplace_back(s);
      }
    }
  }
  if (!have_ts || !have_per_gpu) return Fail("\"ts_ms\" or \"per_gpu\" is missing", why);
  // simdjson on demand reads lazily: trailing garbage shows only here.
  const char* loc = nullptr;  // at the end of the document there is no location
  if (doc.current_location().get(loc) == simdjson::SUCCESS) return Fail("not JSON", why);
  return true;
}

}  // namespace vramd::store
