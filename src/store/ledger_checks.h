// What the ledger store checks before it writes: a node name and an entry
// that Valkey keys and the scripts can hold. Private to src/store.
#pragma once

#include <string>

#include "vramd/ledger/model.h"
#include "vramd/status.h"

namespace vramd::store {

// A node name becomes part of key names inside a hash tag: not empty, no '{'
// or '}'.
Status CheckNodeName(const std::string& node);

// A pod UID, ascending distinct non-negative GPU indices, a non-negative
// per-GPU amount (positive for a reservation), a non-negative peak, and the
// fields entry_codec.h bounds within their bounds.
Status CheckEntry(const ledger::Entry& e, bool reserve);

}  // namespace vramd::store
