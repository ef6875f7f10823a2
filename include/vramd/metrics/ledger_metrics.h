// The ledger's series, computed from a snapshot at scrape time: the three
// vectors and the six metrics per GPU and per node, and per-pod allocations
// (series exist for every allocated pod, idle or not).
#pragma once

#include <cstdint>

#include "vramd/ledger/model.h"
#include "vramd/metrics/registry.h"

namespace vramd::metrics {

void WriteLedgerMetrics(const ledger::Snapshot& snap, int64_t now_ms, int64_t usage_max_age_ms, TextWriter& w);

}  // namespace vramd::metrics
