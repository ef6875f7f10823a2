#include "vramd/reconcile/plan.h"

#include <gtest/gtest.h>

namespace vramd::reconcile {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kNow = 10'000'000;
constexpr int64_t kGrace = 60'000;

ledger::Entry E(const std::string& uid, std::vector<int> gpus, int64_t per_gpu, ledger::EntryState st,
                int64_t age_ms) {
  ledger::Entry e;
  e.pod_uid = uid;
  e.ns = "default";
  e.name = uid;
  e.gpus = std::move(gpus);
  e.per_gpu = per_gpu;
  e.state = st;
  e.created_ms = kNow - age_ms;
  return e;
}

kube::PodInfo P(const std::string& uid, const std::string& node, const char* vram, const std::string& phase = "Running",
                bool deleting = false) {
  kube::PodInfo p;
  p.uid = uid;
  p.ns = "default";
  p.name = uid;
  p.node_name = node;
  p.phase = phase;
  p.deleting = deleting;
  if (vram) p.spec.containers.push_back({std::string(vram), std::string(vram), false});
  return p;
}

kube::PodInfo Annotated(kube::PodInfo p, const std::string& gpus, int64_t per_gpu) {
  p.annotations["vramd.io/gpus"] = gpus;
  p.annotations["vramd.io/vram-per-gpu"] = std::to_string(per_gpu);
  return p;
}

ledger::Snapshot Snap(std::vector<ledger::Entry> entries, int gpus = 2) {
  ledger::Snapshot s;
  ledger::Node& n = s.nodes["n1"];
  n.name = "n1";
  for (int i = 0; i < gpus; ++i) n.gpus.push_back(ledger::Gpu{i, "", 80 * kGi});
  n.entries = std::move(entries);
  s.nodes["n2"].name = "n2";
  s.nodes["n2"].gpus = {ledger::Gpu{0, "", 80 * kGi}};
  return s;
}

using ledger::EntryState;

struct PlanCase {
  const char* name;
  ledger::Snapshot snap;
  std::vector<kube::PodInfo> pods;
  std::set<std::string> in_flight;
  // Expected actions as "kind node uid cause".
  std::vector<std::string> want;
};

std::string Describe(const Action& a) {
  std::string s = std::string(ActionKindName(a.kind)) + " " + a.node + " " + a.entry.pod_uid;
  if (a.kind == ActionKind::kRelease) s += std::string(" ") + ReleaseCauseName(a.cause);
  if (a.kind == ActionKind::kReadd) {
    s += " gpus=";
    for (int g : a.entry.gpus) s += std::to_string(g);
    s += " per_gpu=" + std::to_string(a.entry.per_gpu / kGi) + "Gi";
  }
  return s;
}

class PlanTable : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlanTable, Decides) {
  const PlanCase& c = GetParam();
  PlanResult r = Plan(c.snap, c.pods, c.in_flight, PlanOptions{kNow, kGrace});
  std::vector<std::string> got;
  for (const Action& a : r.actions) got.push_back(Describe(a));
  EXPECT_EQ(got, c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Reconcile, PlanTable,
    ::testing::Values(
        PlanCase{"InSyncDoesNothing", Snap({E("a", {0}, 8 * kGi, EntryState::kBound, 1000)}),
                 {P("a", "n1", "8Gi")}, {}, {}},
        PlanCase{"OrphanReaddedWithAnnotatedGpus", Snap({}),
                 {Annotated(P("a", "n1", "16Gi"), "1", 16 * kGi)}, {},
                 {"readd n1 a gpus=1 per_gpu=16Gi"}},
        PlanCase{"OrphanWithoutAnnotationsGetsMostFreeGpus",
                 Snap({E("x", {0}, 40 * kGi, EntryState::kBound, 1000)}),
                 {P("x", "n1", "40Gi"), P("a", "n1", "8Gi")}, {}, {"readd n1 a gpus=1 per_gpu=8Gi"}},
        PlanCase{"OrphanWithBadAnnotationFallsBack", Snap({}),
                 {Annotated(P("a", "n1", "8Gi"), "7", 8 * kGi)}, {}, {"readd n1 a gpus=0 per_gpu=8Gi"}},
        PlanCase{"PendingPodIsNoOrphan", Snap({}), {P("a", "", "8Gi", "Pending")}, {}, {}},
        PlanCase{"PodWithoutVramIsIgnored", Snap({}), {P("a", "n1", nullptr)}, {}, {}},
        PlanCase{"OrphanOnUnknownNodeWaits", Snap({}), {P("a", "n9", "8Gi")}, {}, {}},
        // Phantom-capacity rule.
        PlanCase{"DeletingPodKeepsVramAndIsMarked", Snap({E("a", {0}, 8 * kGi, EntryState::kBound, 1000)}),
                 {P("a", "n1", "8Gi", "Running", true)}, {}, {"mark-terminating n1 a"}},
        PlanCase{"AlreadyTerminatingStaysHeld", Snap({E("a", {0}, 8 * kGi, EntryState::kTerminating, 1000)}),
                 {P("a", "n1", "8Gi", "Running", true)}, {}, {}},
        PlanCase{"PodGoneIsReleased", Snap({E("a", {0}, 8 * kGi, EntryState::kTerminating, 120'000)}), {}, {},
                 {"release n1 a pod_gone"}},
        PlanCase{"SucceededIsReleasedEvenWhileDeleting",
                 Snap({E("a", {0}, 8 * kGi, EntryState::kTerminating, 1000)}),
                 {P("a", "n1", "8Gi", "Succeeded", true)}, {}, {"release n1 a terminal_phase"}},
        PlanCase{"FailedIsReleased", Snap({E("a", {0}, 8 * kGi, EntryState::kBound, 1000)}),
                 {P("a", "n1", "8Gi", "Failed")}, {}, {"release n1 a terminal_phase"}},
        // Stale reservations and binds in flight.
        PlanCase{"YoungReservationOfUnknownPodIsKept", Snap({E("a", {0}, 8 * kGi, EntryState::kReserved, 5000)}),
                 {}, {}, {}},
        PlanCase{"OldReservationOfUnknownPodIsStale", Snap({E("a", {0}, 8 * kGi, EntryState::kReserved, 61'000)}),
                 {}, {}, {"release n1 a stale_reservation"}},
        PlanCase{"OldReservationOfUnboundPodIsStale", Snap({E("a", {0}, 8 * kGi, EntryState::kReserved, 61'000)}),
                 {P("a", "", "8Gi", "Pending")}, {}, {"release n1 a stale_reservation"}},
        PlanCase{"BindInFlightIsNeverReleased", Snap({E("a", {0}, 8 * kGi, EntryState::kReserved, 600'000)}),
                 {P("a", "", "8Gi", "Pending")}, {"a"}, {}},
        PlanCase{"BindInFlightUnknownPodKept", Snap({E("a", {0}, 8 * kGi, EntryState::kReserved, 600'000)}), {},
                 {"a"}, {}},
        PlanCase{"ReservedButBoundIsMarkedBound", Snap({E("a", {0}, 8 * kGi, EntryState::kReserved, 1000)}),
                 {P("a", "n1", "8Gi")}, {}, {"mark-bound n1 a"}},
        PlanCase{"YoungBoundEntryOfUnseenPodIsKept", Snap({E("a", {0}, 8 * kGi, EntryState::kBound, 1000)}), {},
                 {}, {}},
        PlanCase{"EntryOnWrongNodeMovesToTheRightOne", Snap({E("a", {0}, 8 * kGi, EntryState::kReserved, 1000)}),
                 {Annotated(P("a", "n2", "8Gi"), "0", 8 * kGi)}, {},
                 {"release n1 a wrong_node", "readd n2 a gpus=0 per_gpu=8Gi"}}),
    [](const auto& info) { return info.param.name; });

TEST(Plan, PhantomBytesArePerNodeAndCountersAdd) {
  ledger::Snapshot s = Snap({E("a", {0, 1}, 8 * kGi, EntryState::kTerminating, 1000),
                             E("b", {0}, 4 * kGi, EntryState::kBound, 120'000),
                             E("c", {1}, 4 * kGi, EntryState::kReserved, 120'000)});
  PlanResult r = Plan(s, {P("a", "n1", "16Gi", "Running", true), Annotated(P("d", "n2", "2Gi"), "0", 2 * kGi)}, {},
                      PlanOptions{kNow, kGrace});
  EXPECT_EQ(r.phantom_bytes["n1"], 16 * kGi);
  EXPECT_EQ(r.gone, 1);
  EXPECT_EQ(r.stale, 1);
  EXPECT_EQ(r.orphans, 1);
}

TEST(Plan, PodSeenDeletedIsReleasedAtOnceWhateverItsAge) {
  ledger::Snapshot s = Snap({E("a", {0}, 8 * kGi, EntryState::kTerminating, 2000),
                             E("b", {1}, 8 * kGi, EntryState::kBound, 2000)});
  std::set<std::string> deleted = {"a"};
  PlanOptions o{kNow, kGrace, &deleted};
  PlanResult r = Plan(s, {}, {}, o);
  ASSERT_EQ(r.actions.size(), 1u);  // b is young and unseen: kept
  EXPECT_EQ(Describe(r.actions[0]), "release n1 a pod_gone");
}

TEST(Plan, AnnotationParsing) {
  std::vector<int> g;
  int64_t b = 0;
  EXPECT_TRUE(GpusFromAnnotations({{"vramd.io/gpus", "0,3"}, {"vramd.io/vram-per-gpu", "1024"}}, &g, &b));
  EXPECT_EQ(g, (std::vector<int>{0, 3}));
  EXPECT_EQ(b, 1024);
  for (const char* bad : {"", "a", "0,,1", "1,1", "-1", "0;1"}) {
    EXPECT_FALSE(GpusFromAnnotations({{"vramd.io/gpus", bad}, {"vramd.io/vram-per-gpu", "1"}}, &g, &b)) << bad;
  }
  EXPECT_FALSE(GpusFromAnnotations({{"vramd.io/gpus", "0"}, {"vramd.io/vram-per-gpu", "1Gi"}}, &g, &b));
  EXPECT_FALSE(GpusFromAnnotations({{"vramd.io/gpus", "0"}}, &g, &b));
}

}  // namespace
}  // namespace vramd::reconcile
