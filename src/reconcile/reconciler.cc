#include "vramd/reconcile/reconciler.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <set>

namespace vramd::reconcile {

Reconciler::Reconciler(const config::Config& cfg, store::LedgerStore* store, kube::KubeClient* kube,
                       LeaderElector* leader, PodWatcher* watcher, NodeSync* node_sync, const Clock* clock,
                       metrics::Registry* registry,
                       std::function<void(const std::function<bool(const std::string&)>&)> reap_locks)
    : cfg_(cfg), store_(store), kube_(kube), leader_(leader), watcher_(watcher), node_sync_(node_sync),
      clock_(clock), reap_locks_(std::move(reap_locks)) {
  passes_ = &registry->AddCounter("vramd_reconcile_passes_total", "Reconcile passes run by this replica, by result.",
                                  {"result"});
  passes_->With({"ok"});
  passes_->With({"error"});
  orphans_ = &registry->AddCounter("vramd_reconcile_orphans_readded_total",
                                   "Pods running without a ledger entry whose entry was re-added.");
  orphans_->With({});
  stale_ = &registry->AddCounter("vramd_reconcile_stale_reservations_freed_total",
                                 "Reservations freed because their pod never showed up bound within the grace period.");
  stale_->With({});
  released_ = &registry->AddCounter("vramd_reconcile_released_total", "Ledger entries freed by reconcile, by cause.",
                                    {"cause"});
  for (ReleaseCause c : {ReleaseCause::kPodGone, ReleaseCause::kTerminalPhase, ReleaseCause::kStaleReservation,
                         ReleaseCause::kWrongNode}) {
    released_->With({ReleaseCauseName(c)});
  }
  errors_ = &registry->AddCounter("vramd_reconcile_errors_total", "Reconcile passes or actions that failed.");
  errors_->With({});
  nudges_ = &registry->AddCounter("vramd_reconcile_scheduler_nudges_total",
                                  "Node label updates made so kube-scheduler retries pods after VRAM was freed.");
  nudges_->With({});
  phantom_ = &registry->AddGauge("vramd_reconcile_phantom_bytes",
                                 "VRAM held by terminating pods (phantom-capacity rule), per node.", {"node"});
  duration_ = &registry->AddHistogram("vramd_reconcile_duration_seconds", "Duration of a reconcile pass.",
                                      metrics::LatencyBuckets());
}

Reconciler::~Reconciler() { Stop(); }

void Reconciler::Start() {
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void Reconciler::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  cv_.notify_all();
  thread_.join();
}

void Reconciler::Poke() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poked_ = true;
  }
  cv_.notify_all();
}

Result<PassStats> Reconciler::RunOnce() {
  auto start = std::chrono::steady_clock::now();
  PassStats stats;
  auto fail = [&](const Status& s) -> Result<PassStats> {
    passes_->With({"error"}).Inc();
    errors_->With({}).Inc();
    return s;
  };
  // 4. Capacities (errors do not stop the pass: the ledger keeps the last ones).
  if (node_sync_ != nullptr) {
    Result<NodeSyncStats> ns = node_sync_->SyncOnce();
    if (!ns.ok()) {
      errors_->With({}).Inc();
      spdlog::warn("reconcile: node capacities not refreshed: {}", ns.status().message());
    }
  }
  if (!watcher_->Synced()) return fail(Unavailable("the pod watch is not synced with the API server"));
  std::vector<kube::PodInfo> pods = watcher_->Pods();
  std::set<std::string> deleted = watcher_->RecentlyDeleted();
  Result<std::set<std::string>> in_flight = store_->BindsInFlight();
  if (!in_flight.ok()) return fail(in_flight.status());
  PlanOptions opts;
  opts.now_ms = clock_->NowMs();
  opts.grace_ms = cfg_.reservation_grace_ms;
  opts.deleted = &deleted;
  PlanResult plan;
  {
    // Held only while planning (the actions carry what they need): while a
    // reader holds a snapshot, every refresh must copy it instead of
    // updating it in place.
    Result<ledger::SnapshotPtr> snap = store_->Snapshot();
    if (!snap.ok()) return fail(snap.status());
    plan = Plan(**snap, pods, *in_flight, opts);
  }

  std::set<std::string> freed_nodes;
  for (const Action& a : plan.actions) {
    Status s;
    switch (a.kind) {
      case ActionKind::kReadd: s = store_->PutEntry(a.node, a.entry); break;
      case ActionKind::kMarkBound: s = store_->SetEntryState(a.node, a.entry.pod_uid, ledger::EntryState::kBound); break;
      case ActionKind::kMarkTerminating:
        s = store_->SetEntryState(a.node, a.entry.pod_uid, ledger::EntryState::kTerminating);
        break;
      case ActionKind::kRelease: {
        Result<bool> r = store_->Release(a.node, a.entry.pod_uid);
        s = r.status();
        if (r.ok() && *r) {
          freed_nodes.insert(a.node);
          released_->With({ReleaseCauseName(a.cause)}).Inc();
          if (a.cause == ReleaseCause::kStaleReservation) stale_->With({}).Inc();
        }
        break;
      }
    }
    if (!s.ok()) {
      errors_->With({}).Inc();
      spdlog::warn("reconcile: {} {}/{} on {} failed: {}", ActionKindName(a.kind), a.entry.ns, a.entry.name, a.node,
                   s.message());
      continue;
    }
    ++stats.actions;
    if (a.kind == ActionKind::kReadd) orphans_->With({}).Inc();
    spdlog::info("reconcile: {} {}/{} on {} ({}{})", ActionKindName(a.kind), a.entry.ns, a.entry.name, a.node,
                 a.reason, a.kind == ActionKind::kRelease ? std::string(", ") + ReleaseCauseName(a.cause) : "");
  }
  stats.orphans = plan.orphans;
  stats.stale = plan.stale;
  stats.gone = plan.gone;
  stats.terminal = plan.terminal;

  // Phantom bytes per node (series for every node that holds entries).
  for (const auto& [node, bytes] : plan.phantom_bytes) phantom_->With({node}).Set(static_cast<double>(bytes));

  // Requeue: make kube-scheduler retry unschedulable pods now that VRAM is free.
  if (kube_ != nullptr) {
    const std::string stamp = std::to_string(clock_->NowMs());
    for (const std::string& node : freed_nodes) {
      Status s = kube_->PatchNodeLabels(node, {{kFreedLabel, stamp}});
      if (s.ok()) {
        ++stats.nudged_nodes;
        nudges_->With({}).Inc();
      } else if (s.code() != Code::kNotFound) {
        spdlog::warn("reconcile: nudging kube-scheduler through node {} failed: {}", node, s.message());
      }
    }
  }

  // GPU locks whose holder pod was seen deleted are freed.
  if (reap_locks_) reap_locks_([&deleted](const std::string& uid) { return deleted.count(uid) == 0; });

  if (Status s = store_->MarkReconciled(); !s.ok()) spdlog::warn("reconcile: stamping the pass failed: {}", s.message());
  first_pass_done_ = true;
  passes_->With({"ok"}).Inc();
  duration_->With({}).Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return stats;
}

void Reconciler::Loop(std::stop_token st) {
  using Steady = std::chrono::steady_clock;
  Steady::time_point last_pass{};  // long ago: the first poke runs at once
  while (!st.stop_requested()) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, st, std::chrono::milliseconds(cfg_.reconcile_interval_ms), [this] { return poked_; });
      if (poked_) {
        // A burst of watch events (a deployment scaled up, a scheduler
        // binding hundreds of pods) becomes one pass per gap, not one per event.
        const Steady::time_point ready = last_pass + std::chrono::milliseconds(cfg_.reconcile_min_gap_ms);
        if (Steady::now() < ready) cv_.wait_until(lock, st, ready, [] { return false; });
      }
      poked_ = false;
    }
    if (st.stop_requested()) break;
    if (!leader_->IsLeader() || !watcher_->Synced()) continue;
    Result<PassStats> r = RunOnce();
    last_pass = Steady::now();
    if (!r.ok()) spdlog::warn("reconcile pass failed: {}", r.status().message());
  }
}

}  // namespace vramd::reconcile
