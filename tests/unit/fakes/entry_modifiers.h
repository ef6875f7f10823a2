// Modifiers of a ledger entry for the planners' table tests (reclaim,
// protection): who recreates the pod, its opt-in and its gang (issue 32).
#pragma once

#include <string>
#include <utility>

#include "vramd/ledger/model.h"

namespace vramd::ledger::testing_entries {

// A pod without a controller (nothing recreates it).
inline Entry Bare(Entry e) {
  e.owner_kind.clear();
  e.owner_uid.clear();
  return e;
}
// A pod that opted in to vramd's own evictions (vramd.io/evictable: "true").
inline Entry Evictable(Entry e) {
  e.evictable = true;
  return e;
}
inline Entry InGang(Entry e, std::string gang) {
  e.gang = std::move(gang);
  return e;
}
inline Entry InNs(Entry e, std::string ns) {
  e.ns = std::move(ns);
  return e;
}

}  // namespace vramd::ledger::testing_entries
