// Issue 15's pure decisions: the pressure watchdog's victim, over-budget
// bytes, idle tracking, the idle-eviction set and the action gate. Tables of
// named cases, including both ADRs' scenarios as written
// (shared/background/adr-*.txt).
#include "vramd/ledger/protection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "fakes/entry_modifiers.h"

namespace vramd::ledger {
namespace {

constexpr int64_t kMi = int64_t{1} << 20;
constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kMinMs = 60'000;
constexpr int64_t kNow = 1'000'000'000;
constexpr int64_t kFresh = kNow - 5'000;       // a report 5 s old
constexpr int64_t kStale = kNow - 10 * kMinMs;  // older than the 60 s default

// ---- Builders -------------------------------------------------------------

// A bound pod holding `per_gpu` on `gpus`, using `used` per GPU (fresh),
// owned by a ReplicaSet (something recreates it: idle eviction may take it).
Entry Pod(const std::string& uid, int64_t per_gpu, int64_t used = 0, std::vector<int> gpus = {0}) {
  Entry e;
  e.owner_kind = "ReplicaSet";
  e.owner_uid = "rs-" + uid;
  e.pod_uid = uid;
  e.ns = "ns-" + uid;
  e.name = uid;
  e.gpus = std::move(gpus);
  e.per_gpu = per_gpu;
  e.state = EntryState::kBound;
  e.used = used;
  e.used_ts_ms = kFresh;
  return e;
}
Entry Peak(Entry e, int64_t peak) {
  e.peak_per_gpu = peak;
  return e;
}
Entry Class(Entry e, std::string cls, int32_t priority) {
  e.priority_class = std::move(cls);
  e.priority = priority;
  return e;
}
// The pod in kube-system (where the system classes protect, issue 33).
Entry System(Entry e) {
  e.ns = "kube-system";
  return e;
}
// A designated victim (the default victim class).
Entry Disposable(Entry e, int32_t priority = -1000) {
  e = Class(std::move(e), "vramd-disposable", priority);
  e.victim = true;
  return e;
}
Entry StaleUsage(Entry e) {
  e.used_ts_ms = kStale;
  return e;
}
Entry NeverReported(Entry e) {
  e.used_ts_ms = 0;
  return e;
}
Entry Terminating(Entry e) {
  e.state = EntryState::kTerminating;
  return e;
}
Entry Ttl(Entry e, int64_t ttl_ms = 10 * kMinMs) {
  e.idle_ttl_ms = ttl_ms;
  return e;
}
using namespace testing_entries;  // Bare, Evictable, InGang, InNs (fakes/entry_modifiers.h)

struct GpuSpec {
  int64_t total = 0;     // physical (Gpu::total); 0 = not reported
  int64_t capacity = 0;  // C
  int64_t outside = 0;   // processes outside pods
  std::vector<PodUsage> untracked = {};  // pods vramd does not account
  int64_t report_ms = kFresh;            // 0: never reported
};

// A node whose GPUs report, as the agent would, their physical total and a
// used figure that is the sum of every pod's usage (its entries' and the
// untracked pods') plus what is outside pods, with the per-pod figures.
Node MakeNode(const std::string& name, const std::vector<GpuSpec>& gpus, std::vector<Entry> entries) {
  Node n;
  n.name = name;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const GpuSpec& s = gpus[i];
    Gpu g;
    g.index = static_cast<int>(i);
    g.capacity = s.capacity;
    g.total = s.total;
    g.used_ts_ms = s.report_ms;
    g.outside_pods = s.outside;
    g.used = s.outside;
    for (const PodUsage& u : s.untracked) {
      g.used += u.used;
      g.pods.push_back(u);
      g.untracked += u.used;
    }
    for (const Entry& e : entries) {
      if (std::find(e.gpus.begin(), e.gpus.end(), g.index) == e.gpus.end()) continue;
      g.used += e.used;
      g.pods.push_back(PodUsage{e.pod_uid, e.used});
    }
    std::sort(g.pods.begin(), g.pods.end(), [](const PodUsage& a, const PodUsage& b) { return a.uid < b.uid; });
    n.gpus.push_back(std::move(g));
  }
  n.entries = std::move(entries);
  return n;
}

// GPUs with capacity only (no usage report).
std::vector<GpuSpec> Unreported(std::vector<int64_t> caps) {
  std::vector<GpuSpec> out;
  for (int64_t c : caps) out.push_back(GpuSpec{0, c, 0, {}, 0});
  return out;
}

Snapshot Snap(std::vector<Node> nodes) {
  Snapshot s;
  s.epoch = 1;
  for (Node& n : nodes) {
    std::string name = n.name;
    s.nodes.emplace(std::move(name), std::move(n));
  }
  return s;
}

// ---- The ADRs' scenarios ----------------------------------------------------

// The gpumem ADR: k8s-node1's Tesla T4 (16 GB, 15360 MiB usable, 14000 MiB
// advertised), time-sliced between nine tenants. The five residents carry
// budgets (immich-ml 3000 MiB, llama-swap 5000, frigate 2000, immich-server
// 1800, portal-stt 1500) and the gpu-workload class Kyverno stamps on every
// GPU pod, so priority cannot tell them apart; tts, ebook2audiobook, ytdlp
// and android-emulator are unbudgeted (no entry) and use a little. frigate,
// immich-server and portal-stt at their measured steady state (1.9, 1.2 and
// 1.5 GiB: portal-stt 36 MiB over its 1500 MiB budget).
Node T4(int64_t immich_ml_used, int64_t llama_swap_used) {
  auto tenant = [](const std::string& uid, int64_t budget_mib, int64_t used) {
    return Class(Pod(uid, budget_mib * kMi, used), "gpu-workload", 1'200'000);
  };
  GpuSpec t4{15360 * kMi, 14000 * kMi, 0,
             {{"android-emulator", 150 * kMi}, {"ebook2audiobook", 0}, {"tts", 0}, {"ytdlp", 64 * kMi}}};
  return MakeNode("k8s-node1", {t4},
                  {tenant("immich-ml", 3000, immich_ml_used), tenant("llama-swap", 5000, llama_swap_used),
                   tenant("frigate", 2000, 1946 * kMi), tenant("immich-server", 1800, 1229 * kMi),
                   tenant("portal-stt", 1500, 1536 * kMi)});
}
constexpr int64_t kImmichArena = 10'700'000'000;  // 10.7 GB: the 2026-06-02 runaway

// The burstable ADR's node-4, as one 48 GiB GPU (46 GiB capacity): inference
// reserves its steady state (8Gi) and may burst to 32Gi, in the protected
// homelab-critical class (100000); ClickHouse and embeddings reserve 5Gi and
// sit near it; the disposable agent microVMs (homelab-disposable, -1000) are
// the designated victims.
WatchdogPolicy Node4Policy() {
  WatchdogPolicy p;
  p.protected_classes = {"homelab-critical"};
  return p;
}
Entry Inference(int64_t used) {
  return Class(Peak(Pod("inference", 8 * kGi, used), 32 * kGi), "homelab-critical", 100'000);
}
Entry MicroVm(const std::string& uid, int64_t used) {
  Entry e = Class(Pod(uid, 2 * kGi, used), "homelab-disposable", -1000);
  e.victim = true;
  return e;
}
const GpuSpec kNode4Gpu{48 * kGi, 46 * kGi};

// ---- The watchdog ---------------------------------------------------------

struct WantPressure {
  std::string node;
  int gpu = 0;
  std::string victim;  // empty: none
  VictimReason reason = VictimReason::kOverBudget;
  std::string no_victim;
};

struct WatchdogCase {
  const char* name;
  std::function<std::vector<Node>()> nodes;
  WatchdogPolicy policy;
  std::vector<WantPressure> want;
};

const WatchdogPolicy kDefaults{};

WatchdogPolicy FloorPercent(double pct) {
  WatchdogPolicy p;
  p.floor_percent = pct;
  return p;
}

WatchdogPolicy Margin(int64_t bytes) {
  WatchdogPolicy p;
  p.min_over_budget_bytes = bytes;
  return p;
}

WatchdogPolicy Protecting(std::vector<std::string> classes) {
  WatchdogPolicy p;
  p.protected_classes = std::move(classes);
  return p;
}

// One 24 GiB GPU (physical total 24 GiB, capacity 23 GiB).
const GpuSpec kGpu24{24 * kGi, 23 * kGi};
// The same with `outside` bytes used outside pods.
GpuSpec Gpu24(int64_t outside, int64_t report_ms = kFresh) { return GpuSpec{24 * kGi, 23 * kGi, outside, {}, report_ms}; }

const std::vector<WatchdogCase>& WatchdogCases() {
  static const std::vector<WatchdogCase> cases = {
      {"GpumemAdr_ImmichMlArenaAt10_7GB_IsRecycled",
       [] { return std::vector<Node>{T4(kImmichArena, 100 * kMi)}; },
       kDefaults,
       {{"k8s-node1", 0, "immich-ml", VictimReason::kOverBudget, ""}}},
      {"GpumemAdr_SteadyStateWithoutPressure_Nothing",
       [] { return std::vector<Node>{T4(2150 * kMi, 4454 * kMi)}; },
       kDefaults,
       {}},
      {"GpumemAdr_OverBudgetIntoGenuineSlack_LeftAlone",
       [] { return std::vector<Node>{T4(5 * kGi, 100 * kMi)}; },
       kDefaults,
       {}},
      {"BurstableAdr_CoincidentPeak_PicksADisposableMicroVmNeverInference",
       [] {
         return std::vector<Node>{MakeNode(
             "node-4", {kNode4Gpu},
             {Inference(31 * kGi), Pod("clickhouse", 5 * kGi, 6 * kGi + 512 * kMi), Pod("embeddings", 5 * kGi, 5 * kGi),
              MicroVm("agent-a", 1536 * kMi), MicroVm("agent-b", 2560 * kMi), MicroVm("agent-c", 1 * kGi)})};
       },
       Node4Policy(),
       {{"node-4", 0, "agent-b", VictimReason::kDesignatedVictim, ""}}},
      {"BurstableAdr_NoMicroVmOnTheGpu_MostOverBudgetNeighbourNotInferenceAtItsPeak",
       [] {
         return std::vector<Node>{MakeNode("node-4", {kNode4Gpu},
                                           {Inference(32 * kGi), Pod("clickhouse", 5 * kGi, 7 * kGi),
                                            Pod("embeddings", 5 * kGi, 8 * kGi)})};
       },
       Node4Policy(),
       {{"node-4", 0, "embeddings", VictimReason::kOverBudget, ""}}},
      {"BurstableAdr_InferenceAboveItsPeakButProtected_NoVictim",
       [] {
         return std::vector<Node>{MakeNode("node-4", {GpuSpec{48 * kGi, 46 * kGi, 3584 * kMi}},
                                           {Inference(34 * kGi), Pod("clickhouse", 5 * kGi, 5 * kGi),
                                            Pod("embeddings", 5 * kGi, 5 * kGi)})};
       },
       Node4Policy(),
       {{"node-4", 0, "", VictimReason::kOverBudget,
         "no designated victim and no pod over its budget (skipped: 1 protected, 0 stale)"}}},
      {"BurstableAdr_InferenceAboveItsPeakUnprotected_IsOverBudget",
       [] {
         return std::vector<Node>{MakeNode("node-4", {GpuSpec{48 * kGi, 46 * kGi, 3584 * kMi}},
                                           {Inference(34 * kGi), Pod("clickhouse", 5 * kGi, 5 * kGi),
                                            Pod("embeddings", 5 * kGi, 5 * kGi)})};
       },
       kDefaults,
       {{"node-4", 0, "inference", VictimReason::kOverBudget, ""}}},
      {"StaleUsageIsNeverChosen_TheNextOffenderIs",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {StaleUsage(Pod("big", 4 * kGi, 14 * kGi)), Pod("small", 4 * kGi, 5 * kGi),
                                            Pod("ok", 4 * kGi, 4 * kGi)})};
       },
       kDefaults,
       {{"n1", 0, "small", VictimReason::kOverBudget, ""}}},
      {"NeverReportedUsageIsNeverChosen",
       [] {
         return std::vector<Node>{
             MakeNode("n1", {Gpu24(0)}, {NeverReported(Pod("big", 4 * kGi, 23 * kGi))})};
       },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget,
         "every pod on this GPU is protected or its usage is stale (0 protected, 1 stale)"}}},
      {"StaleDesignatedVictimIsNeverChosen",
       [] {
         return std::vector<Node>{MakeNode(
             "n1", {Gpu24(0)}, {StaleUsage(Disposable(Pod("vm", 2 * kGi, 3 * kGi))), Pod("hog", 4 * kGi, 20 * kGi)})};
       },
       kDefaults,
       {{"n1", 0, "hog", VictimReason::kOverBudget, ""}}},
      {"SystemClassesAndSystemPrioritiesAreNeverChosen",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {System(Class(Pod("dns", 1 * kGi, 9 * kGi), "system-cluster-critical", 0)),
                                            System(Class(Pod("csi", 1 * kGi, 8 * kGi), "system-node-critical", 0)),
                                            System(Class(Pod("unnamed-2e9", 1 * kGi, 5 * kGi), "", 2'000'000'000)),
                                            Pod("app", 1 * kGi, 1 * kGi + 1)})};
       },
       kDefaults,
       {{"n1", 0, "app", VictimReason::kOverBudget, ""}}},
      // Issue 33: a tenant names a system class for its own pod: outside
      // the system namespaces it protects nothing.
      {"ASystemClassOutsideTheSystemNamespacesProtectsNothing",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {Class(Pod("sneaky", 1 * kGi, 22 * kGi), "system-node-critical", 2'000'001'000),
                                            Pod("app", 1 * kGi, 1 * kGi + 1)})};
       },
       kDefaults,
       {{"n1", 0, "sneaky", VictimReason::kOverBudget, ""}}},
      {"SystemPriorityIsProtectedEvenAsADesignatedVictim",
       [] {
         return std::vector<Node>{
             MakeNode("n1", {Gpu24(0)}, {System(Disposable(Pod("dns", 1 * kGi, 23 * kGi), 2'000'000'000))})};
       },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget,
         "every pod on this GPU is protected or its usage is stale (1 protected, 0 stale)"}}},
      {"ConfiguredProtectedClassIsNeverChosen",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {Class(Pod("db", 4 * kGi, 20 * kGi), "homelab-critical", 100'000),
                                            Pod("app", 2 * kGi, 3 * kGi)})};
       },
       Protecting({"homelab-critical"}),
       {{"n1", 0, "app", VictimReason::kOverBudget, ""}}},
      {"TerminatingEntriesAreSkipped",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {Terminating(Pod("going", 4 * kGi, 19 * kGi)), Pod("app", 2 * kGi, 3 * kGi),
                                            Terminating(Disposable(Pod("vm", 1 * kGi, 1 * kGi)))})};
       },
       kDefaults,
       {{"n1", 0, "app", VictimReason::kOverBudget, ""}}},
      {"ProtectedAndTerminating_NoVictim",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {Terminating(Pod("going", 4 * kGi, 13 * kGi)),
                                            System(Class(Pod("dns", 1 * kGi, 10 * kGi), "system-cluster-critical", 0))})};
       },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget,
         "every pod on this GPU is protected or its usage is stale (1 protected, 0 stale, 1 terminating)"}}},
      {"WithinBudgetBesideATerminatingPod_NoVictim",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {Terminating(Pod("going", 4 * kGi, 19 * kGi)), Pod("app", 4 * kGi, 4 * kGi)})};
       },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget,
         "no designated victim and no pod over its budget (skipped: 0 protected, 0 stale, 1 terminating)"}}},
      {"OnlyADesignatedVictimUsingNothing_NoVictim",
       [] {
         return std::vector<Node>{
             MakeNode("n1", {Gpu24(23 * kGi)}, {Disposable(Pod("vm", 2 * kGi, 0)), Pod("app", 4 * kGi, 0)})};
       },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget,
         "the pressure is outside vramd's pods: 23Gi outside pods + 0 untracked >= the deficit 512Mi, and no pod "
         "is over its budget"}}},
      {"EveryPodTerminating_NoVictim",
       [] { return std::vector<Node>{MakeNode("n1", {Gpu24(0)}, {Terminating(Pod("going", 4 * kGi, 23 * kGi))})}; },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget, "every pod on this GPU is already terminating"}}},
      {"PressureFromOutsidePods_NoPodHoldsTheGpu",
       [] {
         return std::vector<Node>{
             MakeNode("n1", {Gpu24(23 * kGi), kGpu24}, {Pod("elsewhere", 4 * kGi, 9 * kGi, {1})})};
       },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget, "no pod holds this GPU"}}},
      {"EveryoneWithinBudget_NoVictim",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(14 * kGi)}, {Pod("a", 4 * kGi, 4 * kGi), Pod("b", 6 * kGi, 5 * kGi)})};
       },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget,
         "the pressure is outside vramd's pods: 14Gi outside pods + 0 untracked >= the deficit 512Mi, and no pod "
         "is over its budget"}}},
      {"UsageWithinItsDeclaredPeakIsNotOverBudget",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(2 * kGi)},
                                           {Peak(Pod("bursty", 4 * kGi, 20 * kGi), 20 * kGi), Pod("app", 1 * kGi, 1 * kGi + 1)})};
       },
       kDefaults,
       {{"n1", 0, "app", VictimReason::kOverBudget, ""}}},
      {"DesignatedVictimBeforeABiggerOffender",
       [] {
         return std::vector<Node>{
             MakeNode("n1", {Gpu24(0)}, {Pod("hog", 4 * kGi, 22 * kGi), Disposable(Pod("vm", 2 * kGi, 1 * kGi))})};
       },
       kDefaults,
       {{"n1", 0, "vm", VictimReason::kDesignatedVictim, ""}}},
      {"DesignatedVictimUsingNothingIsPassedOver",
       [] {
         return std::vector<Node>{
             MakeNode("n1", {Gpu24(0)}, {Pod("hog", 4 * kGi, 23 * kGi), Disposable(Pod("vm", 2 * kGi, 0))})};
       },
       kDefaults,
       {{"n1", 0, "hog", VictimReason::kOverBudget, ""}}},
      {"VictimTie_LowestPriorityFirst",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {Disposable(Pod("vm-big", 2 * kGi, 12 * kGi), -500),
                                            Disposable(Pod("vm-low", 2 * kGi, 11 * kGi), -2000)})};
       },
       kDefaults,
       {{"n1", 0, "vm-low", VictimReason::kDesignatedVictim, ""}}},
      {"VictimTie_SamePriorityLargestUsedFirst",
       [] {
         return std::vector<Node>{MakeNode(
             "n1", {Gpu24(0)}, {Disposable(Pod("vm-a", 2 * kGi, 11 * kGi)), Disposable(Pod("vm-b", 2 * kGi, 12 * kGi))})};
       },
       kDefaults,
       {{"n1", 0, "vm-b", VictimReason::kDesignatedVictim, ""}}},
      {"VictimTie_SamePriorityAndUsedLowestUid",
       [] {
         return std::vector<Node>{MakeNode(
             "n1", {Gpu24(0)}, {Disposable(Pod("vm-b", 2 * kGi, 12 * kGi)), Disposable(Pod("vm-a", 2 * kGi, 12 * kGi))})};
       },
       kDefaults,
       {{"n1", 0, "vm-a", VictimReason::kDesignatedVictim, ""}}},
      {"OverBudgetTie_LowerPriorityFirst",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {Class(Pod("a", 4 * kGi, 12 * kGi), "", 10), Class(Pod("b", 4 * kGi, 12 * kGi), "", 5)})};
       },
       kDefaults,
       {{"n1", 0, "b", VictimReason::kOverBudget, ""}}},
      {"OverBudgetTie_SamePriorityLowestUid",
       [] {
         return std::vector<Node>{
             MakeNode("n1", {Gpu24(0)}, {Pod("b", 4 * kGi, 12 * kGi), Pod("a", 4 * kGi, 12 * kGi)})};
       },
       kDefaults,
       {{"n1", 0, "a", VictimReason::kOverBudget, ""}}},
      {"MostOverBudgetWinsOverLowerPriority",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0)},
                                           {Class(Pod("low", 4 * kGi, 9 * kGi), "", -100), Pod("worse", 4 * kGi, 14 * kGi)})};
       },
       kDefaults,
       {{"n1", 0, "worse", VictimReason::kOverBudget, ""}}},
      {"OnlyPodsOfThePressedGpu",
       [] {
         return std::vector<Node>{MakeNode("n1", {Gpu24(0), kGpu24},
                                           {Pod("on-0", 10 * kGi, 11 * kGi, {0}), Disposable(Pod("vm-on-1", 1 * kGi, 1 * kGi, {1})),
                                            Pod("hog-on-1", 1 * kGi, 2 * kGi, {1}), Pod("two", 1 * kGi, 12 * kGi, {0, 1})})};
       },
       kDefaults,
       {{"n1", 0, "two", VictimReason::kOverBudget, ""}}},
      {"FloorBytes_FreeExactlyAtTheFloorIsNoPressure",
       [] { return std::vector<Node>{MakeNode("n1", {Gpu24(0)}, {Pod("a", 4 * kGi, 24 * kGi - 1536 * kMi)})}; },
       kDefaults,
       {}},
      {"FloorBytes_OneByteBelowTheFloorIsPressure",
       [] { return std::vector<Node>{MakeNode("n1", {Gpu24(0)}, {Pod("a", 4 * kGi, 24 * kGi - 1536 * kMi + 1)})}; },
       kDefaults,
       {{"n1", 0, "a", VictimReason::kOverBudget, ""}}},
      {"FloorPercent_OfThePhysicalTotal",
       // 20 % of 24Gi = 4.8Gi: 4Gi free is pressure (the 1.5Gi byte floor would not be).
       [] { return std::vector<Node>{MakeNode("n1", {Gpu24(0)}, {Pod("a", 4 * kGi, 20 * kGi)})}; },
       FloorPercent(20),
       {{"n1", 0, "a", VictimReason::kOverBudget, ""}}},
      {"FloorPercent_AboveItIsNoPressure",
       [] { return std::vector<Node>{MakeNode("n1", {Gpu24(0)}, {Pod("a", 4 * kGi, 20 * kGi)})}; },
       FloorPercent(10),
       {}},
      {"TotalNotReported_CapacityIsTheTotal",
       // total 0: 23Gi capacity - 22Gi used = 1Gi free < 1.5Gi.
       [] { return std::vector<Node>{MakeNode("n1", {GpuSpec{0, 23 * kGi}}, {Pod("a", 4 * kGi, 22 * kGi)})}; },
       kDefaults,
       {{"n1", 0, "a", VictimReason::kOverBudget, ""}}},
      {"GpuWithoutAFreshReportIsIgnored",
       [] {
         return std::vector<Node>{MakeNode("stale", {Gpu24(0, kStale)}, {Pod("a", 4 * kGi, 24 * kGi)}),
                                  MakeNode("never", {Gpu24(0, 0)}, {Pod("b", 4 * kGi, 24 * kGi)})};
       },
       kDefaults,
       {}},
      // Issue 32: a report stamped an hour ahead (the store's clock and
      // vramd's disagree) has no knowable age: never a reason to act.
      {"GpuReportStampedFarAheadIsIgnored",
       [] {
         return std::vector<Node>{
             MakeNode("ahead", {Gpu24(0, kNow + 3'600'000)}, {Pod("a", 4 * kGi, 24 * kGi)})};
       },
       kDefaults,
       {}},
      {"SeveralGpusUnderPressure_SortedByNodeThenGpu",
       [] {
         return std::vector<Node>{
             MakeNode("n2", {Gpu24(23 * kGi), Gpu24(0)}, {Pod("x", 1 * kGi, 23 * kGi, {1})}),
             MakeNode("n1", {kGpu24, Gpu24(0)}, {Pod("y", 1 * kGi, 23 * kGi, {1})})};
       },
       kDefaults,
       {{"n1", 1, "y", VictimReason::kOverBudget, ""},
        {"n2", 0, "", VictimReason::kOverBudget, "no pod holds this GPU"},
        {"n2", 1, "x", VictimReason::kOverBudget, ""}}},
      // ---- Issue 32: a cause, measured on the GPU under pressure ----------
      // A full 24Gi GPU used within what its pods reserved (A = C, U <= A):
      // pressure below the 1.5Gi floor, but nothing runs away. Before: the
      // designated victim was evicted, placed back and evicted again every
      // cooldown.
      {"FullGpuWithinItsReservations_NoCause",
       [] {
         return std::vector<Node>{MakeNode("n1", {GpuSpec{24 * kGi, 24 * kGi}},
                                           {Pod("a", 12 * kGi, 11 * kGi), Disposable(Pod("b", 12 * kGi, 12 * kGi))})};
       },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget,
         "no cause: used 23Gi is within the 24Gi its pods reserved (capacity 24Gi): the floor is above the "
         "reserve, nothing runs away"}}},
      // Within its reservations but burstable pods may grow past C: a cause.
      {"PeakAboveCapacityIsACause",
       [] {
         return std::vector<Node>{MakeNode("n1", {GpuSpec{24 * kGi, 24 * kGi}},
                                           {Peak(Pod("a", 12 * kGi, 11 * kGi), 20 * kGi),
                                            Disposable(Pod("b", 12 * kGi, 12 * kGi))})};
       },
       kDefaults,
       {{"n1", 0, "b", VictimReason::kDesignatedVictim, ""}}},
      // A CUDA context's few hundred MiB above the request is no runaway.
      {"OverBudgetWithinTheMargin_NoVictim",
       [] {
         return std::vector<Node>{MakeNode("n1", {kGpu24},
                                           {Pod("a", 11 * kGi + 512 * kMi, 11 * kGi + 812 * kMi),
                                            Pod("b", 11 * kGi + 512 * kMi, 11 * kGi + 512 * kMi)})};
       },
       Margin(512 * kMi),
       {{"n1", 0, "", VictimReason::kOverBudget, "no designated victim and no pod over its budget"}}},
      {"OverBudgetBeyondTheMargin_IsChosen",
       [] {
         return std::vector<Node>{MakeNode("n1", {kGpu24},
                                           {Pod("a", 11 * kGi + 512 * kMi, 12 * kGi + 100 * kMi),
                                            Pod("b", 11 * kGi + 512 * kMi, 11 * kGi + 512 * kMi)})};
       },
       Margin(512 * kMi),
       {{"n1", 0, "a", VictimReason::kOverBudget, ""}}},
      // A zombie (untracked) holds the GPU and no pod is over its budget:
      // nobody, not even the designated victim.
      {"ZombieCoversTheDeficit_NotEvenTheDesignatedVictim",
       [] {
         return std::vector<Node>{MakeNode("n1", {GpuSpec{24 * kGi, 23 * kGi, 0, {PodUsage{"zombie", 16 * kGi}}}},
                                           {Disposable(Pod("vm", 4 * kGi, 4 * kGi)), Pod("app", 3 * kGi, 3 * kGi)})};
       },
       kDefaults,
       {{"n1", 0, "", VictimReason::kOverBudget,
         "the pressure is outside vramd's pods: 0 outside pods + 16Gi untracked >= the deficit 512Mi, and no pod is "
         "over its budget"}}},
      // The victim is measured on the GPU under pressure: "wide" uses 12Gi on
      // GPU 1 (its entry's figure, the largest) but 1Gi on GPU 0, where "hog"
      // runs 5Gi over. Before: "wide" was chosen for GPU 0.
      {"TheVictimIsMeasuredOnTheGpuUnderPressure",
       [] {
         Node n = MakeNode("n1", {GpuSpec{24 * kGi, 24 * kGi}, GpuSpec{24 * kGi, 24 * kGi}},
                           {Pod("wide", 4 * kGi, 12 * kGi, {0, 1}), Pod("hog", 4 * kGi, 9 * kGi),
                            Pod("fill", 13 * kGi, 13 * kGi)});
         Gpu& g0 = n.gpus[0];
         for (PodUsage& u : g0.pods) {
           if (u.uid == "wide") {
             g0.used -= u.used - 1 * kGi;
             u.used = 1 * kGi;
           }
         }
         return std::vector<Node>{std::move(n)};
       },
       kDefaults,
       {{"n1", 0, "hog", VictimReason::kOverBudget, ""}}},
  };
  return cases;
}

TEST(Watchdog, Table) {
  for (const WatchdogCase& c : WatchdogCases()) {
    SCOPED_TRACE(c.name);
    const Snapshot snap = Snap(c.nodes());
    const std::vector<GpuPressure> got = PlanWatchdog(snap, c.policy, kNow);
    ASSERT_EQ(got.size(), c.want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const GpuPressure& g = got[i];
      const WantPressure& w = c.want[i];
      EXPECT_EQ(g.node, w.node);
      EXPECT_EQ(g.gpu, w.gpu);
      EXPECT_LT(g.free, g.floor);
      EXPECT_EQ(g.free, g.total - g.used);
      if (w.victim.empty()) {
        EXPECT_FALSE(g.victim.has_value()) << g.victim->pod_uid;
        EXPECT_EQ(g.no_victim, w.no_victim);
      } else {
        ASSERT_TRUE(g.victim.has_value()) << g.no_victim;
        EXPECT_EQ(g.victim->pod_uid, w.victim);
        EXPECT_EQ(g.victim->reason, w.reason);
        EXPECT_EQ(g.no_victim, "");
      }
    }
  }
}

// Issue 32: pressure counts per GPU over consecutive distinct reports.
TEST(PressureStreaks, Table) {
  auto pressed = [](std::string node, int gpu, int64_t report_ms, bool cause = true) {
    GpuPressure p;
    p.node = std::move(node);
    p.gpu = gpu;
    p.report_ms = report_ms;
    if (cause) p.cause = "over budget or untracked (U > A)";
    return p;
  };
  struct Step {
    const char* name;
    std::vector<GpuPressure> pass;
    int n1_0, n1_1, n2_0;  // Reports() after the pass
  };
  PressureStreaks s;
  const Step steps[] = {
      {"FirstReportUnderPressure", {pressed("n1", 0, 100)}, 1, 0, 0},
      {"TheSameReportSeenAgainCountsNothing", {pressed("n1", 0, 100)}, 1, 0, 0},
      {"ANewReportCounts", {pressed("n1", 0, 200), pressed("n2", 0, 200)}, 2, 0, 1},
      {"GpusCountApart", {pressed("n1", 0, 300), pressed("n1", 1, 300), pressed("n2", 0, 300)}, 3, 1, 2},
      {"PressureWithoutACauseStartsAgain", {pressed("n1", 0, 400, false), pressed("n1", 1, 400)}, 0, 2, 0},
      {"AGpuMissingFromAPassStartsAgain", {pressed("n1", 0, 500)}, 1, 0, 0},
      {"AnEarlierStampIsANewReportToo", {pressed("n1", 0, 450)}, 2, 0, 0},
      {"NoPressureAnywhere", {}, 0, 0, 0},
  };
  for (const Step& st : steps) {
    SCOPED_TRACE(st.name);
    s.Observe(st.pass);
    EXPECT_EQ(s.Reports("n1", 0), st.n1_0);
    EXPECT_EQ(s.Reports("n1", 1), st.n1_1);
    EXPECT_EQ(s.Reports("n2", 0), st.n2_0);
  }
  EXPECT_EQ(s.size(), 0u);
}

TEST(Watchdog, PressureCarriesTheReportItWasSeenIn) {
  const Snapshot snap = Snap({MakeNode("n1", {Gpu24(0, kNow - 2000)}, {Pod("a", 4 * kGi, 24 * kGi)})});
  const std::vector<GpuPressure> got = PlanWatchdog(snap, kDefaults, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].report_ms, kNow - 2000);
}

// Issue 32: the fewest candidates that cover the deficit, the earliest such
// set in preference order; nothing covers it: the first alone.
TEST(CoverDeficit, Table) {
  struct Case {
    const char* name;
    std::vector<std::pair<std::string, int64_t>> candidates;  // uid, used (GiB), in preference order
    int64_t deficit;                                           // GiB
    std::set<std::string> excluded;
    std::vector<size_t> want;
  };
  const Case cases[] = {
      {"TheFirstCoversIt", {{"a", 4}, {"b", 5}}, 2, {}, {0}},
      {"TheFirstThatCoversItAlone", {{"a", 1}, {"b", 3}, {"c", 5}}, 2, {}, {1}},
      {"ExactlyTheDeficitCovers", {{"a", 2}}, 2, {}, {0}},
      {"TwoNeeded_TheEarliestPair", {{"a", 1}, {"b", 2}, {"c", 2}, {"d", 3}}, 4, {}, {0, 3}},
      {"TwoNeeded_LaterPairWhenTheFirstCannotComplete", {{"a", 1}, {"b", 3}, {"c", 2}}, 5, {}, {1, 2}},
      {"FewestBeatsPreference", {{"vm-1", 1}, {"vm-2", 1}, {"hog", 6}}, 3, {}, {2}},
      {"NothingCovers_TheFirstAlone", {{"a", 1}, {"b", 1}}, 5, {}, {0}},
      {"ExcludedAreSkipped", {{"a", 4}, {"b", 5}}, 2, {"a"}, {1}},
      {"ExcludedAndNothingCovers_TheFirstLeft", {{"a", 1}, {"b", 1}, {"c", 1}}, 9, {"a"}, {1}},
      {"EveryoneExcluded_Nobody", {{"a", 4}}, 2, {"a"}, {}},
      {"NoDeficit_Nobody", {{"a", 4}}, 0, {}, {}},
      {"NoCandidates_Nobody", {}, 2, {}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<WatchdogVictim> cands;
    for (const auto& [uid, gib] : c.candidates) {
      WatchdogVictim v;
      v.pod_uid = uid;
      v.used = gib * kGi;
      cands.push_back(v);
    }
    EXPECT_EQ(CoverDeficit(cands, c.deficit * kGi, c.excluded), c.want);
  }
}

// Two designated victims using 1.75Gi each on a GPU 2Gi short of its floor
// (0.5Gi over its total): neither alone covers it, both go together; a pod
// within its budget is no candidate.
TEST(Watchdog, TheFewestVictimsThatCoverTheDeficitGoTogether) {
  const Snapshot snap = Snap({MakeNode("n1", {kGpu24},
                                       {Disposable(Pod("vm-a", 1 * kGi, 1792 * kMi)),
                                        Disposable(Pod("vm-b", 1 * kGi, 1792 * kMi)),
                                        Pod("app", 21 * kGi, 21 * kGi)})});
  const std::vector<GpuPressure> got = PlanWatchdog(snap, kDefaults, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].deficit, 2 * kGi);
  std::vector<std::string> victims, candidates;
  for (const WatchdogVictim& v : got[0].victims) victims.push_back(v.pod_uid);
  for (const WatchdogVictim& v : got[0].candidates) candidates.push_back(v.pod_uid);
  EXPECT_EQ(victims, (std::vector<std::string>{"vm-a", "vm-b"}));
  EXPECT_EQ(candidates, (std::vector<std::string>{"vm-a", "vm-b"}));
  ASSERT_TRUE(got[0].victim.has_value());
  EXPECT_EQ(got[0].victim->pod_uid, "vm-a");
}

// Issue 32: a terminating pod's use is relief on its way until its
// deletionTimestamp plus the margin; past that (stuck) or unknown, nothing.
// A 24Gi GPU at 23.5Gi used (1Gi short of its 1.5Gi floor): "going" (6Gi,
// terminating) and "hog" (4Gi over its 4Gi).
TEST(Watchdog, TerminatingPodsAreReliefOnItsWayUntilTheirDeletionTime) {
  const Snapshot snap =
      Snap({MakeNode("n1", {kGpu24}, {Terminating(Pod("going", 6 * kGi, 6 * kGi)), Pod("hog", 4 * kGi, 8 * kGi),
                                       Pod("fill", 9 * kGi, 9 * kGi + 512 * kMi)})});
  const WatchdogPolicy policy;  // margin 30 s
  struct Case {
    const char* name;
    std::optional<int64_t> deletion_ms;  // of "going"; nullopt: unknown
    int64_t going_use_gib;               // 0: as reported (6Gi)
    std::string victim, no_victim;
    int64_t deficit;
  };
  const Case cases[] = {
      {"WithinItsGracePeriod_CoversIt", kNow + 20'000, 0, "",
       "relief on its way: 6Gi from 1 terminating pod(s) covers the deficit 1Gi", 1 * kGi},
      {"WithinTheMarginAfterIt_CoversIt", kNow - 30'000, 0, "",
       "relief on its way: 6Gi from 1 terminating pod(s) covers the deficit 1Gi", 1 * kGi},
      {"PastTheMargin_Stuck_NoRelief", kNow - 30'001, 0, "hog", "", 1 * kGi},
      {"TimeUnknown_NoRelief", std::nullopt, 0, "hog", "", 1 * kGi},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::unordered_map<std::string, int64_t> deleting;
    if (c.deletion_ms) deleting["going"] = *c.deletion_ms;
    const std::vector<GpuPressure> got = PlanWatchdog(snap, policy, kNow, &deleting);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].no_victim, c.no_victim);
    EXPECT_EQ(got[0].victim ? got[0].victim->pod_uid : "", c.victim);
    if (!c.victim.empty()) EXPECT_EQ(got[0].deficit, c.deficit);
  }
  // Relief short of the deficit leaves the rest to the victims: "going" uses
  // 256Mi only, the victims must free 768Mi.
  Node n = MakeNode("n1", {kGpu24}, {Terminating(Pod("going", 6 * kGi, 256 * kMi)),
                                     Pod("hog", 4 * kGi, 10 * kGi + 256 * kMi), Pod("fill", 13 * kGi, 13 * kGi)});
  const Snapshot partial = Snap({std::move(n)});
  std::unordered_map<std::string, int64_t> deleting{{"going", kNow}};
  const std::vector<GpuPressure> got = PlanWatchdog(partial, policy, kNow, &deleting);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].free, 512 * kMi);
  EXPECT_EQ(got[0].deficit, 768 * kMi);
  ASSERT_TRUE(got[0].victim.has_value());
  EXPECT_EQ(got[0].victim->pod_uid, "hog");
}

TEST(Watchdog, GpumemAdrVictimCarriesWhatTheEventSays) {
  const Snapshot snap = Snap({T4(kImmichArena, 100 * kMi)});
  const std::vector<GpuPressure> got = PlanWatchdog(snap, WatchdogPolicy{}, kNow);
  ASSERT_EQ(got.size(), 1u);
  const GpuPressure& p = got[0];
  EXPECT_EQ(p.total, 15360 * kMi);
  // immich-ml 10.7 GB + llama-swap 100 MiB + frigate, immich-server, portal-stt,
  // android-emulator and ytdlp at their steady state.
  EXPECT_EQ(p.used, kImmichArena + (100 + 1946 + 1229 + 1536 + 150 + 64) * kMi);
  EXPECT_EQ(p.floor, 1536 * kMi);
  EXPECT_LT(p.free, p.floor);
  ASSERT_TRUE(p.victim);
  EXPECT_EQ(p.victim->ns, "ns-immich-ml");
  EXPECT_EQ(p.victim->name, "immich-ml");
  EXPECT_EQ(p.victim->used, kImmichArena);
  EXPECT_EQ(p.victim->declared, 3000 * kMi);
  EXPECT_EQ(p.victim->priority, 1'200'000);
  EXPECT_STREQ(VictimReasonName(p.victim->reason), "over-budget");
}

TEST(Watchdog, BurstableAdrVictimDeclaresItsRequestAndInferenceDeclaresItsPeak) {
  EXPECT_EQ(DeclaredBytes(Inference(0)), 32 * kGi);
  EXPECT_EQ(DeclaredBytes(MicroVm("vm", 0)), 2 * kGi);
  const Snapshot snap = Snap({MakeNode("node-4", {kNode4Gpu},
                                       {Inference(40 * kGi), MicroVm("agent-a", 7 * kGi)})});
  const std::vector<GpuPressure> got = PlanWatchdog(snap, Node4Policy(), kNow);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(got[0].victim);
  EXPECT_EQ(got[0].victim->pod_uid, "agent-a");
  EXPECT_EQ(got[0].victim->declared, 2 * kGi);
  EXPECT_EQ(got[0].victim->priority, -1000);
  EXPECT_STREQ(VictimReasonName(got[0].victim->reason), "designated-victim");
}

TEST(Watchdog, FloorOfAPercentRoundsDown) {
  EXPECT_EQ(WatchdogFloor(1001, FloorPercent(10)), 100);
  EXPECT_EQ(WatchdogFloor(16 * kGi, FloorPercent(12.5)), 2 * kGi);
  EXPECT_EQ(WatchdogFloor(16 * kGi, WatchdogPolicy{}), 1536 * kMi);
}

TEST(Watchdog, ProtectedClasses) {
  const std::vector<std::string> none;
  const std::vector<std::string> mine = {"homelab-critical"};
  const std::vector<std::string> system = {"kube-system"};
  struct Case {
    const char* name;
    std::string ns;
    std::string cls;
    int32_t priority;
    const std::vector<std::string>& configured;
    bool want;
  };
  const Case cases[] = {
      {"NoClass", "kube-system", "", 0, none, false},
      {"SystemClusterCritical", "kube-system", "system-cluster-critical", 0, none, true},
      {"SystemNodeCritical", "kube-system", "system-node-critical", 0, none, true},
      {"PriorityAtTheSystemFloor", "kube-system", "", 2'000'000'000, none, true},
      {"PriorityJustBelowTheSystemFloor", "kube-system", "", 1'999'999'999, none, false},
      // Issue 33: any namespace may use the system classes; only the system
      // namespaces are protected by them.
      {"SystemClassInATenantsNamespace", "team-a", "system-node-critical", 2'000'001'000, none, false},
      {"SystemPriorityInATenantsNamespace", "team-a", "", 2'000'000'000, none, false},
      {"ConfiguredClass", "team-a", "homelab-critical", 100'000, mine, true},
      {"ConfiguredClassNotConfigured", "team-a", "homelab-critical", 100'000, none, false},
      {"OtherClass", "kube-system", "gpu-workload", 1'200'000, mine, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(IsProtected(c.ns, c.cls, c.priority, c.configured, system), c.want);
  }
  EXPECT_TRUE(IsProtected("gpu-system", "system-node-critical", 0, none, {"kube-system", "gpu-system"}));
}

// ---- Over budget ----------------------------------------------------------

TEST(OverBudget, Table) {
  struct Case {
    const char* name;
    Entry e;
    int64_t want;
  };
  const Case cases[] = {
      {"AboveItsRequest", Pod("a", 3000 * kMi, kImmichArena), kImmichArena - 3000 * kMi},
      {"AtItsRequest", Pod("a", 4 * kGi, 4 * kGi), 0},
      {"BelowItsRequest", Pod("a", 4 * kGi, 1 * kGi), 0},
      {"AboveItsRequestWithinItsPeak", Peak(Pod("a", 8 * kGi, 20 * kGi), 32 * kGi), 0},
      {"AboveItsPeak", Peak(Pod("a", 8 * kGi, 34 * kGi), 32 * kGi), 2 * kGi},
      {"PeakZeroMeansTheRequest", Peak(Pod("a", 8 * kGi, 9 * kGi), 0), 1 * kGi},
      {"StaleUsage", StaleUsage(Pod("a", 1 * kGi, 9 * kGi)), 0},
      {"NeverReported", NeverReported(Pod("a", 1 * kGi, 9 * kGi)), 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(OverBudgetBytes(c.e, kNow, 60'000), c.want);
  }
  // Exactly usage_max_age_ms old is still fresh; one ms more is stale.
  Entry e = Pod("a", 1 * kGi, 2 * kGi);
  e.used_ts_ms = kNow - 60'000;
  EXPECT_EQ(OverBudgetBytes(e, kNow, 60'000), 1 * kGi);
  EXPECT_EQ(OverBudgetBytes(e, kNow + 1, 60'000), 0);
}

// ---- Idle tracking --------------------------------------------------------

constexpr int64_t kJitter = 64 * kMi;  // usage changes up to this are not activity

// Observes e with its usage reported at now_ms (the agent's figure of this pass).
void ObserveFresh(IdleTracker& t, Entry e, int64_t lock_ms, int64_t now_ms) {
  e.used_ts_ms = now_ms;
  t.Observe(e, lock_ms, now_ms);
}

TEST(IdleTracker, FirstSightingIsActivityNow) {
  IdleTracker t(kJitter, 60'000);
  EXPECT_EQ(t.LastActive("a"), 0);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 3 * kGi)), 0, kNow);
  EXPECT_EQ(t.LastActive("a"), kNow);
  ASSERT_NE(t.Find("a"), nullptr);
  EXPECT_EQ(t.Find("a")->ref_used, 3 * kGi);
}

TEST(IdleTracker, EntriesWithoutTtlAreNotTracked) {
  IdleTracker t(kJitter, 60'000);
  ObserveFresh(t, Pod("a", 4 * kGi, 3 * kGi), kNow, kNow);
  EXPECT_EQ(t.LastActive("a"), 0);
  EXPECT_EQ(t.size(), 0u);
}

TEST(IdleTracker, UsageJitterUpToTheThresholdIsNotActivity) {
  IdleTracker t(kJitter, 60'000);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 3 * kGi)), 0, kNow);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 3 * kGi + kJitter)), 0, kNow + kMinMs);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 3 * kGi - kJitter)), 0, kNow + 2 * kMinMs);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 3 * kGi)), 0, kNow + 3 * kMinMs);
  EXPECT_EQ(t.LastActive("a"), kNow);
}

TEST(IdleTracker, UsageChangeAboveTheThresholdIsActivity) {
  IdleTracker t(kJitter, 60'000);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 3 * kGi)), 0, kNow);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 3 * kGi + kJitter + 1)), 0, kNow + kMinMs);
  EXPECT_EQ(t.LastActive("a"), kNow + kMinMs);
  // Down counts too, measured against the new reference.
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 3 * kGi)), 0, kNow + 2 * kMinMs);
  EXPECT_EQ(t.LastActive("a"), kNow + 2 * kMinMs);
}

TEST(IdleTracker, SlowDriftIsMeasuredFromTheLastActivity) {
  IdleTracker t(kJitter, 60'000);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 1 * kGi)), 0, kNow);
  for (int i = 1; i <= 3; ++i) {  // +40 MiB a pass: the second is 80 MiB from the reference
    ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 1 * kGi + i * 40 * kMi)), 0, kNow + i * kMinMs);
  }
  EXPECT_EQ(t.LastActive("a"), kNow + 2 * kMinMs);
}

TEST(IdleTracker, LockActivityLaterThanTheLastActivityCounts) {
  IdleTracker t(kJitter, 60'000);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 1 * kGi)), 0, kNow);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 1 * kGi)), kNow + 30'000, kNow + kMinMs);
  EXPECT_EQ(t.LastActive("a"), kNow + 30'000);
  // An older lock time says nothing new.
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 1 * kGi)), kNow + 10'000, kNow + 2 * kMinMs);
  EXPECT_EQ(t.LastActive("a"), kNow + 30'000);
  // No lock activity (0) neither.
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 1 * kGi)), 0, kNow + 3 * kMinMs);
  EXPECT_EQ(t.LastActive("a"), kNow + 30'000);
}

TEST(IdleTracker, LockAtFirstSightingLaterThanNowWins) {
  IdleTracker t(kJitter, 60'000);
  ObserveFresh(t, Ttl(Pod("a", 4 * kGi, 1 * kGi)), kNow + 500, kNow);
  EXPECT_EQ(t.LastActive("a"), kNow + 500);
}

TEST(IdleTracker, ForgetDropsTheUidsNotKept) {
  IdleTracker t(kJitter, 60'000);
  ObserveFresh(t, Ttl(Pod("a", 1, 0)), 0, kNow);
  ObserveFresh(t, Ttl(Pod("b", 1, 0)), 0, kNow);
  t.Forget({"b", "c"});
  EXPECT_EQ(t.LastActive("a"), 0);
  EXPECT_EQ(t.LastActive("b"), kNow);
  EXPECT_EQ(t.size(), 1u);
}

TEST(IdleTracker, ForgetUnobservedDropsWhatTheLastPassDidNotSee) {
  IdleTracker t(kJitter, 60'000);
  ObserveFresh(t, Ttl(Pod("a", 1, 0)), 0, kNow);
  ObserveFresh(t, Ttl(Pod("b", 1, 0)), 0, kNow);
  ObserveFresh(t, Ttl(Pod("b", 1, 0)), 0, kNow + kMinMs);  // the next pass sees only b
  t.ForgetUnobserved(kNow + kMinMs);
  EXPECT_EQ(t.LastActive("a"), 0);
  EXPECT_EQ(t.LastActive("b"), kNow);
  EXPECT_EQ(t.size(), 1u);
}

TEST(IdleTracker, IdleForNeedsTheTtlToHavePassed) {
  IdleTracker t(kJitter, 60'000);
  const Entry e = Ttl(Pod("a", 1 * kGi, 0), 10 * kMinMs);
  EXPECT_EQ(IdleFor(e, t, kNow), -1);  // never observed
  ObserveFresh(t, e, 0, kNow);
  EXPECT_EQ(IdleFor(e, t, kNow + 10 * kMinMs - 1), -1);
  EXPECT_EQ(IdleFor(e, t, kNow + 10 * kMinMs), 10 * kMinMs);
  EXPECT_EQ(IdleFor(Terminating(e), t, kNow + 20 * kMinMs), -1);
  EXPECT_EQ(IdleFor(Pod("a", 1 * kGi, 0), t, kNow + 20 * kMinMs), -1);  // no TTL
}

// Issue 32: the agent's utilization signal. A pod whose usage is flat but
// whose processes run work (NVML samples, DRM engine time: Entry::busy) is
// active on every fresh report that says so; once the reports stop saying
// so, it is idle from its last activity.
TEST(IdleTracker, AReportThatSaysThePodRanIsActivity) {
  IdleTracker t(kJitter, 60'000);
  Entry e = Ttl(Pod("a", 4 * kGi, 3 * kGi), 10 * kMinMs);
  ObserveFresh(t, e, 0, kNow);
  e.busy = true;
  ObserveFresh(t, e, 0, kNow + 5 * kMinMs);
  ObserveFresh(t, e, 0, kNow + 12 * kMinMs);
  EXPECT_EQ(t.LastActive("a"), kNow + 12 * kMinMs);
  EXPECT_EQ(IdleFor(e, t, kNow + 12 * kMinMs), -1);
  e.busy = false;
  ObserveFresh(t, e, 0, kNow + 13 * kMinMs);
  ObserveFresh(t, e, 0, kNow + 22 * kMinMs);
  EXPECT_EQ(IdleFor(e, t, kNow + 22 * kMinMs), 10 * kMinMs);
}

// Issue 32: no evidence is not idleness. A pod whose usage no agent reports,
// or whose report went stale, counts as active every pass.
TEST(IdleTracker, MissingOrStaleUsageCountsAsActivity) {
  IdleTracker t(kJitter, 60'000);
  Entry e = Ttl(Pod("a", 4 * kGi, 1 * kGi), 10 * kMinMs);
  ObserveFresh(t, e, 0, kNow);
  e.used_ts_ms = kNow;  // the agent stops reporting: its last figure ages
  t.Observe(e, 0, kNow + 30'000);
  EXPECT_EQ(t.LastActive("a"), kNow) << "30 s old: still fresh, unchanged: not activity";
  t.Observe(e, 0, kNow + 60'001);
  EXPECT_EQ(t.LastActive("a"), kNow + 60'001) << "stale: counts as active";
  t.Observe(e, 0, kNow + 20 * kMinMs);
  EXPECT_EQ(t.LastActive("a"), kNow + 20 * kMinMs);
  EXPECT_EQ(IdleFor(e, t, kNow + 20 * kMinMs), -1) << "never idle while the agent is silent";
  // Never reported at all: the same.
  Entry never = Ttl(NeverReported(Pod("b", 4 * kGi, 0)), 10 * kMinMs);
  t.Observe(never, 0, kNow);
  t.Observe(never, 0, kNow + 15 * kMinMs);
  EXPECT_EQ(IdleFor(never, t, kNow + 15 * kMinMs), -1);
  // Fresh and unchanged again: idle from the last activity on.
  ObserveFresh(t, e, 0, kNow + 21 * kMinMs);
  ObserveFresh(t, e, 0, kNow + 31 * kMinMs);
  EXPECT_EQ(IdleFor(e, t, kNow + 31 * kMinMs), 11 * kMinMs);
}

// ---- Who vramd's own evictions may take --------------------------------------

TEST(EvictionExemption, Table) {
  const Entry owned = Pod("p", 1 * kGi);
  // Gangs are per namespace (Pod() puts each pod in its own, "ns-<uid>").
  const Snapshot snap = Snap({MakeNode(
      "n1", Unreported({80 * kGi}),
      {InNs(InGang(Pod("g1", 1 * kGi), "job/t"), "ml"), InNs(InGang(Pod("g2", 1 * kGi), "job/t"), "ml"),
       Terminating(InNs(InGang(Pod("g3", 1 * kGi), "job/t"), "ml")), InNs(InGang(Pod("o1", 1 * kGi), "jobset/o"), "ml")})});
  const GangSizes gangs = CountGangs(snap);
  EXPECT_EQ(gangs, (GangSizes{{"ml/job/t", 2}, {"ml/jobset/o", 1}}));
  struct Case {
    const char* name;
    Entry e;
    std::string want;
  };
  const Entry ranked = InNs(InGang(owned, "job/t"), "ml");
  const Entry single = InNs(InGang(owned, "jobset/o"), "ml");
  const Entry other_ns = InGang(owned, "job/t");  // ns-p: a gang of its own namespace, unknown here
  const std::vector<Case> cases = {
      {"OwnedPod", owned, ""},
      {"BarePod", Bare(owned), "bare pod"},
      {"BarePodThatOptedIn", Evictable(Bare(owned)), ""},
      {"BareDesignatedVictim", Disposable(Bare(owned)), ""},
      {"RankOfAGangOfTwoLive", ranked, "rank of gang job/t (2 live pods)"},
      {"GangOfOne", single, ""},
      {"SameGangNameOtherNamespace", other_ns, ""},
      {"BareRankSaysBare", Bare(ranked), "bare pod"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(EvictionExemption(c.e, gangs), c.want);
  }
}

// ---- The idle-eviction set ------------------------------------------------

struct WantEviction {
  std::string node, uid, for_uid;
};

struct IdleCase {
  const char* name;
  std::function<std::vector<Node>()> nodes;
  std::map<std::string, int> idle_min;  // uid -> minutes since last seen active (unlisted: never seen)
  std::vector<PendingPod> pending;
  IdleMode mode = IdleMode::kOnDemand;
  std::vector<WantEviction> want;
};

VramRequest Demand(int64_t per_gpu, int gpus = 1) {
  VramRequest r;
  r.gpu_count = gpus;
  r.per_gpu = per_gpu;
  r.total = per_gpu * gpus;
  r.peak_per_gpu = per_gpu;
  return r;
}

PendingPod Waiting(const std::string& uid, int64_t per_gpu, std::vector<std::string> nodes, int refused_min_ago = 1,
                   int gpus = 1) {
  PendingPod p;
  p.uid = uid;
  p.ns = "ns-" + uid;
  p.name = uid;
  p.demand = Demand(per_gpu, gpus);
  p.demand.ns = p.ns;
  p.nodes = std::move(nodes);
  p.refused_ms = kNow - refused_min_ago * kMinMs;
  return p;
}

// An idle-evictable pod without usage figures.
Entry IdlePod(const std::string& uid, int64_t per_gpu, std::vector<int> gpus = {0}) {
  return Ttl(Pod(uid, per_gpu, 0, std::move(gpus)));
}

// n1: one 80Gi GPU, full: busy 20Gi, a 10Gi (idle 60 min), b 10Gi (50), c 10Gi (40), d 30Gi (15).
std::vector<Node> FourIdle() {
  return {MakeNode("n1", Unreported({80 * kGi}),
                   {Pod("busy", 20 * kGi), IdlePod("a", 10 * kGi), IdlePod("b", 10 * kGi), IdlePod("c", 10 * kGi),
                    IdlePod("d", 30 * kGi)})};
}
const std::map<std::string, int> kFourIdle = {{"a", 60}, {"b", 50}, {"c", 40}, {"d", 15}};

const std::vector<IdleCase>& IdleCases() {
  static const std::vector<IdleCase> cases = {
      {"Always_EveryPodPastItsTtl_LongestIdleFirst",
       [] {
         return std::vector<Node>{
             MakeNode("n1", Unreported({80 * kGi}),
                      {IdlePod("past", 1 * kGi), IdlePod("young", 1 * kGi), Pod("no-ttl", 1 * kGi),
                       Terminating(IdlePod("going", 1 * kGi)), IdlePod("unseen", 1 * kGi)}),
             MakeNode("n2", Unreported({80 * kGi}), {IdlePod("older", 1 * kGi)})};
       },
       {{"past", 30}, {"young", 5}, {"no-ttl", 90}, {"going", 60}, {"older", 45}},
       {},
       IdleMode::kAlways,
       {{"n2", "older", ""}, {"n1", "past", ""}}},
      {"Always_IgnoresPendingPods",
       [] { return std::vector<Node>{MakeNode("n1", Unreported({80 * kGi}), {IdlePod("young", 1 * kGi)})}; },
       {{"young", 5}},
       {Waiting("p", 80 * kGi, {"n1"})},
       IdleMode::kAlways,
       {}},
      {"OnDemand_SinglePodSuffices_LongestIdleAmongThoseThatSuffice",
       // a (idle longest) is too small; b and c each suffice: b, idle longer.
       [] {
         return std::vector<Node>{MakeNode("n1", Unreported({80 * kGi}),
                                           {Pod("busy", 20 * kGi), IdlePod("a", 8 * kGi), IdlePod("c", 26 * kGi),
                                            IdlePod("b", 26 * kGi)})};
       },
       {{"a", 90}, {"b", 60}, {"c", 45}},
       {Waiting("p", 24 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {{"n1", "b", "p"}}},
      {"OnDemand_FewestBeforeLongestIdle",
       // d alone (idle 15 min) frees 30Gi; a+b+c (idle longer) would take three.
       FourIdle,
       kFourIdle,
       {Waiting("p", 30 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {{"n1", "d", "p"}}},
      {"OnDemand_SeveralNeeded_FewestThenLongestIdle",
       // 40Gi: no single pod; two: a+d (a idle longest) before b+d and c+d.
       FourIdle,
       kFourIdle,
       {Waiting("p", 40 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {{"n1", "a", "p"}, {"n1", "d", "p"}}},
      {"OnDemand_EveryIdlePodNeeded",
       FourIdle,
       kFourIdle,
       {Waiting("p", 60 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {{"n1", "a", "p"}, {"n1", "b", "p"}, {"n1", "c", "p"}, {"n1", "d", "p"}}},
      {"OnDemand_EvenEveryIdlePodGoneItDoesNotFit",
       FourIdle,
       kFourIdle,
       {Waiting("p", 61 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {}},
      // Issue 32: a bare pod (unless it opted in) and a rank of a gang of
      // several are never idle-evicted, however long idle.
      {"OnDemand_BarePodsAndGangRanksAreNeverEvicted",
       [] {
         return std::vector<Node>{MakeNode(
             "n1", Unreported({96 * kGi}),
             {Pod("busy", 20 * kGi), Bare(IdlePod("a", 30 * kGi)), InNs(InGang(IdlePod("g1", 15 * kGi), "job/x"), "ml"),
              InNs(InGang(IdlePod("g2", 15 * kGi), "job/x"), "ml"), Evictable(Bare(IdlePod("e", 15 * kGi)))})};
       },
       {{"a", 60}, {"g1", 50}, {"g2", 50}, {"e", 10}},
       {Waiting("p", 15 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {{"n1", "e", "p"}}},
      {"Always_BarePodsAndGangRanksAreNeverEvicted",
       [] {
         return std::vector<Node>{MakeNode(
             "n1", Unreported({96 * kGi}),
             {Bare(IdlePod("a", 30 * kGi)), InNs(InGang(IdlePod("g1", 15 * kGi), "job/x"), "ml"),
              InNs(InGang(IdlePod("g2", 15 * kGi), "job/x"), "ml"), Evictable(Bare(IdlePod("e", 15 * kGi)))})};
       },
       {{"a", 60}, {"g1", 50}, {"g2", 50}, {"e", 10}},
       {},
       IdleMode::kAlways,
       {{"n1", "e", ""}}},
      {"OnDemand_PodsNotIdleForTheirTtlAreNotEvicted",
       FourIdle,
       {{"a", 9}, {"b", 9}, {"c", 9}, {"d", 9}},
       {Waiting("p", 10 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {}},
      {"OnDemand_APodThatFitsAlreadyGetsNothing",
       [] {
         std::vector<Node> n = FourIdle();
         n.push_back(MakeNode("n2", Unreported({80 * kGi}), {}));
         return n;
       },
       kFourIdle,
       {Waiting("p", 30 * kGi, {"n1", "n2"})},
       IdleMode::kOnDemand,
       {}},
      {"OnDemand_UnknownNodeInTheListIsSkipped",
       FourIdle,
       kFourIdle,
       {Waiting("p", 30 * kGi, {"ghost", "n1"})},
       IdleMode::kOnDemand,
       {{"n1", "d", "p"}}},
      {"OnDemand_OnlyUnknownNodes_Nothing",
       FourIdle,
       kFourIdle,
       {Waiting("p", 30 * kGi, {"ghost"})},
       IdleMode::kOnDemand,
       {}},
      {"OnDemand_NodeNeedingFewestEvictionsWins",
       [] {
         return std::vector<Node>{
             MakeNode("n1", Unreported({80 * kGi}), {Pod("busy1", 60 * kGi), IdlePod("x", 10 * kGi), IdlePod("y", 10 * kGi)}),
             MakeNode("n2", Unreported({80 * kGi}), {Pod("busy2", 60 * kGi), IdlePod("z", 20 * kGi)})};
       },
       {{"x", 60}, {"y", 60}, {"z", 20}},
       {Waiting("p", 20 * kGi, {"n1", "n2"})},
       IdleMode::kOnDemand,
       {{"n2", "z", "p"}}},
      {"OnDemand_EqualEvictions_NodeNameBreaksTheTie",
       [] {
         return std::vector<Node>{
             MakeNode("n2", Unreported({80 * kGi}), {Pod("busy2", 60 * kGi), IdlePod("z", 20 * kGi)}),
             MakeNode("n1", Unreported({80 * kGi}), {Pod("busy1", 60 * kGi), IdlePod("x", 20 * kGi)})};
       },
       {{"x", 20}, {"z", 60}},
       {Waiting("p", 20 * kGi, {"n2", "n1"})},
       IdleMode::kOnDemand,
       {{"n1", "x", "p"}}},
      {"OnDemand_AnIdlePodIsUsedOnce_OldestRefusalFirst",
       // p-young is listed first but p-old was refused earlier: it gets a.
       [] {
         return std::vector<Node>{MakeNode("n1", Unreported({80 * kGi}), {Pod("busy", 60 * kGi), IdlePod("a", 20 * kGi)})};
       },
       {{"a", 30}},
       {Waiting("p-young", 20 * kGi, {"n1"}, 1), Waiting("p-old", 20 * kGi, {"n1"}, 5)},
       IdleMode::kOnDemand,
       {{"n1", "a", "p-old"}}},
      {"OnDemand_LaterPendingPodSeesTheEarlierOnePlaced",
       // p1 takes a's room; p2 would fit in it too, but p1 is there: b goes for p2.
       [] {
         return std::vector<Node>{MakeNode("n1", Unreported({80 * kGi}),
                                           {Pod("busy", 40 * kGi), IdlePod("a", 20 * kGi), IdlePod("b", 20 * kGi)})};
       },
       {{"a", 60}, {"b", 30}},
       {Waiting("p1", 20 * kGi, {"n1"}, 5), Waiting("p2", 10 * kGi, {"n1"}, 2)},
       IdleMode::kOnDemand,
       {{"n1", "a", "p1"}, {"n1", "b", "p2"}}},
      {"OnDemand_LaterPendingPodFitsInWhatTheEarlierEvictionsLeft",
       // a and b go for p1 (30Gi); 10Gi remain, where p2 fits: nothing more.
       [] {
         return std::vector<Node>{MakeNode("n1", Unreported({80 * kGi}),
                                           {Pod("busy", 40 * kGi), IdlePod("a", 20 * kGi), IdlePod("b", 20 * kGi)})};
       },
       {{"a", 60}, {"b", 30}},
       {Waiting("p1", 30 * kGi, {"n1"}, 5), Waiting("p2", 10 * kGi, {"n1"}, 2)},
       IdleMode::kOnDemand,
       {{"n1", "a", "p1"}, {"n1", "b", "p1"}}},
      {"OnDemand_TheIdlePodsReportedUsageGoesWithIt",
       // a reserved 10Gi but uses 40Gi: only without its usage does 40Gi fit.
       [] {
         Entry a = Ttl(Pod("a", 10 * kGi, 40 * kGi));
         return std::vector<Node>{
             MakeNode("n1", {GpuSpec{81 * kGi, 80 * kGi, 2 * kGi}}, {Pod("busy", 20 * kGi, 20 * kGi), a})};
       },
       {{"a", 30}},
       {Waiting("p", 40 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {{"n1", "a", "p"}}},
      {"OnDemand_TwoGpuPodNeedsAnIdlePodOnEachGpu",
       [] {
         return std::vector<Node>{MakeNode("n1", Unreported({80 * kGi, 80 * kGi}),
                                           {Pod("busy0", 40 * kGi, 0, {0}), Pod("busy1", 40 * kGi, 0, {1}),
                                            IdlePod("a", 40 * kGi, {0}), IdlePod("b", 40 * kGi, {1})})};
       },
       {{"a", 30}, {"b", 20}},
       {Waiting("p", 40 * kGi, {"n1"}, 1, 2)},
       IdleMode::kOnDemand,
       {{"n1", "a", "p"}, {"n1", "b", "p"}}},
      {"OnDemand_TerminatingIdlePodIsNotACandidate",
       [] {
         return std::vector<Node>{
             MakeNode("n1", Unreported({80 * kGi}), {Pod("busy", 60 * kGi), Terminating(IdlePod("a", 20 * kGi))})};
       },
       {{"a", 30}},
       {Waiting("p", 20 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {}},
      {"OnDemand_PendingPodBoundSinceItsRefusal_Nothing",
       [] {
         std::vector<Node> n = FourIdle();
         n[0].entries.push_back(Pod("p", 10 * kGi));  // capacity shrank below allocation: no room
         return n;
       },
       kFourIdle,
       {Waiting("p", 10 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       {}},
      {"OnDemand_PendingPodWithoutVramDemand_Nothing",
       FourIdle,
       kFourIdle,
       {Waiting("p", 0, {"n1"})},
       IdleMode::kOnDemand,
       {}},
      {"OnDemand_ManyIdlePods_SearchGivesWayToGreedyLongestIdle",
       // 20 idle 4Gi pods fill the GPU; 40Gi needs ten. Only the 16 longest
       // idle are considered; the bounded search cannot reach ten of them, so
       // the ten longest idle go.
       [] {
         std::vector<Entry> e;
         for (int i = 0; i < 20; ++i) e.push_back(IdlePod("i" + std::to_string(100 + i), 4 * kGi));
         return std::vector<Node>{MakeNode("n1", Unreported({80 * kGi}), e)};
       },
       [] {
         std::map<std::string, int> m;
         for (int i = 0; i < 20; ++i) m["i" + std::to_string(100 + i)] = 200 - i;  // i100 idle longest
         return m;
       }(),
       {Waiting("p", 40 * kGi, {"n1"})},
       IdleMode::kOnDemand,
       [] {
         std::vector<WantEviction> w;
         for (int i = 0; i < 10; ++i) w.push_back({"n1", "i" + std::to_string(100 + i), "p"});
         return w;
       }()},
  };
  return cases;
}

// A tracker that last saw each listed uid active `idle_min` minutes ago.
IdleTracker TrackerFor(const Snapshot& snap, const std::map<std::string, int>& idle_min) {
  IdleTracker t(kJitter, 60'000);
  for (const auto& [name, node] : snap.nodes) {
    for (const Entry& e : node.entries) {
      auto it = idle_min.find(e.pod_uid);
      if (it != idle_min.end()) ObserveFresh(t, e, 0, kNow - it->second * kMinMs);
    }
  }
  return t;
}

// Each case with a hand-built snapshot and with one indexed as the store
// publishes it (Filter's fast path answers whether a pod fits already).
TEST(PlanIdle, Table) {
  for (const IdleCase& c : IdleCases()) {
    for (bool indexed : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (indexed ? " (indexed)" : ""));
      Snapshot snap = Snap(c.nodes());
      if (indexed) IndexSnapshot(&snap);
      const IdleTracker tracker = TrackerFor(snap, c.idle_min);
      const std::vector<IdleEviction> got = PlanIdle(snap, tracker, c.pending, c.mode, Policy{}, kNow);
      std::vector<std::string> got_text, want_text;
      for (const IdleEviction& e : got) got_text.push_back(e.node + "/" + e.pod_uid + " for " + e.for_uid);
      for (const WantEviction& w : c.want) want_text.push_back(w.node + "/" + w.uid + " for " + w.for_uid);
      EXPECT_EQ(got_text, want_text);
      for (const IdleEviction& e : got) {
        EXPECT_EQ(e.ns, "ns-" + e.pod_uid);
        EXPECT_EQ(e.name, e.pod_uid);
        EXPECT_EQ(e.idle_ms, c.idle_min.at(e.pod_uid) * kMinMs);
        if (!e.for_uid.empty()) {
          EXPECT_EQ(e.for_ns, "ns-" + e.for_uid);
          EXPECT_EQ(e.for_name, e.for_uid);
        }
      }
    }
  }
}

// Issue 32: a pending pod that fits once a terminating pod on its node is
// gone gets no idle eviction while that pod is within its deletion time
// (plus kTerminatingReliefMarginMs); a stuck one, or one without a known
// time, does not hold it back. The room is the first pending pod's.
TEST(PlanIdle, ATerminatingPodsRoomIsOnItsWay) {
  // n1 (80Gi): busy 20Gi, going 30Gi (terminating), a 10Gi idle 60 min: 20Gi free.
  const Snapshot snap = Snap({MakeNode("n1", Unreported({80 * kGi}),
                                       {Pod("busy", 20 * kGi), Terminating(IdlePod("going", 30 * kGi)),
                                        IdlePod("a", 10 * kGi)})});
  const IdleTracker tracker = TrackerFor(snap, {{"a", 60}});
  struct Case {
    const char* name;
    std::optional<int64_t> going_deletion_ms;
    std::vector<PendingPod> pending;
    std::vector<std::string> want;  // "uid for pending"
  };
  const Case cases[] = {
      {"WithinItsDeletionTime_NoEviction", kNow + 10'000, {Waiting("p", 40 * kGi, {"n1"})}, {}},
      {"WithinTheMargin_NoEviction", kNow - kTerminatingReliefMarginMs, {Waiting("p", 40 * kGi, {"n1"})}, {}},
      {"Stuck_TheIdlePodGoes", kNow - kTerminatingReliefMarginMs - 1, {Waiting("p", 30 * kGi, {"n1"})}, {"a for p"}},
      {"TimeUnknown_TheIdlePodGoes", std::nullopt, {Waiting("p", 30 * kGi, {"n1"})}, {"a for p"}},
      // The first pending pod takes the room on its way; the second needs a.
      {"TheRoomOnItsWayIsTheFirstPods", kNow,
       {Waiting("p1", 40 * kGi, {"n1"}, 2), Waiting("p2", 20 * kGi, {"n1"}, 1)}, {"a for p2"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::unordered_map<std::string, int64_t> deleting;
    if (c.going_deletion_ms) deleting["going"] = *c.going_deletion_ms;
    std::vector<std::string> got;
    for (const IdleEviction& e : PlanIdle(snap, tracker, c.pending, IdleMode::kOnDemand, Policy{}, kNow, &deleting)) {
      got.push_back(e.pod_uid + " for " + e.for_uid);
    }
    EXPECT_EQ(got, c.want);
  }
}

// Issue 32: room held for a pod (EntryState::kHold) is spent for everyone
// else, its holder gets no further evictions while it lasts, and a hold is
// never a victim.
Entry Hold(const std::string& for_uid, int64_t per_gpu) {
  Entry e = Pod(for_uid, per_gpu);
  e.state = EntryState::kHold;
  e.owner_kind.clear();
  return e;
}

TEST(PlanIdle, APodHoldingRoomGetsNoMoreEvictionsAndAHoldIsNeverAVictim) {
  struct Case {
    const char* name;
    std::vector<Entry> n1;  // 80Gi, where p was refused
    std::vector<Entry> n2;  // 80Gi, where a reclaim made room
    std::vector<std::string> want;
  };
  const Case cases[] = {
      // 10Gi free on n1; evicting a makes the 20Gi p needs.
      {"NoHold_AGoesForP", {Pod("busy", 40 * kGi), Hold("q", 20 * kGi), IdlePod("a", 10 * kGi)}, {}, {"a for p"}},
      {"AHoldOfAnotherPodElsewhere_AGoesForP", {Pod("busy", 60 * kGi), IdlePod("a", 10 * kGi)},
       {Hold("q", 20 * kGi)}, {"a for p"}},
      {"PHoldsRoomHere_NothingMore", {Pod("busy", 40 * kGi), Hold("p", 20 * kGi), IdlePod("a", 10 * kGi)}, {}, {}},
      {"PHoldsRoomElsewhere_NothingMore", {Pod("busy", 60 * kGi), IdlePod("a", 10 * kGi)}, {Hold("p", 20 * kGi)},
       {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Snapshot snap =
        Snap({MakeNode("n1", Unreported({80 * kGi}), c.n1), MakeNode("n2", Unreported({80 * kGi}), c.n2)});
    const IdleTracker tracker = TrackerFor(snap, {{"a", 60}});
    std::vector<std::string> got;
    for (const IdleEviction& e :
         PlanIdle(snap, tracker, {Waiting("p", 20 * kGi, {"n1"})}, IdleMode::kOnDemand, Policy{}, kNow)) {
      got.push_back(e.pod_uid + " for " + e.for_uid);
    }
    EXPECT_EQ(got, c.want);
  }
  const GangSizes none;
  EXPECT_EQ(EvictionExemption(Hold("p", kGi), none), "room held for a pending pod");
}

// RoomMadeFor: the GPUs and bytes the pod takes once its victims are gone.
TEST(RoomMadeFor, Table) {
  // Two 40Gi GPUs: GPU 0 holds v (30Gi) and w (5Gi), GPU 1 x (20Gi).
  Entry x = Pod("x", 20 * kGi, 0, {1});
  const Node node = MakeNode("n1", Unreported({40 * kGi, 40 * kGi}), {Pod("v", 30 * kGi), Pod("w", 5 * kGi), x});
  struct Case {
    const char* name;
    std::vector<std::string> victims;
    int64_t per_gpu;
    int gpus;
    std::optional<std::vector<int>> want;
  };
  const Case cases[] = {
      {"VGone_GPU0", {"v"}, 30 * kGi, 1, std::vector<int>{0}},
      {"VGone_BothGPUs", {"v"}, 20 * kGi, 2, std::vector<int>{0, 1}},
      {"XGone_TheMostFree", {"x"}, 20 * kGi, 1, std::vector<int>{1}},
      {"StillNoRoom", {"w"}, 30 * kGi, 1, std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PendingPod p = Waiting("p", c.per_gpu, {"n1"}, 1, c.gpus);
    std::optional<Entry> hold = RoomMadeFor(node, c.victims, p, Policy{}, kNow);
    ASSERT_EQ(hold.has_value(), c.want.has_value());
    if (!hold) continue;
    EXPECT_EQ(hold->gpus, *c.want);
    EXPECT_EQ(hold->per_gpu, c.per_gpu);
    EXPECT_EQ(hold->pod_uid, "p");
    EXPECT_EQ(hold->state, EntryState::kHold);
  }
}

TEST(PlanIdle, ModeNames) {
  IdleMode m = IdleMode::kAlways;
  ASSERT_TRUE(ParseIdleMode("on-demand", &m));
  EXPECT_EQ(m, IdleMode::kOnDemand);
  ASSERT_TRUE(ParseIdleMode("always", &m));
  EXPECT_EQ(m, IdleMode::kAlways);
  EXPECT_FALSE(ParseIdleMode("sometimes", &m));
  EXPECT_STREQ(IdleModeName(IdleMode::kOnDemand), "on-demand");
  EXPECT_STREQ(IdleModeName(IdleMode::kAlways), "always");
}

TEST(PlanIdle, DoesNotChangeTheSnapshot) {
  const Snapshot snap = Snap(FourIdle());
  const IdleTracker tracker = TrackerFor(snap, kFourIdle);
  const Node before = *snap.Find("n1");
  const std::vector<IdleEviction> got =
      PlanIdle(snap, tracker, {Waiting("p", 40 * kGi, {"n1"})}, IdleMode::kOnDemand, Policy{}, kNow);
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(snap.Find("n1")->entries, before.entries);
}

}  // namespace
}  // namespace vramd::ledger
