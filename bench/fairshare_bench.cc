// Issue 16's figure: fair share for 1,000 queues and 50,000 pods <= 10 ms
// (ledger/queues.h). What the leader does each pass is ComputeTenancy:
// QueueUsageOf over every entry (with the namespace -> queue lookup),
// FairShares over the queues, QueueStatuses. BM_ComputeTenancy is the figure;
// the others split it up, and BM_BuildQueueSet is what a change of a
// VramQueue object costs (validation and the namespace map).
//
//   build-bench/bin/fairshare_bench
//   build-bench/bin/fairshare_bench --benchmark_filter=ComputeTenancy
//
// The queues: 100 departments (deserved 2,000Gi, one in four with a limit)
// of 10 projects each (1,000 leaf queues, 1,100 objects), each project
// deserving 100..280Gi with a weight 1..4 and serving 2 namespaces. The
// cluster: 5,000 nodes x 8 GPUs of 80Gi (3,200,000Gi), 10 entries per node
// (50,000): GPUs 0 and 1 hold two 38Gi entries each, GPUs 2..7 one 70Gi
// entry; each entry in a namespace of a project, one in ten in a namespace
// no queue names (the default queue); priorities alternate around the
// preemptible threshold, a few carry a preemptible class. 1,000 pending pods
// of 40Gi spread over the projects.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "bench_data.h"
#include "vramd/ledger/queues.h"

namespace vramd::bench {
namespace {

constexpr int kNodes = 5000;
constexpr int kGpus = 8;
constexpr int kEntriesPerNode = 10;
constexpr int kDepartments = 100;
constexpr int kProjectsPerDepartment = 10;
constexpr int kProjects = kDepartments * kProjectsPerDepartment;
constexpr int kPending = 1000;

std::string ProjectName(int p) { return "project-" + std::to_string(p); }
// The namespaces of project p: "<project>-a" and "<project>-b".
std::string ProjectNamespace(int p, int k) { return ProjectName(p) + (k ? "-b" : "-a"); }

std::vector<ledger::QueueSpec> MakeSpecs() {
  std::vector<ledger::QueueSpec> specs;
  for (int d = 0; d < kDepartments; ++d) {
    ledger::QueueSpec dept;
    dept.name = "dept-" + std::to_string(d);
    dept.uid = "uid-" + dept.name;
    dept.created_ms = 1'700'000'000'000 + d;
    dept.deserved = 2000 * kGi;
    if (d % 4 == 0) dept.limit = 6000 * kGi;
    dept.weight = 1 + d % 3;
    for (int j = 0; j < kProjectsPerDepartment; ++j) {
      const int p = d * kProjectsPerDepartment + j;
      ledger::QueueSpec q;
      q.name = ProjectName(p);
      q.uid = "uid-" + q.name;
      q.created_ms = dept.created_ms + 1;
      q.parent = dept.name;
      q.namespaces = {ProjectNamespace(p, 0), ProjectNamespace(p, 1)};
      q.deserved = (100 + 20 * (p % 10)) * kGi;
      if (p % 7 == 0) q.limit = 600 * kGi;
      q.weight = 1 + p % 4;
      specs.push_back(std::move(q));
    }
    specs.push_back(std::move(dept));
  }
  return specs;
}

ledger::TenancyPolicy MakePolicy() {
  ledger::TenancyPolicy policy;
  policy.preemptible_classes = {"batch-low", "training", "spot"};
  return policy;
}

ledger::Snapshot MakeCluster() {
  ledger::Snapshot snap;
  snap.epoch = 1;
  snap.nodes.reserve(kNodes);
  int serial = 0;
  for (int i = 0; i < kNodes; ++i) {
    ledger::Node node;
    node.name = NodeName(i);
    for (int g = 0; g < kGpus; ++g) {
      ledger::Gpu gpu;
      gpu.index = g;
      gpu.capacity = 80 * kGi;
      node.gpus.push_back(std::move(gpu));
    }
    for (int k = 0; k < kEntriesPerNode; ++k, ++serial) {
      ledger::Entry e;
      e.pod_uid = "uid-" + std::to_string(i) + "-" + std::to_string(k);
      e.ns = serial % 10 == 9 ? "unlisted-" + std::to_string(serial % 50)
                              : ProjectNamespace((serial * 7919) % kProjects, serial % 2);
      e.name = "pod-" + std::to_string(i) + "-" + std::to_string(k);
      const int g = k % kGpus;
      e.gpus = {g};
      e.per_gpu = g < 2 ? 38 * kGi : 70 * kGi;
      e.state = ledger::EntryState::kBound;
      e.created_ms = 1'700'000'000'000 + serial;
      e.priority = serial % 2 ? 50 : 1000;
      if (serial % 13 == 0) e.priority_class = "training";
      node.entries.push_back(std::move(e));
    }
    snap.nodes.emplace(node.name, std::move(node));
  }
  return snap;
}

std::vector<ledger::PendingPod> MakePending() {
  std::vector<ledger::PendingPod> out;
  for (int j = 0; j < kPending; ++j) {
    ledger::PendingPod p;
    p.uid = "pending-" + std::to_string(j);
    p.ns = ProjectNamespace((j * 31) % kProjects, j % 2);
    p.name = p.uid;
    p.demand.total = 40 * kGi;
    p.demand.per_gpu = p.demand.total;
    p.refused_ms = 1'700'000'000'000 + j;
    out.push_back(std::move(p));
  }
  return out;
}

struct Fixture {
  ledger::TenancyPolicy policy = MakePolicy();
  std::vector<ledger::QueueSpec> specs = MakeSpecs();
  ledger::QueueSetPtr set = std::make_shared<const ledger::QueueSet>(ledger::BuildQueueSet(specs, policy));
  ledger::Snapshot snap = MakeCluster();
  std::vector<ledger::PendingPod> pending = MakePending();
};

Fixture& TheFixture() {
  static Fixture f;
  return f;
}

// The leader's pass. Counters: queues in the set, entries, and the sum of
// the top-level fair shares (all of the cluster when demand exceeds it).
void BM_ComputeTenancy(benchmark::State& state) {
  Fixture& f = TheFixture();
  int64_t shared = 0;
  for (auto _ : state) {
    ledger::TenancyView view = ledger::ComputeTenancy(f.set, f.snap, f.pending, f.policy);
    shared = 0;
    for (size_t i = 0; i < view.statuses.size(); ++i) {
      if (f.set->queues[i].valid && f.set->queues[i].parent < 0) shared += view.fair_shares[i];
    }
    benchmark::DoNotOptimize(view);
  }
  state.counters["queues"] = static_cast<double>(f.set->queues.size());
  state.counters["entries"] = kNodes * kEntriesPerNode;
  state.counters["shared_Gi"] = static_cast<double>(shared / kGi);
}
BENCHMARK(BM_ComputeTenancy)->Unit(benchmark::kMillisecond);

void BM_QueueUsageOf(benchmark::State& state) {
  Fixture& f = TheFixture();
  for (auto _ : state) {
    std::vector<ledger::QueueUsage> u = ledger::QueueUsageOf(*f.set, f.snap, f.pending, f.policy);
    benchmark::DoNotOptimize(u);
  }
}
BENCHMARK(BM_QueueUsageOf)->Unit(benchmark::kMillisecond);

void BM_FairShares(benchmark::State& state) {
  Fixture& f = TheFixture();
  const std::vector<ledger::QueueUsage> usage = ledger::QueueUsageOf(*f.set, f.snap, f.pending, f.policy);
  const int64_t capacity = int64_t{kNodes} * kGpus * 80 * kGi;
  for (auto _ : state) {
    std::vector<int64_t> s = ledger::FairShares(*f.set, usage, capacity);
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_FairShares)->Unit(benchmark::kMicrosecond);

void BM_BuildQueueSet(benchmark::State& state) {
  Fixture& f = TheFixture();
  for (auto _ : state) {
    ledger::QueueSet set = ledger::BuildQueueSet(f.specs, f.policy);
    benchmark::DoNotOptimize(set);
  }
}
BENCHMARK(BM_BuildQueueSet)->Unit(benchmark::kMicrosecond);

// One admission (filter and bind call it once per pod).
void BM_AdmitToQueue(benchmark::State& state) {
  Fixture& f = TheFixture();
  const std::vector<ledger::QueueUsage> usage = ledger::QueueUsageOf(*f.set, f.snap, f.pending, f.policy);
  std::vector<std::string> namespaces;
  for (int p = 0; p < kProjects; ++p) namespaces.push_back(ProjectNamespace(p, p % 2));
  size_t j = 0;
  for (auto _ : state) {
    ledger::Admission a = ledger::AdmitToQueue(*f.set, usage, namespaces[j % namespaces.size()], 40 * kGi, j % 2 == 0);
    benchmark::DoNotOptimize(a);
    ++j;
  }
}
BENCHMARK(BM_AdmitToQueue)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace vramd::bench

BENCHMARK_MAIN();
