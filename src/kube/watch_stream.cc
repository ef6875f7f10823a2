#include "kube/watch_stream.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "kube/api_status.h"
#include "kube/json_decode.h"
#include "kube/pod_simdjson.h"

namespace vramd::kube {
namespace {

using nlohmann::json;

std::optional<WatchEventType> ParseType(const std::string& t) {
  if (t == "ADDED") return WatchEventType::kAdded;
  if (t == "MODIFIED") return WatchEventType::kModified;
  if (t == "DELETED") return WatchEventType::kDeleted;
  if (t == "BOOKMARK") return WatchEventType::kBookmark;
  return std::nullopt;
}

// An ERROR event's object is a metav1.Status: {"code":410,"message":…,"reason":"Expired"}.
Status ErrorEventStatus(const json& obj, const char* what) {
  int code = 500;
  std::string message = "watch ERROR event";
  if (obj.is_object()) {
    auto c = obj.find("code");
    if (c != obj.end() && c->is_number_integer()) code = c->get<int>();
    auto m = obj.find("message");
    if (m != obj.end() && m->is_string()) message = m->get<std::string>();
  }
  if (code >= 200 && code <= 299) code = 500;  // an ERROR is never a success
  return StatusFromHttp(code, what, message);
}

template <typename T, typename Decode>
Status HandleLine(std::string_view line, const char* what, const Decode& decode,
                  const std::function<void(const WatchEvent<T>&)>& on_event) {
  try {
    json ev = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (ev.is_discarded() || !ev.is_object()) {
      return Internal(std::string(what) + ": a stream line is not a JSON object");
    }
    auto type_it = ev.find("type");
    auto obj_it = ev.find("object");
    if (type_it == ev.end() || !type_it->is_string() || obj_it == ev.end()) {
      return Internal(std::string(what) + ": a stream line is not a watch event (no type/object)");
    }
    const std::string& type = type_it->get_ref<const std::string&>();
    if (type == "ERROR") return ErrorEventStatus(*obj_it, what);
    std::optional<WatchEventType> t = ParseType(type);
    if (!t) {
      spdlog::warn("{}: skipping an event of unknown type \"{}\"", what, type);
      return Status::Ok();
    }
    WatchEvent<T> out{*t, T{}};
    if (*t == WatchEventType::kBookmark) {
      if constexpr (requires { out.object.resource_version; }) out.object.resource_version = ResourceVersionOf(*obj_it);
    } else {
      Result<T> decoded = decode(*obj_it);
      if (!decoded.ok()) {
        spdlog::warn("{}: skipping {} {}: {}", what, type, ObjectRef(*obj_it), decoded.status().message());
        return Status::Ok();
      }
      out.object = std::move(*decoded);
    }
    on_event(out);
    return Status::Ok();
  } catch (const json::exception& e) {
    return Internal(std::string(what) + ": " + e.what());
  }
}

}  // namespace

LineSplitter::LineSplitter(size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

bool LineSplitter::Feed(std::string_view chunk, const LineFn& on_line) {
  if (overflowed_) return false;
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      if (partial_.size() + chunk.size() > max_line_bytes_) {
        overflowed_ = true;
        partial_.clear();
        return false;
      }
      partial_.append(chunk);
      return true;
    }
    std::string_view line;
    if (partial_.empty()) {
      line = chunk.substr(0, nl);  // no copy in the common case
    } else {
      partial_.append(chunk.substr(0, nl));
      line = partial_;
    }
    chunk.remove_prefix(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool go_on = line.empty() || on_line(line);
    partial_.clear();
    if (!go_on) return false;
  }
  return true;
}

bool LineSplitter::Finish(const LineFn& on_line) {
  if (overflowed_ || partial_.empty()) return true;
  std::string last = std::move(partial_);
  partial_.clear();
  std::string_view line = last;
  if (line.back() == '\r') line.remove_suffix(1);
  return line.empty() || on_line(line);
}

Status HandlePodWatchLine(std::string_view line, const std::string& resource,
                          const std::function<void(const WatchEvent<PodInfo>&)>& on_event) {
  // The events of well-formed pods take the fast decoder (a bound pod's
  // event costs ~28 us through an nlohmann tree); anything it is not sure of
  // is decoded, judged and reported by the reference path.
  thread_local FastPodDecoder fast;
  WatchEvent<PodInfo> event{WatchEventType::kAdded, PodInfo{}};
  if (fast.DecodeEvent(line, resource, &event)) {
    on_event(event);
    return Status::Ok();
  }
  return HandlePodWatchLineReference(line, resource, on_event);
}

Status HandlePodWatchLineReference(std::string_view line, const std::string& resource,
                                   const std::function<void(const WatchEvent<PodInfo>&)>& on_event) {
  return HandleLine<PodInfo>(
      line, "watch pods", [&](const json& obj) { return PodFromJson(obj, resource); }, on_event);
}

Status HandleNodeWatchLine(std::string_view line, const std::function<void(const WatchEvent<NodeInfo>&)>& on_event) {
  return HandleLine<NodeInfo>(
      line, "watch nodes", [](const json& obj) { return NodeFromJson(obj); }, on_event);
}

Status HandleQueueWatchLine(std::string_view line,
                            const std::function<void(const WatchEvent<ledger::QueueSpec>&)>& on_event) {
  return HandleLine<ledger::QueueSpec>(line, "watch vramqueues", QueueWithName, on_event);
}

}  // namespace vramd::kube
