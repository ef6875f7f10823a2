// Reading the ledger's keys (ledger_keys.h) back from Valkey replies: a node
// from its four hashes, the epoch counter, a change-log score, and the
// numbers inside them. Malformed fields are skipped and counted (Problems),
// never fatal: one corrupt field must not hide the rest of the ledger.
// Private to src/store.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vramd/ledger/model.h"
#include "vramd/ledger/usage.h"
#include "vramd/status.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"
#include "store/entry_codec.h"

namespace vramd::store {

// The whole of `s` as a decimal integer.
bool ParseInt64(std::string_view s, int64_t* out);
// The whole of `s` as a non-negative int (a GPU index).
bool ParseIndex(std::string_view s, int* out);
// A sorted-set score that is a whole number below 2^53 (an epoch).
bool ParseScore(std::string_view s, uint64_t* out);
// The reply to GET of the epoch key `key`: nil is 0.
Result<uint64_t> ParseEpoch(const Reply& r, const std::string& key);

// P:reported's value for one node, "<idx>=<total>=<uuid>,..." (uuid may be
// empty). False, with *out unspecified, when any part is malformed.
bool DecodeReportedGpus(std::string_view text, std::vector<ReportedGpu>* out);

// The used hash's field "g:<idx>" of a version-2 report (ledger_keys.h):
// "<total>,<outside>,<uuid>" and ",<uid>=<bytes>" per pod, uuid possibly
// empty. Neither a GPU UUID nor a canonical pod UID holds ',' or '='
// (ledger::CheckUsageReport), so PackGpuUsage needs no escaping.
// After the pods: ",!n=<count>" when invalid_process_lists > 0 and
// ",!u=<reason, percent-encoded: ',' '=' '%'>" when processes_unavailable is
// set ('!' starts no pod UID). UnpackGpuUsage fills total, outside_pods, uuid,
// pods (in the field's order), invalid_process_lists and
// processes_unavailable of *g; false, with *g unspecified, when any part is
// malformed.
std::string PackGpuUsage(const ledger::GpuUsage& g);
bool UnpackGpuUsage(std::string_view text, ledger::GpuUsage* g);

// The used hash's field "e:<idx>" (issue 34): the agent's enforcement on
// the GPU, "<backend>,<reason>" and per pod ",<uid>=<state>[:<reason>]"
// (reasons percent-encoded as above; state ledger::EnforceStateName).
// UnpackEnforcement: false, with *e unspecified, when any part is malformed.
std::string PackEnforcement(const ledger::GpuEnforcement& e);
bool UnpackEnforcement(std::string_view text, ledger::GpuEnforcement* e);

// Malformed fields met by one load or refresh.
struct Problems {
  uint64_t count = 0;
  std::vector<std::string> samples;  // the first few, for the log
  void Add(std::string what) {
    ++count;
    if (samples.size() < 5) samples.push_back(std::move(what));
  }
  void Merge(Problems&& other) {
    count += other.count;
    for (std::string& s : other.samples) {
      if (samples.size() < 5) samples.push_back(std::move(s));
    }
  }
};

// Malformed fields per node (nodes without any are left out).
using NodeProblems = std::unordered_map<std::string, uint64_t>;

// Fills *node (its name set) from the HGETALL replies of its cap, alloc,
// used and models hashes: GPUs by index, entries oldest first (ties by UID).
// From the usage hash (the node agent's last report, ledger_keys.h): each
// GPU's used, total, outside-pods bytes and per-pod figures (sorted by UID),
// its UUID where the capacity has none; after a version-2 report also each
// entry's used (its largest figure over its GPUs, 0 when not named) and
// used_ts_ms, and each GPU's untracked bytes (figures of UIDs without an
// entry here). Figures for GPUs the capacity lacks are ignored.
// Moves strings out of `cap` and `alloc`. Each malformed field is skipped
// and added to *problems.
void BuildNode(ledger::Node* node, Reply& cap, Reply& alloc, const Reply& used, const Reply& models,
               EntryDecoder* decoder, Problems* problems);

// A node whose change since `base` (the same node, built by BuildNode or
// RebuildUsage with no problems) is its usage report alone: *node becomes
// what BuildNode would make of `cap`, `used` and base's unchanged alloc and
// models hashes, without reading or decoding those. False (*node then
// unspecified) when `used` is not a version-2 report: without per-pod
// figures the entries keep the usage their own text carries, which only
// BuildNode knows; the caller reads the whole node then.
bool RebuildUsage(ledger::Node* node, const ledger::Node& base, Reply& cap, const Reply& used, Problems* problems);

// Entries' used / used_ts_ms / busy and GPUs' untracked bytes from the
// per-pod figures of a version-2 report made at `ts` (node->gpus as BuildNode
// filled them from it): what BuildNode adds after such a report.
void FillPodUsage(ledger::Node* node, int64_t ts);

// Entries oldest first, ties by UID: the order BuildNode leaves them in.
void SortEntriesOldestFirst(ledger::Node* node);

}  // namespace vramd::store
