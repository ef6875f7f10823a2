// The pod watch's fast decoder (simdjson's DOM): the events a watch brings
// (ADDED, MODIFIED, DELETED of well-formed pods) decoded without building an
// nlohmann tree of every field, managedFields included. It decides only what
// it is sure of: any doubt — another event type, a value of an unusual type
// (a quantity as a JSON number, a non-string annotation), a missing name,
// invalid JSON — answers "not mine", and the caller decodes the line with the
// reference decoder (PodFromJson), which says what is wrong. What it does
// decode equals the reference's PodInfo field for field (duplicate keys: the
// last wins, as there); tests/unit/kube/pod_simdjson_test.cc and the
// kube_pod fuzz target check that. Private to src/kube.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "vramd/kube/kube_client.h"

namespace vramd::kube {

class FastPodDecoder {
 public:
  FastPodDecoder();
  ~FastPodDecoder();
  FastPodDecoder(const FastPodDecoder&) = delete;
  FastPodDecoder& operator=(const FastPodDecoder&) = delete;

  // A watch line {"type": ..., "object": pod}: true with *out set when the
  // event is ADDED, MODIFIED or DELETED and its pod decodes with certainty.
  bool DecodeEvent(std::string_view line, const std::string& resource, WatchEvent<PodInfo>* out);
  // A pod object alone (for the tests and the fuzz target).
  bool DecodePod(std::string_view text, const std::string& resource, PodInfo* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vramd::kube
