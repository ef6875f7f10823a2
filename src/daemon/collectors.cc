#include "daemon/collectors.h"

#include "vramd/metrics/ledger_metrics.h"
#include "vramd/metrics/thread_guard.h"

namespace vramd::daemon {

void ExportProcessMetrics(metrics::Registry* registry) {
  metrics::ExportThreadErrors(registry);  // vramd_thread_errors_total{thread}
  registry->AddGauge("vramd_build_info", "Build information (value 1).", {"version"}).With({VRAMD_VERSION}).Set(1);
}

void AddCollectors(metrics::Registry* registry, const store::ValkeyClient* valkey, store::LedgerStore* store,
                   const Clock* clock, int64_t usage_max_age_ms, double max_peak_ratio) {
  registry->AddCollector([valkey](metrics::TextWriter& w) {
    w.Header("vramd_valkey_errors_total", "Valkey transport failures (unreachable, timeouts) seen by callers.",
             "counter");
    w.Sample("vramd_valkey_errors_total", {}, static_cast<double>(valkey->TransportErrors()));
  });
  registry->AddCollector([store_ptr = store](metrics::TextWriter& w) {
    w.Header("vramd_ledger_epoch_watch_up",
             "1 while vramd follows the ledger's change notifications (filter and prioritize then skip the "
             "epoch read), else 0.",
             "gauge");
    w.Sample("vramd_ledger_epoch_watch_up", {}, store_ptr->EpochWatchLive() ? 1.0 : 0.0);
    w.Header("vramd_ledger_epoch_reads_total", "Epoch reads (one Valkey round trip each) made for snapshots.",
             "counter");
    w.Sample("vramd_ledger_epoch_reads_total", {}, static_cast<double>(store_ptr->EpochChecks()));
    const store::LedgerStore::ReloadCounts r = store_ptr->SnapshotReloads();
    w.Header("vramd_ledger_snapshot_refreshes_total",
             "Snapshot refreshes by kind: full (the whole ledger read), incremental (changed nodes only), or "
             "own_write (a reserve or bound mark of this replica taken from its script's answer, nothing read).",
             "counter");
    w.Sample("vramd_ledger_snapshot_refreshes_total", {{"kind", "full"}}, static_cast<double>(r.full));
    w.Sample("vramd_ledger_snapshot_refreshes_total", {{"kind", "incremental"}}, static_cast<double>(r.incremental));
    w.Sample("vramd_ledger_snapshot_refreshes_total", {{"kind", "own_write"}}, static_cast<double>(r.own_writes));
  });
  registry->AddCollector([store, clock, max_age = usage_max_age_ms, max_peak_ratio](metrics::TextWriter& w) {
    Result<ledger::SnapshotPtr> snap = store->Snapshot();
    w.Header("vramd_ledger_up", "1 when the VRAM ledger could be read from Valkey at this scrape.", "gauge");
    w.Sample("vramd_ledger_up", {}, snap.ok() ? 1 : 0);
    if (!snap.ok()) return;
    w.Header("vramd_ledger_epoch", "The ledger's epoch counter (moves on every write).", "gauge");
    w.Sample("vramd_ledger_epoch", {}, static_cast<double>((*snap)->epoch));
    w.Header("vramd_ledger_nodes", "Nodes in the ledger.", "gauge");
    w.Sample("vramd_ledger_nodes", {}, static_cast<double>((*snap)->nodes.size()));
    metrics::WriteLedgerMetrics(**snap, clock->NowMs(), max_age, w, max_peak_ratio);
  });
}

}  // namespace vramd::daemon
