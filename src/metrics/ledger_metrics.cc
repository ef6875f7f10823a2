#include "vramd/metrics/ledger_metrics.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "vramd/ledger/enforcement.h"
#include "vramd/ledger/fit.h"
#include "vramd/ledger/protection.h"
#include "vramd/ledger/metrics.h"

namespace vramd::metrics {
namespace {

using LabelList = std::vector<std::pair<std::string, std::string>>;

struct Row {
  LabelList labels;
  ledger::Vectors v;
  ledger::SixMetrics m;
};

struct Series {
  const char* suffix;
  const char* help;
  std::function<double(const Row&)> value;
};

const std::vector<Series>& AllSeries() {
  static const std::vector<Series> s = {
      {"capacity_bytes", "Capacity C: physical VRAM minus the reserve.",
       [](const Row& r) { return static_cast<double>(r.v.capacity); }},
      {"allocated_bytes", "Allocation A: VRAM promised to pods (reserved, bound, terminating).",
       [](const Row& r) { return static_cast<double>(r.v.allocated); }},
      {"used_bytes", "Usage U: VRAM observed in use (equals A without a fresh report).",
       [](const Row& r) { return static_cast<double>(r.v.used); }},
      {"over_subscription_ratio", "Over-subscription A / C (> 1: promised more than exists).",
       [](const Row& r) { return r.m.over_subscription; }},
      {"utilization_ratio", "Utilization U / A (> 1 starvation, < 0.3 waste).",
       [](const Row& r) { return r.m.utilization; }},
      {"saturation_ratio", "Saturation U / C (physical stress; alert above 0.85).",
       [](const Row& r) { return r.m.saturation; }},
      {"headroom_bytes", "Headroom C - U (may be negative).",
       [](const Row& r) { return static_cast<double>(r.m.headroom); }},
      {"potential_bytes", "Potential A - U: reserved but idle (may be negative).",
       [](const Row& r) { return static_cast<double>(r.m.potential); }},
      {"risk_ratio", "Risk potential / headroom (> 1: a simultaneous burst would exceed the card).",
       [](const Row& r) { return r.m.risk; }},
  };
  return s;
}

void WriteRows(const char* scope, const std::vector<Row>& rows, TextWriter& w) {
  for (const Series& s : AllSeries()) {
    std::string name = std::string("vramd_") + scope + "_" + s.suffix;
    w.Header(name, std::string(s.help) + (std::string(scope) == "gpu" ? " Per GPU." : " Per node."), "gauge");
    for (const Row& r : rows) w.Sample(name, r.labels, s.value(r));
  }
}

}  // namespace

void WriteLedgerMetrics(const ledger::Snapshot& snap, int64_t now_ms, int64_t usage_max_age_ms, TextWriter& w,
                        double max_peak_ratio) {
  // Stable output order: nodes by name.
  std::vector<const ledger::Node*> nodes;
  nodes.reserve(snap.nodes.size());
  for (const auto& [name, node] : snap.nodes) nodes.push_back(&node);
  std::sort(nodes.begin(), nodes.end(), [](const auto* a, const auto* b) { return a->name < b->name; });

  std::vector<Row> gpu_rows, node_rows;
  std::vector<std::pair<LabelList, double>> fresh;
  std::vector<std::pair<LabelList, const ledger::Gpu*>> reported;  // GPUs with a fresh agent report
  std::vector<std::pair<LabelList, double>> peak, unsafe;  // the peak rule (fit.h): P and !BurstSafe
  for (const ledger::Node* n : nodes) {
    std::vector<ledger::Vectors> vec = ledger::GpuVectors(*n, now_ms, usage_max_age_ms);
    const std::vector<ledger::GpuPeak> peaks = ledger::GpuPeaks(*n);
    for (size_t i = 0; i < vec.size(); ++i) {
      const ledger::Gpu& g = n->gpus[i];
      const LabelList node_gpu = {{"node", n->name}, {"gpu", std::to_string(g.index)}};
      peak.emplace_back(node_gpu, static_cast<double>(peaks[i].peak));
      unsafe.emplace_back(node_gpu, ledger::BurstSafe(g.capacity, peaks[i], max_peak_ratio) ? 0 : 1);
      LabelList l = {{"node", n->name}, {"gpu", std::to_string(g.index)}, {"gpu_uuid", g.uuid}};
      gpu_rows.push_back({l, vec[i], ledger::ComputeMetrics(vec[i])});
      bool is_fresh = ledger::UsageFresh(g.used_ts_ms, now_ms, usage_max_age_ms);
      if (is_fresh && g.total > 0) reported.emplace_back(l, &g);  // an agent's (version-2) report
      fresh.emplace_back(std::move(l), is_fresh ? 1 : 0);
    }
    ledger::Vectors sum = ledger::SumVectors(vec);
    node_rows.push_back({{{"node", n->name}}, sum, ledger::ComputeMetrics(sum)});
  }
  WriteRows("gpu", gpu_rows, w);
  WriteRows("node", node_rows, w);

  w.Header("vramd_gpu_usage_fresh", "1 when the GPU's usage report is fresh, 0 when U falls back to A.", "gauge");
  for (const auto& [l, v] : fresh) w.Sample("vramd_gpu_usage_fresh", l, v);

  w.Header("vramd_gpu_peak_bytes",
           "Peak demand P: the sum over the GPU's entries of max(request, vramd.io/vram-peak) per GPU.", "gauge");
  for (const auto& [l, v] : peak) w.Sample("vramd_gpu_peak_bytes", l, v);
  w.Header("vramd_gpu_burst_unsafe",
           "1 when the GPU's peak demand exceeds its capacity by more than designated victims cover, or exceeds "
           "burst.max_peak_ratio x capacity (its capacity shrank, the ratio was lowered, or running pods were "
           "re-added); its entries stay, new placements there need the rule to hold.",
           "gauge");
  for (const auto& [l, v] : unsafe) w.Sample("vramd_gpu_burst_unsafe", l, v);

  w.Header("vramd_pod_allocated_bytes", "VRAM reserved for a pod on one GPU (series exist while the pod holds it).",
           "gauge");
  for (const ledger::Node* n : nodes) {
    for (const ledger::Entry& e : n->entries) {
      for (int g : e.gpus) {
        w.Sample("vramd_pod_allocated_bytes",
                 {{"node", n->name}, {"namespace", e.ns}, {"pod", e.name}, {"gpu", std::to_string(g)}},
                 static_cast<double>(e.per_gpu));
      }
    }
  }
  // From the node agents' reports (fresh ones only; a stale figure is no measurement).
  w.Header("vramd_gpu_outside_pods_bytes",
           "VRAM held on the GPU by processes that belong to no pod, as the node agent reported it.", "gauge");
  for (const auto& [l, g] : reported) {
    w.Sample("vramd_gpu_outside_pods_bytes", l, static_cast<double>(g->outside_pods));
  }
  w.Header("vramd_gpu_untracked_bytes",
           "VRAM the node agent attributed to pods that hold no VRAM in the ledger on this node (a pod vramd does "
           "not account, or a zombie whose pod is gone); counted in U.",
           "gauge");
  for (const auto& [l, g] : reported) w.Sample("vramd_gpu_untracked_bytes", l, static_cast<double>(g->untracked));
  w.Header("vramd_gpu_processes_unavailable",
           "1 when the node agent's last report has no per-process figures for the GPU (a process list that failed "
           "validation, an NVML error, /proc/PID/fdinfo it may not read: see /v1/nodes' processes_unavailable); "
           "per-pod usage is then empty.",
           "gauge");
  for (const auto& [l, g] : reported) {
    w.Sample("vramd_gpu_processes_unavailable", l, g->processes_unavailable.empty() ? 0.0 : 1.0);
  }
  w.Header("vramd_gpu_invalid_process_lists",
           "Process lists the node agent read from the driver and refused (they failed validation) since it started, "
           "as its last report says.",
           "gauge");
  for (const auto& [l, g] : reported) {
    w.Sample("vramd_gpu_invalid_process_lists", l, static_cast<double>(g->invalid_process_lists));
  }
  // Issue 34: what enforces pods' VRAM, as the agents' fresh reports say.
  w.Header("vramd_gpu_enforcement_backend",
           "1 for the backend the node agent enforces pods' VRAM limits with on the GPU: dmem (the kernel's dmem "
           "cgroup), nvml (NVML memory limits) or none (accounted only: see /v1/nodes' enforcement.reason). No "
           "series while enforce.mode is off for the node.",
           "gauge");
  for (const auto& [l, g] : reported) {
    if (g->enforcement.backend.empty()) continue;
    LabelList with = l;
    with.emplace_back("backend", g->enforcement.backend);
    w.Sample("vramd_gpu_enforcement_backend", with, 1.0);
  }
  w.Header("vramd_pod_vram_enforcement",
           "1 for the state of a pod's VRAM limit as its node agent reports it: enforced, dry-run, accounted (nothing "
           "on the node can enforce it) or failed (see the pod's VramEnforcementFailed Event); the worst over its "
           "GPUs. Series exist while the node's report is fresh and says it.",
           "gauge");
  for (const ledger::Node* n : nodes) {
    for (const ledger::Entry& e : n->entries) {
      if (e.state == ledger::EntryState::kHold) continue;
      std::optional<ledger::PodEnforcement> pe = ledger::PodEnforcementOn(*n, e.pod_uid);
      if (!pe) continue;
      const bool fresh = std::any_of(n->gpus.begin(), n->gpus.end(), [&](const ledger::Gpu& g) {
        return ledger::UsageFresh(g.used_ts_ms, now_ms, usage_max_age_ms);
      });
      if (!fresh) continue;
      w.Sample("vramd_pod_vram_enforcement",
               {{"node", n->name}, {"namespace", e.ns}, {"pod", e.name}, {"state", ledger::EnforceStateName(pe->state)}},
               1.0);
    }
  }
  w.Header("vramd_pod_used_bytes",
           "VRAM a pod's processes hold on one GPU, as the node agent reported it (series exist while the report "
           "is fresh).",
           "gauge");
  for (const ledger::Node* n : nodes) {
    for (const ledger::Entry& e : n->entries) {
      if (!ledger::UsageFresh(e.used_ts_ms, now_ms, usage_max_age_ms)) continue;
      for (int idx : e.gpus) {
        auto g = std::find_if(n->gpus.begin(), n->gpus.end(), [idx](const ledger::Gpu& x) { return x.index == idx; });
        if (g == n->gpus.end()) continue;
        auto p = std::lower_bound(g->pods.begin(), g->pods.end(), e.pod_uid,
                                  [](const ledger::PodUsage& u, const std::string& uid) { return u.uid < uid; });
        const int64_t bytes = p != g->pods.end() && p->uid == e.pod_uid ? p->used : 0;
        w.Sample("vramd_pod_used_bytes",
                 {{"node", n->name}, {"namespace", e.ns}, {"pod", e.name}, {"gpu", std::to_string(idx)}},
                 static_cast<double>(bytes));
      }
    }
  }
  w.Header("vramd_pod_over_budget_bytes",
           "Bytes a pod uses on a GPU above what it declared (its vramd.io/vram-peak, else its request); 0 within "
           "it. Series exist while the pod's usage report is fresh.",
           "gauge");
  for (const ledger::Node* n : nodes) {
    for (const ledger::Entry& e : n->entries) {
      if (!ledger::UsageFresh(e.used_ts_ms, now_ms, usage_max_age_ms)) continue;
      w.Sample("vramd_pod_over_budget_bytes", {{"node", n->name}, {"namespace", e.ns}, {"pod", e.name}},
               static_cast<double>(ledger::OverBudgetBytes(e, now_ms, usage_max_age_ms)));
    }
  }
  w.Header("vramd_pod_terminating", "1 while a pod's VRAM is held because it is terminating (phantom rule).",
           "gauge");
  for (const ledger::Node* n : nodes) {
    for (const ledger::Entry& e : n->entries) {
      w.Sample("vramd_pod_terminating", {{"node", n->name}, {"namespace", e.ns}, {"pod", e.name}},
               e.state == ledger::EntryState::kTerminating ? 1 : 0);
    }
  }
}

}  // namespace vramd::metrics
