#include "vramd/reconcile/evictor.h"

#include <spdlog/spdlog.h>

#include "vramd/ledger/quantity.h"

namespace vramd::reconcile {
namespace {

// " on node-1 GPU 0", " on node-1", or "".
std::string Where(const EvictionAction& a) {
  if (a.node.empty()) return "";
  return " on " + a.node + (a.gpu >= 0 ? " GPU " + std::to_string(a.gpu) : "");
}

// " for ml/pending-pod", or "".
std::string For(const EvictionAction& a) { return a.for_name.empty() ? "" : " for " + a.for_ns + "/" + a.for_name; }

}  // namespace

const char* ActionModeName(ActionMode mode) { return mode == ActionMode::kEnforce ? "enforce" : "dry-run"; }

std::string EvictionEventMessage(const EvictionAction& action, ActionMode mode) {
  const bool dry = mode == ActionMode::kDryRun;
  std::string what;
  if (action.reason == "pressure") {
    what = dry ? "would recycle" : "recycled";
  } else if (action.reason == "idle") {
    what = dry ? "would evict idle pod" : "evicted idle pod";
  } else {
    what = std::string(dry ? "would evict" : "evicted") + " (" + action.reason + ")";
  }
  return what + ": " + action.detail;
}

std::optional<std::string> EvictionBudget::Take(const std::string& key, int64_t now_ms) {
  Result<std::string> r = store_->BudgetTake(key, max_per_minute_, cooldown_ms_, now_ms, leader_identity_);
  if (!r.ok()) {
    spdlog::warn("{}, {} left alone this pass: {}",
                 r.status().code() == Code::kConflict ? "not the leader in the store" : "eviction budget unreadable",
                 key, r.status().message());
    return std::nullopt;
  }
  if (r->empty()) return std::nullopt;
  return std::move(*r);
}

void EvictionBudget::Record(const std::string& key, int64_t now_ms) {
  if (Status s = store_->BudgetRecord(key, cooldown_ms_, now_ms); !s.ok()) {
    spdlog::warn("eviction budget: recording an action on {} failed: {}", key, s.message());
  }
}

void EvictionBudget::GiveBack(const std::string& key, const std::string& claim) {
  if (Status s = store_->BudgetGiveBack(key, claim); !s.ok()) {
    // The claim stays: the key waits its cooldown for nothing (the safe side).
    spdlog::warn("eviction budget: giving back an unused claim on {} failed: {}", key, s.message());
  }
}

bool HoldRoom(store::LedgerStore* store, const ledger::Snapshot& snap, const std::string& node,
              const std::vector<std::string>& victims, const ledger::PendingPod& pod, const ledger::Policy& policy,
              int64_t hold_ms, int64_t now_ms) {
  if (hold_ms <= 0) return false;
  const ledger::Node* n = snap.Find(node);
  std::optional<ledger::Entry> hold = n == nullptr ? std::nullopt : ledger::RoomMadeFor(*n, victims, pod, policy, now_ms);
  if (!hold) {
    spdlog::warn("evictor: no hold for {}/{} on {}: it would not fit there once its victims are gone", pod.ns,
                 pod.name, node);
    return false;
  }
  Result<store::LedgerStore::HoldOutcome> r = store->HoldRoom(node, victims, *hold, hold_ms);
  if (!r.ok()) {
    spdlog::warn("evictor: holding room for {}/{} on {} failed: {}", pod.ns, pod.name, node, r.status().message());
    return false;
  }
  if (*r == store::LedgerStore::HoldOutcome::kHolderPlaced) return false;  // bound meanwhile: the room is its own
  std::string gpus;
  for (int g : hold->gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
  spdlog::info("evictor: {} on each of GPU(s) {} of {} held for {}/{} for {} ms{}", ledger::FormatBytes(hold->per_gpu),
               gpus, node, pod.ns, pod.name, hold_ms,
               *r == store::LedgerStore::HoldOutcome::kPending ? " once its victims are gone" : "");
  return true;
}

Evictor::Evictor(kube::KubeClient* kube, metrics::Registry* registry, std::function<bool()> may_act)
    : kube_(kube), may_act_(std::move(may_act)) {
  actions_ = &registry->AddCounter("vramd_watchdog_actions_total",
                                   "Evictions vramd carried out (enforce) or only recorded as Events (dry-run), by "
                                   "mode and reason (pressure, idle).",
                                   {"mode", "reason"});
  failures_ = &registry->AddCounter("vramd_watchdog_eviction_failures_total",
                                    "Evictions that did not happen, by reason and why: blocked (a "
                                    "PodDisruptionBudget; tried again later), error (the API call failed) or "
                                    "not_leader (this replica lost the leadership during the pass).",
                                    {"reason", "why"});
  for (const char* reason : {"pressure", "idle"}) {
    for (ActionMode mode : {ActionMode::kDryRun, ActionMode::kEnforce}) actions_->With({ActionModeName(mode), reason});
    failures_->With({reason, "blocked"});
    failures_->With({reason, "error"});
    failures_->With({reason, "not_leader"});
  }
}

ActionResult Evictor::Act(const EvictionAction& a, ActionMode mode) {
  const std::string pod = a.ns + "/" + a.name;
  ActionResult result = ActionResult::kRecorded;
  if (may_act_ && !may_act_()) {
    spdlog::warn("evictor: not the leader any more: {} ({}{}) left alone", pod, a.reason, Where(a));
    failures_->With({a.reason, "not_leader"}).Inc();
    return ActionResult::kFenced;
  }
  if (mode == ActionMode::kDryRun) {
    spdlog::info("evictor: dry-run: would evict {} ({}{}{}): {}", pod, a.reason, Where(a), For(a), a.detail);
  } else {
    std::string api_message;
    Result<kube::EvictOutcome> r = kube_->EvictPod(a.ns, a.name, a.uid, &api_message);
    if (!r.ok()) {
      spdlog::warn("evictor: eviction of {} ({}{}) failed: {}", pod, a.reason, Where(a), r.status().ToString());
      failures_->With({a.reason, "error"}).Inc();
      return ActionResult::kFailed;
    }
    switch (*r) {
      case kube::EvictOutcome::kBlocked:
        spdlog::warn("evictor: eviction of {} ({}{}) refused, tried again later: {}", pod, a.reason, Where(a),
                     api_message);
        failures_->With({a.reason, "blocked"}).Inc();
        return ActionResult::kBlocked;
      case kube::EvictOutcome::kGone:
        spdlog::debug("evictor: {} ({}) is gone or was replaced, not evicted: {}", pod, a.reason, api_message);
        return ActionResult::kGone;
      case kube::EvictOutcome::kEvicted:
        break;
    }
    spdlog::info("evictor: evicted {} ({}{}{}): {}", pod, a.reason, Where(a), For(a), a.detail);
    result = ActionResult::kEvicted;
  }
  const char* event_reason = mode == ActionMode::kDryRun ? kWouldEvictEventReason : kEvictedEventReason;
  PostEvent(a.ns, a.name, a.uid, "Warning", event_reason, EvictionEventMessage(a, mode));
  if (!a.for_name.empty()) {
    PostEvent(a.for_ns, a.for_name, a.for_uid, "Normal", kMadeRoomEventReason,
              std::string(mode == ActionMode::kDryRun ? "vramd would evict " : "vramd evicted ") + pod +
                  " to make room: " + a.detail);
  }
  actions_->With({ActionModeName(mode), a.reason}).Inc();
  return result;
}

int Evictor::Precheck(const std::vector<EvictionAction>& actions, ActionMode mode) {
  if (mode == ActionMode::kDryRun || actions.size() < 2) return kPrecheckPassed;
  for (size_t i = 0; i < actions.size(); ++i) {
    const EvictionAction& a = actions[i];
    std::string api_message;
    Result<kube::EvictOutcome> r = kube_->EvictPod(a.ns, a.name, a.uid, &api_message, /*dry_run=*/true);
    if (!r.ok()) {
      spdlog::warn("evictor: dry-run eviction of {}/{} ({}{}) failed, the action of {} pods waits: {}", a.ns, a.name,
                   a.reason, Where(a), actions.size(), r.status().ToString());
      failures_->With({a.reason, "error"}).Inc();
      return kPrecheckFailed;
    }
    if (*r == kube::EvictOutcome::kBlocked) {
      spdlog::warn("evictor: {}/{} ({}{}) would be refused: none of the {} pods of the action is evicted: {}", a.ns,
                   a.name, a.reason, Where(a), actions.size(), api_message);
      failures_->With({a.reason, "blocked"}).Inc();
      return static_cast<int>(i);
    }
  }
  return kPrecheckPassed;
}

void Evictor::PostEvent(const std::string& ns, const std::string& name, const std::string& uid, const char* type,
                        const char* reason, const std::string& message) {
  kube::PodInfo pod;
  pod.ns = ns;
  pod.name = name;
  pod.uid = uid;
  Status s = kube_->PostPodEvent(pod, type, reason, message);
  if (!s.ok()) spdlog::warn("evictor: event {} on {}/{} not posted: {}", reason, ns, name, s.ToString());
}

}  // namespace vramd::reconcile
