#include "vramd/reconcile/plan.h"

#include <algorithm>
#include <unordered_map>

#include "vramd/ledger/placement.h"
#include "vramd/ledger/pod_request.h"

namespace vramd::reconcile {

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kReadd: return "readd";
    case ActionKind::kMarkBound: return "mark-bound";
    case ActionKind::kMarkTerminating: return "mark-terminating";
    case ActionKind::kRelease: return "release";
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
  }
  return "?";
}

bool GpusFromAnnotations(const std::map<std::string, std::string>& ann, std::vector<int>* gpus, int64_t* per_gpu) {
  auto g = ann.find("vramd.io/gpus");
  auto b = ann.find("vramd.io/vram-per-gpu");
  if (g == ann.end() || b == ann.end() || g->second.empty() || b->second.empty()) return false;
  std::vector<int> out;
  int cur = -1;
  for (char c : g->second + ",") {
    if (c >= '0' && c <= '9') {
      cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
      if (cur > 4096) return false;
    } else if (c == ',') {
      if (cur < 0) return false;
      out.push_back(cur);
      cur = -1;
    } else {
      return false;
    }
  }
  const std::string& s = b->second;
  if (s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  int64_t bytes = std::stoll(s);
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) return false;
  *gpus = std::move(out);
  *per_gpu = bytes;
  return true;
}

namespace {

bool Terminal(const kube::PodInfo& p) { return p.phase == "Succeeded" || p.phase == "Failed"; }

// An orphan without usable annotations: take the GPUs with the most free
// memory (an over-commit shows in the metrics rather than being hidden).
std::vector<int> PickGpus(const ledger::Node& node, int count, int64_t now_ms) {
  std::vector<ledger::Vectors> vec = ledger::GpuVectors(node, now_ms, 0);
  std::vector<size_t> idx(vec.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t a, size_t b) { return ledger::FreeBytes(vec[a]) > ledger::FreeBytes(vec[b]); });
  std::vector<int> out;
  for (size_t i = 0; i < idx.size() && static_cast<int>(out.size()) < count; ++i) out.push_back(node.gpus[idx[i]].index);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

PlanResult Plan(const ledger::Snapshot& snap, const std::vector<kube::PodInfo>& pods,
                const std::set<std::string>& in_flight, const PlanOptions& opts) {
  PlanResult r;
  std::unordered_map<std::string, const kube::PodInfo*> by_uid;
  by_uid.reserve(pods.size());
  for (const kube::PodInfo& p : pods) by_uid.emplace(p.uid, &p);

  // Where each pod holds an entry now.
  std::unordered_map<std::string, std::pair<const ledger::Node*, const ledger::Entry*>> held;
  for (const auto& [name, node] : snap.nodes) {
    for (const ledger::Entry& e : node.entries) held[e.pod_uid] = {&node, &e};
  }

  // 1. Ledger entries against the cluster.
  for (const auto& [name, node] : snap.nodes) {
    int64_t phantom = 0;
    for (const ledger::Entry& e : node.entries) {
      auto it = by_uid.find(e.pod_uid);
      const int64_t age = opts.now_ms - e.created_ms;
      const bool flying = in_flight.count(e.pod_uid) > 0;
      Action a{ActionKind::kRelease, name, e, ReleaseCause::kNone, ""};
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

  // 2. Pods against the ledger: orphans.
  for (const kube::PodInfo& p : pods) {
    if (p.node_name.empty() || Terminal(p)) continue;
    Result<ledger::VramRequest> req = ledger::ComputeVramRequest(p.spec);
    if (!req.ok() || !req->wants_vram()) continue;
    auto h = held.find(p.uid);
    if (h != held.end() && h->second.first->name == p.node_name) continue;
    const ledger::Node* node = snap.Find(p.node_name);
    if (node == nullptr || node->gpus.empty()) continue;  // capacity not known yet: next pass
    ledger::Entry e;
    e.pod_uid = p.uid;
    e.ns = p.ns;
    e.name = p.name;
    e.model = req->model;
    e.peak_per_gpu = req->peak_per_gpu;
    e.state = p.deleting ? ledger::EntryState::kTerminating : ledger::EntryState::kBound;
    e.created_ms = opts.now_ms;
    std::vector<int> gpus;
    int64_t per_gpu = 0;
    bool annotated = GpusFromAnnotations(p.annotations, &gpus, &per_gpu);
    if (annotated) {
      for (int g : gpus) {
        bool known = std::any_of(node->gpus.begin(), node->gpus.end(), [&](const ledger::Gpu& x) { return x.index == g; });
        if (!known) annotated = false;
      }
    }
    if (annotated) {
      e.gpus = gpus;
      e.per_gpu = per_gpu;
    } else {
      e.gpus = PickGpus(*node, req->gpu_count, opts.now_ms);
      e.per_gpu = req->per_gpu;
    }
    if (p.deleting) r.phantom_bytes[p.node_name] += e.per_gpu * static_cast<int64_t>(e.gpus.size());
    ++r.orphans;
    r.actions.push_back({ActionKind::kReadd, p.node_name, e, ReleaseCause::kNone,
                         annotated ? "orphan (GPUs from annotations)" : "orphan (no GPU annotations: GPUs chosen)"});
  }
  return r;
}

}  // namespace vramd::reconcile
