// The ledger's series, computed from a snapshot at scrape time: the three
// vectors and the six metrics per GPU and per node, and per-pod allocations
// (series exist for every allocated pod, idle or not).
#pragma once

#include <cstdint>

#include "vramd/ledger/model.h"
#include "vramd/metrics/registry.h"

namespace vramd::metrics {

// `max_peak_ratio` (burst.max_peak_ratio) decides vramd_gpu_burst_unsafe
// (ledger::BurstSafe).
void WriteLedgerMetrics(const ledger::Snapshot& snap, int64_t now_ms, int64_t usage_max_age_ms, TextWriter& w,
                        double max_peak_ratio = 1.5);

}  // namespace vramd::metrics
