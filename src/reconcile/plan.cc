#include "vramd/reconcile/plan.h"

#include <algorithm>
#include <unordered_map>

#include "vramd/ledger/capacity.h"
#include "vramd/ledger/fit.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/pod_request.h"
#include "vramd/ledger/quantity.h"
#include "vramd/parse.h"

namespace vramd::reconcile {

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kReadd: return "readd";
    case ActionKind::kMarkBound: return "mark-bound";
    case ActionKind::kMarkTerminating: return "mark-terminating";
    case ActionKind::kRelease: return "release";
    case ActionKind::kRefresh: return "refresh";
  }
  return "?";
}

const char* ReleaseCauseName(ReleaseCause c) {
  switch (c) {
    case ReleaseCause::kNone: return "none";
    case ReleaseCause::kPodGone: return "pod_gone";
    case ReleaseCause::kTerminalPhase: return "terminal_phase";
    case ReleaseCause::kStaleReservation: return "stale_reservation";
    case ReleaseCause::kWrongNode: return "wrong_node";
    case ReleaseCause::kHoldEnded: return "hold_ended";
  }
  return "?";
}

namespace {

// At most 64 bytes of an annotation's value, quoted, for a reason.
std::string Quoted(std::string_view v) {
  std::string out = "\"";
  out += v.substr(0, 64);
  if (v.size() > 64) out += "...";
  return out + "\"";
}

}  // namespace

Result<std::optional<AnnotatedGpus>> GpusFromAnnotations(const std::map<std::string, std::string>& ann) {
  auto g = ann.find(kGpusAnnotation);
  auto b = ann.find(kVramPerGpuAnnotation);
  if (g == ann.end() && b == ann.end()) return std::optional<AnnotatedGpus>();
  if (g == ann.end() || b == ann.end()) {
    return InvalidArgument(std::string("annotation ") + (g == ann.end() ? kVramPerGpuAnnotation : kGpusAnnotation) +
                           " is set without " + (g == ann.end() ? kGpusAnnotation : kVramPerGpuAnnotation));
  }
  const std::string_view list = g->second;
  auto bad_list = [&](const std::string& why) {
    return InvalidArgument(std::string("annotation ") + kGpusAnnotation + "=" + Quoted(list) + " " + why);
  };
  if (list.empty()) return bad_list("is empty");
  AnnotatedGpus out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    const std::string_view item =
        list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    std::optional<int> idx = ParseSmallInt(item, kMaxGpuIndex);
    if (!idx) {
      return bad_list("is not a comma list of GPU indices 0.." + std::to_string(kMaxGpuIndex) + " (item " +
                      Quoted(item) + ")");
    }
    out.gpus.push_back(*idx);
    if (static_cast<int>(out.gpus.size()) > kMaxAnnotatedGpus) {
      return bad_list("names more than " + std::to_string(kMaxAnnotatedGpus) + " GPUs");
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(out.gpus.begin(), out.gpus.end());
  if (auto d = std::adjacent_find(out.gpus.begin(), out.gpus.end()); d != out.gpus.end()) {
    return bad_list("names GPU " + std::to_string(*d) + " twice");
  }
  const std::string_view bytes = b->second;
  std::optional<uint64_t> per_gpu = ParseDigits(bytes, static_cast<uint64_t>(ledger::kMaxBytesPerGpu));
  if (!per_gpu || *per_gpu == 0) {
    return InvalidArgument(std::string("annotation ") + kVramPerGpuAnnotation + "=" + Quoted(bytes) +
                           " is not a whole number of bytes from 1 to " +
                           std::to_string(ledger::kMaxBytesPerGpu) + " (1Pi)");
  }
  out.per_gpu = static_cast<int64_t>(*per_gpu);
  return std::optional<AnnotatedGpus>(std::move(out));
}

namespace {

bool Terminal(const kube::PodInfo& p) { return p.phase == "Succeeded" || p.phase == "Failed"; }

// An orphan without usable annotations: the GPUs with the most free memory
// by allocation (fit.h's MostFreeGpus: an over-commit shows in the metrics
// rather than being hidden).
std::vector<int> PickGpus(const ledger::Node& node, int count, int64_t now_ms) {
  std::vector<ledger::Vectors> vec = ledger::GpuVectors(node, now_ms, ledger::FitPolicy{/*count_usage=*/false, 0});
  std::vector<int> out;
  for (size_t pos : ledger::MostFreeGpus(vec, count)) out.push_back(node.gpus[pos].index);
  return out;
}

}  // namespace

std::string HoldEnds(const ledger::Entry& hold, const kube::PodInfo* pod, bool bind_in_flight, int64_t now_ms) {
  if (bind_in_flight) return "";  // its bind is replacing it now
  if (pod == nullptr) return "the pod it was held for is gone";
  if (Terminal(*pod)) return "the pod it was held for reached " + pod->phase;
  if (pod->deleting) return "the pod it was held for is being deleted";
  if (!pod->node_name.empty()) return "the pod it was held for is bound to " + pod->node_name;
  if (now_ms >= hold.hold_until_ms) return "the hold expired";
  return "";
}

bool AnyPodAwaitingBind(const std::vector<kube::PodInfo>& pods) {
  for (const kube::PodInfo& p : pods) {
    if (!p.node_name.empty() || Terminal(p)) continue;
    Result<ledger::VramRequest> req = ledger::ComputeVramRequest(p.spec);
    if (req.ok() && req->wants_vram()) return true;
  }
  return false;
}

namespace {

bool PlacementKey(const std::string& k) {
  return k == kGpusAnnotation || k == kVramPerGpuAnnotation || k == kGpuUuidsAnnotation;
}

// Equal but for the placement annotations.
bool SameBesidesPlacement(const std::map<std::string, std::string>& a, const std::map<std::string, std::string>& b) {
  auto i = a.begin();
  auto j = b.begin();
  for (;;) {
    while (i != a.end() && PlacementKey(i->first)) ++i;
    while (j != b.end() && PlacementKey(j->first)) ++j;
    if (i == a.end() || j == b.end()) return i == a.end() && j == b.end();
    if (*i != *j) return false;
    ++i;
    ++j;
  }
}

}  // namespace

bool OnlyBound(const kube::PodInfo& before, const kube::PodInfo& after) {
  return before.node_name.empty() && !after.node_name.empty() && before.uid == after.uid &&
         before.phase == after.phase && before.deleting == after.deleting &&
         before.scheduler_name == after.scheduler_name && before.spec == after.spec &&
         SameBesidesPlacement(before.annotations, after.annotations);
}

bool BindAccounted(const ledger::Snapshot& snap, const kube::PodInfo& pod,
                   const std::vector<std::string>* victim_classes) {
  if (!snap.sealed || pod.node_name.empty() || pod.deleting || Terminal(pod)) return false;
  Result<ledger::VramRequest> req = victim_classes != nullptr ? ledger::ComputeVramRequest(pod.spec, *victim_classes)
                                                              : ledger::ComputeVramRequest(pod.spec);
  if (!req.ok() || !req->wants_vram()) return false;
  Result<std::optional<AnnotatedGpus>> ann = GpusFromAnnotations(pod.annotations);
  if (!ann.ok() || !ann->has_value()) return false;
  const ledger::Node* node = snap.Find(pod.node_name);
  if (node == nullptr) return false;
  const ledger::Entry* mine = nullptr;
  for (const ledger::Entry& e : node->entries) {
    if (e.pod_uid == pod.uid && e.state != ledger::EntryState::kHold) mine = &e;
  }
  if (mine == nullptr || (mine->state != ledger::EntryState::kReserved && mine->state != ledger::EntryState::kBound)) {
    return false;
  }
  std::vector<int> gpus = mine->gpus;
  std::sort(gpus.begin(), gpus.end());
  if (mine->per_gpu != req->per_gpu || static_cast<int>(gpus.size()) != req->gpu_count ||
      (*ann)->per_gpu != mine->per_gpu || (*ann)->gpus != gpus) {
    return false;
  }
  return ledger::FindHold(snap, pod.uid) == nullptr;
}

PlanResult Plan(const ledger::Snapshot& snap, const std::vector<kube::PodInfo>& pods,
                const std::set<std::string>& in_flight, const PlanOptions& opts) {
  PlanResult r;
  std::unordered_map<std::string, const kube::PodInfo*> by_uid;
  by_uid.reserve(pods.size());
  for (const kube::PodInfo& p : pods) by_uid.emplace(p.uid, &p);

  // Where each pod holds an entry now (room held for it is not its entry).
  std::unordered_map<std::string, std::pair<const ledger::Node*, const ledger::Entry*>> held;
  for (const auto& [name, node] : snap.nodes) {
    for (const ledger::Entry& e : node.entries) {
      if (e.state != ledger::EntryState::kHold) held[e.pod_uid] = {&node, &e};
    }
  }

  // 1. Ledger entries against the cluster.
  for (const auto& [name, node] : snap.nodes) {
    int64_t phantom = 0;
    for (const ledger::Entry& e : node.entries) {
      auto it = by_uid.find(e.pod_uid);
      const int64_t age = opts.now_ms - e.created_ms;
      const bool flying = in_flight.count(e.pod_uid) > 0;
      Action a{ActionKind::kRelease, name, e, ReleaseCause::kNone, ""};
      if (e.state == ledger::EntryState::kHold) {
        // Room an eviction made for a pending pod (issue 32): kept while the
        // pod waits for it and the hold lasts; the pod's own bind replaces it.
        const std::string why = HoldEnds(e, it == by_uid.end() ? nullptr : it->second, flying, opts.now_ms);
        if (why.empty()) continue;
        a.cause = ReleaseCause::kHoldEnded;
        a.reason = why;
        ++r.holds_ended;
        r.actions.push_back(a);
        continue;
      }
      if (it == by_uid.end()) {
        // Unknown pod. A bind may be in flight, or the watch may not have
        // delivered a brand-new pod yet: entries younger than the grace
        // period are kept, unless the watch saw the pod deleted.
        const bool seen_deleted = opts.deleted != nullptr && opts.deleted->count(e.pod_uid) > 0;
        if (!seen_deleted && (flying || age < opts.grace_ms)) continue;
        if (e.state == ledger::EntryState::kReserved && !seen_deleted) {
          a.cause = ReleaseCause::kStaleReservation;
          a.reason = "reservation never showed up bound";
          ++r.stale;
        } else {
          a.cause = ReleaseCause::kPodGone;
          a.reason = "pod no longer exists";
          ++r.gone;
        }
        r.actions.push_back(a);
        continue;
      }
      const kube::PodInfo& p = *it->second;
      if (Terminal(p)) {
        a.cause = ReleaseCause::kTerminalPhase;
        a.reason = "pod reached " + p.phase;
        ++r.terminal;
        r.actions.push_back(a);
        continue;
      }
      if (p.node_name.empty()) {
        // Not bound (yet): a reservation waiting for its Binding.
        if (flying || age < opts.grace_ms) continue;
        a.cause = ReleaseCause::kStaleReservation;
        a.reason = "pod still unbound after the grace period";
        ++r.stale;
        r.actions.push_back(a);
        continue;
      }
      if (p.node_name != name) {
        if (flying) continue;
        a.cause = ReleaseCause::kWrongNode;
        a.reason = "pod is bound to " + p.node_name;
        r.actions.push_back(a);
        continue;
      }
      // Bound here. Phantom rule: a deleting pod keeps its VRAM.
      if (p.deleting) {
        phantom += e.per_gpu * static_cast<int64_t>(e.gpus.size());
        if (e.state != ledger::EntryState::kTerminating) {
          r.actions.push_back({ActionKind::kMarkTerminating, name, e, ReleaseCause::kNone, "deletionTimestamp set"});
        }
      } else if (e.state == ledger::EntryState::kReserved && !flying) {
        r.actions.push_back({ActionKind::kMarkBound, name, e, ReleaseCause::kNone, "pod is bound"});
      }
    }
    if (phantom > 0 || !node.entries.empty()) r.phantom_bytes[name] = phantom;
  }

  // 2. Pods against the ledger: orphans. A pod whose metadata cannot be read
  // is reported (MalformedPod) and never stops the pass.
  for (const kube::PodInfo& p : pods) {
    if (p.node_name.empty() || Terminal(p)) continue;
    auto report = [&](std::string reason) {
      r.malformed.push_back({p.uid, p.ns, p.name, p.node_name, std::move(reason)});
    };
    Result<ledger::VramRequest> req = opts.victim_classes != nullptr
                                          ? ledger::ComputeVramRequest(p.spec, *opts.victim_classes)
                                          : ledger::ComputeVramRequest(p.spec);
    if (req.ok() && std::max(req->per_gpu, req->peak_per_gpu) > ledger::kMaxBytesPerGpu) {
      req = InvalidArgument("the pod asks for " + ledger::FormatBytes(std::max(req->per_gpu, req->peak_per_gpu)) +
                            " per GPU, more than the " + ledger::FormatBytes(ledger::kMaxBytesPerGpu) +
                            " one GPU may have");
    }
    if (!req.ok()) {
      report("invalid VRAM request: " + req.status().message() +
             "; reconcile does not account this pod (an entry it already holds is kept until the pod ends)");
      continue;
    }
    if (!req->wants_vram()) continue;
    Result<std::optional<AnnotatedGpus>> annotations = GpusFromAnnotations(p.annotations);
    if (!annotations.ok()) {
      report(annotations.status().message() +
             "; reconcile ignores both placement annotations and accounts the pod by its request (" +
             ledger::FormatBytes(req->per_gpu) + " on each of " + std::to_string(req->gpu_count) +
             " GPU(s) it chooses)");
    }
    auto h = held.find(p.uid);
    const bool held_here = h != held.end() && h->second.first->name == p.node_name;
    const ledger::Node* node = snap.Find(p.node_name);
    const bool placeable = node != nullptr && !node->gpus.empty();
    // What a rebuild must find before it seals the ledger: this pod's entry.
    if (held_here || placeable) r.required.emplace_back(p.node_name, p.uid);
    // Placement annotations are the pod's own metadata, which anyone who may
    // create a pod can write (a pod created with spec.nodeName never meets
    // filter or bind): bytes they claim beyond (or below) the request, or a
    // GPU count other than the request's, are never accounted (issue 30).
    // Such a pod is reported (a Warning Event, the malformed gauge) for as
    // long as it runs; vramd's own bind always writes the request's figures.
    const bool annotated = annotations.ok() && annotations->has_value();
    const bool annotations_match = annotated && (*annotations)->per_gpu == req->per_gpu &&
                                   static_cast<int>((*annotations)->gpus.size()) == req->gpu_count;
    if (annotated && !annotations_match) {
      ++r.annotations_overridden;
      report("placement annotations (" + std::string(kGpusAnnotation) + " naming " +
             std::to_string((*annotations)->gpus.size()) + " GPU(s), " + kVramPerGpuAnnotation + " " +
             ledger::FormatBytes((*annotations)->per_gpu) + ") do not match what the pod requests (" +
             ledger::FormatBytes(req->per_gpu) + " on each of " + std::to_string(req->gpu_count) +
             " GPU(s)): vramd did not write them (the pod did not come through its bind); it is accounted at its "
             "request");
    }
    // An entry held at other bytes than the request (re-added from forged
    // annotations by an older vramd) is put right; a reservation belongs to
    // its bind and is left alone.
    const ledger::Entry* mine = held_here ? h->second.second : nullptr;
    const bool wrong_bytes = mine != nullptr && mine->state != ledger::EntryState::kReserved &&
                             in_flight.count(p.uid) == 0 && mine->per_gpu != req->per_gpu;
    if (held_here && !wrong_bytes) {
      // The facts vramd's evictions decide on, as the pod says them now: an
      // entry written before vramd recorded them (priority 0, no class, no
      // owner) or whose pod changed its vramd.io annotations is put right.
      // A reservation belongs to its bind, which records them.
      if (mine != nullptr && mine->state != ledger::EntryState::kReserved && ledger::EvictionFactsDiffer(*req, *mine) &&
          in_flight.count(p.uid) == 0) {
        ledger::Entry fresh = *mine;
        ledger::RecordEvictionFacts(*req, &fresh);
        ++r.refreshed;
        r.actions.push_back({ActionKind::kRefresh, p.node_name, std::move(fresh), ReleaseCause::kNone,
                             "the pod's priority, class, owner or vramd.io annotations differ from its entry's"});
      }
      continue;
    }
    if (!placeable) continue;  // capacity not known yet: next pass
    ledger::Entry e;
    e.pod_uid = p.uid;
    e.ns = p.ns;
    e.name = p.name;
    ledger::RecordDemand(*req, &e);  // model, peak, priority, class, victim
    e.state = p.deleting ? ledger::EntryState::kTerminating : ledger::EntryState::kBound;
    e.created_ms = wrong_bytes ? mine->created_ms : opts.now_ms;
    // On the GPUs the entry being put right or the annotations name when they
    // are usable (as many as the pod asks for, all on the node: its capacity
    // may have changed), else chosen as for any re-add; at the request's bytes.
    std::vector<int> named;
    if (wrong_bytes) {
      named = mine->gpus;
    } else if (annotated) {
      named = (*annotations)->gpus;
    }
    bool usable = !named.empty() && static_cast<int>(named.size()) == req->gpu_count;
    for (int g : named) {
      bool known = std::any_of(node->gpus.begin(), node->gpus.end(), [&](const ledger::Gpu& x) { return x.index == g; });
      if (!known) usable = false;
    }
    e.gpus = usable ? named : PickGpus(*node, req->gpu_count, opts.now_ms);
    e.per_gpu = req->per_gpu;
    if (p.deleting && !held_here) r.phantom_bytes[p.node_name] += e.per_gpu * static_cast<int64_t>(e.gpus.size());
    if (!wrong_bytes) ++r.orphans;
    r.actions.push_back({ActionKind::kReadd, p.node_name, e, ReleaseCause::kNone,
                         wrong_bytes ? "entry held other bytes than the pod requests: accounted at its request"
                         : usable    ? "orphan (GPUs from annotations)"
                                     : "orphan (no usable GPU annotations: GPUs chosen)"});
  }
  return r;
}

}  // namespace vramd::reconcile
