// The daemon's own metrics: build info and thread errors, and the collectors
// that read the Valkey client and the ledger store at each scrape.
#pragma once

#include <cstdint>

#include "vramd/clock.h"
#include "vramd/metrics/registry.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"

namespace vramd::daemon {

// vramd_build_info{version} and vramd_thread_errors_total{thread}.
void ExportProcessMetrics(metrics::Registry* registry);

// At each scrape: vramd_valkey_errors_total; the epoch watch and snapshot
// refresh counters of the store; vramd_ledger_up/_epoch/_nodes and the
// ledger's per-node and per-GPU gauges (metrics/ledger_metrics.h), read from
// a snapshot. The pointers must outlive the registry's last Render().
void AddCollectors(metrics::Registry* registry, const store::ValkeyClient* valkey, store::LedgerStore* store,
                   const Clock* clock, int64_t usage_max_age_ms,
                   double max_peak_ratio = 1.5);

}  // namespace vramd::daemon
