#include "vramd/reconcile/protection.h"

#include <spdlog/spdlog.h>

#include <unordered_map>
#include <utility>

#include "vramd/ledger/quantity.h"

namespace vramd::reconcile {
namespace {

std::optional<ActionMode> ModeOf(const std::string& s) {
  if (s == "enforce") return ActionMode::kEnforce;
  if (s == "dry-run") return ActionMode::kDryRun;
  return std::nullopt;  // off
}

// "45s", "12m", "1h5m", "2d3h": the two largest units.
std::string FormatDuration(int64_t ms) {
  int64_t s = ms / 1000;
  if (s < 60) return std::to_string(s) + "s";
  const int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60, sec = s % 60;
  if (d > 0) return std::to_string(d) + "d" + (h > 0 ? std::to_string(h) + "h" : "");
  if (h > 0) return std::to_string(h) + "h" + (m > 0 ? std::to_string(m) + "m" : "");
  return std::to_string(m) + "m" + (sec > 0 ? std::to_string(sec) + "s" : "");
}

}  // namespace

ProtectionSettings ProtectionSettingsFrom(const config::Config& cfg, const ledger::Policy& placement) {
  ProtectionSettings s;
  s.watchdog = ModeOf(cfg.watchdog_mode);
  s.idle = ModeOf(cfg.idle_mode);
  s.idle_policy = cfg.idle_policy == "always" ? ledger::IdleMode::kAlways : ledger::IdleMode::kOnDemand;
  if (Result<config::Floor> f = config::ParseFloor(cfg.watchdog_floor); f.ok()) {
    s.watchdog_policy.floor_bytes = f->bytes;
    s.watchdog_policy.floor_percent = f->percent;
  }
  if (Result<std::vector<std::string>> l = config::ParseClassList(cfg.watchdog_protected_classes); l.ok()) {
    s.watchdog_policy.protected_classes = std::move(*l);
  }
  if (Result<std::vector<std::string>> l = config::ParseClassList(cfg.watchdog_system_namespaces); l.ok()) {
    s.watchdog_policy.system_namespaces = std::move(*l);
  }
  s.watchdog_policy.usage_max_age_ms = cfg.usage_max_age_ms;
  s.watchdog_policy.min_over_budget_bytes = cfg.watchdog_min_over_budget_bytes;
  s.placement = placement;
  s.usage_change_bytes = cfg.idle_usage_change_bytes;
  s.interval_ms = cfg.watchdog_interval_ms;
  s.cooldown_ms = cfg.watchdog_cooldown_ms;
  s.hold_ms = cfg.eviction_hold_ms;
  s.max_per_minute = cfg.watchdog_max_actions_per_minute;
  s.pending_max_age_ms = cfg.idle_pending_max_age_ms;
  s.pressure_reports = cfg.watchdog_pressure_reports;
  return s;
}

std::string WatchdogDetail(const ledger::GpuPressure& p, const ledger::WatchdogVictim* v) {
  std::string out;
  if (v != nullptr) {
    if (v->reason == ledger::VictimReason::kDesignatedVictim) {
      out = "designated victim uses " + ledger::FormatBytes(v->used);
    } else {
      out = "uses " + ledger::FormatBytes(v->used) + ", declared " + ledger::FormatBytes(v->declared);
    }
    out += "; ";
  }
  out += "GPU " + std::to_string(p.gpu) + " of " + p.node + " has " + ledger::FormatBytes(p.free) + " free, floor " +
         ledger::FormatBytes(p.floor);
  if (p.victims.size() > 1) out += "; one of " + std::to_string(p.victims.size()) + " pods evicted together to free it";
  return out;
}

std::string IdleDetail(const ledger::IdleEviction& e, int64_t ttl_ms) {
  std::string out = "idle for " + FormatDuration(e.idle_ms) + " (idle-ttl " + FormatDuration(ttl_ms) + ")";
  if (!e.for_uid.empty()) out += "; makes room for " + e.for_ns + "/" + e.for_name + " on " + e.node;
  return out;
}

std::vector<ledger::PendingPod> WaitingPods(std::vector<store::Refusal> refusals,
                                            const std::vector<kube::PodInfo>* pods, std::vector<std::string>* gone) {
  std::unordered_map<std::string, const kube::PodInfo*> by_uid;
  if (pods != nullptr) {
    for (const kube::PodInfo& p : *pods) by_uid[p.uid] = &p;
  }
  std::vector<ledger::PendingPod> pending;
  for (store::Refusal& r : refusals) {
    if (pods != nullptr) {
      auto it = by_uid.find(r.uid);
      const bool waiting = it != by_uid.end() && it->second->node_name.empty() && !it->second->deleting &&
                           (it->second->phase.empty() || it->second->phase == "Pending");
      if (!waiting) {
        if (gone != nullptr) gone->push_back(r.uid);
        continue;
      }
    }
    ledger::PendingPod pp;
    pp.uid = r.uid;
    pp.ns = r.ns;
    pp.name = r.name;
    pp.demand.gpu_count = r.gpu_count < 1 ? 1 : r.gpu_count;
    pp.demand.per_gpu = r.per_gpu;
    pp.demand.total = r.per_gpu * pp.demand.gpu_count;
    pp.demand.peak_per_gpu = r.peak_per_gpu < r.per_gpu ? r.per_gpu : r.peak_per_gpu;
    pp.demand.ns = r.ns;
    pp.demand.priority = r.priority;
    pp.demand.priority_class = std::move(r.priority_class);
    pp.demand.victim = r.victim;
    pp.demand.idle_ttl_ms = r.idle_ttl_ms;
    pp.nodes = std::move(r.nodes);
    pp.refused_ms = r.ts_ms;
    pending.push_back(std::move(pp));
  }
  return pending;
}

Protection::Protection(ProtectionSettings settings, store::LedgerStore* store, PodWatcher* watcher,
                       Evictor* evictor, LockActivityFn lock_activity, const Clock* clock,
                       metrics::Registry* registry)
    : s_(std::move(settings)),
      store_(store),
      watcher_(watcher),
      evictor_(evictor),
      lock_activity_(std::move(lock_activity)),
      clock_(clock),
      tracker_(s_.usage_change_bytes, s_.watchdog_policy.usage_max_age_ms),
      watchdog_budget_(store, s_.cooldown_ms, s_.max_per_minute, s_.leader_identity),
      idle_budget_(store, s_.cooldown_ms, s_.max_per_minute, s_.leader_identity) {
  pressure_ = &registry->AddGauge("vramd_gpu_under_pressure",
                                  "1 while the GPU's physical free VRAM (total - observed used) is below the "
                                  "watchdog's floor (set by the leader).",
                                  {"node", "gpu"});
  waiting_ = &registry->AddGauge("vramd_pods_waiting_for_vram",
                                 "Pending pods that vramd refused for VRAM recently (leader).");
  waiting_->With({});
  idle_pods_ = &registry->AddGauge("vramd_idle_pods",
                                   "Pods with vramd.io/idle-ttl that are past it: idle and evictable (leader).");
  idle_pods_->With({});
  persisting_ = &registry->AddGauge("vramd_watchdog_pressure_persisting",
                                    "GPUs under pressure with a cause and a victim whose pressure has not yet "
                                    "persisted watchdog.pressure_reports consecutive reports: the watchdog waits "
                                    "(leader; the info log names the pod it would choose).");
  persisting_->With({});
}

std::optional<Result<ProtectionStats>> Protection::MaybeRun() {
  {
    MutexLock lock(&mu_);
    const int64_t now = clock_->NowMs();
    if (last_run_ms_ != 0 && now - last_run_ms_ < s_.interval_ms && now >= last_run_ms_) return std::nullopt;
    last_run_ms_ = now;
  }
  return RunOnce();
}

Result<ProtectionStats> Protection::RunOnce() {
  ProtectionStats stats;
  if (!s_.watchdog && !s_.idle) return stats;
  Result<ledger::SnapshotPtr> snap_r = store_->Snapshot();
  if (!snap_r.ok()) return snap_r.status();
  const ledger::Snapshot& snap = **snap_r;
  // Nothing is decided from a ledger being rebuilt: entries may be missing.
  if (!snap.sealed) return stats;
  const int64_t now = clock_->NowMs();
  MutexLock lock(&mu_);

  // The watchdog: per GPU under pressure, the fewest victims that cover its
  // deficit, once the pressure persisted and the GPU's cooldown allows.
  const std::unordered_map<std::string, int64_t> deleting = watcher_->DeletionTimes();
  std::vector<ledger::GpuPressure> pressure = ledger::PlanWatchdog(snap, s_.watchdog_policy, now, &deleting);
  std::map<std::string, bool> series;
  for (const ledger::GpuPressure& p : pressure) series[p.node + '\n' + std::to_string(p.gpu)] = true;
  for (const auto& [key, on] : pressure_series_) {
    if (!series.contains(key)) {
      const size_t nl = key.find('\n');
      pressure_->With({key.substr(0, nl), key.substr(nl + 1)}).Set(0);
    }
  }
  for (const auto& [key, on] : series) {
    const size_t nl = key.find('\n');
    pressure_->With({key.substr(0, nl), key.substr(nl + 1)}).Set(1);
  }
  pressure_series_ = std::move(series);
  stats.gpus_under_pressure = static_cast<int>(pressure.size());
  streaks_.Observe(pressure);
  if (s_.watchdog) {
    for (const ledger::GpuPressure& p : pressure) {
      if (!p.victim) {
        // A full GPU used within its reservations (no cause) is normal: debug.
        spdlog::log(p.cause.empty() ? spdlog::level::debug : spdlog::level::warn,
                    "watchdog: GPU {} of {} has {} free, below the floor of {}, and no victim: {}", p.gpu, p.node,
                    ledger::FormatBytes(p.free), ledger::FormatBytes(p.floor), p.no_victim);
        continue;
      }
      if (const int seen = streaks_.Reports(p.node, p.gpu); seen < s_.pressure_reports) {
        ++stats.persisting;
        spdlog::info("watchdog: GPU {} of {} has {} free, below the floor of {} ({}), in {} of the {} consecutive "
                     "reports it takes to act; {} would be chosen now",
                     p.gpu, p.node, ledger::FormatBytes(p.free), ledger::FormatBytes(p.floor), p.cause, seen,
                     s_.pressure_reports, p.victim->ns + "/" + p.victim->name);
        continue;
      }
      const std::string key = "gpu:" + p.node + "/" + std::to_string(p.gpu);
      const std::optional<std::string> claim = watchdog_budget_.Take(key, now);
      if (!claim) {
        ++stats.gated;
        continue;
      }
      int acted = 0;
      // The victims as one action; one refused (a PodDisruptionBudget):
      // the next candidates cover what is still missing.
      std::set<std::string> done;  // acted on or refused
      int64_t freed = 0;
      for (std::vector<size_t> set = ledger::CoverDeficit(p.candidates, p.deficit, done); !set.empty();
           set = ledger::CoverDeficit(p.candidates, p.deficit - freed, done)) {
        bool refused = false;
        std::vector<EvictionAction> actions;
        for (size_t i : set) {
          const ledger::WatchdogVictim& v = p.candidates[i];
          EvictionAction a;
          a.ns = v.ns;
          a.name = v.name;
          a.uid = v.pod_uid;
          a.node = p.node;
          a.gpu = p.gpu;
          a.reason = "pressure";
          a.detail = WatchdogDetail(p, &v);
          actions.push_back(std::move(a));
        }
        // An action of several pods goes whole: a pod a budget would refuse
        // is known before any of them goes, and the next set covers without it.
        const int pre = evictor_->Precheck(actions, *s_.watchdog);
        if (pre == Evictor::kPrecheckFailed) break;
        if (pre >= 0) {
          done.insert(p.candidates[set[static_cast<size_t>(pre)]].pod_uid);
          continue;
        }
        for (size_t k = 0; k < set.size(); ++k) {
          const size_t i = set[k];
          const ledger::WatchdogVictim& v = p.candidates[i];
          const EvictionAction& a = actions[k];
          const ActionResult r = evictor_->Act(a, *s_.watchdog);
          done.insert(v.pod_uid);
          if (r == ActionResult::kRecorded || r == ActionResult::kEvicted) {
            if (acted++ > 0) watchdog_budget_.Record(key, now);  // the claim counts the first
            freed += v.used;
            ++stats.watchdog_actions;
          } else if (r == ActionResult::kBlocked) {
            refused = true;
          }
        }
        if (!refused) break;
      }
      if (acted == 0) watchdog_budget_.GiveBack(key, *claim);
    }
  }
  persisting_->With({}).Set(stats.persisting);

  if (!s_.idle) return stats;
  // Idle tracking: usage changes and GPU-lock activity of the pods that say
  // vramd.io/idle-ttl.
  std::vector<std::string> idle_nodes;
  for (const auto& [name, node] : snap.nodes) {
    for (const ledger::Entry& e : node.entries) {
      if (e.idle_ttl_ms > 0) {
        idle_nodes.push_back(name);
        break;
      }
    }
  }
  std::map<std::string, int64_t> activity;
  if (lock_activity_ && !idle_nodes.empty()) {
    Result<std::map<std::string, int64_t>> r = lock_activity_(idle_nodes);
    if (r.ok()) {
      activity = std::move(*r);
    } else {
      // Without the lock signal a pod could look idle while it computes:
      // no idle eviction this pass.
      spdlog::warn("idle eviction: GPU-lock activity unreadable, skipping this pass: {}", r.status().message());
      return stats;
    }
  }
  int idle_now = 0;
  for (const auto& [name, node] : snap.nodes) {
    for (const ledger::Entry& e : node.entries) {
      if (e.idle_ttl_ms <= 0) continue;
      auto it = activity.find(e.pod_uid);
      tracker_.Observe(e, it == activity.end() ? 0 : it->second, now);
      if (ledger::IdleFor(e, tracker_, now) >= 0) ++idle_now;
    }
  }
  tracker_.ForgetUnobserved(now);
  idle_pods_->With({}).Set(idle_now);

  // Pods waiting for VRAM: refused by a filter recently and still pending.
  std::vector<ledger::PendingPod> pending;
  if (s_.idle_policy == ledger::IdleMode::kOnDemand) {
    Result<std::vector<store::Refusal>> refusals = store_->ReadRefusals(s_.pending_max_age_ms);
    if (!refusals.ok()) return refusals.status();
    std::vector<std::string> forget;
    const std::vector<kube::PodInfo> pods = watcher_->Pods();
    pending = WaitingPods(std::move(*refusals), &pods, &forget);
    if (!forget.empty()) {
      if (Status s = store_->ForgetRefusals(forget); !s.ok()) {
        spdlog::debug("idle eviction: forgetting {} refusals failed: {}", forget.size(), s.message());
      }
    }
  }
  stats.waiting_pods = static_cast<int>(pending.size());
  waiting_->With({}).Set(static_cast<double>(pending.size()));

  std::vector<ledger::IdleEviction> plan =
      ledger::PlanIdle(snap, tracker_, pending, s_.idle_policy, s_.placement, now, &deleting);
  stats.idle_candidates = static_cast<int>(plan.size());
  std::unordered_map<std::string, int64_t> ttl_of;
  for (const auto& [name, node] : snap.nodes) {
    for (const ledger::Entry& e : node.entries) {
      if (e.idle_ttl_ms > 0) ttl_of[e.pod_uid] = e.idle_ttl_ms;
    }
  }
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> made_room;  // (pod, node) -> evicted
  // The evictions made for one waiting pod are one action and go whole:
  // every pod's budget claimed and its eviction pre-checked (Precheck) before
  // any goes; kAlways evictions (no waiting pod) go one by one.
  std::vector<std::vector<size_t>> actions_of;
  std::map<std::string, size_t> action_for;  // waiting pod -> its action in actions_of
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].for_uid.empty()) {
      actions_of.push_back({i});
      continue;
    }
    auto [it, added] = action_for.emplace(plan[i].for_uid, actions_of.size());
    if (added) actions_of.emplace_back();
    actions_of[it->second].push_back(i);
  }
  for (const std::vector<size_t>& members : actions_of) {
    std::vector<std::pair<std::string, std::string>> claims;  // (key, claim)
    std::vector<EvictionAction> actions;
    for (size_t i : members) {
      const ledger::IdleEviction& e = plan[i];
      const std::string key = "idle:" + e.pod_uid;
      std::optional<std::string> claim = idle_budget_.Take(key, now);
      if (!claim) break;
      claims.emplace_back(key, std::move(*claim));
      EvictionAction a;
      a.ns = e.ns;
      a.name = e.name;
      a.uid = e.pod_uid;
      a.node = e.node;
      a.reason = "idle";
      a.detail = IdleDetail(e, ttl_of[e.pod_uid]);
      a.for_ns = e.for_ns;
      a.for_name = e.for_name;
      a.for_uid = e.for_uid;
      actions.push_back(std::move(a));
    }
    const bool gated = claims.size() < members.size();
    if (gated || evictor_->Precheck(actions, *s_.idle) != Evictor::kPrecheckPassed) {
      ++(gated ? stats.gated : stats.blocked);
      for (const auto& [key, claim] : claims) idle_budget_.GiveBack(key, claim);
      continue;
    }
    for (size_t k = 0; k < actions.size(); ++k) {
      const EvictionAction& a = actions[k];
      const ActionResult r = evictor_->Act(a, *s_.idle);
      if (r == ActionResult::kRecorded || r == ActionResult::kEvicted) {
        ++stats.idle_actions;
        if (r == ActionResult::kEvicted && !a.for_uid.empty()) made_room[{a.for_uid, a.node}].push_back(a.uid);
      } else {
        idle_budget_.GiveBack(claims[k].first, claims[k].second);
      }
    }
  }
  // The room is the waiting pod's: held for it (issue 32).
  for (const auto& [at, evicted] : made_room) {
    const std::string& for_uid = at.first;  // not the binding itself: clang 14 cannot capture one
    auto p = std::find_if(pending.begin(), pending.end(), [&](const ledger::PendingPod& x) { return x.uid == for_uid; });
    if (p != pending.end() && HoldRoom(store_, snap, at.second, evicted, *p, s_.placement, s_.hold_ms, now)) {
      ++stats.holds;
    }
  }
  return stats;
}

}  // namespace vramd::reconcile
