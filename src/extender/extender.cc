#include "vramd/extender/extender.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <set>

#include "vramd/extender/wire.h"
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

const std::string& RebuildingError() {
  static const std::string m = std::string("vramd: ") + store::kRebuildingMessage;
  return m;
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
    : opts_(std::move(opts)), store_(store), kube_(kube), clock_(clock) {
  bind_results_ = &registry->AddCounter("vramd_bind_total",
                                        "Bind requests by result (bound, already_bound, rejected, failed).",
                                        {"result"});
  for (const char* r : {"bound", "already_bound", "rejected", "failed"}) bind_results_->With({r});
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
  if (Rebuilding(**snap)) return Unavailable(RebuildingError());
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
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(args.pod);
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
  ledger::FilterResult result = ledger::Filter(**snap, args.node_names, *req, opts_.policy, clock_->NowMs());
  WriteFilterResult(result, args, &resp.body);
  return resp;
}

Response Extender::Prioritize(std::string_view body) {
  thread_local ArgsDecoder decoder;
  ExtenderArgs args;
  if (Status s = decoder.Decode(body, opts_.resource_name, &args); !s.ok()) return BadRequest(s);
  Response resp;
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(args.pod);
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
  Response resp;
  std::string error = BindPod(args->pod_namespace, args->pod_name, args->pod_uid, args->node);
  if (!error.empty()) {
    spdlog::warn("bind {}/{} to {} failed: {}", args->pod_namespace, args->pod_name, args->node, error);
  }
  WriteBindResult(error, &resp.body);
  return resp;
}

std::string Extender::BindPod(const std::string& ns, const std::string& name, const std::string& uid,
                              const std::string& node) {
  const std::string pod_ref = ns + "/" + name;
  ledger::VramRequest req;
  Cached seen;
  const bool filtered_here = Recall(uid, &seen) && seen.ns == ns && seen.name == name;
  if (kube_ != nullptr && filtered_here) {
    // The request this replica's filter computed for the pod. Whether the pod
    // was replaced or bound meanwhile, the Binding itself checks (UID
    // precondition, 409 when assigned); a conflict is examined below.
    req = seen.req;
  } else if (kube_ != nullptr) {
    Result<kube::PodInfo> pod = kube_->GetPod(ns, name);
    if (!pod.ok()) {
      bind_results_->With({"failed"}).Inc();
      return "cannot read pod " + pod_ref + ": " + pod.status().message();
    }
    if (pod->uid != uid) {
      bind_results_->With({"rejected"}).Inc();
      return "pod " + pod_ref + " now has UID " + pod->uid + ", not " + uid + " (it was replaced)";
    }
    if (!pod->node_name.empty()) {
      if (pod->node_name == node) {
        bind_results_->With({"already_bound"}).Inc();
        return "";
      }
      bind_results_->With({"rejected"}).Inc();
      return "pod " + pod_ref + " is already bound to node " + pod->node_name;
    }
    Result<ledger::VramRequest> r = ledger::ComputeVramRequest(pod->spec);
    if (!r.ok()) {
      bind_results_->With({"rejected"}).Inc();
      return "invalid VRAM request of pod " + pod_ref + ": " + r.status().message();
    }
    req = *r;
  } else {
    if (!filtered_here) {
      bind_results_->With({"rejected"}).Inc();
      return "standalone mode: pod " + pod_ref + " (UID " + uid + ") was not seen by filter on this replica";
    }
    req = seen.req;
  }

  // While this bind runs, no replica's reconcile may free its reservation:
  // the reserve script marks the bind in flight together with the entry (the
  // mark expires by itself if this process dies mid-bind), and FinishBind or
  // this guard clears it.
  struct InFlight {
    store::LedgerStore* store;
    const std::string& uid;
    bool active = false;
    ~InFlight() {
      if (active) (void)store->EndBind(uid);
    }
  } in_flight{store_, uid};
  const int64_t in_flight_ttl_ms = kube_ != nullptr ? opts_.bind_in_flight_ttl_ms : 0;

  // Reserve: choose GPUs and write atomically. The first choice is made on
  // the watched snapshot (no round trip while the epoch watch vouches for
  // it); the reserve script checks capacity itself, and any doubt — no fit,
  // a concurrent bind took the GPU, the entry already exists — re-reads.
  std::vector<int> gpus;
  std::vector<std::string> uuids;
  if (req.wants_vram()) {
    bool done = false;
    for (int attempt = 0; attempt < opts_.bind_attempts && !done; ++attempt) {
      const bool watched = attempt == 0;
      Result<ledger::SnapshotPtr> snap = watched ? store_->WatchedSnapshot() : store_->Snapshot();
      if (!snap.ok()) {
        bind_results_->With({"failed"}).Inc();
        return "VRAM ledger unavailable: " + snap.status().message();
      }
      if (Rebuilding(**snap)) {
        if (watched && attempt + 1 < opts_.bind_attempts) continue;  // the watched view may lag the seal
        bind_results_->With({"failed"}).Inc();
        return store::kRebuildingMessage;
      }
      const ledger::Node* n = (*snap)->Find(node);
      const ledger::Entry* held = nullptr;
      if (n != nullptr) {
        for (const ledger::Entry& e : n->entries) {
          if (e.pod_uid == uid) held = &e;
        }
      }
      if (held != nullptr && watched && attempt + 1 < opts_.bind_attempts) continue;  // confirm it on a fresh read
      if (held != nullptr) {
        if (in_flight_ttl_ms > 0) {
          if (Status s = store_->BeginBind(uid, in_flight_ttl_ms); !s.ok()) {
            bind_results_->With({"failed"}).Inc();
            return "VRAM ledger unavailable: " + s.message();
          }
          in_flight.active = true;
        }
        gpus = held->gpus;
      } else {
        ledger::NodeDecision d = ledger::DecideNode(n, node, req, opts_.policy, clock_->NowMs());
        if (d.verdict != ledger::Verdict::kFits) {
          if (watched && attempt + 1 < opts_.bind_attempts) continue;  // never reject on a view that may lag
          bind_results_->With({"rejected"}).Inc();
          return "node " + node + ": " + d.reason;
        }
        store::ReserveRequest rr;
        rr.node = node;
        rr.entry.pod_uid = uid;
        rr.entry.ns = ns;
        rr.entry.name = name;
        rr.entry.gpus = d.choice.gpus;
        rr.entry.per_gpu = d.choice.per_gpu;
        ledger::RecordDemand(req, &rr.entry);  // model, peak, priority, class, victim
        rr.fit_on_usage = opts_.policy.fit_on_usage;
        rr.usage_max_age_ms = opts_.policy.usage_max_age_ms;
        rr.in_flight_ttl_ms = in_flight_ttl_ms;
        rr.require_sealed = kube_ != nullptr;
        in_flight.active = in_flight_ttl_ms > 0;  // whatever the answer, leave no mark behind
        Result<store::ReserveOutcome> out = store_->Reserve(rr);
        if (!out.ok()) {
          if (out.status().code() == Code::kInsufficient && attempt + 1 < opts_.bind_attempts) continue;
          bind_results_->With({out.status().code() == Code::kInsufficient ? "rejected" : "failed"}).Inc();
          return "reserving VRAM on node " + node + " failed: " + out.status().message();
        }
        if (*out == store::ReserveOutcome::kAlreadyHeld) continue;  // re-read to learn its GPUs
        gpus = d.choice.gpus;
      }
      if (n != nullptr) {
        for (int g : gpus) {
          for (const ledger::Gpu& gpu : n->gpus) {
            if (gpu.index == g && !gpu.uuid.empty()) uuids.push_back(gpu.uuid);
          }
        }
      }
      done = true;
    }
    if (!done) {
      bind_results_->With({"rejected"}).Inc();
      return "node " + node + ": lost the race for its GPUs " + std::to_string(opts_.bind_attempts) + " times";
    }
  }

  auto release = [&](const std::string& why) {
    if (!req.wants_vram()) return why;
    Result<bool> r = store_->Release(node, uid);
    if (!r.ok()) {
      // The reconcile loop frees it after the grace period.
      return why + " (releasing the reservation failed too: " + r.status().message() + ")";
    }
    return why;
  };

  if (kube_ != nullptr) {
    // One API call: the annotations travel in the Binding.
    std::map<std::string, std::string> ann;
    if (req.wants_vram()) {
      ann[kAnnotationGpus] = JoinInts(gpus);
      ann[kAnnotationVramPerGpu] = std::to_string(req.per_gpu);
      if (uuids.size() == gpus.size() && !uuids.empty()) {
        std::string u;
        for (size_t i = 0; i < uuids.size(); ++i) u += (i ? "," : "") + uuids[i];
        ann[kAnnotationGpuUuids] = u;
      }
    }
    if (Status s = kube_->Bind(ns, name, uid, node, ann); !s.ok()) {
      if (s.code() == Code::kConflict) {
        // Already assigned (perhaps by an earlier attempt of this bind whose
        // answer was lost), or replaced by a pod of the same name.
        Result<kube::PodInfo> now = kube_->GetPod(ns, name);
        if (now.ok() && now->uid == uid && now->node_name == node) {
          bind_results_->With({"already_bound"}).Inc();
          if (req.wants_vram() && store_->FinishBind(node, uid).ok()) in_flight.active = false;
          return "";
        }
        if (now.ok() && now->uid != uid) {
          bind_results_->With({"rejected"}).Inc();
          return release("pod " + pod_ref + " now has UID " + now->uid + ", not " + uid + " (it was replaced)");
        }
        if (now.ok() && !now->node_name.empty()) {
          bind_results_->With({"rejected"}).Inc();
          return release("pod " + pod_ref + " is already bound to node " + now->node_name);
        }
      }
      bind_results_->With({"failed"}).Inc();
      return release("creating the Binding of pod " + pod_ref + " to " + node + " failed: " + s.message());
    }
  }
  if (req.wants_vram()) {
    if (Status s = store_->FinishBind(node, uid); !s.ok()) {
      // The pod is bound; reconcile marks the entry bound later (and the
      // guard tries to clear the in-flight mark once more).
      spdlog::warn("marking {} bound in the ledger failed: {}", pod_ref, s.message());
    } else {
      in_flight.active = false;
    }
  }
  bind_results_->With({"bound"}).Inc();
  return "";
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
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(args.pod);
  if (!req.ok()) return BadRequest(req.status());
  Result<ledger::SnapshotPtr> snap = DecisionSnapshot();
  if (!snap.ok()) return ErrorResponse(503, snap.status().message());
  nlohmann::json kept = nlohmann::json::object();
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
      ledger::Node without = *n;
      std::erase_if(without.entries, [&](const ledger::Entry& e) { return uids.count(e.pod_uid) > 0; });
      fits = ledger::DecideNode(&without, it.key(), *req, opts_.policy, clock_->NowMs()).verdict ==
             ledger::Verdict::kFits;
    }
    if (fits) kept[it.key()] = v;
  }
  nlohmann::json out = {{"NodeNameToMetaVictims", kept}};
  resp.body = out.dump();
  return resp;
}

}  // namespace vramd::extender
