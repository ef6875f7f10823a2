// Issue 15's figure: a watchdog + idle pass at 5,000 nodes x 8 GPUs and
// 50,000 entries <= 20 ms CPU (ledger/protection.h). One pass is what the
// leader does each period: PlanWatchdog over every GPU, IdleTracker::Observe
// over every entry (with a lookup of the pod's GPU-lock activity), and
// PlanIdle on demand for the pods vramd refused (BM_ProtectionPass/always:0;
// always:1 is the same pass with the idle policy "always").
//
//   build-bench/bin/protection_bench
//   build-bench/bin/protection_bench --benchmark_filter=Pass
//
// The cluster: every GPU has 80Gi capacity (81Gi physical) and a fresh usage
// report. Ten entries per node: GPUs 0 and 1 hold two 38Gi entries each,
// GPUs 2..7 one 70Gi entry; each uses 1Gi below its reservation, plus 512Mi
// outside pods per GPU. 30 % of the entries (3 per node) carry an idle TTL of
// 10 min; on every third node they have been idle 20 min, elsewhere active a
// minute ago. 100 GPUs are under pressure: on 50 nodes one pod runs 10Gi over
// its budget on GPU 2; on 50 others GPU 1 is full with a designated victim on
// it. 100 pending pods want 20Gi on one GPU (no node has it), each refused on
// 50 nodes spread over the cluster.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_data.h"
#include "vramd/ledger/protection.h"

namespace vramd::bench {
namespace {

constexpr int64_t kMi = int64_t{1} << 20;
constexpr int64_t kNowMs = 1'700'000'100'000;
constexpr int64_t kMinMs = 60'000;
constexpr int kNodes = 5000;
constexpr int kGpus = 8;
constexpr int kEntriesPerNode = 10;
constexpr int kPending = 100;
constexpr int kNodesPerPending = 50;

bool HasTtl(int k) { return k == 3 || k == 8 || k == 9; }

ledger::Snapshot MakeProtectionSnapshot() {
  ledger::Snapshot snap;
  snap.epoch = 1;
  snap.nodes.reserve(kNodes);
  for (int i = 0; i < kNodes; ++i) {
    ledger::Node node;
    node.name = NodeName(i);
    for (int g = 0; g < kGpus; ++g) {
      ledger::Gpu gpu;
      gpu.index = g;
      gpu.capacity = 80 * kGi;
      gpu.total = 81 * kGi;
      gpu.used_ts_ms = kNowMs - 5'000;
      gpu.outside_pods = 512 * kMi;
      gpu.used = gpu.outside_pods;
      node.gpus.push_back(std::move(gpu));
    }
    for (int k = 0; k < kEntriesPerNode; ++k) {
      ledger::Entry e;
      e.pod_uid = "uid-" + std::to_string(i) + "-" + std::to_string(k);
      e.ns = "team-" + std::to_string(i % 40);
      e.name = "pod-" + std::to_string(i) + "-" + std::to_string(k);
      const int g = k % kGpus;
      e.gpus = {g};
      e.per_gpu = g < 2 ? 38 * kGi : 70 * kGi;
      e.state = ledger::EntryState::kBound;
      e.created_ms = kNowMs - 3'600'000;
      e.priority_class = "gpu-workload";
      e.priority = 1'000;
      e.used = e.per_gpu - kGi;
      e.used_ts_ms = kNowMs - 5'000;
      if (HasTtl(k)) e.idle_ttl_ms = 10 * kMinMs;
      e.owner_kind = "ReplicaSet";  // recreated by a controller: idle eviction may take it
      e.owner_uid = "rs-" + e.pod_uid;
      if (i % 10 == 0 && k == 9) {  // a designated victim on GPU 1
        e.victim = true;
        e.priority_class = "vramd-disposable";
        e.priority = -1000;
      }
      if (i % 100 == 0 && k == 2) e.used = 80 * kGi;  // 10Gi over budget: GPU 2 full
      if (i % 100 == 50 && k == 1) e.used = 43 * kGi;  // GPU 1 full (with the victim)
      ledger::Gpu& gpu = node.gpus[static_cast<size_t>(g)];
      gpu.used += e.used;
      gpu.pods.push_back(ledger::PodUsage{e.pod_uid, e.used});
      node.entries.push_back(std::move(e));
    }
    for (ledger::Gpu& gpu : node.gpus) {
      std::sort(gpu.pods.begin(), gpu.pods.end(),
                [](const ledger::PodUsage& a, const ledger::PodUsage& b) { return a.uid < b.uid; });
    }
    snap.nodes.emplace(node.name, std::move(node));
  }
  ledger::IndexSnapshot(&snap);
  return snap;
}

std::vector<ledger::PendingPod> MakePending() {
  std::vector<ledger::PendingPod> out;
  for (int j = 0; j < kPending; ++j) {
    ledger::PendingPod p;
    p.uid = "pending-" + std::to_string(j);
    p.ns = "team-" + std::to_string(j % 40);
    p.name = p.uid;
    p.demand.gpu_count = 1;
    p.demand.per_gpu = 20 * kGi;
    p.demand.total = p.demand.per_gpu;
    p.demand.peak_per_gpu = p.demand.per_gpu;
    p.demand.ns = p.ns;
    for (int m = 0; m < kNodesPerPending; ++m) p.nodes.push_back(NodeName((j * 37 + m * 97) % kNodes));
    p.refused_ms = kNowMs - (kPending - j) * 1'000;
    out.push_back(std::move(p));
  }
  return out;
}

struct Fixture {
  ledger::Snapshot snap = MakeProtectionSnapshot();
  std::vector<ledger::PendingPod> pending = MakePending();
  ledger::IdleTracker tracker{64 * kMi, 60'000};
  std::unordered_map<std::string, int64_t> locks;  // pod uid -> last GPU-lock activity
  ledger::WatchdogPolicy watchdog;
  ledger::Policy policy;

  Fixture() {
    watchdog.protected_classes = {"homelab-critical"};
    // Seed the tracker as earlier passes would have: idle 20 min on every third node.
    for (const auto& [name, node] : snap.nodes) {
      const bool idle = std::stoi(name.substr(name.size() - 5)) % 3 == 0;
      for (const ledger::Entry& e : node.entries) {
        tracker.Observe(e, 0, kNowMs - (idle ? 20 : 1) * kMinMs);
      }
    }
    // 2,000 pods (on nodes that are not idle) took a GPU lock a minute ago.
    for (int i = 1; i < kNodes && locks.size() < 2000; i += 3) {
      locks.emplace("uid-" + std::to_string(i) + "-3", kNowMs - kMinMs);
    }
  }

  void Observe() {
    for (const auto& [name, node] : snap.nodes) {
      for (const ledger::Entry& e : node.entries) {
        if (e.idle_ttl_ms <= 0) continue;
        auto it = locks.find(e.pod_uid);
        tracker.Observe(e, it != locks.end() ? it->second : 0, kNowMs);
      }
    }
  }
};

Fixture& TheFixture() {
  static Fixture f;
  return f;
}

// The whole pass (arg 0: idle policy on-demand, 1: always). Counters: GPUs
// under pressure, idle evictions planned.
void BM_ProtectionPass(benchmark::State& state) {
  Fixture& f = TheFixture();
  const ledger::IdleMode mode = state.range(0) != 0 ? ledger::IdleMode::kAlways : ledger::IdleMode::kOnDemand;
  size_t pressure = 0, evictions = 0;
  for (auto _ : state) {
    std::vector<ledger::GpuPressure> w = ledger::PlanWatchdog(f.snap, f.watchdog, kNowMs);
    f.Observe();
    f.tracker.ForgetUnobserved(kNowMs);
    std::vector<ledger::IdleEviction> idle = ledger::PlanIdle(f.snap, f.tracker, f.pending, mode, f.policy, kNowMs);
    pressure = w.size();
    evictions = idle.size();
    benchmark::DoNotOptimize(w);
    benchmark::DoNotOptimize(idle);
  }
  state.counters["gpus_under_pressure"] = static_cast<double>(pressure);
  state.counters["idle_evictions"] = static_cast<double>(evictions);
}
BENCHMARK(BM_ProtectionPass)->ArgName("always")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_PlanWatchdog(benchmark::State& state) {
  Fixture& f = TheFixture();
  for (auto _ : state) {
    std::vector<ledger::GpuPressure> w = ledger::PlanWatchdog(f.snap, f.watchdog, kNowMs);
    benchmark::DoNotOptimize(w);
  }
}
BENCHMARK(BM_PlanWatchdog)->Unit(benchmark::kMillisecond);

void BM_IdleObserve(benchmark::State& state) {
  Fixture& f = TheFixture();
  for (auto _ : state) {
    f.Observe();
    f.tracker.ForgetUnobserved(kNowMs);
  }
  state.counters["tracked"] = static_cast<double>(f.tracker.size());
}
BENCHMARK(BM_IdleObserve)->Unit(benchmark::kMillisecond);

void BM_PlanIdleOnDemand(benchmark::State& state) {
  Fixture& f = TheFixture();
  for (auto _ : state) {
    std::vector<ledger::IdleEviction> idle =
        ledger::PlanIdle(f.snap, f.tracker, f.pending, ledger::IdleMode::kOnDemand, f.policy, kNowMs);
    benchmark::DoNotOptimize(idle);
  }
}
BENCHMARK(BM_PlanIdleOnDemand)->Unit(benchmark::kMillisecond);

void BM_PlanIdleAlways(benchmark::State& state) {
  Fixture& f = TheFixture();
  size_t n = 0;
  for (auto _ : state) {
    std::vector<ledger::IdleEviction> idle =
        ledger::PlanIdle(f.snap, f.tracker, {}, ledger::IdleMode::kAlways, f.policy, kNowMs);
    n = idle.size();
    benchmark::DoNotOptimize(idle);
  }
  state.counters["idle_evictions"] = static_cast<double>(n);
}
BENCHMARK(BM_PlanIdleAlways)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vramd::bench

BENCHMARK_MAIN();
