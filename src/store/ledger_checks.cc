#include "store/ledger_checks.h"

#include "store/entry_codec.h"

namespace vramd::store {

using ledger::Entry;

Status CheckNodeName(const std::string& node) {
  if (node.empty()) return InvalidArgument("empty node name");
  if (node.find_first_of("{}") != std::string::npos) {
    return InvalidArgument("node name '" + node + "' contains '{' or '}'");
  }
  return Status::Ok();
}

Status CheckEntry(const Entry& e, bool reserve) {
  if (e.pod_uid.empty()) return InvalidArgument("entry without a pod UID");
  const std::string who = "entry of pod " + e.ns + "/" + e.name + " (" + e.pod_uid + ")";
  if (e.gpus.empty()) return InvalidArgument(who + " lists no GPU");
  for (size_t i = 0; i < e.gpus.size(); ++i) {
    if (e.gpus[i] < 0) return InvalidArgument(who + " lists a negative GPU index");
    if (i > 0 && e.gpus[i] <= e.gpus[i - 1]) {
      return InvalidArgument(who + ": GPU indices must be ascending and distinct");
    }
  }
  if (e.per_gpu < 0 || (reserve && e.per_gpu == 0)) {
    return InvalidArgument(who + ": per-GPU amount must be positive");
  }
  if (e.peak_per_gpu < 0) return InvalidArgument(who + ": negative peak");
  if (std::string problem = EntryFieldProblem(e); !problem.empty()) return InvalidArgument(who + ": " + problem);
  return Status::Ok();
}

}  // namespace vramd::store
