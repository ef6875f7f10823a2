#include "vramd/extender/extender.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <set>

#include "vramd/extender/wire.h"
#include "vramd/ledger/protection.h"
#include "vramd/ledger/quantity.h"

namespace vramd::extender {
namespace {

constexpr size_t kPodCacheSize = 16384;

std::string JoinInts(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

Response ErrorResponse(int status, const std::string& message) {
  Response r;
  r.status = status;
  r.body = "{\"Error\":";
  AppendJsonString(message, &r.body);
  r.body += "}";
  return r;
}

Response BadRequest(const Status& s) { return ErrorResponse(400, s.message()); }

std::string RebuildingError(const ledger::Snapshot& snap, int64_t quiet_ms) {
  return "vramd: " + store::RebuildingMessage(snap.unseal_reason, quiet_ms);
}

// Every candidate node fails for the same pod-level reason.
ledger::FilterResult AllUnresolvable(const std::vector<std::string_view>& names, const std::string& reason) {
  ledger::FilterResult r;
  const std::string_view why = r.reasons.emplace_back(reason);
  for (std::string_view n : names) r.unresolvable.emplace_back(n, why);
  return r;
}

}  // namespace

Extender::Extender(Options opts, store::LedgerStore* store, kube::KubeClient* kube, const Clock* clock,
                   metrics::Registry* registry)
    : opts_(std::move(opts)), store_(store), kube_(kube), clock_(clock), refusals_(store, clock) {
  bind_results_ = &registry->AddCounter("vramd_bind_total",
                                        "Bind requests by result (bound, already_bound, rejected, failed).",
                                        {"result"});
  for (const char* r : {"bound", "already_bound", "rejected", "failed"}) bind_results_->With({r});
  if (opts_.bound_mark_window_ms > 0 && kube_ != nullptr) {  // standalone binds have no in-flight mark to hold them
    BoundMarkerOptions m;
    m.batch_window_ms = opts_.bound_mark_window_ms;
    marker_ = std::make_unique<BoundMarker>(store_, registry, m);
  }
}

void Extender::Remember(const std::string& uid, const std::string& ns, const std::string& name,
                        const ledger::VramRequest& req) {
  if (uid.empty()) return;
  MutexLock lock(&cache_mu_);
  auto it = cache_.find(uid);
  if (it != cache_.end()) {
    lru_.erase(it->second.second);
    cache_.erase(it);
  }
  lru_.push_front(uid);
  cache_.emplace(uid, std::make_pair(Cached{ns, name, req}, lru_.begin()));
  while (cache_.size() > kPodCacheSize) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
}

bool Extender::Recall(const std::string& uid, Cached* out) {
  MutexLock lock(&cache_mu_);
  auto it = cache_.find(uid);
  if (it == cache_.end()) return false;
  *out = it->second.first;
  return true;
}

Result<ledger::SnapshotPtr> Extender::DecisionSnapshot() {
  Result<ledger::SnapshotPtr> snap = store_->WatchedSnapshot();
  if (snap.ok() && Rebuilding(**snap)) snap = store_->Snapshot();  // the watched view may lag the seal
  if (!snap.ok()) return Unavailable("vramd: VRAM ledger unavailable: " + snap.status().message());
  if (Rebuilding(**snap)) return Unavailable(RebuildingError(**snap, opts_.rebuild_quiet_ms));
  return snap;
}

Response Extender::Filter(std::string_view body) {
  thread_local ArgsDecoder decoder;
  ExtenderArgs args;
  if (Status s = decoder.Decode(body, opts_.resource_name, &args); !s.ok()) {
    Response r;
    r.status = 400;
    WriteFilterError(s.message(), &r.body);
    return r;
  }
  Response resp;
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(args.pod, opts_.policy.victim_classes);
  if (!req.ok()) {
    WriteFilterResult(AllUnresolvable(args.node_names, "invalid VRAM request: " + req.status().message()), args,
                      &resp.body);
    return resp;
  }
  // Bind takes the pod's request from here instead of reading the pod again
  // (kube-scheduler filters a pod on this replica right before binding it).
  Remember(args.pod.uid, args.pod.ns, args.pod.name, *req);
  if (!req->wants_vram()) {
    ledger::FilterResult all;
    all.fits = args.node_names;
    WriteFilterResult(all, args, &resp.body);
    return resp;
  }
  Result<ledger::SnapshotPtr> snap = DecisionSnapshot();
  if (!snap.ok()) {
    WriteFilterError(snap.status().message(), &resp.body);
    return resp;
  }
  if (ledger::Admission a = AdmitToQueue(*snap, *req, 0); !a.ok) {
    // The queue refuses the pod wherever it would go: every node says why,
    // and the leader sees the pod waiting (its queue's pending demand; room
    // it may make by priority preemption inside the queue).
    WriteFilterResult(AllUnresolvable(args.node_names, a.reason), args, &resp.body);
    NoteRefusal(args.pod, *req, nullptr, &args.node_names);
    return resp;
  }
  ledger::FilterResult result = ledger::Filter(**snap, args.node_names, *req, opts_.policy, clock_->NowMs());
  WriteFilterResult(result, args, &resp.body);
  if (result.fits.empty() && !result.failed.empty()) NoteRefusal(args.pod, *req, &result);
  return resp;
}

std::shared_ptr<const std::vector<ledger::QueueUsage>> Extender::QueueUsage(const ledger::SnapshotPtr& snap,
                                                                            const ledger::QueueSetPtr& set) {
  {
    MutexLock lock(&usage_mu_);
    if (usage_ != nullptr && usage_snap_ == snap && usage_set_ == set) return usage_;
  }
  auto usage = std::make_shared<const std::vector<ledger::QueueUsage>>(
      ledger::QueueUsageOf(*set, *snap, {}, opts_.tenancy.policy));
  MutexLock lock(&usage_mu_);
  usage_snap_ = snap;
  usage_set_ = set;
  usage_ = usage;
  return usage;
}

ledger::Admission Extender::AdmitToQueue(const ledger::SnapshotPtr& snap, const ledger::VramRequest& req,
                                         int64_t own_bytes) {
  if (!opts_.tenancy.queues) return {};
  ledger::QueueSetPtr set = opts_.tenancy.queues();
  if (set == nullptr || set->empty()) return {};
  const bool preemptible = ledger::IsPreemptible(req.priority, req.priority_class, req.victim, opts_.tenancy.policy);
  if (!ledger::AdmissionNeedsUsage(*set, req.ns, preemptible)) return {};  // admitted whatever the usage
  return ledger::AdmitToQueue(*set, *QueueUsage(snap, set), req.ns, req.total, preemptible, own_bytes);
}

std::optional<Extender::BindOutcome> Extender::CheckQueue(const BindTarget& t, const ledger::VramRequest& req) {
  // A fresh read: the watched snapshot may not show this replica's last bind yet.
  Result<ledger::SnapshotPtr> snap = store_->Snapshot();
  if (!snap.ok()) return BindOutcome::Failed("VRAM ledger unavailable: " + snap.status().message());
  int64_t own = 0;
  if (const ledger::Node* n = (*snap)->Find(t.node)) {
    for (const ledger::Entry& e : n->entries) {
      if (e.pod_uid == t.uid) own = ledger::EntryBytes(e);
    }
  }
  ledger::Admission a = AdmitToQueue(*snap, req, own);
  if (!a.ok) return BindOutcome::Rejected(a.reason);
  return std::nullopt;
}

void Extender::NoteRefusal(const ledger::PodSpecView& pod, const ledger::VramRequest& req,
                           const ledger::FilterResult* r, const std::vector<std::string_view>* offered) {
  store::Refusal ref;
  ref.uid = pod.uid;
  ref.ns = pod.ns;
  ref.name = pod.name;
  ref.per_gpu = req.per_gpu;
  ref.peak_per_gpu = req.peak_per_gpu;
  ref.gpu_count = req.gpu_count;
  ref.victim = req.victim;
  ref.priority = req.priority;
  ref.priority_class = req.priority_class;
  ref.idle_ttl_ms = req.idle_ttl_ms;
  if (r != nullptr) {
    const size_t n = std::min(r->failed.size(), store::kMaxRefusalNodes);
    ref.nodes.reserve(n);
    for (size_t i = 0; i < n; ++i) ref.nodes.emplace_back(r->failed[i].first);
  } else if (offered != nullptr) {
    const size_t n = std::min(offered->size(), store::kMaxRefusalNodes);
    ref.nodes.reserve(n);
    for (size_t i = 0; i < n; ++i) ref.nodes.emplace_back((*offered)[i]);
  }
  (void)refusals_.Record(std::move(ref));
}

Response Extender::Prioritize(std::string_view body) {
  thread_local ArgsDecoder decoder;
  ExtenderArgs args;
  if (Status s = decoder.Decode(body, opts_.resource_name, &args); !s.ok()) return BadRequest(s);
  Response resp;
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(args.pod, opts_.policy.victim_classes);
  std::vector<ledger::HostScore> scores;
  if (!req.ok() || !req->wants_vram()) {
    for (std::string_view n : args.node_names) scores.push_back({n, 0});
    WriteHostPriorities(scores, &resp.body);
    return resp;
  }
  Result<ledger::SnapshotPtr> snap = DecisionSnapshot();
  if (!snap.ok()) return ErrorResponse(503, snap.status().message());
  scores = ledger::Prioritize(**snap, args.node_names, *req, opts_.policy, clock_->NowMs());
  WriteHostPriorities(scores, &resp.body);
  return resp;
}

Response Extender::Bind(std::string_view body) {
  Result<BindArgs> args = DecodeBindArgs(body);
  if (!args.ok()) return BadRequest(args.status());
  const BindOutcome out = BindPod({args->pod_namespace, args->pod_name, args->pod_uid, args->node});
  static constexpr const char* kLabels[] = {"bound", "already_bound", "rejected", "failed"};
  bind_results_->With({kLabels[static_cast<int>(out.result)]}).Inc();
  if (out.result == BindResult::kBound || out.result == BindResult::kAlreadyBound) {
    (void)refusals_.Forget(args->pod_uid);
  }
  if (!out.error.empty()) {
    spdlog::warn("bind {}/{} to {} failed: {}", args->pod_namespace, args->pod_name, args->node, out.error);
  }
  Response resp;
  WriteBindResult(out.error, &resp.body);
  return resp;
}

Extender::BindOutcome Extender::BindPod(const BindTarget& t) {
  ledger::VramRequest req;
  if (std::optional<BindOutcome> ended = ResolveRequest(t, &req)) return *ended;
  // While this bind runs, no replica's reconcile may free its reservation:
  // the reserve script marks the bind in flight together with the entry (the
  // mark expires by itself if this process dies mid-bind), and FinishBind or
  // this guard clears it.
  InFlightMark in_flight{store_, t.uid};
  Reserved reserved;
  if (req.wants_vram()) {
    std::optional<MutexLock> queue_lock;  // held until the reservation is written
    if (opts_.tenancy.queues) {
      ledger::QueueSetPtr set = opts_.tenancy.queues();
      const bool preemptible =
          ledger::IsPreemptible(req.priority, req.priority_class, req.victim, opts_.tenancy.policy);
      if (set != nullptr && ledger::AdmissionNeedsUsage(*set, req.ns, preemptible)) {
        queue_lock.emplace(&queue_bind_mu_);
        if (std::optional<BindOutcome> ended = CheckQueue(t, req)) return *ended;
      }
    }
    if (std::optional<BindOutcome> ended = ReserveVram(t, req, &in_flight, &reserved)) return *ended;
  }
  return CreateBinding(t, req, reserved, &in_flight);
}

std::optional<Extender::BindOutcome> Extender::ResolveRequest(const BindTarget& t, ledger::VramRequest* req) {
  Cached seen;
  const bool filtered_here = Recall(t.uid, &seen) && seen.ns == t.ns && seen.name == t.name;
  if (kube_ == nullptr) {
    if (!filtered_here) {
      return BindOutcome::Rejected("standalone mode: pod " + t.Ref() + " (UID " + t.uid +
                                   ") was not seen by filter on this replica");
    }
    *req = seen.req;
    return std::nullopt;
  }
  if (filtered_here) {
    // The request this replica's filter computed for the pod. Whether the pod
    // was replaced or bound meanwhile, the Binding itself checks (UID
    // precondition, 409 when assigned); a conflict is examined there.
    *req = seen.req;
    return std::nullopt;
  }
  Result<kube::PodInfo> pod = kube_->GetPod(t.ns, t.name);
  if (!pod.ok()) return BindOutcome::Failed("cannot read pod " + t.Ref() + ": " + pod.status().message());
  if (pod->uid != t.uid) {
    return BindOutcome::Rejected("pod " + t.Ref() + " now has UID " + pod->uid + ", not " + t.uid +
                                 " (it was replaced)");
  }
  if (!pod->node_name.empty()) {
    if (pod->node_name == t.node) return BindOutcome{BindResult::kAlreadyBound, ""};
    return BindOutcome::Rejected("pod " + t.Ref() + " is already bound to node " + pod->node_name);
  }
  Result<ledger::VramRequest> r = ledger::ComputeVramRequest(pod->spec, opts_.policy.victim_classes);
  if (!r.ok()) return BindOutcome::Rejected("invalid VRAM request of pod " + t.Ref() + ": " + r.status().message());
  *req = *r;
  return std::nullopt;
}

store::ReserveRequest BindReserveRequest(const std::string& node, const std::string& ns, const std::string& name,
                                         const std::string& uid, const ledger::GpuChoice& choice,
                                         const ledger::VramRequest& req, const ledger::Policy& policy,
                                         int64_t in_flight_ttl_ms, bool require_sealed) {
  store::ReserveRequest rr;
  rr.node = node;
  rr.entry.pod_uid = uid;
  rr.entry.ns = ns;
  rr.entry.name = name;
  rr.entry.gpus = choice.gpus;
  rr.entry.per_gpu = choice.per_gpu;
  ledger::RecordDemand(req, &rr.entry);  // model, peak, priority, class, victim
  rr.fit_on_usage = policy.fit_on_usage;
  rr.usage_max_age_ms = policy.usage_max_age_ms;
  rr.max_peak_ratio = policy.max_peak_ratio;
  rr.in_flight_ttl_ms = in_flight_ttl_ms;
  rr.require_sealed = require_sealed;
  return rr;
}

namespace {

// The UUIDs of `gpus` on node `n` (as far as the ledger knows them).
std::vector<std::string> GpuUuids(const ledger::Node* n, const std::vector<int>& gpus) {
  std::vector<std::string> uuids;
  if (n == nullptr) return uuids;
  for (int g : gpus) {
    for (const ledger::Gpu& gpu : n->gpus) {
      if (gpu.index == g && !gpu.uuid.empty()) uuids.push_back(gpu.uuid);
    }
  }
  return uuids;
}

}  // namespace

// Chooses GPUs and reserves them atomically. The first choice is made on the
// watched snapshot (no round trip while the epoch watch vouches for it); the
// reserve script checks capacity itself, and any doubt (no fit, a concurrent
// bind took the GPU, the entry already exists) re-reads.
std::optional<Extender::BindOutcome> Extender::ReserveVram(const BindTarget& t, const ledger::VramRequest& req,
                                                           InFlightMark* in_flight, Reserved* out) {
  const int64_t in_flight_ttl_ms = kube_ != nullptr ? opts_.bind_in_flight_ttl_ms : 0;
  for (int attempt = 0; attempt < opts_.bind_attempts; ++attempt) {
    const bool watched = attempt == 0;
    const bool last = attempt + 1 == opts_.bind_attempts;
    Result<ledger::SnapshotPtr> snap = watched ? store_->WatchedSnapshot() : store_->Snapshot();
    if (!snap.ok()) return BindOutcome::Failed("VRAM ledger unavailable: " + snap.status().message());
    if (Rebuilding(**snap)) {
      if (watched && !last) continue;  // the watched view may lag the seal
      return BindOutcome::Failed(store::RebuildingMessage((*snap)->unseal_reason, opts_.rebuild_quiet_ms));
    }
    const ledger::Node* n = (*snap)->Find(t.node);
    const ledger::Entry* held = nullptr;
    if (n != nullptr) {
      for (const ledger::Entry& e : n->entries) {
        if (e.pod_uid == t.uid) held = &e;
      }
    }
    if (held != nullptr && watched && !last) continue;  // confirm it on a fresh read
    if (held != nullptr) {
      if (in_flight_ttl_ms > 0) {
        if (Status s = store_->BeginBind(t.uid, in_flight_ttl_ms); !s.ok()) {
          return BindOutcome::Failed("VRAM ledger unavailable: " + s.message());
        }
        in_flight->active = true;
      }
      out->gpus = held->gpus;
    } else {
      ledger::NodeDecision d = ledger::DecideNode(n, t.node, req, opts_.policy, clock_->NowMs());
      if (d.verdict != ledger::Verdict::kFits) {
        if (watched && !last) continue;  // never reject on a view that may lag
        return BindOutcome::Rejected("node " + t.node + ": " + d.reason);
      }
      const store::ReserveRequest rr = BindReserveRequest(t.node, t.ns, t.name, t.uid, d.choice, req, opts_.policy,
                                                          in_flight_ttl_ms, /*require_sealed=*/kube_ != nullptr);
      in_flight->active = in_flight_ttl_ms > 0;  // whatever the answer, leave no mark behind
      // Let go of the snapshot before writing: the store then takes the
      // write into its cache in place, from the script's answer, instead of
      // leaving it to the next filter call to read (SnapshotCache::ApplyOwnEntry).
      std::vector<std::string> uuids = GpuUuids(n, d.choice.gpus);
      n = nullptr;
      snap->reset();
      Result<store::ReserveOutcome> reserved = store_->Reserve(rr);
      if (!reserved.ok()) {
        const bool no_room = reserved.status().code() == Code::kInsufficient;
        if (no_room && !last) continue;
        std::string why = "reserving VRAM on node " + t.node + " failed: " + reserved.status().message();
        return no_room ? BindOutcome::Rejected(std::move(why)) : BindOutcome::Failed(std::move(why));
      }
      if (*reserved == store::ReserveOutcome::kAlreadyHeld) continue;  // re-read to learn its GPUs
      out->gpus = d.choice.gpus;
      out->uuids = std::move(uuids);
      return std::nullopt;
    }
    out->uuids = GpuUuids(n, out->gpus);
    return std::nullopt;
  }
  return BindOutcome::Rejected("node " + t.node + ": lost the race for its GPUs " +
                               std::to_string(opts_.bind_attempts) + " times");
}

// One API call: the annotations travel in the Binding. Any failure releases
// the reservation (reconcile frees it after the grace period if that fails too).
Extender::BindOutcome Extender::CreateBinding(const BindTarget& t, const ledger::VramRequest& req, const Reserved& r,
                                              InFlightMark* in_flight) {
  auto release = [&](BindOutcome out) {
    if (!req.wants_vram()) return out;
    Result<bool> released = store_->Release(t.node, t.uid);
    if (!released.ok()) out.error += " (releasing the reservation failed too: " + released.status().message() + ")";
    return out;
  };
  if (kube_ != nullptr) {
    std::map<std::string, std::string> ann;
    if (req.wants_vram()) {
      ann[kAnnotationGpus] = JoinInts(r.gpus);
      ann[kAnnotationVramPerGpu] = std::to_string(req.per_gpu);
      if (r.uuids.size() == r.gpus.size() && !r.uuids.empty()) {
        std::string u;
        for (size_t i = 0; i < r.uuids.size(); ++i) u += (i ? "," : "") + r.uuids[i];
        ann[kAnnotationGpuUuids] = u;
      }
    }
    if (Status s = kube_->Bind(t.ns, t.name, t.uid, t.node, ann); !s.ok()) {
      if (s.code() == Code::kConflict) {
        // Already assigned (perhaps by an earlier attempt of this bind whose
        // answer was lost), or replaced by a pod of the same name.
        Result<kube::PodInfo> now = kube_->GetPod(t.ns, t.name);
        if (now.ok() && now->uid == t.uid && now->node_name == t.node) {
          if (req.wants_vram() && store_->FinishBind(t.node, t.uid).ok()) in_flight->active = false;
          return BindOutcome{BindResult::kAlreadyBound, ""};
        }
        if (now.ok() && now->uid != t.uid) {
          return release(BindOutcome::Rejected("pod " + t.Ref() + " now has UID " + now->uid + ", not " + t.uid +
                                               " (it was replaced)"));
        }
        if (now.ok() && !now->node_name.empty()) {
          return release(BindOutcome::Rejected("pod " + t.Ref() + " is already bound to node " + now->node_name));
        }
      }
      return release(
          BindOutcome::Failed("creating the Binding of pod " + t.Ref() + " to " + t.node + " failed: " + s.message()));
    }
  }
  if (req.wants_vram()) {
    // Batched after the answer (the in-flight mark holds the entry until
    // then, and the marker's write clears it), or now.
    if (marker_ != nullptr && marker_->Mark(t.node, t.uid)) {
      in_flight->active = false;
    } else if (Status s = store_->FinishBind(t.node, t.uid); !s.ok()) {
      // The pod is bound; reconcile marks the entry bound later (and the
      // guard tries to clear the in-flight mark once more).
      spdlog::warn("marking {} bound in the ledger failed: {}", t.Ref(), s.message());
    } else {
      in_flight->active = false;
    }
  }
  return BindOutcome{BindResult::kBound, ""};
}

// Preempt (EXTENDER-PROTOCOL.md): kube-scheduler's dry run ignores VRAM, so
// for each proposed node vramd keeps it only if removing the proposed victims'
// reservations makes the pod fit there. Nodes with an empty victim list are
// never returned. A node that does not fit is dropped (an empty map vetoes).
Response Extender::Preempt(std::string_view body) {
  thread_local ArgsDecoder decoder;
  ExtenderArgs args;
  if (Status s = decoder.Decode(body, opts_.resource_name, &args); !s.ok()) return BadRequest(s);
  Response resp;
  nlohmann::json victims = nlohmann::json::object();
  if (!args.meta_victims.empty()) {
    victims = nlohmann::json::parse(args.meta_victims, nullptr, false);
    if (victims.is_discarded() || !victims.is_object()) {
      return BadRequest(InvalidArgument("NodeNameToMetaVictims must be an object"));
    }
  }
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(args.pod, opts_.policy.victim_classes);
  if (!req.ok()) return BadRequest(req.status());
  Result<ledger::SnapshotPtr> snap = DecisionSnapshot();
  if (!snap.ok()) return ErrorResponse(503, snap.status().message());
  // With queues, the victims must be ones reclaim could take too
  // (ledger::PreemptVictimsAllowed); the queues' fair shares are read once.
  std::optional<ledger::TenancyView> tenancy;
  if (opts_.tenancy.queues && opts_.tenancy.view && req->wants_vram()) {
    ledger::QueueSetPtr set = opts_.tenancy.queues();
    if (set != nullptr && !set->empty()) tenancy = opts_.tenancy.view();
  }
  nlohmann::json kept = nlohmann::json::object();
  // Room vramd's own eviction made for this pod is held for it (issue 32):
  // it waits for that room; more victims anywhere would be a second
  // eviction for one pod. Every node is dropped.
  // So is room still being made (its victims terminating, the hold not yet
  // written): asked of the store, which alone knows (a store that cannot
  // answer gets the same answer: no victims, the safe side).
  std::string_view held_on;
  if (req->wants_vram() && ledger::FindHold(**snap, req->uid, &held_on) != nullptr) {
    spdlog::debug("preempt: pod {}/{} holds room on {} already: no victims", args.pod.ns, args.pod.name, held_on);
    victims = nlohmann::json::object();
  } else if (req->wants_vram() && !victims.empty() && !req->uid.empty()) {
    Result<bool> pending = store_->HoldPending(req->uid);
    if (!pending.ok() || *pending) {
      spdlog::debug("preempt: pod {}/{}: {}: no victims", args.pod.ns, args.pod.name,
                    pending.ok() ? "room is being made for it (victims terminating)"
                                 : "whether room is being made for it is unknown: " + pending.status().message());
      victims = nlohmann::json::object();
    }
  }
  for (auto it = victims.begin(); it != victims.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (!v.is_object() || !v.contains("Pods") || !v["Pods"].is_array() || v["Pods"].empty()) continue;
    std::set<std::string> uids;
    for (const auto& p : v["Pods"]) {
      if (p.is_object() && p.contains("UID") && p["UID"].is_string()) uids.insert(p["UID"].get<std::string>());
    }
    if (uids.empty()) continue;
    bool fits = true;
    if (req->wants_vram()) {
      const ledger::Node* n = (*snap)->Find(it.key());
      if (n == nullptr) continue;
      // The victims gone as evicting them would leave the node: their
      // reservations and their measured usage (with an agent reporting, U
      // would otherwise still hold their bytes and veto every preemption).
      ledger::Node without = *n;
      for (const std::string& uid : uids) ledger::RemoveFromNode(&without, uid);
      fits = ledger::DecideNode(&without, it.key(), *req, opts_.policy, clock_->NowMs()).verdict ==
             ledger::Verdict::kFits;
      if (fits && tenancy && tenancy->set != nullptr) {
        std::vector<const ledger::Entry*> taken;
        for (const ledger::Entry& e : n->entries) {
          if (uids.count(e.pod_uid) > 0) taken.push_back(&e);
        }
        const std::string why =
            ledger::PreemptVictimsAllowed(*tenancy->set, tenancy->statuses, req->ns, req->priority, req->total,
                                          taken, tenancy->policy, clock_->NowMs());
        if (!why.empty()) {
          spdlog::debug("preempt: node {} dropped for pod {}/{}: {}", it.key(), args.pod.ns, args.pod.name, why);
          fits = false;
        }
      }
    }
    if (fits) kept[it.key()] = v;
  }
  nlohmann::json out = {{"NodeNameToMetaVictims", kept}};
  resp.body = out.dump();
  return resp;
}

}  // namespace vramd::extender
