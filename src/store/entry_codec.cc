#include "store/entry_codec.h"

#include <limits>
#include <utility>

#include "vramd/json_string.h"
#include "vramd/ledger/capacity.h"
#include "vramd/ledger/pod_request.h"

namespace vramd::store {
namespace {

namespace od = simdjson::ondemand;
using ledger::Entry;

void AppendInt(std::string* out, const char* key, int64_t v) {
  *out += key;
  *out += std::to_string(v);
}

bool Fail(std::string reason, std::string* why) {
  *why = std::move(reason);
  return false;
}

// A JSON integer, or a float with an integral value (cjson writes large
// numbers as 1e+14).
bool Int(od::value& v, int64_t* out) {
  od::number_type type;
  if (v.get_number_type().get(type) != simdjson::SUCCESS) return false;
  if (type == od::number_type::signed_integer) {
    return v.get_int64().get(*out) == simdjson::SUCCESS;
  }
  double d = 0;
  if (v.get_double().get(d) != simdjson::SUCCESS) return false;
  if (!(d >= -9.2e18 && d <= 9.2e18) || d != static_cast<double>(static_cast<int64_t>(d))) {
    return false;
  }
  *out = static_cast<int64_t>(d);
  return true;
}

// A string, or null (which leaves *out as it is).
bool String(od::value& v, std::string* out) {
  od::json_type type;
  if (v.type().get(type) != simdjson::SUCCESS) return false;
  if (type == od::json_type::null) return true;
  std::string_view str;
  if (type != od::json_type::string || v.get_string().get(str) != simdjson::SUCCESS) return false;
  out->assign(str);
  return true;
}

}  // namespace

std::string EntryFieldProblem(const Entry& e) {
  if (e.priority_class.size() > ledger::kMaxPriorityClassName) {
    return "\"priority_class\" is longer than " + std::to_string(ledger::kMaxPriorityClassName) + " bytes";
  }
  if (e.used < 0 || e.used > ledger::kMaxBytesPerGpu) {
    return "\"used\" is not a byte count from 0 to 1 PiB";
  }
  if (e.used_ts_ms < 0 || e.used_ts_ms > kMaxEntryTimeMs) {
    return "\"used_ts_ms\" is not a time from 0 to the year 9999";
  }
  if (e.last_active_ms < 0 || e.last_active_ms > kMaxEntryTimeMs) {
    return "\"last_active_ms\" is not a time from 0 to the year 9999";
  }
  if (e.idle_ttl_ms < 0 || e.idle_ttl_ms > ledger::kMaxIdleTtlMs) {
    return "\"idle_ttl_ms\" is not a duration from 0 to 30 days";
  }
  if (e.owner_kind.size() > ledger::kMaxOwnerField || e.owner_uid.size() > ledger::kMaxOwnerField) {
    return "\"owner_kind\" or \"owner_uid\" is longer than " + std::to_string(ledger::kMaxOwnerField) + " bytes";
  }
  if (e.hold_until_ms < 0 || e.hold_until_ms > kMaxEntryTimeMs) {
    return "\"hold_until_ms\" is not a time from 0 to the year 9999";
  }
  if (e.gang.size() > ledger::kMaxGangKey) {
    return "\"gang\" is longer than " + std::to_string(ledger::kMaxGangKey) + " bytes";
  }
  return "";
}

std::string EncodeEntry(const Entry& e, bool omit_created) {
  std::string out;
  out.reserve(160 + e.ns.size() + e.name.size() + e.model.size() + e.priority_class.size());
  out += "{\"ns\":";
  AppendJsonString(e.ns, &out);
  out += ",\"name\":";
  AppendJsonString(e.name, &out);
  out += ",\"gpus\":[";
  for (size_t i = 0; i < e.gpus.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(e.gpus[i]);
  }
  out += ']';
  AppendInt(&out, ",\"per_gpu\":", e.per_gpu);
  AppendInt(&out, ",\"peak_per_gpu\":", e.peak_per_gpu);
  out += ",\"model\":";
  AppendJsonString(e.model, &out);
  out += ",\"state\":\"";
  out += ledger::EntryStateName(e.state);
  out += '"';
  // The fields added in 0.2, only where they say something (see the header).
  if (e.priority != 0) AppendInt(&out, ",\"priority\":", e.priority);
  if (!e.priority_class.empty()) {
    out += ",\"priority_class\":";
    AppendJsonString(e.priority_class, &out);
  }
  if (e.victim) out += ",\"victim\":true";
  if (e.used != 0) AppendInt(&out, ",\"used\":", e.used);
  if (e.used_ts_ms != 0) AppendInt(&out, ",\"used_ts_ms\":", e.used_ts_ms);
  if (e.last_active_ms != 0) AppendInt(&out, ",\"last_active_ms\":", e.last_active_ms);
  if (e.idle_ttl_ms != 0) AppendInt(&out, ",\"idle_ttl_ms\":", e.idle_ttl_ms);
  // Added in 0.3 (issue 32), the same way.
  if (!e.owner_kind.empty()) {
    out += ",\"owner_kind\":";
    AppendJsonString(e.owner_kind, &out);
  }
  if (!e.owner_uid.empty()) {
    out += ",\"owner_uid\":";
    AppendJsonString(e.owner_uid, &out);
  }
  if (e.evictable) out += ",\"evictable\":true";
  if (!e.gang.empty()) {
    out += ",\"gang\":";
    AppendJsonString(e.gang, &out);
  }
  if (e.hold_until_ms != 0) AppendInt(&out, ",\"hold_until_ms\":", e.hold_until_ms);
  out += ",\"created_ms\":";
  if (!omit_created) {
    out += std::to_string(e.created_ms);
    out += '}';
  }
  return out;
}

bool EntryDecoder::Decode(std::string_view text, Entry* e, std::string* why) {
  buf_.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  buf_.assign(text.data(), text.size());
  od::document doc;
  od::object obj;
  if (parser_.iterate(buf_.data(), buf_.size(), buf_.capacity()).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(obj) != simdjson::SUCCESS) {
    return Fail("not a JSON object", why);
  }
  bool have_gpus = false, have_per_gpu = false;
  for (auto maybe_field : obj) {
    od::field field;
    std::string_view key;
    if (std::move(maybe_field).get(field) != simdjson::SUCCESS || field.unescaped_key().get(key) != simdjson::SUCCESS) {
      return Fail("not JSON", why);
    }
    od::value v = field.value();
    if (key == "gpus") {
      od::array arr;
      if (v.get_array().get(arr) != simdjson::SUCCESS) return Fail("bad \"gpus\"", why);
      e->gpus.clear();
      for (auto maybe_item : arr) {
        od::value item;
        int64_t g = 0;
        if (std::move(maybe_item).get(item) != simdjson::SUCCESS || !Int(item, &g) || g < 0 || g > 1'000'000) {
          return Fail("bad GPU index in \"gpus\"", why);
        }
        e->gpus.push_back(static_cast<int>(g));
      }
      have_gpus = !e->gpus.empty();
    } else if (key == "per_gpu") {
      if (!Int(v, &e->per_gpu) || e->per_gpu < 0) return Fail("bad \"per_gpu\"", why);
      have_per_gpu = true;
    } else if (key == "peak_per_gpu") {
      if (!Int(v, &e->peak_per_gpu)) return Fail("bad \"peak_per_gpu\"", why);
    } else if (key == "created_ms") {
      if (!Int(v, &e->created_ms)) return Fail("bad \"created_ms\"", why);
    } else if (key == "state") {
      std::string_view st;
      if (v.get_string().get(st) != simdjson::SUCCESS || !ledger::ParseEntryState(st, &e->state)) {
        return Fail("bad \"state\"", why);
      }
    } else if (key == "ns" || key == "name" || key == "model" || key == "priority_class" || key == "owner_kind" ||
               key == "owner_uid" || key == "gang") {
      std::string* out = key == "ns"               ? &e->ns
                         : key == "name"           ? &e->name
                         : key == "model"          ? &e->model
                         : key == "priority_class" ? &e->priority_class
                         : key == "owner_kind"     ? &e->owner_kind
                         : key == "owner_uid"      ? &e->owner_uid
                                                   : &e->gang;
      if (!String(v, out)) return Fail("a non-string \"" + std::string(key) + "\"", why);
    } else if (key == "priority") {
      int64_t p = 0;
      if (!Int(v, &p) || p < std::numeric_limits<int32_t>::min() || p > std::numeric_limits<int32_t>::max()) {
        return Fail("\"priority\" is not a 32-bit integer", why);
      }
      e->priority = static_cast<int32_t>(p);
    } else if (key == "victim" || key == "evictable") {
      bool* out = key == "victim" ? &e->victim : &e->evictable;
      od::json_type type;
      if (v.type().get(type) != simdjson::SUCCESS) return Fail("not JSON", why);
      if (type != od::json_type::null && v.get_bool().get(*out) != simdjson::SUCCESS) {
        return Fail("\"" + std::string(key) + "\" is not true or false", why);
      }
    } else if (key == "used" || key == "used_ts_ms" || key == "last_active_ms" || key == "idle_ttl_ms" ||
               key == "hold_until_ms") {
      int64_t* out = key == "used"             ? &e->used
                     : key == "used_ts_ms"     ? &e->used_ts_ms
                     : key == "last_active_ms" ? &e->last_active_ms
                     : key == "idle_ttl_ms"    ? &e->idle_ttl_ms
                                               : &e->hold_until_ms;
      if (!Int(v, out)) return Fail("\"" + std::string(key) + "\" is not an integer", why);
    }
    // Unknown fields are skipped (written by a newer version).
  }
  if (!have_gpus) return Fail("no \"gpus\" array", why);
  if (!have_per_gpu) return Fail("no \"per_gpu\"", why);
  if (std::string problem = EntryFieldProblem(*e); !problem.empty()) return Fail(std::move(problem), why);
  return true;
}

}  // namespace vramd::store
