// Micro benchmarks (issue 6, item 1): the pure placement core, quantity
// parsing, and decoding extender requests, next to the nlohmann DOM / SAX and
// simdjson echo baselines that answer the same body.
//
//   build/bin/micro_bench                       # everything
//   build/bin/micro_bench --benchmark_filter=Filter
#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench_data.h"
#include "echo_codecs.h"
#include "fakes/fake_ledger_store.h"
#include "kube/watch_stream.h"
#include "vramd/clock.h"
#include "vramd/extender/extender.h"
#include "vramd/extender/wire.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/pod_request.h"
#include "vramd/ledger/quantity.h"
#include "vramd/metrics/registry.h"
#include "vramd/reconcile/plan.h"

namespace vramd::bench {
namespace {

constexpr int64_t kNowMs = 1'700'000'100'000;

// The request of the fixture pods (filter-multicontainer-initcontainer.json):
// 30Gi + 2Gi app containers on one GPU.
ledger::VramRequest Request32Gi(int gpu_count = 1) {
  ledger::VramRequest r;
  r.gpu_count = gpu_count;
  r.per_gpu = 32 * kGi;
  r.total = r.per_gpu * gpu_count;
  r.peak_per_gpu = 40 * kGi;
  r.model = "hermes-beast";
  return r;
}

std::vector<std::string_view> Views(const std::vector<std::string>& names) {
  return {names.begin(), names.end()};
}

std::vector<std::string> Names(int n) {
  std::vector<std::string> v;
  v.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v.push_back(NodeName(i));
  return v;
}

// Args: {nodes, GPUs per node, indexed}. Half of the nodes are full (their
// reason is built: that is part of the cost). indexed=1 is the snapshot as the
// Valkey store publishes it; indexed=0 the fallback path (hand-built snapshots).
// Filter over every node of `snap` (names n0..n-1), per node counters.
void RunFilter(benchmark::State& state, int n, const ledger::Snapshot& snap) {
  const std::vector<std::string> names = Names(n);
  const std::vector<std::string_view> views = Views(names);
  const ledger::VramRequest req = Request32Gi();
  const ledger::Policy policy;
  for (auto _ : state) {
    ledger::FilterResult r = ledger::Filter(snap, views, req, policy, kNowMs);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * n);  // items/s = nodes/s
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}

void BM_Filter(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  RunFilter(state, n, MakeSnapshot(n, static_cast<int>(state.range(1)), state.range(2) != 0));
}

// Prioritize over every node of `snap` (names n0..n-1), per node counters.
void RunPrioritize(benchmark::State& state, int n, const ledger::Snapshot& snap) {
  const std::vector<std::string> names = Names(n);
  const std::vector<std::string_view> views = Views(names);
  const ledger::VramRequest req = Request32Gi();
  const ledger::Policy policy;
  for (auto _ : state) {
    std::vector<ledger::HostScore> s = ledger::Prioritize(snap, views, req, policy, kNowMs);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}

void BM_Prioritize(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  RunPrioritize(state, n, MakeSnapshot(n, static_cast<int>(state.range(1)), state.range(2) != 0));
}

void PlacementArgs(benchmark::internal::Benchmark* b) {
  for (int indexed : {1, 0}) {
    for (int gpus : {1, 8}) {
      for (int n : {10, 100, 1000, 2000, 5000}) b->Args({n, gpus, indexed});
    }
  }
  b->ArgNames({"nodes", "gpus", "indexed"});
}

// The same with no node full: every node fits, so no reason is built. The
// difference to BM_Filter is what the reasons of the full half cost.
void BM_FilterNoneFull(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  RunFilter(state, n, MakeSnapshot(n, static_cast<int>(state.range(1)), true, /*half_full=*/false));
}
BENCHMARK(BM_FilterNoneFull)->ArgNames({"nodes", "gpus"})->Args({1000, 8})->Args({5000, 1})->Args({5000, 8});

// Filter and Prioritize where every GPU has a fresh usage report (the node
// agent on every node): the index answers a one-GPU demand from each node's
// usage-counted offer (placement.cc, UsageOfferKnown).
void BM_FilterWithUsage(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  RunFilter(state, n, MakeSnapshotWithUsage(n, static_cast<int>(state.range(1)), kNowMs));
}
void BM_PrioritizeWithUsage(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  RunPrioritize(state, n, MakeSnapshotWithUsage(n, static_cast<int>(state.range(1)), kNowMs));
}
BENCHMARK(BM_FilterWithUsage)->ArgNames({"nodes", "gpus"})->Args({1000, 8})->Args({5000, 8});
BENCHMARK(BM_PrioritizeWithUsage)->ArgNames({"nodes", "gpus"})->Args({1000, 8})->Args({5000, 8});

// Building the index (the Valkey store does it once per reload).
void BM_IndexSnapshot(benchmark::State& state) {
  ledger::Snapshot snap = MakeSnapshot(static_cast<int>(state.range(0)), 8, /*index=*/false);
  for (auto _ : state) {
    ledger::IndexSnapshot(&snap);
    benchmark::DoNotOptimize(snap.index);
  }
}
BENCHMARK(BM_IndexSnapshot)->ArgName("nodes")->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Filter)->Apply(PlacementArgs);
BENCHMARK(BM_Prioritize)->Apply(PlacementArgs);

// GPU choice on one 8-GPU node, GPUs 0-3 partly used: arg = gpu-count.
void BM_ChooseGpus(benchmark::State& state) {
  ledger::Node node;
  node.name = "gpu-node-00000";
  for (int g = 0; g < 8; ++g) node.gpus.push_back({g, "", 80 * kGi, 0, 0});
  for (int g = 0; g < 4; ++g) {
    ledger::Entry e;
    e.pod_uid = "uid-" + std::to_string(g);
    e.gpus = {g};
    e.per_gpu = (g + 1) * 8 * kGi;
    node.entries.push_back(e);
  }
  const ledger::VramRequest req = Request32Gi(static_cast<int>(state.range(0)));
  const ledger::Policy policy;
  for (auto _ : state) {
    ledger::NodeDecision d = ledger::DecideNode(&node, node.name, req, policy, kNowMs);
    if (d.verdict != ledger::Verdict::kFits) state.SkipWithError("does not fit");
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_ChooseGpus)->ArgName("gpu_count")->Arg(1)->Arg(2)->Arg(8);

// Quantity parsing, one benchmark per form.
const char* const kQuantities[] = {"137438953472", "54Gi", "1.5Gi", "1500M", "1e9"};
void BM_ParseBytes(benchmark::State& state) {
  const std::string_view q = kQuantities[state.range(0)];
  state.SetLabel(std::string(q));
  for (auto _ : state) {
    Result<int64_t> r = ledger::ParseBytes(q);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ParseBytes)->DenseRange(0, 4);

// --- Wire: the same body, decoded four ways. Arg = node names in the body.

void SetBodyCounters(benchmark::State& state, const std::string& body) {
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}

// vramd's decoder: ExtenderArgs (the whole pod + names) with simdjson.
void BM_DecodeExtenderArgs(benchmark::State& state) {
  const std::string body = FixtureBody("filter-multicontainer-initcontainer.json", static_cast<int>(state.range(0)));
  extender::ArgsDecoder decoder;
  const std::string resource = "vramd.io/vram";
  for (auto _ : state) {
    extender::ExtenderArgs args;
    Status s = decoder.Decode(body, resource, &args);
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(args);
  }
  SetBodyCounters(state, body);
}

// Echo baselines: decode the names and write a filter result keeping all.
void BM_EchoNlohmannDom(benchmark::State& state) {
  const std::string body = FixtureBody("filter-multicontainer-initcontainer.json", static_cast<int>(state.range(0)));
  for (auto _ : state) {
    std::string out;
    if (!EchoNlohmannDom(body, &out)) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(out);
  }
  SetBodyCounters(state, body);
}

void BM_EchoNlohmannSax(benchmark::State& state) {
  const std::string body = FixtureBody("filter-multicontainer-initcontainer.json", static_cast<int>(state.range(0)));
  for (auto _ : state) {
    std::string out;
    if (!EchoNlohmannSax(body, &out)) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(out);
  }
  SetBodyCounters(state, body);
}

void BM_EchoSimdjson(benchmark::State& state) {
  const std::string body = FixtureBody("filter-multicontainer-initcontainer.json", static_cast<int>(state.range(0)));
  SimdjsonEcho echo;
  for (auto _ : state) {
    std::string out;
    if (!echo.Echo(body, &out)) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(out);
  }
  SetBodyCounters(state, body);
  state.SetLabel(std::string("stage1=") + simdjson::get_active_implementation()->name());
}

void WireArgs(benchmark::internal::Benchmark* b) { b->ArgName("names")->Arg(100)->Arg(1000)->Arg(5000); }
BENCHMARK(BM_DecodeExtenderArgs)->Apply(WireArgs);
BENCHMARK(BM_EchoNlohmannDom)->Apply(WireArgs);
BENCHMARK(BM_EchoNlohmannSax)->Apply(WireArgs);
BENCHMARK(BM_EchoSimdjson)->Apply(WireArgs);

// --- The pure part of a full reconcile pass at the design size: 5,000
// nodes x 8 GPUs, 50,000 bound entries and the 50,000 pods they belong to,
// all consistent (no action). The pass also reads a snapshot (one epoch check,
// or a reload when the ledger moved: see scale_bench) and the binds in flight.
void BM_ReconcilePlan(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int entries = static_cast<int>(state.range(1));
  ledger::Snapshot snap = MakeSnapshot(nodes, 8, /*index=*/false, /*half_full=*/false);
  for (auto& [name, node] : snap.nodes) node.entries.clear();
  std::vector<kube::PodInfo> pods;
  pods.reserve(static_cast<size_t>(entries));
  for (int k = 0; k < entries; ++k) {
    ledger::Entry e;
    e.pod_uid = "5c1e0b7a-0000-4000-8000-" + std::to_string(100000000000 + k);
    e.ns = "team-" + std::to_string(k % 40);
    e.name = "inference-" + std::to_string(k);
    e.gpus = {k % 8};
    e.per_gpu = 8 * kGi;
    e.peak_per_gpu = 8 * kGi;
    e.state = ledger::EntryState::kBound;
    e.created_ms = kNowMs - 3'600'000;
    kube::PodInfo p;
    p.name = e.name;
    p.ns = e.ns;
    p.uid = e.pod_uid;
    p.node_name = NodeName(k % nodes);
    p.phase = "Running";
    p.scheduler_name = "default-scheduler";
    p.annotations = {{"vramd.io/gpus", std::to_string(k % 8)}, {"vramd.io/vram-per-gpu", std::to_string(8 * kGi)}};
    p.spec.uid = p.uid;
    p.spec.ns = p.ns;
    p.spec.name = p.name;
    p.spec.containers.push_back({std::string("8Gi"), std::string("8Gi"), false});
    pods.push_back(std::move(p));
    snap.nodes.at(NodeName(k % nodes)).entries.push_back(std::move(e));
  }
  const std::set<std::string> in_flight;
  reconcile::PlanOptions opts;
  opts.now_ms = kNowMs;
  size_t actions = 0;
  for (auto _ : state) {
    reconcile::PlanResult r = reconcile::Plan(snap, pods, in_flight, opts);
    actions = r.actions.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["actions"] = static_cast<double>(actions);
}
BENCHMARK(BM_ReconcilePlan)->ArgNames({"nodes", "entries"})->Args({100, 1000})->Args({5000, 50000})
    ->Unit(benchmark::kMillisecond);

// --- A whole verb in process: decode + snapshot + placement + response, the
// store being an in-memory snapshot (what an HTTP handler costs minus HTTP
// and the epoch check).

// The unit tests' fake store (kept in step with the LedgerStore interface),
// answering Snapshot() with one fixed snapshot instead of a copy.
class StaticStore final : public testing::FakeLedgerStore {
 public:
  explicit StaticStore(ledger::SnapshotPtr snap) : snap_(std::move(snap)) {}
  Result<ledger::SnapshotPtr> Snapshot() override { return snap_; }

 private:
  ledger::SnapshotPtr snap_;
};

class FixedClock final : public Clock {
 public:
  int64_t NowMs() const override { return kNowMs; }
};

template <bool kPrioritize>
void BM_ExtenderVerb(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  StaticStore store(std::make_shared<const ledger::Snapshot>(MakeSnapshot(n, 8)));
  FixedClock clock;
  metrics::Registry registry;
  extender::Extender ext({}, &store, nullptr, &clock, &registry);
  const std::string body =
      FixtureBody(kPrioritize ? "prioritize-multicontainer.json" : "filter-multicontainer-initcontainer.json", n);
  size_t out_bytes = 0;
  for (auto _ : state) {
    extender::Response r = kPrioritize ? ext.Prioritize(body) : ext.Filter(body);
    if (r.status != 200) state.SkipWithError(r.body.c_str());
    out_bytes = r.body.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["reply_bytes"] = static_cast<double>(out_bytes);
}
BENCHMARK_TEMPLATE(BM_ExtenderVerb, false)->Name("BM_ExtenderFilter")->Apply(WireArgs);
BENCHMARK_TEMPLATE(BM_ExtenderVerb, true)->Name("BM_ExtenderPrioritize")->Apply(WireArgs);

// --- One pod watch event as the API server sends it when a pod is bound
// (1.9 KB: managedFields, tolerations, status), decoded into a PodInfo: the
// reconcile loop's watch decodes two or three of these per scheduled pod.
constexpr std::string_view kBoundPodEvent = R"json({"type":"MODIFIED","object":{"metadata":{"name":"qwen-tp2","namespace":"default","uid":"abc666f3-89ef-425f-bdff-1c07d6edf406","resourceVersion":"209","creationTimestamp":"2026-11-21T06:09:41Z","annotations":{"vramd.io/gpu-count":"2","vramd.io/gpus":"0,1","vramd.io/vram-per-gpu":"68719476736","vramd.io/gpu-uuids":"GPU-0,GPU-1"},"managedFields":[{"manager":"curl","operation":"Update","apiVersion":"v1","time":"2026-11-21T06:09:41Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:vramd.io/gpu-count":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:limits":{".":{},"f:vramd.io/vram":{}},"f:requests":{".":{},"f:vramd.io/vram":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}}]},"spec":{"containers":[{"name":"main","image":"vllm","resources":{"limits":{"vramd.io/vram":"137438953472"},"requests":{"vramd.io/vram":"137438953472"}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","nodeName":"node-0042"},"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-21T06:09:42Z"}],"qosClass":"BestEffort"}}})json";

void BM_PodWatchLine(benchmark::State& state) {
  size_t pods = 0;
  const std::function<void(const kube::WatchEvent<kube::PodInfo>&)> on_event =
      [&](const kube::WatchEvent<kube::PodInfo>& ev) { pods += ev.object.node_name.size(); };
  for (auto _ : state) {
    Status s = kube::HandlePodWatchLine(kBoundPodEvent, "vramd.io/vram", on_event);
    benchmark::DoNotOptimize(s);
  }
  if (pods == 0) state.SkipWithError("the event decoded to nothing");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBoundPodEvent.size()));
}
BENCHMARK(BM_PodWatchLine);

}  // namespace
}  // namespace vramd::bench

BENCHMARK_MAIN();
