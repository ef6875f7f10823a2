// The body of a Kubernetes watch: newline-delimited JSON events
// {"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{…}}, arriving in
// chunks that do not line up with events. Private to src/kube.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "vramd/kube/kube_client.h"
#include "vramd/status.h"

namespace vramd::kube {

// Reassembles lines from arbitrary chunks. Not thread-safe (one per stream).
class LineSplitter {
 public:
  using LineFn = std::function<bool(std::string_view line)>;

  explicit LineSplitter(size_t max_line_bytes = size_t{64} << 20);

  // Appends `chunk` and calls `on_line` for each completed line, without its
  // '\n' (and a '\r' before it); empty lines are skipped. Returns false, and
  // stops, as soon as `on_line` returns false or an unterminated line grows
  // past max_line_bytes (overflowed() is then true).
  bool Feed(std::string_view chunk, const LineFn& on_line);

  // The stream ended: delivers a last unterminated line, if any.
  bool Finish(const LineFn& on_line);

  bool overflowed() const { return overflowed_; }

 private:
  std::string partial_;
  size_t max_line_bytes_;
  bool overflowed_ = false;
};

// Decodes one watch line and calls `on_event` for ADDED, MODIFIED, DELETED
// and BOOKMARK (whose object carries only resource_version). Returns:
//   OK           event delivered, or its object undecodable (skipped, warning logged),
//                or an unknown event type (skipped, warning logged);
//   ERROR event  StatusFromHttp(object.code, …): 410 → kConflict "410 Gone: …";
//   kInternal    the line is not JSON or not a watch event.
// `on_event` must not throw.
// Pod events of well-formed pods are decoded by FastPodDecoder
// (kube/pod_simdjson.h); the rest by the reference path below, which judges
// and reports them.
Status HandlePodWatchLine(std::string_view line, const std::string& resource,
                          const std::function<void(const WatchEvent<PodInfo>&)>& on_event);
// HandlePodWatchLine through the nlohmann decoder alone (the reference the
// fast decoder is tested against).
Status HandlePodWatchLineReference(std::string_view line, const std::string& resource,
                                   const std::function<void(const WatchEvent<PodInfo>&)>& on_event);
Status HandleNodeWatchLine(std::string_view line, const std::function<void(const WatchEvent<NodeInfo>&)>& on_event);
// VramQueue events: an object with a readable name is delivered even when its
// decode_error is set; one without is skipped (warning). BOOKMARK events come
// with an empty QueueSpec (it has no resourceVersion).
Status HandleQueueWatchLine(std::string_view line,
                            const std::function<void(const WatchEvent<ledger::QueueSpec>&)>& on_event);

}  // namespace vramd::kube
