// Reclaim and priority preemption (queues.h): PlanReclaim's victims, nodes
// and reasons, and the preempt verb's check. Tables of named cases over
// hand-built queue sets and figures (the fair shares are given, not
// computed: this file tests the reclaim rules alone).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vramd/ledger/queues.h"
#include "fakes/entry_modifiers.h"

namespace vramd::ledger {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kSec = 1000;
constexpr int64_t kNow = 1'000'000'000;
constexpr int64_t kFresh = kNow - 5 * kSec;

// ---- Builders -------------------------------------------------------------

// A bound pod of namespace `ns` holding `gib` on each of `gpus`, owned by a
// ReplicaSet (a pod something recreates: reclaim may take it).
Entry Pod(const std::string& uid, const std::string& ns, int64_t gib, std::vector<int> gpus = {0},
          int32_t priority = 10, int64_t created_ms = kNow - 3600 * kSec) {
  Entry e;
  e.owner_kind = "ReplicaSet";
  e.owner_uid = "rs-" + uid;
  e.pod_uid = uid;
  e.ns = ns;
  e.name = uid;
  e.gpus = std::move(gpus);
  e.per_gpu = gib * kGi;
  e.state = EntryState::kBound;
  e.priority = priority;
  e.created_ms = created_ms;
  return e;
}
Entry Terminating(Entry e) {
  e.state = EntryState::kTerminating;
  return e;
}
Entry Reserved(Entry e) {
  e.state = EntryState::kReserved;
  return e;
}
using namespace testing_entries;  // Bare, Evictable, InGang, InNs (fakes/entry_modifiers.h)

// A node with GPUs of these capacities (GiB), never reported (U = A).
Node MakeNode(const std::string& name, std::vector<int64_t> caps_gib, std::vector<Entry> entries) {
  Node n;
  n.name = name;
  for (size_t i = 0; i < caps_gib.size(); ++i) {
    Gpu g;
    g.index = static_cast<int>(i);
    g.capacity = caps_gib[i] * kGi;
    n.gpus.push_back(std::move(g));
  }
  n.entries = std::move(entries);
  return n;
}

// The same node with a fresh usage report on every GPU: each entry uses
// `used_gib[uid]` there (missing: what it reserved).
Node Reported(Node n, const std::map<std::string, int64_t>& used_gib) {
  for (Gpu& g : n.gpus) {
    g.used_ts_ms = kFresh;
    g.used = 0;
    for (const Entry& e : n.entries) {
      if (std::find(e.gpus.begin(), e.gpus.end(), g.index) == e.gpus.end()) continue;
      auto it = used_gib.find(e.pod_uid);
      const int64_t used = it != used_gib.end() ? it->second * kGi : e.per_gpu;
      g.used += used;
      g.pods.push_back(PodUsage{e.pod_uid, used});
    }
    std::sort(g.pods.begin(), g.pods.end(), [](const PodUsage& a, const PodUsage& b) { return a.uid < b.uid; });
  }
  return n;
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

// One queue as a case states it: the object and its fair share (given).
struct Q {
  std::string name;
  std::vector<std::string> namespaces;
  int64_t deserved_gib = 0;
  int64_t fair_share_gib = 0;
  std::string parent = "";
  std::optional<int64_t> limit_gib = std::nullopt;
  bool synthetic = false;  // the default queue BuildQueueSet adds (no object): serves every other namespace
};

// The queue set as BuildQueueSet would make it from valid objects (sorted by
// name, parents and children linked, namespaces mapped), and each queue's
// status: allocated and non-preemptible bytes summed from the snapshot the
// way QueueUsageOf counts them (a parent's include its children's), the
// fair share as given.
struct World {
  QueueSet set;
  std::vector<QueueStatus> statuses;
};

World MakeWorld(std::vector<Q> qs, const Snapshot& snap, const TenancyPolicy& policy) {
  std::sort(qs.begin(), qs.end(), [](const Q& a, const Q& b) { return a.name < b.name; });
  World w;
  for (const Q& q : qs) {
    Queue queue;
    queue.spec.name = q.name;
    queue.spec.parent = q.parent;
    queue.spec.namespaces = q.namespaces;
    queue.spec.deserved = q.deserved_gib * kGi;
    if (q.limit_gib) queue.spec.limit = *q.limit_gib * kGi;
    queue.synthetic = queue.unmanaged = q.synthetic;
    if (q.synthetic) w.set.default_queue = static_cast<int>(w.set.queues.size());
    w.set.queues.push_back(std::move(queue));
  }
  w.set.objects = static_cast<size_t>(std::count_if(qs.begin(), qs.end(), [](const Q& q) { return !q.synthetic; }));
  for (size_t i = 0; i < w.set.queues.size(); ++i) {
    Queue& queue = w.set.queues[i];
    if (!queue.spec.parent.empty()) {
      queue.parent = w.set.Find(queue.spec.parent);
      w.set.queues[static_cast<size_t>(queue.parent)].children.push_back(static_cast<int>(i));
    }
    for (const std::string& ns : queue.spec.namespaces) w.set.by_namespace[ns] = static_cast<int>(i);
  }
  w.statuses.resize(qs.size());
  for (size_t i = 0; i < qs.size(); ++i) {
    QueueStatus& st = w.statuses[i];
    st.name = qs[i].name;
    st.parent = qs[i].parent;
    st.reason = "Valid";
    st.deserved = qs[i].deserved_gib * kGi;
    if (qs[i].limit_gib) st.limit = *qs[i].limit_gib * kGi;
    st.fair_share = qs[i].fair_share_gib * kGi;
  }
  for (const auto& [name, node] : snap.nodes) {
    for (const Entry& e : node.entries) {
      for (int q = w.set.QueueOf(e.ns); q >= 0; q = w.set.queues[static_cast<size_t>(q)].parent) {
        w.statuses[static_cast<size_t>(q)].allocated += EntryBytes(e);
        if (!IsPreemptible(e, policy)) w.statuses[static_cast<size_t>(q)].allocated_nonpreemptible += EntryBytes(e);
      }
    }
  }
  return w;
}

// A pending pod of `gib` on each of `count` GPUs.
PendingPod Waiting(const std::string& uid, const std::string& ns, int64_t gib, int count = 1,
                        int32_t priority = 50, int64_t since_ms = kNow - 60 * kSec) {
  PendingPod p;
  p.uid = uid;
  p.ns = ns;
  p.name = uid;
  p.demand.per_gpu = gib * kGi;
  p.demand.gpu_count = count;
  p.demand.total = gib * kGi * count;
  p.demand.priority = priority;
  p.refused_ms = since_ms;
  return p;
}
PendingPod Peak(PendingPod p, int64_t peak_gib) {
  p.demand.peak_per_gpu = peak_gib * kGi;
  return p;
}
PendingPod On(PendingPod p, std::vector<std::string> nodes) {
  p.nodes = std::move(nodes);
  return p;
}

// ---- PlanReclaim ----------------------------------------------------------

struct WantPlan {
  std::string pending;
  ReclaimKind kind = ReclaimKind::kReclaim;
  std::string node;
  std::vector<std::string> victims = {};  // uids, in the order taken
};

struct PlanCase {
  std::string name;
  std::vector<Q> queues;
  std::vector<Node> nodes;
  std::vector<PendingPod> pending;
  std::vector<WantPlan> want = {};
  std::map<std::string, std::string> why_not = {};  // uid -> the exact text
  int64_t min_runtime_ms = 0;
  size_t max_plans = 10;
  bool reclaim_unqueued = false;
};

// Team A has a quota (deserved 160Gi) and is quiet; team B has none of its
// own and borrowed idle VRAM: all it holds is above its fair share (0 by
// default).
std::vector<Q> TwoTeams(int64_t fair_a = 160, int64_t fair_b = 0) {
  return {Q{"team-a", {"a"}, 160, fair_a}, Q{"team-b", {"b"}, 0, fair_b}};
}

// The same with team A deserving nothing: only the fair-share rule can
// entitle it (the deserved rule, WithinDeserved, never applies).
std::vector<Q> TwoTeamsFairShareOnly(int64_t fair_a, int64_t fair_b) {
  return {Q{"team-a", {"a"}, 0, fair_a}, Q{"team-b", {"b"}, 0, fair_b}};
}

// n1 (one 80Gi GPU) full with two 40Gi team-b pods, b1 the younger.
Node TeamBFillsN1() {
  return MakeNode("n1", {80},
                  {Pod("b1", "b", 40, {0}, 10, kNow - 10 * kSec), Pod("b2", "b", 40, {0}, 10, kNow - 20 * kSec)});
}

std::vector<PlanCase> PlanCases() {
  std::vector<PlanCase> cases;

  cases.push_back(PlanCase{
      "TeamBBorrowsTeamAEntitledTakesYoungestLowPriorityOnCheapestNode",
      TwoTeams(160, 160),
      {MakeNode("n1", {80, 80},
                {Pod("b1", "b", 40, {0}, 10, kNow - 3000 * kSec), Pod("b2", "b", 40, {0}, 10, kNow - 2000 * kSec),
                 Pod("b3", "b", 40, {1}, 50, kNow - 100 * kSec), Pod("b4", "b", 40, {1}, 10, kNow - 5000 * kSec)}),
       MakeNode("n2", {80, 80},
                {Pod("b5", "b", 80, {0}, 10, kNow - 50 * kSec), Pod("b6", "b", 80, {1}, 10, kNow - 60 * kSec)})},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b2"}}},
  });

  cases.push_back(PlanCase{
      "TiesGoToTheFirstNodeByName",
      TwoTeams(),
      {MakeNode("n2", {80}, {Pod("b2", "b", 80, {0})}), MakeNode("n1", {80}, {Pod("b1", "b", 80, {0})})},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
  });

  // As many bytes in as many victims on either node: the younger victim's node.
  cases.push_back(PlanCase{
      "AtEqualCostTheNodeOfTheYoungerVictimWins",
      TwoTeams(),
      {MakeNode("n1", {80}, {Pod("b1", "b", 80, {0}, 10, kNow - 200 * kSec)}),
       MakeNode("n2", {80}, {Pod("b2", "b", 80, {0}, 10, kNow - 100 * kSec)})},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n2", {"b2"}}},
  });

  // The e2e's cluster: two 16Gi GPUs, team B holds both with 8Gi pods; team
  // A's two pods each take the youngest victim left.
  cases.push_back(PlanCase{
      "EachPendingPodTakesTheYoungestVictimLeft",
      {Q{"team-a", {"a"}, 16, 16}, Q{"team-b", {"b"}, 8, 16}},
      {MakeNode("q-1", {16}, {Pod("b2", "b", 8, {0}, 0, kNow - 30 * kSec), Pod("b4", "b", 8, {0}, 0, kNow - 10 * kSec)}),
       MakeNode("q-2", {16}, {Pod("b1", "b", 8, {0}, 0, kNow - 40 * kSec), Pod("b3", "b", 8, {0}, 0, kNow - 20 * kSec)})},
      {Waiting("a1", "a", 8, 1, 0, kNow - 5 * kSec), Waiting("a2", "a", 8, 1, 0, kNow - 4 * kSec)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "q-1", {"b4"}}, WantPlan{"a2", ReclaimKind::kReclaim, "q-2", {"b3"}}},
  });

  // The same a moment later: b4 is terminating, a1 waits for its room.
  cases.push_back(PlanCase{
      "TheNextPassLeavesTheTerminatingRoomToTheFirstPod",
      {Q{"team-a", {"a"}, 16, 16}, Q{"team-b", {"b"}, 8, 16}},
      {MakeNode("q-1", {16}, {Pod("b1", "b", 8, {0}, 0, kNow - 40 * kSec),
                              Terminating(Pod("b4", "b", 8, {0}, 0, kNow - 10 * kSec))}),
       MakeNode("q-2", {16}, {Pod("b2", "b", 8, {0}, 0, kNow - 30 * kSec), Pod("b3", "b", 8, {0}, 0, kNow - 20 * kSec)})},
      {Waiting("a1", "a", 8, 1, 0, kNow - 5 * kSec), Waiting("a2", "a", 8, 1, 0, kNow - 4 * kSec)},
      {WantPlan{"a2", ReclaimKind::kReclaim, "q-2", {"b3"}}},
      {{"a1", "fits without evictions (node q-1)"}},
  });

  cases.push_back(PlanCase{
      "FewerVictimsWinAByteTie",
      TwoTeams(),
      {MakeNode("n1", {80},
                {Pod("b1", "b", 40, {0}, 10, kNow - 10 * kSec), Pod("b2", "b", 40, {0}, 10, kNow - 20 * kSec)}),
       MakeNode("n2", {80, 80}, {Pod("b3", "b", 80, {0}), Pod("b4", "b", 80, {1})})},
      {Waiting("a1", "a", 80)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n2", {"b3"}}},
  });

  // n1's walk takes its youngest pod (70Gi); n2 comes later by name but
  // needs only 38Gi: a later node still wins on fewer bytes.
  cases.push_back(PlanCase{
      "ALaterNodeWinsWithFewerBytes",
      TwoTeams(),
      {MakeNode("n1", {80, 80},
                {Pod("b1", "b", 70, {0}, 10, kNow - 10 * kSec), Pod("b2", "b", 38, {1}, 10, kNow - 20 * kSec),
                 Pod("x1", "b", 38, {1}, 100)}),
       MakeNode("n2", {80}, {Pod("b3", "b", 38, {0}), Pod("x2", "b", 38, {0}, 100)})},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n2", {"b3"}}},
  });

  // Two GPUs of 40Gi each: n1 needs two pods (80Gi), n2 one pod spanning
  // both GPUs (80Gi): as many bytes, fewer victims.
  cases.push_back(PlanCase{
      "OneVictimOnTwoGpusBeatsTwoVictims",
      TwoTeams(),
      {MakeNode("n1", {80, 80},
                {Pod("b1", "b", 40, {0}), Pod("b2", "b", 40, {1}), Pod("x1", "b", 40, {0}, 100),
                 Pod("x2", "b", 40, {1}, 100)}),
       MakeNode("n2", {80, 80},
                {Pod("b3", "b", 40, {0, 1}), Pod("x3", "b", 40, {0}, 100), Pod("x4", "b", 40, {1}, 100)})},
      {Waiting("a1", "a", 40, 2)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n2", {"b3"}}},
  });

  // B holds 80Gi, fair share 60Gi: evicting a 40Gi pod would leave 40Gi.
  cases.push_back(PlanCase{
      "NeverBelowFairShare",
      {Q{"team-a", {"a"}, 60, 60}, Q{"team-b", {"b"}, 60, 60}, Q{"team-c", {"c"}, 40, 40}},
      {MakeNode("n1", {80, 80},
                {Pod("b1", "b", 40, {0}, 10, kNow - 20 * kSec), Pod("b2", "b", 40, {0}, 10, kNow - 10 * kSec),
                 Pod("c1", "c", 80, {1}, 200)})},
      {Waiting("a1", "a", 40)},
      {},
      {{"a1",
        "evicting b/b2: it would take queue team-b below its fair share (40Gi left < fair share 60Gi); within "
        "queue team-a: no lower-priority preemptible pod may be evicted"}},
  });

  cases.push_back(PlanCase{
      "DownToExactlyTheFairShareIsAllowed",
      {Q{"team-a", {"a"}, 60, 60}, Q{"team-b", {"b"}, 40, 40}, Q{"team-c", {"c"}, 40, 40}},
      {MakeNode("n1", {80, 80},
                {Pod("b1", "b", 40, {0}, 10, kNow - 20 * kSec), Pod("b2", "b", 40, {0}, 10, kNow - 10 * kSec),
                 Pod("c1", "c", 80, {1}, 200)})},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b2"}}},
  });

  cases.push_back(PlanCase{
      "MinimumRuntimeProtectsYoungPods",
      TwoTeams(),
      {MakeNode("n1", {80},
                {Pod("b1", "b", 40, {0}, 10, kNow - 30 * kSec), Pod("b2", "b", 40, {0}, 10, kNow - 50 * kSec)})},
      {Waiting("a1", "a", 40)},
      {},
      {{"a1",
        "no preemptible pod of a queue above its fair share may be evicted (2 are within the minimum runtime); "
        "within queue team-a: no lower-priority preemptible pod may be evicted"}},
      60 * kSec,
  });

  cases.push_back(PlanCase{
      "MinimumRuntimeLeavesTheOlderPod",
      TwoTeams(),
      {MakeNode("n1", {80},
                {Pod("b1", "b", 40, {0}, 10, kNow - 30 * kSec), Pod("b2", "b", 40, {0}, 10, kNow - 90 * kSec)})},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b2"}}},
      {},
      60 * kSec,
  });

  // The 40Gi pod would be the cheapest, but priority 100 is not preemptible
  // (the default threshold): the 80Gi one goes.
  cases.push_back(PlanCase{
      "NonPreemptibleNeverVictims",
      TwoTeams(),
      {MakeNode("n1", {80, 80}, {Pod("b1", "b", 40, {0}, 100, kNow - 1 * kSec), Pod("b2", "b", 40, {0}, 150),
                                 Pod("b3", "b", 80, {1}, 99)})},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b3"}}},
  });

  cases.push_back(PlanCase{
      "OnlyNonPreemptiblePodsLeavesNoPlan",
      TwoTeams(),
      {MakeNode("n1", {80}, {Pod("b1", "b", 80, {0}, 100)})},
      {Waiting("a1", "a", 40)},
      {},
      {{"a1",
        "no preemptible pod of a queue above its fair share may be evicted; within queue team-a: no "
        "lower-priority preemptible pod may be evicted"}},
  });

  cases.push_back(PlanCase{
      "TerminatingAndReservedEntriesNeverVictims",
      TwoTeams(),
      {MakeNode("n1", {80, 80},
                {Terminating(Pod("b1", "b", 40, {0}, 10, kNow - 1 * kSec)),
                 Reserved(Pod("b2", "b", 40, {0}, 10, kNow - 2 * kSec)), Pod("b3", "b", 80, {1}, 10)})},
      {Waiting("a1", "a", 80)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b3"}}},
  });

  // b1 is terminating (evicted earlier): a1, the older, fits once it is gone
  // and takes that room; a2 needs one more victim.
  cases.push_back(PlanCase{
      "RoomBeingFreedByTerminatingPodsCountsFirst",
      TwoTeams(),
      {MakeNode("n1", {80}, {Terminating(Pod("b1", "b", 40, {0})), Pod("b2", "b", 40, {0})})},
      {Waiting("a1", "a", 40, 1, 50, kNow - 20 * kSec), Waiting("a2", "a", 40, 1, 50, kNow - 10 * kSec)},
      {WantPlan{"a2", ReclaimKind::kReclaim, "n1", {"b2"}}},
      {{"a1", "fits without evictions (node n1)"}},
  });

  // Team B's fair share is 40Gi; it holds 80Gi of which 40Gi are leaving:
  // taking b2 as well would leave it below its share.
  cases.push_back(PlanCase{
      "BytesAlreadyLeavingDoNotCountTowardsAQueuesShare",
      TwoTeamsFairShareOnly(160, 40),
      {MakeNode("n1", {80}, {Terminating(Pod("b1", "b", 40, {0})), Pod("b2", "b", 40, {0})})},
      {Waiting("a1", "a", 40, 1, 50, kNow - 20 * kSec), Waiting("a2", "a", 40, 1, 50, kNow - 10 * kSec)},
      {},
      {{"a1", "fits without evictions (node n1)"}},
  });

  // B is 60Gi over its share, C 20Gi: B's pod goes though C's is of lower
  // priority and younger.
  cases.push_back(PlanCase{
      "MostOverShareQueueFirst",
      {Q{"team-a", {"a"}, 80, 80}, Q{"team-b", {"b"}, 20, 20}, Q{"team-c", {"c"}, 40, 60}},
      {MakeNode("n1", {80, 80},
                {Pod("b1", "b", 40, {0}, 50, kNow - 500 * kSec), Pod("b2", "b", 40, {0}, 50, kNow - 600 * kSec),
                 Pod("c1", "c", 40, {1}, 5, kNow - 10 * kSec), Pod("c2", "c", 40, {1}, 5, kNow - 20 * kSec)})},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
  });

  // Once B is down to C's excess, the order turns to C (each pick looks at
  // the queues as the pods taken before it left them).
  cases.push_back(PlanCase{
      "OverShareIsRecomputedAfterEachVictim",
      {Q{"team-a", {"a"}, 80, 80}, Q{"team-b", {"b"}, 60, 60}, Q{"team-c", {"c"}, 40, 40}},
      {MakeNode("n1", {80},
                {Pod("b1", "b", 10, {0}, 50, kNow - 500 * kSec), Pod("b2", "b", 10, {0}, 50, kNow - 600 * kSec),
                 Pod("c1", "c", 10, {0}, 50, kNow - 10 * kSec), Pod("c2", "c", 10, {0}, 50, kNow - 20 * kSec)}),
       MakeNode("n9", {80, 80}, {Pod("b9", "b", 70, {0}, 200), Pod("c9", "c", 45, {1}, 200)})},
      // B: 90Gi, 30Gi over; C: 65Gi, 25Gi over. b1 (B 20 over), then C's c1
      // (C 25 over, B 20).
      {On(Waiting("a1", "a", 80), {"n1"})},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1", "c1", "b2", "c2"}}},
  });

  // The pod needs two GPUs; the preemptible pods all sit on GPU 0 and GPU 1
  // is held by a non-preemptible pod.
  cases.push_back(PlanCase{
      "EvenEveryVictimLeavesNoRoom",
      TwoTeams(),
      {MakeNode("n1", {80, 80}, {Pod("b1", "b", 40, {0}), Pod("b2", "b", 40, {0}), Pod("b3", "b", 60, {1}, 100)})},
      {Waiting("a1", "a", 40, 2)},
      {},
      {{"a1",
        "evicting every preemptible pod of a queue above its fair share would still leave no room on any of 1 "
        "node; within queue team-a: no lower-priority preemptible pod may be evicted"}},
  });

  // As above, and the queue rule would refuse the victims too: no room is
  // the reason that counts.
  cases.push_back(PlanCase{
      "NoRoomIsTheReasonWhenTheQueueRuleWouldRefuseToo",
      TwoTeams(160, 120),
      {MakeNode("n1", {80, 80}, {Pod("b1", "b", 40, {0}), Pod("b2", "b", 40, {0}), Pod("b3", "b", 60, {1}, 100)})},
      {Waiting("a1", "a", 40, 2)},
      {},
      {{"a1",
        "evicting every preemptible pod of a queue above its fair share would still leave no room on any of 1 "
        "node; within queue team-a: no lower-priority preemptible pod may be evicted"}},
  });

  // Usage, not allocation, is what leaves no room: only the simulation can
  // tell, and the queue rule refuses the victim.
  cases.push_back(PlanCase{
      "QueueRuleIsTheReasonWhenRoomWouldBeMade",
      TwoTeamsFairShareOnly(160, 40),
      {Reported(MakeNode("n1", {80}, {Pod("b1", "b", 40, {0}), Pod("x1", "b", 10, {0}, 100)}), {{"b1", 60}})},
      {Waiting("a1", "a", 30)},
      {},
      {{"a1",
        "evicting b/b1: it would take queue team-b below its fair share (10Gi left < fair share 40Gi); within "
        "queue team-a: no lower-priority preemptible pod may be evicted"}},
  });

  cases.push_back(PlanCase{
      "MultiGpuPodTakesAVictimOnEachGpu",
      TwoTeams(),
      {MakeNode("n1", {80, 80},
                {Pod("b1", "b", 40, {0}, 10, kNow - 10 * kSec), Pod("b2", "b", 40, {0}, 10, kNow - 20 * kSec),
                 Pod("b3", "b", 40, {1}, 10, kNow - 30 * kSec), Pod("b4", "b", 40, {1}, 10, kNow - 40 * kSec)})},
      {Waiting("a1", "a", 40, 2)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1", "b3"}}},
  });

  // Greedy takes the youngest first (b1, on GPU 0), which alone does not
  // make room for 60Gi; b2 does, and b1 is dropped again.
  cases.push_back(PlanCase{
      "VictimsTheOthersDoWithoutAreDropped",
      TwoTeams(),
      {MakeNode("n1", {80, 80},
                {Pod("b1", "b", 40, {0}, 10, kNow - 10 * kSec), Pod("x1", "b", 40, {0}, 100),
                 Pod("b2", "b", 80, {1}, 10, kNow - 20 * kSec)})},
      {Waiting("a1", "a", 60)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b2"}}},
  });

  // 20Gi fits GPU 0 by the fit rule (A 30Gi of 80Gi), but its peak of 60Gi
  // does not: P would be 90Gi > 80Gi. Evicting b1 (20Gi) brings P to 70Gi.
  cases.push_back(PlanCase{
      "PeakRuleRespected",
      TwoTeams(),
      {MakeNode("n1", {80}, {Pod("b1", "b", 20, {0}), Pod("x1", "b", 10, {0}, 100)})},
      {Peak(Waiting("a1", "a", 20), 60)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
  });

  cases.push_back(PlanCase{
      "WithoutPeakTheSamePodFitsAsItIs",
      TwoTeams(),
      {MakeNode("n1", {80}, {Pod("b1", "b", 20, {0}), Pod("x1", "b", 10, {0}, 100)})},
      {Waiting("a1", "a", 20)},
      {},
      {{"a1", "fits without evictions (node n1)"}},
  });

  // b1 uses 60Gi of its 40Gi: the fresh report's U is 70Gi. Once it is gone
  // its 60Gi leave U with it: 30Gi fits.
  cases.push_back(PlanCase{
      "AVictimsReportedUsageLeavesWithIt",
      TwoTeams(),
      {Reported(MakeNode("n1", {80}, {Pod("b1", "b", 40, {0}), Pod("x1", "b", 10, {0}, 100)}), {{"b1", 60}})},
      {Waiting("a1", "a", 30)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
  });

  // Team A is at its fair share: no reclaim, but its priority-50 pod may
  // evict A's own priority-10 pod (not the priority-60 one, nor B's).
  cases.push_back(PlanCase{
      "PriorityWithinTheQueueLowerOnly",
      {Q{"team-a", {"a"}, 80, 80}, Q{"team-b", {"b"}, 0, 0}},
      {MakeNode("n1", {80, 80},
                {Pod("a2", "a", 40, {0}, 60, kNow - 1 * kSec), Pod("a3", "a", 40, {0}, 10, kNow - 100 * kSec),
                 Pod("b1", "b", 80, {1}, 5, kNow - 1 * kSec)})},
      {Waiting("a1", "a", 40, 1, 50)},
      {WantPlan{"a1", ReclaimKind::kPriority, "n1", {"a3"}}},
  });

  cases.push_back(PlanCase{
      "PriorityNeedsALowerPriority",
      {Q{"team-a", {"a"}, 80, 80}, Q{"team-b", {"b"}, 0, 0}},
      {MakeNode("n1", {80}, {Pod("a2", "a", 40, {0}, 50), Pod("a3", "a", 40, {0}, 70)})},
      {Waiting("a1", "a", 40, 1, 50)},
      {},
      {{"a1",
        "queue team-a would go above its fair share (80Gi allocated + 40Gi requested > fair share 80Gi); within "
        "queue team-a: no lower-priority preemptible pod may be evicted"}},
  });

  // Limit 50Gi, 60Gi held: evicting a3 makes room, but 20Gi + 40Gi is still
  // above the limit; a2 goes too.
  cases.push_back(PlanCase{
      "PriorityAdmittedOnceTheVictimsAreGone",
      {Q{"team-a", {"a"}, 40, 50, "", 50}, Q{"team-b", {"b"}, 0, 0}},
      {MakeNode("n1", {80, 80},
                {Pod("a2", "a", 20, {0}, 20), Pod("b2", "b", 60, {0}, 100), Pod("a3", "a", 40, {1}, 10),
                 Pod("b1", "b", 40, {1}, 100)})},
      {Waiting("a1", "a", 40, 1, 50)},
      {WantPlan{"a1", ReclaimKind::kPriority, "n1", {"a3", "a2"}}},
  });

  cases.push_back(PlanCase{
      "PriorityRefusedWhenTheQueueLimitStillHolds",
      {Q{"team-a", {"a"}, 60, 60, "", 60}, Q{"team-b", {"b"}, 0, 0}},
      {MakeNode("n1", {80, 80}, {Pod("a2", "a", 40, {0}, 60), Pod("b2", "b", 40, {0}, 100), Pod("a3", "a", 40, {1}, 10),
                                 Pod("b1", "b", 40, {1}, 100)})},
      {Waiting("a1", "a", 40, 1, 50)},
      {},
      {{"a1",
        "queue team-a would go above its fair share (80Gi allocated + 40Gi requested > fair share 60Gi); within "
        "queue team-a: waits on its queue: queue team-a at its limit: 40Gi allocated + 40Gi requested > limit "
        "60Gi"}},
  });

  cases.push_back(PlanCase{
      "PriorityRefusedByTheParentsLimit",
      {Q{"d1", {}, 40, 60, "", 60}, Q{"team-a", {"a"}, 40, 40, "d1"}, Q{"team-b", {"b"}, 0, 0}},
      {MakeNode("n1", {80, 80}, {Pod("a2", "a", 40, {0}, 60), Pod("b2", "b", 40, {0}, 100), Pod("a3", "a", 40, {1}, 10),
                                 Pod("b1", "b", 40, {1}, 100)})},
      {Waiting("a1", "a", 40, 1, 50)},
      {},
      {{"a1",
        "queue team-a would go above its fair share (80Gi allocated + 40Gi requested > fair share 40Gi); within "
        "queue team-a: waits on its queue: queue team-a's parent d1 at its limit: 40Gi allocated + 40Gi requested "
        "> limit 60Gi"}},
  });

  // A non-preemptible pod (priority 200) may use only A's deserved quota,
  // which A's own non-preemptible pod already fills: room alone is not enough.
  cases.push_back(PlanCase{
      "NonPreemptiblePendingPodNeedsInQuotaRoom",
      {Q{"team-a", {"a"}, 40, 160}, Q{"team-b", {"b"}, 0, 0}},
      {MakeNode("n1", {80, 80}, {Pod("x1", "a", 40, {0}, 150), Pod("b1", "b", 40, {0}), Pod("b2", "b", 80, {1})})},
      {Waiting("a1", "a", 40, 1, 200)},
      {},
      {{"a1",
        "waits on its queue: queue team-a: non-preemptible pods may use only its deserved 40Gi (40Gi in use, "
        "40Gi requested); within queue team-a: no lower-priority preemptible pod may be evicted"}},
  });

  // Entitled, but nobody is over their share: priority preemption in its
  // own queue comes next.
  cases.push_back(PlanCase{
      "EntitledFallsBackToPriority",
      {Q{"team-a", {"a"}, 120, 120}, Q{"team-b", {"b"}, 40, 40}},
      {MakeNode("n1", {80}, {Pod("a2", "a", 40, {0}, 10), Pod("b1", "b", 40, {0}, 10)})},
      {Waiting("a1", "a", 40, 1, 50)},
      {WantPlan{"a1", ReclaimKind::kPriority, "n1", {"a2"}}},
  });

  // Two pods of A, B's victims both on GPU 0: the first plan takes b1 and
  // the room it leaves, the second b2.
  cases.push_back(PlanCase{
      "PendingPodsDoNotReuseVictimsOrRoom",
      TwoTeams(160, 0),
      {TeamBFillsN1()},
      {Waiting("a1", "a", 40, 1, 50, kNow - 20 * kSec), Waiting("a2", "a", 40, 1, 50, kNow - 10 * kSec)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}, WantPlan{"a2", ReclaimKind::kReclaim, "n1", {"b2"}}},
  });

  // B may give 40Gi before its fair share of 40Gi: the second pod of A finds
  // B at its share (the first plan's victim counted).
  cases.push_back(PlanCase{
      "QueueFiguresCarryAcrossPlans",
      TwoTeamsFairShareOnly(160, 40),
      {TeamBFillsN1()},
      {Waiting("a1", "a", 40, 1, 50, kNow - 20 * kSec), Waiting("a2", "a", 40, 1, 50, kNow - 10 * kSec)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
      {{"a2",
        "evicting b/b2: it would take queue team-b below its fair share (0 left < fair share 40Gi); within queue "
        "team-a: no lower-priority preemptible pod may be evicted"}},
  });

  // A's fair share 40Gi: its second pod, once the first joined, is not entitled.
  cases.push_back(PlanCase{
      "ThePendingPodJoinsItsQueue",
      TwoTeamsFairShareOnly(40, 0),
      {TeamBFillsN1()},
      {Waiting("a1", "a", 40, 1, 50, kNow - 20 * kSec), Waiting("a2", "a", 40, 1, 50, kNow - 10 * kSec)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
      {{"a2",
        "queue team-a would go above its fair share (40Gi allocated + 40Gi requested > fair share 40Gi); within "
        "queue team-a: no lower-priority preemptible pod may be evicted"}},
  });

  // Issue 32, the deserved rule (KAI's reclaim by deserved quota): team A,
  // within its deserved 40Gi once a1 joins, takes from team B (deserved 0),
  // though B then falls below its fair share of 60Gi; B keeping its own
  // deserved quota, or A going beyond its own, leaves the fair-share rule to
  // decide (and it refuses).
  cases.push_back(PlanCase{
      "WithinItsDeservedAQueueTakesBelowTheVictimsFairShare",
      {Q{"team-a", {"a"}, 40, 40}, Q{"team-b", {"b"}, 0, 60}},
      {TeamBFillsN1()},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
  });
  cases.push_back(PlanCase{
      "TheVictimKeepsItsDeservedQuota",
      {Q{"team-a", {"a"}, 40, 40}, Q{"team-b", {"b"}, 60, 60}},
      {TeamBFillsN1()},
      {Waiting("a1", "a", 40)},
      {},
      {{"a1",
        "evicting b/b1: it would take queue team-b below its fair share (40Gi left < fair share 60Gi); within "
        "queue team-a: no lower-priority preemptible pod may be evicted"}},
  });
  cases.push_back(PlanCase{
      "BeyondItsDeservedTheFairShareRuleDecides",
      {Q{"team-a", {"a"}, 20, 40}, Q{"team-b", {"b"}, 0, 60}},
      {TeamBFillsN1()},
      {Waiting("a1", "a", 40)},
      {},
      {{"a1",
        "evicting b/b1: it would take queue team-b below its fair share (40Gi left < fair share 60Gi); within "
        "queue team-a: no lower-priority preemptible pod may be evicted"}},
  });

  cases.push_back(PlanCase{
      "PlanLimit",
      TwoTeams(160, 0),
      {TeamBFillsN1()},
      {Waiting("a1", "a", 40, 1, 50, kNow - 20 * kSec), Waiting("a2", "a", 40, 1, 50, kNow - 10 * kSec)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
      {{"a2", "plan limit reached (1 per pass)"}},
      0,
      1,
  });

  cases.push_back(PlanCase{
      "OnlyThePendingPodsNodes",
      TwoTeams(),
      {MakeNode("n1", {80}, {Pod("b1", "b", 40, {0}), Pod("b2", "b", 40, {0})}),
       MakeNode("n2", {80}, {Pod("b3", "b", 80, {0})})},
      {On(Waiting("a1", "a", 40), {"n2", "gone"})},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n2", {"b3"}}},
  });

  // Departments: d1 (team-a) and d2 (team-b, team-c). team-b is over its own
  // share, but d2 is at its share (team-c wants more): nothing may leave d2.
  // The pod needs two GPUs: GPU 2 alone is not enough.
  cases.push_back(PlanCase{
      "NeverTakesTheVictimsDepartmentBelowItsShare",
      {Q{"d1", {}, 80, 80}, Q{"d2", {}, 160, 160}, Q{"team-a", {"a"}, 80, 80, "d1"}, Q{"team-b", {"b"}, 0, 0, "d2"},
       Q{"team-c", {"c"}, 160, 160, "d2"}},
      {MakeNode("n1", {80, 80, 80}, {Pod("b1", "b", 40, {0}), Pod("b2", "b", 40, {0}), Pod("c1", "c", 80, {1}, 200)})},
      {Waiting("a1", "a", 40, 2)},
      {},
      {{"a1",
        "evicting b/b1: it would take queue d2 below its fair share (120Gi left < fair share 160Gi); within queue "
        "team-a: no lower-priority preemptible pod may be evicted"}},
  });

  cases.push_back(PlanCase{
      "SiblingsWithinADepartment",
      {Q{"d1", {}, 160, 160}, Q{"team-a", {"a"}, 80, 80, "d1"}, Q{"team-b", {"b"}, 80, 80, "d1"}},
      {MakeNode("n1", {80, 80}, {Pod("b1", "b", 80, {0}), Pod("b2", "b", 80, {1})})},
      {Waiting("a1", "a", 80)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
  });

  cases.push_back(PlanCase{
      "FitsWithoutEvictions",
      TwoTeams(),
      {MakeNode("n1", {80}, {Pod("b1", "b", 40, {0})}), MakeNode("n2", {80}, {Pod("b2", "b", 20, {0})})},
      {Waiting("a1", "a", 40)},
      {},
      {{"a1", "fits without evictions (node n1)"}},
  });

  PendingPod victim = Waiting("v1", "a", 40);
  victim.demand.victim = true;
  cases.push_back(PlanCase{
      "PendingPodsThatGetNothing",
      {Q{"team-a", {"a"}, 160, 160}, Q{"team-b", {"b"}, 0, 0}},
      {MakeNode("n1", {80}, {Pod("b1", "b", 80, {0}), Pod("h1", "a", 0, {0})})},
      {victim, Waiting("z1", "a", 0), Waiting("n1", "nowhere", 40), Waiting("h1", "a", 40)},
      {},
      {{"v1", "a designated victim never preempts"},
       {"z1", "wants no VRAM"},
       {"n1", "no valid queue serves namespace nowhere"},
       {"h1", "already holds a reservation on node n1"}},
  });

  // ---- Who is never a victim (issue 32) ----------------------------------

  // One research queue created; "web" is in no queue: its priority-0 pods
  // (preemptible by priority) were victims of the first reclaim.
  const std::vector<Q> research = {Q{"research", {"r"}, 16, 16}, Q{"default", {}, 0, 0, "", std::nullopt, true}};
  cases.push_back(PlanCase{
      "UnqueuedNamespacesAreNeverVictims",
      research,
      {MakeNode("n1", {16}, {Pod("web-1", "web", 16, {0}, 0)})},
      {Waiting("r1", "r", 8)},
      {},
      {{"r1", "no preemptible pod of a queue above its fair share may be evicted (never victims: 1 of namespaces "
              "no queue names); within queue research: no lower-priority preemptible pod may be evicted (never "
              "victims: 1 of namespaces no queue names)"}},
  });
  PlanCase unqueued{"WithReclaimUnqueuedTheyAre", research,
                    {MakeNode("n1", {16}, {Pod("web-1", "web", 16, {0}, 0)})},
                    {Waiting("r1", "r", 8)},
                    {WantPlan{"r1", ReclaimKind::kReclaim, "n1", {"web-1"}}}};
  unqueued.reclaim_unqueued = true;
  cases.push_back(unqueued);
  // A VramQueue object named "default" (not synthetic) makes them a queue like any.
  cases.push_back(PlanCase{
      "ADefaultQueueObjectMakesThemAQueue",
      {Q{"research", {"r"}, 16, 16}, Q{"default", {"web"}, 0, 0}},
      {MakeNode("n1", {16}, {Pod("web-1", "web", 16, {0}, 0)})},
      {Waiting("r1", "r", 8)},
      {WantPlan{"r1", ReclaimKind::kReclaim, "n1", {"web-1"}}},
  });

  // A bare pod (no controller) is never taken; one that opted in, or a
  // designated victim, is. The younger b2 would go first otherwise.
  cases.push_back(PlanCase{
      "ABarePodIsNeverAVictim",
      TwoTeams(),
      {MakeNode("n1", {16, 16}, {Bare(Pod("b2", "b", 16, {0}, 10, kNow - 100 * kSec)),
                                 Pod("b1", "b", 16, {1}, 10, kNow - 200 * kSec)})},
      {Waiting("a1", "a", 16)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
  });
  cases.push_back(PlanCase{
      "ABarePodThatOptedInIsAVictim",
      TwoTeams(),
      {MakeNode("n1", {16, 16}, {Evictable(Bare(Pod("b2", "b", 16, {0}, 10, kNow - 100 * kSec))),
                                 Pod("b1", "b", 16, {1}, 10, kNow - 200 * kSec)})},
      {Waiting("a1", "a", 16)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b2"}}},
  });
  cases.push_back(PlanCase{
      "OnlyBarePodsNoPlan",
      TwoTeams(),
      {MakeNode("n1", {16}, {Bare(Pod("b1", "b", 16, {0}))})},
      {Waiting("a1", "a", 16)},
      {},
      {{"a1", "no preemptible pod of a queue above its fair share may be evicted (never victims: 1 bare pod); "
              "within queue team-a: no lower-priority preemptible pod may be evicted (never victims: 1 bare pod)"}},
  });

  // A three-pod gang and a single pod of equal size: never one rank of the
  // gang, even the youngest; the single pod goes.
  cases.push_back(PlanCase{
      "NeverOneRankOfAGang",
      TwoTeams(),
      {MakeNode("n1", {16, 16, 16, 16},
                {InGang(Pod("g1", "b", 16, {0}, 10, kNow - 300 * kSec), "job/train"),
                 InGang(Pod("g2", "b", 16, {1}, 10, kNow - 300 * kSec), "job/train"),
                 InGang(Pod("g3", "b", 16, {2}, 10, kNow - 10 * kSec), "job/train"),
                 Pod("s1", "b", 16, {3}, 10, kNow - 900 * kSec)})},
      {Waiting("a1", "a", 16)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"s1"}}},
  });
  cases.push_back(PlanCase{
      "AGangAloneIsNotTaken",
      TwoTeams(),
      {MakeNode("n1", {16, 16}, {InGang(Pod("g1", "b", 16, {0}), "job/train"),
                                 InGang(Pod("g2", "b", 16, {1}), "job/train")})},
      {Waiting("a1", "a", 16)},
      {},
      {{"a1", "no preemptible pod of a queue above its fair share may be evicted (never victims: 2 ranks of "
              "gangs); within queue team-a: no lower-priority preemptible pod may be evicted (never victims: 2 "
              "ranks of gangs)"}},
  });
  // Gangs are per namespace, and a gang of one (a Job's single live pod) is
  // taken like any pod; a terminating rank does not count.
  cases.push_back(PlanCase{
      "AGangOfOneIsTakenLikeAnyPod",
      TwoTeams(),
      {MakeNode("n1", {16}, {InGang(Pod("g1", "b", 16, {0}), "job/train")}),
       MakeNode("n2", {16}, {Terminating(InGang(Pod("g0", "b", 8, {0}), "job/train")),
                             InGang(Pod("x1", "a", 8, {0}, 200), "job/train")})},
      {Waiting("a1", "a", 16)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"g1"}}},
  });

  return cases;
}

std::string Describe(const std::vector<ReclaimPlan>& plans) {
  std::string s;
  for (const ReclaimPlan& p : plans) {
    s += p.pending_uid + " " + ReclaimKindName(p.kind) + " on " + p.node + ":";
    for (const ReclaimVictim& v : p.victims) s += " " + v.uid;
    s += "\n";
  }
  return s;
}

void CheckCase(PlanCase& c) {
  SCOPED_TRACE(c.name);
  TenancyPolicy policy;
  policy.min_runtime_ms = c.min_runtime_ms;
  policy.reclaim_unqueued = c.reclaim_unqueued;
  const Snapshot snap = Snap(std::move(c.nodes));
  const World w = MakeWorld(c.queues, snap, policy);
  std::unordered_map<std::string, std::string> why;
  const std::vector<ReclaimPlan> got =
      PlanReclaim(w.set, w.statuses, snap, c.pending, policy, FitPolicy{}, kNow, c.max_plans, &why);
  ASSERT_EQ(got.size(), c.want.size()) << Describe(got);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].pending_uid, c.want[i].pending) << Describe(got);
    EXPECT_EQ(got[i].kind, c.want[i].kind) << Describe(got);
    EXPECT_EQ(got[i].node, c.want[i].node) << Describe(got);
    std::vector<std::string> victims;
    for (const ReclaimVictim& v : got[i].victims) {
      victims.push_back(v.uid);
      EXPECT_EQ(v.node, got[i].node);
    }
    EXPECT_EQ(victims, c.want[i].victims) << Describe(got);
    EXPECT_EQ(got[i].queue, w.set.QueueOf(got[i].pending_ns));
    EXPECT_FALSE(why.contains(got[i].pending_uid)) << why[got[i].pending_uid];
  }
  for (const auto& [uid, text] : c.why_not) {
    ASSERT_TRUE(why.contains(uid)) << uid;
    EXPECT_EQ(why[uid], text) << uid;
  }
}

TEST(PlanReclaim, Table) {
  for (PlanCase& c : PlanCases()) CheckCase(c);
}

// Input no real cluster should send: no crash, no plan that breaks a rule.
std::vector<PlanCase> HostileCases() {
  std::vector<PlanCase> cases;
  PendingPod huge = Waiting("a1", "a", 1);
  huge.demand.gpu_count = 1'000'000;
  huge.demand.total = huge.demand.per_gpu * huge.demand.gpu_count;
  cases.push_back(PlanCase{
      "AMillionGpus",
      TwoTeams(kMaxQueueBytes / kGi),
      {MakeNode("n1", {80}, {Pod("b1", "b", 80, {0})})},
      {huge},
      {},
      {{"a1",
        "evicting every preemptible pod of a queue above its fair share would still leave no room on any of 1 "
        "node; within queue team-a: no lower-priority preemptible pod may be evicted"}},
  });
  PendingPod negative = Waiting("a1", "a", 40);
  negative.demand.per_gpu = -kGi;
  cases.push_back(PlanCase{
      "NegativeSize", TwoTeams(), {MakeNode("n1", {80}, {Pod("b1", "b", 80, {0})})}, {negative}, {},
      {{"a1", "wants no VRAM"}},
  });
  cases.push_back(PlanCase{
      "TheSamePodTwice",
      TwoTeams(),
      {MakeNode("n1", {80}, {Pod("b1", "b", 40, {0}), Pod("b2", "b", 40, {0})})},
      {Waiting("a1", "a", 40), Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
  });
  // b9 names a GPU the node does not have: it frees nothing there.
  cases.push_back(PlanCase{
      "AVictimOnAGpuTheNodeLacks",
      TwoTeams(),
      {MakeNode("n1", {80}, {Pod("b9", "b", 80, {7}, 10, kNow - 1 * kSec), Pod("b1", "b", 80, {0})})},
      {Waiting("a1", "a", 40)},
      {WantPlan{"a1", ReclaimKind::kReclaim, "n1", {"b1"}}},
  });
  cases.push_back(PlanCase{
      "ANodeWithoutGpus",
      TwoTeams(),
      {MakeNode("n1", {}, {Pod("b1", "b", 80, {0})})},
      {Waiting("a1", "a", 40)},
      {},
      {{"a1",
        "evicting every preemptible pod of a queue above its fair share would still leave no room on any of 1 "
        "node; within queue team-a: no lower-priority preemptible pod may be evicted"}},
  });
  PendingPod big = Waiting("a1", "a", 40);
  big.demand.total = std::numeric_limits<int64_t>::max();
  cases.push_back(PlanCase{
      "ATotalAtTheLimitOfInt64",
      TwoTeams(kMaxQueueBytes / kGi),
      {MakeNode("n1", {80}, {Pod("b1", "b", 80, {0})})},
      {big},
      {},
      {{"a1",
        "queue team-a would go above its fair share (0 allocated + 8.0Ei requested > fair share 4Ei); within "
        "queue team-a: no lower-priority preemptible pod may be evicted"}},
  });
  return cases;
}

TEST(PlanReclaim, HostileInputs) {
  for (PlanCase& c : HostileCases()) CheckCase(c);
}

TEST(PlanReclaim, VictimFieldsComeFromTheEntry) {
  const Snapshot snap = Snap({MakeNode("n1", {80}, {Pod("b1", "b", 40, {0}, 7, kNow - 99 * kSec)}),
                              MakeNode("n2", {80}, {Pod("b2", "b", 80, {0})})});
  TenancyPolicy policy;
  const World w = MakeWorld(TwoTeams(), snap, policy);
  const std::vector<PendingPod> pending = {Waiting("a1", "a", 60)};
  const std::vector<ReclaimPlan> got = PlanReclaim(w.set, w.statuses, snap, pending, policy, FitPolicy{}, kNow, 10);
  ASSERT_EQ(got.size(), 1u) << Describe(got);
  EXPECT_EQ(got[0].kind, ReclaimKind::kReclaim);
  EXPECT_EQ(got[0].pending_ns, "a");
  EXPECT_EQ(got[0].pending_name, "a1");
  EXPECT_EQ(got[0].queue, w.set.Find("team-a"));
  ASSERT_EQ(got[0].victims.size(), 1u);
  // 60Gi fits neither node; evicting n1's b1 (40Gi) makes room, n2's b2 (80Gi) too.
  const ReclaimVictim& v = got[0].victims[0];
  EXPECT_EQ(v.uid, "b1");
  EXPECT_EQ(v.ns, "b");
  EXPECT_EQ(v.name, "b1");
  EXPECT_EQ(v.node, "n1");
  EXPECT_EQ(v.queue, w.set.Find("team-b"));
  EXPECT_EQ(v.bytes, 40 * kGi);
  EXPECT_EQ(v.priority, 7);
  EXPECT_EQ(v.created_ms, kNow - 99 * kSec);
}

TEST(PlanReclaim, NoQueuesNoPlans) {
  const Snapshot snap = Snap({MakeNode("n1", {80}, {Pod("b1", "b", 80, {0})})});
  const QueueSet empty;
  const std::vector<PendingPod> pending = {Waiting("a1", "a", 40)};
  std::unordered_map<std::string, std::string> why;
  EXPECT_TRUE(PlanReclaim(empty, {}, snap, pending, TenancyPolicy{}, FitPolicy{}, kNow, 10, &why).empty());
  EXPECT_EQ(why["a1"], "no queues (no VramQueue objects)");
}

TEST(PlanReclaim, MismatchedFiguresNoPlans) {
  const Snapshot snap = Snap({MakeNode("n1", {80}, {Pod("b1", "b", 80, {0})})});
  TenancyPolicy policy;
  World w = MakeWorld(TwoTeams(), snap, policy);
  w.statuses.pop_back();
  const std::vector<PendingPod> pending = {Waiting("a1", "a", 40)};
  std::unordered_map<std::string, std::string> why;
  EXPECT_TRUE(PlanReclaim(w.set, w.statuses, snap, pending, policy, FitPolicy{}, kNow, 10, &why).empty());
  EXPECT_EQ(why["a1"], "queue figures do not match the queues");
}

TEST(PlanReclaim, OldestRefusalFirst) {
  // One victim, two pods: the one refused earlier gets it, whatever the order given.
  const Snapshot snap = Snap({MakeNode("n1", {80}, {Pod("b1", "b", 80, {0})})});
  TenancyPolicy policy;
  const World w = MakeWorld(TwoTeams(), snap, policy);
  const std::vector<PendingPod> pending = {Waiting("a2", "a", 80, 1, 50, kNow - 10 * kSec),
                                                Waiting("a1", "a", 80, 1, 50, kNow - 20 * kSec)};
  std::unordered_map<std::string, std::string> why;
  const std::vector<ReclaimPlan> got =
      PlanReclaim(w.set, w.statuses, snap, pending, policy, FitPolicy{}, kNow, 10, &why);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].pending_uid, "a1");
  EXPECT_TRUE(why.contains("a2"));
}

TEST(ReclaimKind, Names) {
  EXPECT_STREQ(ReclaimKindName(ReclaimKind::kReclaim), "reclaim");
  EXPECT_STREQ(ReclaimKindName(ReclaimKind::kPriority), "priority");
}

// ---- PreemptVictimsAllowed -----------------------------------------------

struct PreemptCase {
  std::string name;
  std::vector<Q> queues;
  std::vector<Entry> held;        // every entry in the cluster (the figures)
  std::vector<std::string> victims;  // uids among `held`
  std::string ns;
  int32_t priority = 50;
  int64_t total_gib = 40;
  std::string want;  // "" = allowed
  int64_t min_runtime_ms = 0;
};

std::vector<PreemptCase> PreemptCases() {
  const std::vector<Q> teams = {Q{"team-a", {"a"}, 80, 80}, Q{"team-b", {"b"}, 40, 40}};
  const std::vector<Entry> held = {Pod("a2", "a", 40, {0}, 10), Pod("a3", "a", 40, {0}, 60),
                                   Pod("b1", "b", 40, {1}, 10), Pod("b2", "b", 40, {1}, 10),
                                   Pod("b3", "b", 40, {1}, 100), Pod("b4", "b", 40, {1}, 10, kNow - 10 * kSec)};
  return {
      PreemptCase{"SameQueueLowerPriority", teams, held, {"a2"}, "a", 50, 40, ""},
      PreemptCase{"SameQueueHigherPriority",
                  teams,
                  held,
                  {"a3"},
                  "a",
                  50,
                  40,
                  "pod a/a3 of the same queue has priority 60, not below 50"},
      PreemptCase{"SameQueueEqualPriority",
                  teams,
                  held,
                  {"a2"},
                  "a",
                  10,
                  40,
                  "pod a/a2 of the same queue has priority 10, not below 10"},
      PreemptCase{"NonPreemptible", teams, held, {"b3"}, "a", 50, 40, "pod b/b3 is not preemptible (priority 100)"},
      // B holds 160Gi, fair share 40Gi; A 80Gi of 80Gi: A would go above.
      PreemptCase{"CrossQueueWhenThePodsQueueWouldGoAbove",
                  teams,
                  held,
                  {"b1"},
                  "a",
                  50,
                  40,
                  "pod b/b1 may not go: queue team-a would go above its fair share (120Gi > fair share 80Gi)"},
      PreemptCase{"CrossQueueAllowed",
                  {Q{"team-a", {"a"}, 160, 160}, Q{"team-b", {"b"}, 40, 40}},
                  held,
                  {"b1", "b2"},
                  "a",
                  50,
                  40,
                  ""},
      PreemptCase{
          "CrossQueueBelowFairShare",
          {Q{"team-a", {"a"}, 0, 160}, Q{"team-b", {"b"}, 40, 100}},
          held,
          {"b1", "b2"},
          "a",
          50,
          40,
          "pod b/b1 may not go: it would take queue team-b below its fair share (80Gi left < fair share 100Gi)"},
      PreemptCase{"FirstVictimThatMayNotGoIsNamed",
                  teams,
                  held,
                  {"a2", "a3"},
                  "a",
                  50,
                  40,
                  "pod a/a3 of the same queue has priority 60, not below 50"},
      PreemptCase{"MinimumRuntime",
                  {Q{"team-a", {"a"}, 160, 160}, Q{"team-b", {"b"}, 40, 40}},
                  held,
                  {"b4"},
                  "a",
                  50,
                  40,
                  "pod b/b4 is within its minimum runtime (10 s of 60 s)",
                  60 * kSec},
      PreemptCase{"EmptySetAllowsAll", {}, held, {"b3", "a3"}, "a", 50, 40, ""},
      // B holds 160Gi, fair share 120Gi: b1 once leaves 120Gi; twice would be 80Gi.
      PreemptCase{"TheSameVictimTwiceCountsOnce",
                  {Q{"team-a", {"a"}, 160, 160}, Q{"team-b", {"b"}, 40, 120}},
                  held,
                  {"b1", "b1"},
                  "a",
                  50,
                  40,
                  ""},
      PreemptCase{
          "TwoVictimsTakeTheQueueBelow",
          {Q{"team-a", {"a"}, 0, 160}, Q{"team-b", {"b"}, 40, 120}},
          held,
          {"b1", "b2"},
          "a",
          50,
          40,
          "pod b/b1 may not go: it would take queue team-b below its fair share (80Gi left < fair share 120Gi)"},
      // Issue 32, the deserved rule: A stays within its deserved 160Gi, B at
      // or above its deserved 40Gi though below its fair share 120Gi.
      PreemptCase{"WithinItsDeservedBelowTheVictimsFairShare",
                  {Q{"team-a", {"a"}, 160, 160}, Q{"team-b", {"b"}, 40, 120}},
                  held,
                  {"b1", "b2"},
                  "a",
                  50,
                  40,
                  ""},
      PreemptCase{"NeverBelowTheVictimsDeserved",
                  {Q{"team-a", {"a"}, 160, 160}, Q{"team-b", {"b"}, 100, 120}},
                  held,
                  {"b1", "b2"},
                  "a",
                  50,
                  40,
                  "pod b/b1 may not go: it would take queue team-b below its fair share (80Gi left < fair share 120Gi)"},
      // Departments: a victim of another department needs the pod's
      // department within its share, and the victim's at or above its own.
      PreemptCase{"CrossDepartmentThePodsDepartmentWouldGoAbove",
                  {Q{"d1", {}, 80, 80}, Q{"d2", {}, 40, 40}, Q{"team-a", {"a"}, 80, 160, "d1"},
                   Q{"team-b", {"b"}, 40, 40, "d2"}},
                  held,
                  {"b1"},
                  "a",
                  50,
                  40,
                  "pod b/b1 may not go: queue d1 (the parent of team-a) would go above its fair share (120Gi > fair "
                  "share 80Gi)"},
      PreemptCase{"CrossDepartmentTheVictimsDepartmentWouldGoBelow",
                  {Q{"d1", {}, 160, 160}, Q{"d2", {}, 160, 160}, Q{"team-a", {"a"}, 80, 160, "d1"},
                   Q{"team-b", {"b"}, 40, 40, "d2"}},
                  held,
                  {"b1"},
                  "a",
                  50,
                  40,
                  "pod b/b1 may not go: it would take queue d2 below its fair share (120Gi left < fair share 160Gi)"},
      PreemptCase{"CrossDepartmentAllowed",
                  {Q{"d1", {}, 160, 160}, Q{"d2", {}, 80, 80}, Q{"team-a", {"a"}, 80, 160, "d1"},
                   Q{"team-b", {"b"}, 40, 40, "d2"}},
                  held,
                  {"b1"},
                  "a",
                  50,
                  40,
                  ""},
  };
}

TEST(PreemptVictimsAllowed, Table) {
  for (const PreemptCase& c : PreemptCases()) {
    SCOPED_TRACE(c.name);
    TenancyPolicy policy;
    policy.min_runtime_ms = c.min_runtime_ms;
    const Snapshot snap = Snap({MakeNode("n1", {160, 160}, c.held)});
    const World w = MakeWorld(c.queues, snap, policy);
    std::vector<const Entry*> victims;
    const Node* node = snap.Find("n1");
    for (const std::string& uid : c.victims) {
      auto it = std::find_if(node->entries.begin(), node->entries.end(),
                             [&](const Entry& e) { return e.pod_uid == uid; });
      ASSERT_NE(it, node->entries.end()) << uid;
      victims.push_back(&*it);
    }
    EXPECT_EQ(PreemptVictimsAllowed(w.set, w.statuses, c.ns, c.priority, c.total_gib * kGi, victims, policy, kNow),
              c.want);
  }
}

TEST(PreemptVictimsAllowed, NoVictimsAllowed) {
  const Snapshot snap = Snap({MakeNode("n1", {80}, {})});
  const World w = MakeWorld(TwoTeams(), snap, TenancyPolicy{});
  EXPECT_EQ(PreemptVictimsAllowed(w.set, w.statuses, "a", 0, 40 * kGi, {}, TenancyPolicy{}, kNow), "");
}

}  // namespace
}  // namespace vramd::ledger
