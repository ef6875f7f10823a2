#include "vramd/reconcile/reconciler.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <set>

#include "vramd/metrics/thread_guard.h"

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
                         ReleaseCause::kWrongNode, ReleaseCause::kHoldEnded}) {
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
  rebuilding_ = &registry->AddGauge("vramd_ledger_rebuilding",
                                    "1 while the ledger is unsealed: its store lost data and the leader is rebuilding "
                                    "it from the cluster (no VRAM is granted meanwhile).");
  rebuilding_->With({});
  rebuilds_ = &registry->AddCounter("vramd_ledger_rebuilds_total",
                                    "Ledger rebuilds after a loss of the store, by event (begun, sealed) on this "
                                    "replica as leader.",
                                    {"event"});
  rebuilds_->With({"begun"});
  rebuilds_->With({"sealed"});
  malformed_ = &registry->AddGauge(kMalformedObjectsGauge, kMalformedObjectsHelp, {"kind"});
  malformed_->With({"pod"});
  malformed_reports_ = &registry->AddCounter(kMalformedReportsCounter, kMalformedReportsHelp, {"kind"});
  malformed_reports_->With({"pod"});
  overridden_ = &registry->AddGauge("vramd_reconcile_placement_annotations_overridden",
                                    "Bound VRAM pods whose placement annotations claim other bytes or GPU count than "
                                    "they request (not written by vramd's bind), as of the last pass: accounted at "
                                    "their request.",
                                    {});
  overridden_->With({});
}

Reconciler::~Reconciler() { Stop(); }

void Reconciler::Start() {
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void Reconciler::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  cv_.NotifyAll();
  thread_.join();
}

void Reconciler::Poke() {
  {
    MutexLock lock(&mu_);
    poked_ = true;
  }
  cv_.NotifyAll();
}

Result<PassStats> Reconciler::RunOnce() {
  auto start = std::chrono::steady_clock::now();
  PassStats stats;
  auto fail = [&](const Status& s) -> Result<PassStats> {
    passes_->With({"error"}).Inc();
    errors_->With({}).Inc();
    return s;
  };
  // 0. The seal. A store that lost data lost its seal with it: nothing is
  // granted until this loop has restored every bound pod's entry and sealed
  // the ledger again, no earlier than the quiet period after the rebuild
  // began (a bind granted before the loss may create its Binding meanwhile)
  // unless no VRAM pod is waiting for a bind (AnyPodAwaitingBind), and from a
  // fresh list of the cluster's pods, not the watch's copy.
  Result<store::SealState> seal = store_->ReadSeal();
  if (!seal.ok()) return fail(seal.status());
  if (!seal->sealed && seal->rebuild_token.empty()) {
    seal = store_->BeginRebuild(leader_ != nullptr ? leader_->identity() : std::string("reconciler"));
    if (!seal.ok()) return fail(seal.status());
    if (!seal->sealed) {
      rebuilds_->With({"begun"}).Inc();
      spdlog::warn("reconcile: the ledger is not sealed (its store is new or lost data): rebuilding it from the "
                   "cluster; no VRAM is granted until it is sealed, in {} ms at the earliest",
                   config::RebuildQuietMs(cfg_));
    }
  }
  rebuilding_->With({}).Set(seal->sealed ? 0 : 1);
  const bool quiet_over = seal->now_ms - seal->rebuild_since_ms >= config::RebuildQuietMs(cfg_);
  bool seal_now = !seal->sealed && quiet_over;
  rebuilding_now_.store(!seal->sealed);

  // 4. Capacities (errors do not stop the pass: the ledger keeps the last ones).
  //    Only when due (NodeSyncDue): pod events bring a pass every
  //    reconcile_min_gap_ms, and a sync reads every Node (~200 ms of CPU at
  //    5,000 nodes under load). A rebuild always syncs.
  if (node_sync_ != nullptr) {
    std::optional<Result<NodeSyncStats>> ns = node_sync_->SyncIfDue(clock_->NowMs(), /*force=*/!seal->sealed);
    if (ns && !ns->ok()) {
      errors_->With({}).Inc();
      spdlog::warn("reconcile: node capacities not refreshed: {}", ns->status().message());
    }
  }
  if (!watcher_->Synced()) return fail(Unavailable("the pod watch is not synced with the API server"));
  std::vector<kube::PodInfo> pods = watcher_->Pods();
  // Within the quiet period, a cluster where no VRAM pod waits for a bind (a
  // fresh install, or none pending when the store was lost) has no bind in
  // flight that could still land: confirmed on a fresh list, it seals now.
  bool early = false;
  if (!seal->sealed && !seal_now && kube_ != nullptr && !AnyPodAwaitingBind(pods)) early = seal_now = true;
  if (seal_now && kube_ != nullptr) {
    // Every Binding the API server accepted before this list is in it.
    Result<kube::List<kube::PodInfo>> list = kube_->ListPods();
    if (!list.ok()) return fail(list.status());
    pods = std::move(list->items);
    if (early && AnyPodAwaitingBind(pods)) early = seal_now = false;  // one appeared: the quiet period runs
  }
  std::set<std::string> deleted = watcher_->RecentlyDeleted();
  Result<std::set<std::string>> in_flight = store_->BindsInFlight();
  if (!in_flight.ok()) return fail(in_flight.status());
  PlanOptions opts;
  opts.now_ms = clock_->NowMs();
  opts.grace_ms = cfg_.reservation_grace_ms;
  opts.deleted = &deleted;
  opts.victim_classes = &cfg_.burst_victim_classes;
  PlanResult plan;
  std::string any_node;  // a node to nudge kube-scheduler through once sealed
  {
    // Held only while planning (the actions carry what they need): while a
    // reader holds a snapshot, every refresh must copy it instead of
    // updating it in place.
    Result<ledger::SnapshotPtr> snap = store_->Snapshot();
    if (!snap.ok()) return fail(snap.status());
    metrics::WorkingOn working_on("plan over " + std::to_string(pods.size()) + " pods");
    plan = Plan(**snap, pods, *in_flight, opts);
    if (seal_now && !(*snap)->nodes.empty()) any_node = (*snap)->nodes.begin()->first;
  }
  ReportMalformed(plan.malformed);
  overridden_->With({}).Set(static_cast<double>(plan.annotations_overridden));

  std::set<std::string> freed_nodes;
  int failed_actions = 0;
  for (const Action& a : plan.actions) {
    metrics::WorkingOn working_on(std::string(ActionKindName(a.kind)) + " pod " + a.entry.ns + "/" + a.entry.name +
                                  " (uid " + a.entry.pod_uid + ") on node " + a.node);
    Status s;
    switch (a.kind) {
      case ActionKind::kReadd: s = store_->PutEntry(a.node, a.entry); break;
      case ActionKind::kMarkBound: s = store_->SetEntryState(a.node, a.entry.pod_uid, ledger::EntryState::kBound); break;
      case ActionKind::kRefresh: {
        // false: the entry changed since the snapshot (the next pass decides again).
        Result<bool> r = store_->RefreshEntry(a.node, a.entry);
        s = r.status();
        break;
      }
      case ActionKind::kMarkTerminating:
        s = store_->SetEntryState(a.node, a.entry.pod_uid, ledger::EntryState::kTerminating);
        break;
      case ActionKind::kRelease: {
        Result<bool> r = a.cause == ReleaseCause::kHoldEnded ? store_->ReleaseHold(a.node, a.entry.pod_uid)
                                                             : store_->Release(a.node, a.entry.pod_uid);
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
      ++failed_actions;
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

  if (seal_now && failed_actions == 0) {
    // One atomic step checks that every entry the plan requires exists and
    // seals; a second loss meanwhile took the rebuild's token with it.
    Status s = store_->Seal(seal->rebuild_token, plan.required);
    if (s.ok()) {
      rebuilds_->With({"sealed"}).Inc();
      // kube-scheduler parked the pods refused meanwhile as unschedulable:
      // one node label change moves them all back to its active queue.
      if (!any_node.empty()) freed_nodes.insert(any_node);
      rebuilding_->With({}).Set(0);
      rebuilding_now_.store(false);
      spdlog::warn("reconcile: ledger rebuilt and sealed ({} bound pods accounted, {} entries re-added this pass, "
                   "{} ms after the rebuild began{}); VRAM is granted again",
                   plan.required.size(), plan.orphans, seal->now_ms - seal->rebuild_since_ms,
                   early ? ", before its quiet period ended: no VRAM pod was waiting for a bind" : "");
    } else {
      spdlog::warn("reconcile: not sealing the ledger yet: {}", s.message());
    }
  } else if (!seal->sealed) {
    spdlog::info("reconcile: rebuilding the ledger ({} re-added this pass{})", plan.orphans,
                 seal_now ? ", some actions failed" : ", quiet period running");
  }

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

void Reconciler::ReportMalformed(const std::vector<MalformedPod>& now) {
  MutexLock lock(&report_mu_);
  std::map<std::string, bool> still;  // what is malformed now; the rest is forgotten
  for (const MalformedPod& m : now) {
    const std::string key = m.uid + '\n' + m.reason;
    auto it = reported_.find(key);
    bool posted = it != reported_.end() && it->second;
    if (it == reported_.end()) {
      spdlog::warn("reconcile: pod {}/{} (uid {}) on {}: {}", m.ns, m.name, m.uid, m.node, m.reason);
      malformed_reports_->With({"pod"}).Inc();
    }
    if (!posted && kube_ != nullptr) {
      kube::PodInfo pod;
      pod.ns = m.ns;
      pod.name = m.name;
      pod.uid = m.uid;
      Status s = kube_->PostPodEvent(pod, "Warning", kMalformedPodEventReason, "vramd: " + m.reason);
      // Retried next pass only when the API server was unreachable.
      posted = s.ok() || s.code() != Code::kUnavailable;
      if (!s.ok()) {
        spdlog::warn("reconcile: posting the {} event on pod {}/{} failed: {}", kMalformedPodEventReason, m.ns,
                     m.name, s.message());
      }
    }
    still[key] = posted;
  }
  reported_ = std::move(still);
  malformed_->With({"pod"}).Set(static_cast<double>(now.size()));
}

void Reconciler::Loop(std::stop_token st) {
  using Steady = std::chrono::steady_clock;
  Steady::time_point last_pass{};  // long ago: the first poke runs at once
  while (!st.stop_requested()) {
    {
      MutexLock lock(&mu_);
      // During a rebuild the next pass comes sooner, so the ledger is sealed
      // soon after its quiet period ends.
      const int wait_ms = rebuilding_now_.load() ? std::min(cfg_.reconcile_interval_ms, 500) : cfg_.reconcile_interval_ms;
      cv_.WaitFor(&lock, st, std::chrono::milliseconds(wait_ms), [this]() EXCLUSIVE_LOCKS_REQUIRED(mu_) { return poked_; });
      if (poked_) {
        // A burst of watch events (a deployment scaled up, a scheduler
        // binding hundreds of pods) becomes one pass per gap, not one per event.
        const Steady::time_point ready = last_pass + std::chrono::milliseconds(cfg_.reconcile_min_gap_ms);
        if (Steady::now() < ready) cv_.WaitUntil(&lock, st, ready);
      }
      poked_ = false;
    }
    if (st.stop_requested()) break;
    if (!leader_->IsLeader() || !watcher_->Synced()) continue;
    const bool ok = metrics::GuardedStep(metrics::kThreadReconcile, [&] {
      Result<PassStats> r = RunOnce();
      if (!r.ok()) spdlog::warn("reconcile pass failed: {}", r.status().message());
      if (r.ok() && after_pass_) after_pass_();
    });
    last_pass = Steady::now();
    if (!ok) {
      passes_->With({"error"}).Inc();
      metrics::PauseAfterError(st);
    }
  }
}

}  // namespace vramd::reconcile
