// The scheduler-extender wire format (EXTENDER-PROTOCOL.md): decoding
// ExtenderArgs with simdjson's on-demand API (the hot path) and writing the
// results directly as JSON text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/json_string.h"  // AppendJsonString, used by the writers below
#include "vramd/ledger/placement.h"
#include "vramd/ledger/pod_request.h"
#include "vramd/status.h"

namespace vramd::extender {

struct ExtenderArgs {
  ledger::PodSpecView pod;
  // Candidate node names. Views stay valid until the decoder is used again.
  std::vector<std::string_view> node_names;
  // true when the scheduler sent NodeNames (nodeCacheCapable); false when it
  // sent full Node objects in Nodes.items, whose raw JSON is kept here in the
  // same order as node_names so the kept ones can be returned verbatim.
  bool cache_mode = true;
  std::vector<std::string_view> node_objects;
  // Preempt requests: the raw JSON of NodeNameToMetaVictims (empty if absent).
  std::string_view meta_victims;
};

struct BindArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};

// One decoder per thread: it owns the parser and the padded copy of the body.
class ArgsDecoder {
 public:
  ArgsDecoder();
  ~ArgsDecoder();
  ArgsDecoder(const ArgsDecoder&) = delete;
  ArgsDecoder& operator=(const ArgsDecoder&) = delete;

  // Decodes filter/prioritize arguments; the resource name selects which
  // container amounts count. kInvalidArgument with a precise message on
  // malformed JSON, wrong types or missing fields.
  Status Decode(std::string_view body, const std::string& resource, ExtenderArgs* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Decodes ExtenderBindingArgs.
Result<BindArgs> DecodeBindArgs(std::string_view body);

// ExtenderFilterResult. In cache mode the kept names go to NodeNames; in
// non-cache mode the kept Node objects go to Nodes.items (names -> objects
// mapping from args). Unresolvable nodes are listed in FailedAndUnresolvableNodes
// and also in FailedNodes (1.20 reads only that one; newer schedulers give the
// unresolvable map precedence for a node in both).
void WriteFilterResult(const ledger::FilterResult& r, const ExtenderArgs& args, std::string* out);
// A filter result that only carries an Error (the attempt fails and is retried).
void WriteFilterError(std::string_view error, std::string* out);
// HostPriorityList.
void WriteHostPriorities(const std::vector<ledger::HostScore>& scores, std::string* out);
// ExtenderBindingResult.
void WriteBindResult(std::string_view error, std::string* out);

}  // namespace vramd::extender
