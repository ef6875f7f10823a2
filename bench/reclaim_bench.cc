// Issue 16's figure: a reclaim plan at 5,000 nodes x 8 GPUs and 50,000
// entries <= 50 ms (ledger/queues.h PlanReclaim). One call is what the leader
// does each pass for the pods vramd refused for VRAM.
//
//   build-bench/bin/reclaim_bench
//
// The cluster: every GPU has 80Gi capacity and a fresh usage report (each pod
// uses 1Gi below its reservation). Ten entries per node: GPUs 0 and 1 hold
// two 38Gi entries each, GPUs 2..7 one 70Gi entry, so no GPU has 40Gi free.
// Half the entries are preemptible (priority 10..59), half not (1000); they
// were created over the last hours, one second apart. 100 queues: 10
// departments of 9 projects, one namespace each; entries are spread over the
// 90 projects. Departments d1..d9 and their projects hold twice their fair
// share (they borrowed); d0 and its projects are far below theirs. The
// pending pods belong to d0's projects and want 40Gi on one GPU: entitled,
// they fit nowhere as things are, and every node holds victims, so each pod
// searches all 5,000 nodes (pending:N, any node) or the 50 nodes that refused
// it (pending:N/restricted).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_data.h"
#include "vramd/ledger/queues.h"

namespace vramd::bench {
namespace {

constexpr int64_t kNowMs = 1'700'000'100'000;
constexpr int kNodes = 5000;
constexpr int kGpus = 8;
constexpr int kEntriesPerNode = 10;
constexpr int kDepartments = 10;
constexpr int kProjectsPer = 9;
constexpr int kProjects = kDepartments * kProjectsPer;
constexpr int kNodesPerPending = 50;

// "<prefix><a>[-<b>]" (built by appending: GCC 12 warns falsely on "literal" + string).
std::string Name(const char* prefix, int a, int b = -1) {
  std::string s = prefix;
  s += std::to_string(a);
  if (b >= 0) {
    s += '-';
    s += std::to_string(b);
  }
  return s;
}
std::string DepartmentName(int d) { return Name("d", d); }
std::string ProjectName(int p) { return Name("p-", p / kProjectsPer, p % kProjectsPer); }
std::string ProjectNs(int p) { return Name("ns-", p / kProjectsPer, p % kProjectsPer); }

ledger::Snapshot MakeSnapshot(bool adverse) {
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
      node.gpus.push_back(std::move(gpu));
    }
    for (int k = 0; k < kEntriesPerNode; ++k) {
      ledger::Entry e;
      e.pod_uid = Name("uid-", i, k);
      // Adverse: the 70Gi pods in d1..d4, the 38Gi ones in d5..d9.
      e.ns = adverse ? ProjectNs(k < 4 ? 45 + (i * 7 + k) % 45 : 9 + (i * 7 + k) % 36)
                     : ProjectNs((i * 7 + k) % kProjects);
      e.name = Name("pod-", i, k);
      const int g = k < 4 ? k / 2 : k - 2;
      e.gpus = {g};
      e.per_gpu = g < 2 ? 38 * kGi : 70 * kGi;
      e.state = ledger::EntryState::kBound;
      e.created_ms = kNowMs - (static_cast<int64_t>(i) * kEntriesPerNode + k) * 1'000;
      e.priority = k % 2 == 0 ? 10 + i % 50 : 1000;
      e.owner_kind = "Job";  // recreated by a controller: reclaim may take it
      e.owner_uid = "job-" + e.pod_uid;
      e.used = e.per_gpu - kGi;
      e.used_ts_ms = kNowMs - 5'000;
      ledger::Gpu& gpu = node.gpus[static_cast<size_t>(g)];
      gpu.used += e.used;
      gpu.pods.push_back(ledger::PodUsage{e.pod_uid, e.used});
      node.entries.push_back(std::move(e));
    }
    snap.nodes.emplace(node.name, std::move(node));
  }
  return snap;
}

// The queue set as BuildQueueSet would build it, and the statuses with the
// figures the snapshot gives (fair shares as described above).
struct Queues {
  ledger::QueueSet set;
  std::vector<ledger::QueueStatus> statuses;
};

Queues MakeQueues(const ledger::Snapshot& snap, const ledger::TenancyPolicy& policy, bool adverse) {
  Queues q;
  std::vector<std::string> names;
  for (int d = 0; d < kDepartments; ++d) names.push_back(DepartmentName(d));
  for (int p = 0; p < kProjects; ++p) names.push_back(ProjectName(p));
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    ledger::Queue queue;
    queue.spec.name = n;
    q.set.queues.push_back(std::move(queue));
  }
  q.set.objects = q.set.queues.size();
  for (int p = 0; p < kProjects; ++p) {
    const int pi = q.set.Find(ProjectName(p));
    const int di = q.set.Find(DepartmentName(p / kProjectsPer));
    ledger::Queue& queue = q.set.queues[static_cast<size_t>(pi)];
    queue.spec.parent = DepartmentName(p / kProjectsPer);
    queue.spec.namespaces = {ProjectNs(p)};
    queue.parent = di;
    q.set.queues[static_cast<size_t>(di)].children.push_back(pi);
    q.set.by_namespace[ProjectNs(p)] = pi;
  }
  q.statuses.resize(q.set.queues.size());
  for (size_t i = 0; i < q.set.queues.size(); ++i) {
    q.statuses[i].name = q.set.queues[i].spec.name;
    q.statuses[i].parent = q.set.queues[i].spec.parent;
    q.statuses[i].reason = "Valid";
  }
  for (const auto& [name, node] : snap.nodes) {
    for (const ledger::Entry& e : node.entries) {
      for (int x = q.set.QueueOf(e.ns); x >= 0; x = q.set.queues[static_cast<size_t>(x)].parent) {
        q.statuses[static_cast<size_t>(x)].allocated += ledger::EntryBytes(e);
        if (!ledger::IsPreemptible(e, policy)) {
          q.statuses[static_cast<size_t>(x)].allocated_nonpreemptible += ledger::EntryBytes(e);
        }
      }
    }
  }
  for (ledger::QueueStatus& st : q.statuses) {
    const bool lender = st.name.rfind("d0", 0) != 0 && st.name.rfind("p-0-", 0) != 0;
    st.fair_share = lender ? st.allocated / 2 : st.allocated + 100'000 * kGi;
    // Adverse: d1..d4's projects far more over their share than d5..d9's.
    if (adverse && lender && st.name.rfind("p-", 0) == 0 && st.name[2] >= '1' && st.name[2] <= '4') st.fair_share = 0;
    st.deserved = lender ? st.allocated / 4 : st.allocated;
  }
  return q;
}

std::vector<ledger::PendingPod> MakePending(int n, bool restricted, bool wide, bool adverse) {
  std::vector<ledger::PendingPod> out;
  for (int j = 0; j < n; ++j) {
    ledger::PendingPod p;
    p.uid = Name("pending-", j);
    p.ns = ProjectNs(j % kProjectsPer);  // d0's projects
    p.name = p.uid;
    p.demand.per_gpu = wide ? 78 * kGi : adverse ? 41 * kGi : 40 * kGi;
    p.demand.gpu_count = wide ? 2 : 1;
    p.demand.total = p.demand.per_gpu * p.demand.gpu_count;
    p.demand.priority = 50;
    p.refused_ms = kNowMs - (n - j) * 1'000;
    if (restricted) {
      for (int m = 0; m < kNodesPerPending; ++m) p.nodes.push_back(NodeName((j * 37 + m * 97) % kNodes));
    }
    out.push_back(std::move(p));
  }
  return out;
}

struct Fixture {
  explicit Fixture(bool adverse) : snap(MakeSnapshot(adverse)), queues(MakeQueues(snap, policy, adverse)) {}
  ledger::TenancyPolicy policy;
  ledger::Snapshot snap;
  Queues queues;
};

Fixture& TheFixture(bool adverse = false) {
  static Fixture plain(false);
  if (!adverse) return plain;
  static Fixture bad(true);
  return bad;
}

// One PlanReclaim call. Args: pending pods; restricted 1 = each pod only on
// the 50 nodes that refused it; wide 1 = each wants 78Gi on 2 GPUs instead
// of 40Gi on 1; adverse 1 = the cluster below. Counters: plans, victims,
// victim_gib (their bytes).
//
// 40Gi on 1 GPU: an early node offers the cheapest set there can be (one
// 38Gi pod), and later nodes are passed over on a lower bound of what they
// could offer. 78Gi on 2 GPUs: every node needs two 70Gi victims and the
// bound (two GPUs short of 68Gi+, one victim each) passes them over too.
// adverse: the worst case for the bound. The 70Gi pods belong to d1..d4,
// whose projects are far more over their share than d5..d9's, which own
// the 38Gi pods: on every node the walk takes a 70Gi pod first while the
// bound says a 38Gi one might do, so every node of the cluster runs the
// whole greedy walk for every pending pod. Its pods want 41Gi (a 70Gi
// victim's GPU keeps 39Gi free after one: the next pod does not fit there).
void BM_PlanReclaim(benchmark::State& state) {
  Fixture& f = TheFixture(state.range(3) != 0);
  const std::vector<ledger::PendingPod> pending =
      MakePending(static_cast<int>(state.range(0)), state.range(1) != 0, state.range(2) != 0, state.range(3) != 0);
  size_t plans = 0, victims = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    std::unordered_map<std::string, std::string> why;
    std::vector<ledger::ReclaimPlan> got = ledger::PlanReclaim(f.queues.set, f.queues.statuses, f.snap, pending,
                                                               f.policy, ledger::FitPolicy{}, kNowMs, 100, &why);
    plans = got.size();
    victims = 0;
    bytes = 0;
    for (const ledger::ReclaimPlan& p : got) {
      victims += p.victims.size();
      for (const ledger::ReclaimVictim& v : p.victims) bytes += v.bytes;
    }
    benchmark::DoNotOptimize(got);
  }
  state.counters["plans"] = static_cast<double>(plans);
  state.counters["victims"] = static_cast<double>(victims);
  state.counters["victim_gib"] = static_cast<double>(bytes / kGi);
}
BENCHMARK(BM_PlanReclaim)
    ->ArgNames({"pending", "restricted", "wide", "adverse"})
    ->Args({1, 0, 0, 0})
    ->Args({4, 0, 0, 0})
    ->Args({8, 0, 0, 0})
    ->Args({100, 1, 0, 0})
    ->Args({1, 0, 1, 0})
    ->Args({4, 0, 1, 0})
    ->Args({8, 0, 1, 0})
    ->Args({100, 1, 1, 0})
    ->Args({1, 0, 0, 1})
    ->Args({4, 0, 0, 1})
    ->Args({8, 0, 0, 1})
    ->Unit(benchmark::kMillisecond);

// The preempt verb's check for one node's worth of victims.
void BM_PreemptVictimsAllowed(benchmark::State& state) {
  Fixture& f = TheFixture();
  const ledger::Node* node = f.snap.Find(NodeName(123));
  std::vector<const ledger::Entry*> victims;
  for (const ledger::Entry& e : node->entries) {
    if (e.priority < 100) victims.push_back(&e);
  }
  std::string why;
  for (auto _ : state) {
    why = ledger::PreemptVictimsAllowed(f.queues.set, f.queues.statuses, ProjectNs(0), 50, 40 * kGi, victims,
                                        f.policy, kNowMs);
    benchmark::DoNotOptimize(why);
  }
  state.counters["allowed"] = why.empty() ? 1 : 0;
}
BENCHMARK(BM_PreemptVictimsAllowed);

}  // namespace
}  // namespace vramd::bench

BENCHMARK_MAIN();
