#include "vramd/reconcile/tenancy.h"

#include <spdlog/spdlog.h>

#include <ctime>
#include <utility>

#include "vramd/kube/decode.h"
#include "vramd/ledger/quantity.h"
#include "vramd/reconcile/protection.h"
#include "vramd/reconcile/reconciler.h"

namespace vramd::reconcile {
namespace {

std::string Rfc3339(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

TenancySettings TenancySettingsFrom(const config::Config& cfg, const ledger::Policy& placement) {
  TenancySettings s;
  s.enabled = cfg.queues_enabled;
  s.policy.default_queue = cfg.queues_default_queue;
  s.policy.preemptible_below_priority = cfg.queues_preemptible_below_priority;
  Result<std::vector<std::string>> classes = config::ParseClassList(cfg.queues_preemptible_classes);
  if (classes.ok()) s.policy.preemptible_classes = std::move(classes).value();
  s.policy.min_runtime_ms = cfg.queues_min_runtime_ms;
  s.policy.reclaim_unqueued = cfg.queues_reclaim_unqueued;
  if (cfg.queues_reclaim_mode == "off") s.reclaim = std::nullopt;
  else if (cfg.queues_reclaim_mode == "dry-run") s.reclaim = ActionMode::kDryRun;
  else s.reclaim = ActionMode::kEnforce;
  s.fit = placement.fit();
  s.placement = placement;
  s.interval_ms = cfg.queues_interval_ms;
  s.cooldown_ms = cfg.queues_reclaim_cooldown_ms;
  s.hold_ms = cfg.eviction_hold_ms;
  s.max_per_minute = cfg.queues_max_reclaims_per_minute;
  s.pending_max_age_ms = cfg.idle_pending_max_age_ms;
  return s;
}

std::string ReclaimDetail(const ledger::ReclaimPlan& plan, const ledger::ReclaimVictim& v,
                          const ledger::TenancyView& view) {
  const auto& qs = view.statuses;
  const bool known = plan.queue >= 0 && static_cast<size_t>(plan.queue) < qs.size();
  const std::string for_pod = plan.pending_ns + "/" + plan.pending_name;
  std::string out;
  if (plan.kind == ledger::ReclaimKind::kPriority) {
    out = "priority preemption in queue " + (known ? qs[plan.queue].name : std::string("?")) + ": priority " +
          std::to_string(v.priority) + " makes room for " + for_pod + " on " + plan.node;
    return out;
  }
  out = "reclaim for " + for_pod;
  if (known) {
    const ledger::QueueStatus& q = qs[plan.queue];
    out += " of queue " + q.name + " (" + ledger::FormatBytes(q.allocated) + " allocated, fair share " +
           ledger::FormatBytes(q.fair_share) + ")";
  }
  if (v.queue >= 0 && static_cast<size_t>(v.queue) < qs.size()) {
    const ledger::QueueStatus& q = qs[v.queue];
    out += "; queue " + q.name + " holds " + ledger::FormatBytes(q.allocated) + ", over its fair share " +
           ledger::FormatBytes(q.fair_share);
  }
  out += "; on " + plan.node;
  return out;
}

Tenancy::Tenancy(TenancySettings settings, std::function<std::vector<ledger::QueueSpec>()> specs,
                 store::LedgerStore* store, kube::KubeClient* kube, PodWatcher* pods, Evictor* evictor,
                 const Clock* clock, metrics::Registry* registry)
    : s_(std::move(settings)),
      specs_(std::move(specs)),
      store_(store),
      kube_(kube),
      pods_(pods),
      evictor_(evictor),
      clock_(clock),
      set_(std::make_shared<const ledger::QueueSet>()),
      budget_(store, s_.cooldown_ms, s_.max_per_minute, s_.leader_identity) {
  const std::vector<std::string> q = {"queue"};
  deserved_ = &registry->AddGauge("vramd_queue_deserved_bytes", "The queue's deserved VRAM quota (leader).", q);
  limit_ = &registry->AddGauge("vramd_queue_limit_bytes", "The queue's hard VRAM limit, when it has one (leader).", q);
  allocated_ = &registry->AddGauge("vramd_queue_allocated_bytes",
                                   "VRAM reserved by the queue's pods (a parent includes its children; leader).", q);
  fair_share_ = &registry->AddGauge("vramd_queue_fair_share_bytes",
                                    "The queue's fair share: deserved, then its weight's part of the unused VRAM "
                                    "(recomputed every pass; leader).",
                                    q);
  pending_ = &registry->AddGauge("vramd_queue_pending_bytes",
                                 "VRAM asked by the queue's pods that vramd refused and that still wait (leader).", q);
  valid_ = &registry->AddGauge("vramd_queue_valid", "1 when the VramQueue object is valid, 0 when its condition "
                                                    "says why not (leader).",
                               q);
  reclaims_ = &registry->AddCounter("vramd_queue_reclaims_total",
                                    "Plans acted on to make room for a pending pod, by kind (reclaim: from queues "
                                    "over their fair share; priority: inside the pod's queue) and mode.",
                                    {"kind", "mode"});
  reclaim_passes_ = &registry->AddCounter("vramd_queue_reclaim_passes_total",
                                          "Reclaim planning passes over the pods waiting for VRAM (leader).");
  without_plan_ = &registry->AddGauge("vramd_queue_pods_without_reclaim_plan",
                                      "Pods waiting for VRAM for which the last reclaim pass found no plan (no "
                                      "room whatever may be evicted, or only pods that may not be; leader). The "
                                      "reasons are in the log at debug level.");
  without_plan_->With({});
}

void Tenancy::Refresh() {
  if (!s_.enabled || !specs_) return;
  auto set = std::make_shared<const ledger::QueueSet>(ledger::BuildQueueSet(specs_(), s_.policy));
  MutexLock lock(&mu_);
  set_ = std::move(set);
}

ledger::QueueSetPtr Tenancy::Queues() const {
  MutexLock lock(&mu_);
  return set_;
}

Result<std::vector<ledger::PendingPod>> Tenancy::Pending(bool check_watch) {
  Result<std::vector<store::Refusal>> refusals = store_->ReadRefusals(s_.pending_max_age_ms);
  if (!refusals.ok()) return refusals.status();
  if (check_watch && pods_ != nullptr && pods_->Synced()) {
    const std::vector<kube::PodInfo> pods = pods_->Pods();
    return WaitingPods(std::move(*refusals), &pods, nullptr);
  }
  return WaitingPods(std::move(*refusals), nullptr, nullptr);
}

std::optional<ledger::TenancyView> Tenancy::View() {
  Result<ledger::SnapshotPtr> snap = store_->WatchedSnapshot();
  if (!snap.ok()) return std::nullopt;
  Result<std::vector<ledger::PendingPod>> pending = Pending(true);
  if (!pending.ok()) return std::nullopt;
  return ledger::ComputeTenancy(Queues(), **snap, *pending, s_.policy);
}

std::optional<Result<TenancyStats>> Tenancy::MaybeRun() {
  {
    MutexLock lock(&run_mu_);
    const int64_t now = clock_->NowMs();
    if (last_run_ms_ != 0 && now - last_run_ms_ < s_.interval_ms && now >= last_run_ms_) return std::nullopt;
    last_run_ms_ = now;
  }
  return RunOnce();
}

Result<TenancyStats> Tenancy::RunOnce() {
  TenancyStats stats;
  ledger::QueueSetPtr set = Queues();
  if (!s_.enabled || set->empty()) {
    MutexLock lock(&run_mu_);
    // Queues were all deleted: their series go too.
    for (const std::string& q : exported_) {
      for (auto* f : {deserved_, limit_, allocated_, fair_share_, pending_, valid_}) f->Remove({q});
    }
    exported_.clear();
    written_.clear();
    return stats;
  }
  Result<ledger::SnapshotPtr> snap_r = store_->Snapshot();
  if (!snap_r.ok()) return snap_r.status();
  const ledger::Snapshot& snap = **snap_r;
  // Nothing is decided from a ledger being rebuilt: entries may be missing.
  if (!snap.sealed) return stats;
  Result<std::vector<ledger::PendingPod>> pending = Pending(true);
  if (!pending.ok()) return pending.status();
  const ledger::TenancyView view = ledger::ComputeTenancy(set, snap, *pending, s_.policy);
  stats.queues = static_cast<int>(set->objects);
  for (const ledger::QueueStatus& q : view.statuses) {
    if (!q.synthetic && !q.valid) ++stats.invalid;
  }
  stats.pending_pods = static_cast<int>(pending->size());
  MutexLock lock(&run_mu_);
  Export(view);
  WriteStatus(view, &stats);
  if (s_.reclaim && evictor_ != nullptr) Reclaim(view, snap, *pending, &stats);
  return stats;
}

void Tenancy::Export(const ledger::TenancyView& view) {
  std::set<std::string> now;
  for (const ledger::QueueStatus& q : view.statuses) {
    now.insert(q.name);
    const metrics::Labels l = {q.name};
    deserved_->With(l).Set(static_cast<double>(q.deserved));
    if (q.limit) limit_->With(l).Set(static_cast<double>(*q.limit));
    else limit_->Remove(l);
    allocated_->With(l).Set(static_cast<double>(q.allocated));
    fair_share_->With(l).Set(static_cast<double>(q.fair_share));
    pending_->With(l).Set(static_cast<double>(q.pending));
    valid_->With(l).Set(q.valid ? 1 : 0);
  }
  for (const std::string& q : exported_) {
    if (now.contains(q)) continue;
    for (auto* f : {deserved_, limit_, allocated_, fair_share_, pending_, valid_}) f->Remove({q});
  }
  exported_ = std::move(now);
}

void Tenancy::WriteStatus(const ledger::TenancyView& view, TenancyStats* stats) {
  if (kube_ == nullptr) return;
  const int64_t now = clock_->NowMs();
  std::set<std::string> seen;
  for (const ledger::QueueStatus& q : view.statuses) {
    if (q.synthetic) continue;
    seen.insert(q.name);
    auto w = written_.find(q.name);
    if (w != written_.end() && w->second == q) continue;
    // lastTransitionTime moves only when the condition changes.
    std::string& since = transition_[q.name];
    if (since.empty() || w == written_.end() || w->second.valid != q.valid || w->second.reason != q.reason) {
      since = Rfc3339(now);
    }
    Status s = kube_->PatchQueueStatus(q.name, kube::QueueStatusPatch(q, since));
    if (!s.ok()) {
      ++stats->status_errors;
      // Once per queue until a write succeeds (e.g. RBAC without vramqueues/status).
      if (status_failing_.insert(q.name).second) {
        spdlog::warn("VramQueue {}: writing its status failed (retried every pass, logged again once it works "
                     "and fails anew): {}",
                     q.name, s.message());
      }
      continue;
    }
    status_failing_.erase(q.name);
    ++stats->status_patches;
    written_[q.name] = q;
  }
  std::erase_if(written_, [&](const auto& kv) { return !seen.contains(kv.first); });
  std::erase_if(status_failing_, [&](const std::string& q) { return !seen.contains(q); });
  std::erase_if(transition_, [&](const auto& kv) { return !seen.contains(kv.first); });
}

void Tenancy::Nudge(const ledger::Snapshot& snap, const std::vector<ledger::PendingPod>& pending,
                    const std::unordered_map<std::string, std::string>& fits_on, TenancyStats* stats) {
  // A pod that fits now but still waits, refused a while ago: kube-scheduler
  // parked it (e.g. after a bind lost a race for the room its victims freed)
  // and will not look again for up to a minute. One node label change moves
  // every parked pod back to its active queue: at most one per pass, and not
  // again for the same pod within kNudgeSpacingMs.
  // A pod holding room an eviction made (issue 32) is nudged to it the same way.
  if (kube_ == nullptr) return;
  const int64_t now = clock_->NowMs();
  std::erase_if(nudged_, [&](const auto& kv) { return now - kv.second >= kNudgeSpacingMs; });
  for (const ledger::PendingPod& p : pending) {
    std::string_view node;
    if (auto it = fits_on.find(p.uid); it != fits_on.end()) node = it->second;
    else if (ledger::FindHold(snap, p.uid, &node) == nullptr) continue;
    if (now - p.refused_ms < kNudgeAfterMs || nudged_.contains(p.uid)) continue;
    // PlanReclaim counts terminating pods as gone; kube-scheduler sees them
    // until they are: nudge only for room that is there now (its own hold
    // not counted against it: Filter with its UID).
    ledger::VramRequest demand = p.demand;
    demand.uid = p.uid;
    if (ledger::Filter(snap, {node}, demand, s_.placement, now).fits.empty()) continue;
    const std::string name(node);
    Status s = kube_->PatchNodeLabels(name, {{kFreedLabel, std::to_string(now)}});
    if (!s.ok()) {
      spdlog::warn("queues: nudging kube-scheduler through node {} failed: {}", name, s.message());
      return;
    }
    spdlog::info("queues: {}/{} fits on {} but still waits; asked kube-scheduler to retry parked pods", p.ns, p.name,
                 name);
    nudged_[p.uid] = now;
    ++stats->nudges;
    return;
  }
}

void Tenancy::Reclaim(const ledger::TenancyView& view, const ledger::Snapshot& snap,
                      const std::vector<ledger::PendingPod>& pending, TenancyStats* stats) {
  if (pending.empty()) {
    without_plan_->With({}).Set(0);
    return;
  }
  const int64_t now = clock_->NowMs();
  std::unordered_map<std::string, std::string> why_not, fits_on;
  std::vector<ledger::ReclaimPlan> plans = ledger::PlanReclaim(
      *view.set, view.statuses, snap, pending, s_.policy, s_.fit, now, s_.max_plans_per_pass, &why_not, &fits_on);
  stats->plans = static_cast<int>(plans.size());
  reclaim_passes_->With({}).Inc();
  without_plan_->With({}).Set(static_cast<double>(why_not.size()));
  for (const auto& [uid, why] : why_not) spdlog::debug("reclaim: no plan for pod {}: {}", uid, why);
  Nudge(snap, pending, fits_on, stats);
  const ActionMode mode = *s_.reclaim;
  std::unordered_map<std::string_view, const ledger::PendingPod*> pending_by_uid;
  for (const ledger::PendingPod& p : pending) pending_by_uid.emplace(p.uid, &p);
  for (const ledger::ReclaimPlan& plan : plans) {
    const std::string key = "reclaim:" + plan.pending_uid;
    // A plan that evicts nothing keeps its claim: it waits its cooldown too.
    if (!budget_.Take(key, now)) {
      ++stats->gated;
      continue;
    }
    std::vector<EvictionAction> actions;
    for (const ledger::ReclaimVictim& v : plan.victims) {
      EvictionAction a;
      a.ns = v.ns;
      a.name = v.name;
      a.uid = v.uid;
      a.node = v.node;
      a.reason = ledger::ReclaimKindName(plan.kind);
      a.detail = ReclaimDetail(plan, v, view);
      a.for_ns = plan.pending_ns;
      a.for_name = plan.pending_name;
      a.for_uid = plan.pending_uid;
      actions.push_back(std::move(a));
    }
    // A plan goes whole (issue 32): with a victim a PodDisruptionBudget
    // would keep, none goes (the claim stays: the plan waits its cooldown).
    if (evictor_->Precheck(actions, mode) != Evictor::kPrecheckPassed) {
      ++stats->blocked;
      continue;
    }
    reclaims_->With({ledger::ReclaimKindName(plan.kind), ActionModeName(mode)}).Inc();
    int acted = 0;
    std::vector<std::string> evicted;
    for (const EvictionAction& a : actions) {
      const ActionResult r = evictor_->Act(a, mode);
      if (r == ActionResult::kRecorded || r == ActionResult::kEvicted) {
        ++stats->evictions;
        if (acted++ > 0) budget_.Record(key, now);  // the budget counts evictions; the claim the first
        if (r == ActionResult::kEvicted) evicted.push_back(a.uid);
      }
    }
    // The room is the pending pod's: held for it (issue 32), so that neither
    // a victim's replacement nor anyone else takes it first.
    if (!evicted.empty()) {
      if (auto p = pending_by_uid.find(plan.pending_uid); p != pending_by_uid.end()) {
        if (HoldRoom(store_, snap, plan.node, evicted, *p->second, s_.placement, s_.hold_ms, now)) ++stats->holds;
      }
    }
  }
}

}  // namespace vramd::reconcile
