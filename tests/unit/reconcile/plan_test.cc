#include "vramd/reconcile/plan.h"

#include <gtest/gtest.h>

#include "vramd/ledger/capacity.h"

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

// Room held for pod `uid` (issue 32), ending `left_ms` from now.
ledger::Entry H(const std::string& uid, int64_t left_ms) {
  ledger::Entry e = E(uid, {0}, 8 * kGi, ledger::EntryState::kHold, 1000);
  e.hold_until_ms = kNow + left_ms;
  return e;
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

// gtest copies its parameters; a Snapshot is copied only by Clone.
struct CaseSnapshot {
  CaseSnapshot(ledger::Snapshot s) : value(std::move(s)) {}  // NOLINT: implicit, for the table
  CaseSnapshot(const CaseSnapshot& o) : value(o.value.Clone()) {}
  ledger::Snapshot value;
};

struct PlanCase {
  const char* name;
  CaseSnapshot snap;
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
  PlanResult r = Plan(c.snap.value, c.pods, c.in_flight, PlanOptions{kNow, kGrace});
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
        // Issue 30: placement annotations the pod wrote itself (spec.nodeName:
        // it never met filter or bind) never set the bytes accounted.
        PlanCase{"OrphanClaimingHugeBytesOnTwoGpusIsAccountedAtItsRequest", Snap({}),
                 {Annotated(P("a", "n1", "2Gi"), "0,1", int64_t{1} << 50)}, {}, {"readd n1 a gpus=0 per_gpu=2Gi"}},
        PlanCase{"OrphanClaimingFewerBytesIsAccountedAtItsRequestOnItsGpu", Snap({}),
                 {Annotated(P("a", "n1", "40Gi"), "1", 1)}, {}, {"readd n1 a gpus=1 per_gpu=40Gi"}},
        PlanCase{"EntryHeldAtForgedBytesIsPutRight",
                 Snap({E("a", {1}, 1024 * kGi, EntryState::kBound, 1000)}),
                 {Annotated(P("a", "n1", "2Gi"), "1", 1024 * kGi)}, {}, {"readd n1 a gpus=1 per_gpu=2Gi"}},
        PlanCase{"ReservationAtOtherBytesBelongsToItsBind",
                 Snap({E("a", {1}, 4 * kGi, EntryState::kReserved, 1000)}), {P("a", "n1", "2Gi")}, {},
                 {"mark-bound n1 a"}},
        PlanCase{"EntryOnWrongNodeMovesToTheRightOne", Snap({E("a", {0}, 8 * kGi, EntryState::kReserved, 1000)}),
                 {Annotated(P("a", "n2", "8Gi"), "0", 8 * kGi)}, {},
                 {"release n1 a wrong_node", "readd n2 a gpus=0 per_gpu=8Gi"}},
        // Issue 32: room held for a pending pod lasts while the pod waits
        // for it and the hold has time left; it is never the pod's memory
        // (no phantom rule) and never counts as the pod's own entry.
        PlanCase{"HoldOfAWaitingPodLasts", Snap({H("w", 1000)}), {P("w", "", "8Gi", "Pending")}, {}, {}},
        PlanCase{"HoldExpires", Snap({H("w", 0)}), {P("w", "", "8Gi", "Pending")}, {}, {"release n1 w hold_ended"}},
        PlanCase{"HoldOfAGonePodEnds", Snap({H("w", 60'000)}), {}, {}, {"release n1 w hold_ended"}},
        PlanCase{"HoldOfADeletedPodEnds", Snap({H("w", 60'000)}), {P("w", "", "8Gi", "Pending", true)}, {},
                 {"release n1 w hold_ended"}},
        PlanCase{"HoldOfAPodBoundElsewhereEnds", Snap({H("w", 60'000)}),
                 {Annotated(P("w", "n2", "8Gi"), "0", 8 * kGi)}, {},
                 {"release n1 w hold_ended", "readd n2 w gpus=0 per_gpu=8Gi"}},
        PlanCase{"HoldOfAPodBindingNowLasts", Snap({H("w", 0)}), {P("w", "", "8Gi", "Pending")}, {"w"}, {}}),
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

TEST(Plan, ForeignPlacementAnnotationsAreReportedForAsLongAsThePodRuns) {
  kube::PodInfo forged = Annotated(P("a", "n1", "2Gi"), "0,1", int64_t{1} << 50);
  kube::PodInfo honest = Annotated(P("b", "n1", "8Gi"), "1", 8 * kGi);
  PlanResult r = Plan(Snap({}), {forged, honest}, {}, PlanOptions{kNow, kGrace});
  EXPECT_EQ(r.annotations_overridden, 1);
  ASSERT_EQ(r.malformed.size(), 1u);
  EXPECT_EQ(r.malformed[0].uid, "a");
  EXPECT_NE(r.malformed[0].reason.find("accounted at its request"), std::string::npos) << r.malformed[0].reason;
  // Once re-added at its request it is still reported (and not re-added).
  PlanResult again = Plan(Snap({E("a", {0}, 2 * kGi, EntryState::kBound, 1000),
                                E("b", {1}, 8 * kGi, EntryState::kBound, 1000)}),
                          {forged, honest}, {}, PlanOptions{kNow, kGrace});
  EXPECT_TRUE(again.actions.empty());
  EXPECT_EQ(again.annotations_overridden, 1);
  EXPECT_EQ(again.malformed.size(), 1u);
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

TEST(Plan, AReaddedEntryRecordsThePodsDemand) {
  kube::PodInfo p = P("a", "n1", "8Gi");
  p.ns = "ml";
  p.spec.ns = "ml";
  p.spec.priority = -1000;
  p.spec.priority_class = "vramd-disposable";
  p.spec.vram_peak = "10Gi";
  p.spec.model = "llama";
  PlanResult r = Plan(Snap({}), {p}, {}, PlanOptions{kNow, kGrace});
  ASSERT_EQ(r.actions.size(), 1u);
  ASSERT_EQ(r.actions[0].kind, ActionKind::kReadd);
  const ledger::Entry& e = r.actions[0].entry;
  EXPECT_EQ(e.ns, "ml");
  EXPECT_EQ(e.model, "llama");
  EXPECT_EQ(e.peak_per_gpu, 10 * kGi);
  EXPECT_EQ(e.priority, -1000);
  EXPECT_EQ(e.priority_class, "vramd-disposable");
  EXPECT_TRUE(e.victim);
  EXPECT_EQ(e.created_ms, kNow);
}

// Issue 32: an entry written before vramd recorded the eviction facts reads
// priority 0, no class, no owner: a system-critical pod's entry looked
// unprotected, a Deployment's looked bare. Reconcile writes the pod's facts.
TEST(Plan, EntriesGetThePodsEvictionFacts) {
  struct Case {
    const char* name;
    ledger::EntryState state;
    bool in_flight;
    bool facts_already;  // the entry already records what the pod says
    bool refreshed;
  };
  const Case cases[] = {
      {"OldBoundEntry_Refreshed", EntryState::kBound, false, false, true},
      {"OldTerminatingEntry_Refreshed", EntryState::kTerminating, false, false, true},
      {"InSync_Nothing", EntryState::kBound, false, true, false},
      {"AReservation_LeftToItsBind", EntryState::kReserved, false, false, false},
      {"BindInFlight_LeftToItsBind", EntryState::kBound, true, false, false},
  };
  kube::PodInfo p = P("a", "n1", "8Gi");
  p.spec.priority = 2'000'000'000;
  p.spec.priority_class = "system-cluster-critical";
  p.spec.owner_kind = "ReplicaSet";
  p.spec.owner_uid = "rs-1";
  p.spec.idle_ttl = "10m";
  p.spec.evictable = "true";
  p.spec.gang = "pod-group/g";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ledger::Entry e = E("a", {1}, 8 * kGi, c.state, 1000);
    e.used = 3 * kGi;
    e.used_ts_ms = kNow - 500;
    e.last_active_ms = kNow - 700;
    if (c.facts_already) {
      e.priority = 2'000'000'000;
      e.priority_class = "system-cluster-critical";
      e.owner_kind = "ReplicaSet";
      e.owner_uid = "rs-1";
      e.idle_ttl_ms = 600'000;
      e.evictable = true;
      e.gang = "pod-group/g";
    }
    std::set<std::string> in_flight;
    if (c.in_flight) in_flight.insert("a");
    PlanResult r = Plan(Snap({e}), {p}, in_flight, PlanOptions{kNow, kGrace});
    std::vector<Action> refresh;
    for (const Action& a : r.actions) {
      if (a.kind == ActionKind::kRefresh) refresh.push_back(a);
    }
    EXPECT_EQ(r.refreshed, c.refreshed ? 1 : 0);
    ASSERT_EQ(refresh.size(), c.refreshed ? 1u : 0u);
    if (!c.refreshed) continue;
    const ledger::Entry& got = refresh[0].entry;
    EXPECT_EQ(refresh[0].node, "n1");
    EXPECT_EQ(got.priority, 2'000'000'000);
    EXPECT_EQ(got.priority_class, "system-cluster-critical");
    EXPECT_EQ(got.owner_kind, "ReplicaSet");
    EXPECT_EQ(got.owner_uid, "rs-1");
    EXPECT_EQ(got.idle_ttl_ms, 600'000);
    EXPECT_TRUE(got.evictable);
    EXPECT_EQ(got.gang, "pod-group/g");
    // Everything else is the entry's own: the store writes only while it
    // still holds these (RefreshEntry).
    EXPECT_EQ(got.gpus, e.gpus);
    EXPECT_EQ(got.per_gpu, e.per_gpu);
    EXPECT_EQ(got.state, e.state);
    EXPECT_EQ(got.created_ms, e.created_ms);
    EXPECT_EQ(got.last_active_ms, e.last_active_ms);
    EXPECT_EQ(got.used, e.used);
  }
}

TEST(Plan, AnnotationParsing) {
  Result<std::optional<AnnotatedGpus>> ok =
      GpusFromAnnotations({{"vramd.io/gpus", "3,0"}, {"vramd.io/vram-per-gpu", "1024"}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_TRUE(ok->has_value());
  EXPECT_EQ((*ok)->gpus, (std::vector<int>{0, 3}));
  EXPECT_EQ((*ok)->per_gpu, 1024);
  Result<std::optional<AnnotatedGpus>> none = GpusFromAnnotations({{"vramd.io/model", "llama"}});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  Result<std::optional<AnnotatedGpus>> edge = GpusFromAnnotations(
      {{"vramd.io/gpus", "4096"}, {"vramd.io/vram-per-gpu", std::to_string(ledger::kMaxBytesPerGpu)}});
  ASSERT_TRUE(edge.ok()) << edge.status().message();
  EXPECT_EQ((*edge)->per_gpu, ledger::kMaxBytesPerGpu);
}

// Hostile annotations (issue 11): each is an error with a reason, never an
// exception (std::stoll threw std::out_of_range on the 19-digit value and
// aborted the reconcile thread).
struct BadAnnotations {
  const char* name;
  std::map<std::string, std::string> annotations;
  const char* reason_part;
};

class AnnotationRejects : public ::testing::TestWithParam<BadAnnotations> {};

TEST_P(AnnotationRejects, WithAReason) {
  Result<std::optional<AnnotatedGpus>> r = GpusFromAnnotations(GetParam().annotations);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(GetParam().reason_part), std::string::npos) << r.status().message();
}

std::map<std::string, std::string> A(const std::string& gpus, const std::string& bytes) {
  return {{"vramd.io/gpus", gpus}, {"vramd.io/vram-per-gpu", bytes}};
}

INSTANTIATE_TEST_SUITE_P(
    Plan, AnnotationRejects,
    ::testing::Values(
        BadAnnotations{"BytesPastInt64", A("0", "9999999999999999999"),
                       "vramd.io/vram-per-gpu=\"9999999999999999999\""},
        BadAnnotations{"BytesFarPastInt64", A("0", std::string(400, '9')), "is not a whole number of bytes"},
        BadAnnotations{"BytesUint64Max", A("0", "18446744073709551615"), "vramd.io/vram-per-gpu"},
        BadAnnotations{"BytesTwoToThe60", A("0", std::to_string(int64_t{1} << 60)), "from 1 to"},
        BadAnnotations{"BytesJustAboveBound", A("0", std::to_string(ledger::kMaxBytesPerGpu + 1)), "(1Pi)"},
        BadAnnotations{"BytesZero", A("0", "0"), "from 1 to"},
        BadAnnotations{"BytesNegative", A("0", "-1"), "vramd.io/vram-per-gpu"},
        BadAnnotations{"BytesPlus", A("0", "+1"), "vramd.io/vram-per-gpu"},
        BadAnnotations{"BytesQuantity", A("0", "1Gi"), "vramd.io/vram-per-gpu"},
        BadAnnotations{"BytesFloat", A("0", "1e9"), "vramd.io/vram-per-gpu"},
        BadAnnotations{"BytesWhitespace", A("0", " 1024"), "vramd.io/vram-per-gpu"},
        BadAnnotations{"BytesTrailingSpace", A("0", "1024 "), "vramd.io/vram-per-gpu"},
        BadAnnotations{"BytesEmpty", A("0", ""), "vramd.io/vram-per-gpu"},
        BadAnnotations{"BytesText", A("0", "lots"), "vramd.io/vram-per-gpu"},
        BadAnnotations{"GpusEmpty", A("", "1024"), "is empty"},
        BadAnnotations{"GpusText", A("a", "1024"), "item \"a\""},
        BadAnnotations{"GpusEmptyItem", A("0,,1", "1024"), "item \"\""},
        BadAnnotations{"GpusTrailingComma", A("0,", "1024"), "item \"\""},
        BadAnnotations{"GpusDuplicate", A("1,1", "1024"), "names GPU 1 twice"},
        BadAnnotations{"GpusDuplicateLeadingZero", A("1,01", "1024"), "names GPU 1 twice"},
        BadAnnotations{"GpusNegative", A("-1", "1024"), "item \"-1\""},
        BadAnnotations{"GpusHugeIndex", A("4097", "1024"), "0..4096"},
        BadAnnotations{"GpusIndexPastInt64", A("99999999999999999999", "1024"), "vramd.io/gpus"},
        BadAnnotations{"GpusWhitespace", A("0, 1", "1024"), "item \" 1\""},
        BadAnnotations{"GpusSemicolon", A("0;1", "1024"), "vramd.io/gpus"},
        BadAnnotations{"GpusTooMany", A([] {
                                          std::string s = "0";
                                          for (int i = 1; i <= 64; ++i) s += "," + std::to_string(i);
                                          return s;
                                        }(),
                                        "1024"),
                       "more than 64 GPUs"},
        BadAnnotations{"OnlyGpus", {{"vramd.io/gpus", "0"}}, "vramd.io/gpus is set without vramd.io/vram-per-gpu"},
        BadAnnotations{"OnlyBytes", {{"vramd.io/vram-per-gpu", "1024"}},
                       "vramd.io/vram-per-gpu is set without vramd.io/gpus"}),
    [](const auto& info) { return info.param.name; });

// Hostile bound pods in a plan: every one is reported with its reason, none
// stops the pass, and the good pods beside them are planned as usual.
struct HostilePod {
  const char* name;
  kube::PodInfo pod;
  const char* reason_part;
  const char* want_action;  // the pod's action, "" for none
};

kube::PodInfo WithAnnotations(kube::PodInfo p, std::map<std::string, std::string> ann) {
  for (auto& [k, v] : ann) p.annotations[k] = v;
  return p;
}

kube::PodInfo WithSpec(kube::PodInfo p, const char* gpu_count, const char* peak) {
  if (gpu_count) p.spec.gpu_count = gpu_count;
  if (peak) p.spec.vram_peak = peak;
  return p;
}

class PlanHostile : public ::testing::TestWithParam<HostilePod> {};

TEST_P(PlanHostile, IsReportedAndTheRestIsPlanned) {
  const HostilePod& c = GetParam();
  ledger::Snapshot s = Snap({E("held", {0}, 8 * kGi, EntryState::kBound, 1000)});
  std::vector<kube::PodInfo> pods = {P("held", "n1", "8Gi"), c.pod, P("good", "n2", "4Gi")};
  PlanResult r;
  ASSERT_NO_THROW(r = Plan(s, pods, {}, PlanOptions{kNow, kGrace}));
  ASSERT_EQ(r.malformed.size(), 1u);
  const MalformedPod& m = r.malformed[0];
  EXPECT_EQ(m.uid, c.pod.uid);
  EXPECT_EQ(m.ns, "default");
  EXPECT_EQ(m.name, c.pod.name);
  EXPECT_EQ(m.node, "n1");
  EXPECT_NE(m.reason.find(c.reason_part), std::string::npos) << m.reason;
  std::vector<std::string> got;
  for (const Action& a : r.actions) got.push_back(Describe(a));
  std::vector<std::string> want;
  if (*c.want_action) want.push_back(c.want_action);
  want.push_back("readd n2 good gpus=0 per_gpu=4Gi");
  EXPECT_EQ(got, want);
  // Nothing planned claims more than one GPU may have.
  for (const Action& a : r.actions) EXPECT_LE(a.entry.per_gpu, ledger::kMaxBytesPerGpu);
}

INSTANTIATE_TEST_SUITE_P(
    Plan, PlanHostile,
    ::testing::Values(
        // Malformed placement annotations, valid request: re-added from the request.
        HostilePod{"PerGpuPastInt64", WithAnnotations(P("h", "n1", "8Gi"), A("0", "9999999999999999999")),
                   "accounts the pod by its request (8Gi on each of 1 GPU(s)", "readd n1 h gpus=1 per_gpu=8Gi"},
        HostilePod{"PerGpuTwoToThe60", WithAnnotations(P("h", "n1", "8Gi"), A("0", "1152921504606846976")),
                   "from 1 to", "readd n1 h gpus=1 per_gpu=8Gi"},
        HostilePod{"PerGpuZero", WithAnnotations(P("h", "n1", "8Gi"), A("0", "0")), "from 1 to",
                   "readd n1 h gpus=1 per_gpu=8Gi"},
        HostilePod{"PerGpuNegative", WithAnnotations(P("h", "n1", "8Gi"), A("0", "-8589934592")),
                   "vramd.io/vram-per-gpu", "readd n1 h gpus=1 per_gpu=8Gi"},
        HostilePod{"GpusDuplicate", WithAnnotations(P("h", "n1", "8Gi"), A("0,0", "8589934592")), "twice",
                   "readd n1 h gpus=1 per_gpu=8Gi"},
        HostilePod{"GpusHugeIndex", WithAnnotations(P("h", "n1", "8Gi"), A("99999", "8589934592")), "0..4096",
                   "readd n1 h gpus=1 per_gpu=8Gi"},
        HostilePod{"GpusEmpty", WithAnnotations(P("h", "n1", "8Gi"), A("", "8589934592")), "is empty",
                   "readd n1 h gpus=1 per_gpu=8Gi"},
        HostilePod{"GpusText", WithAnnotations(P("h", "n1", "8Gi"), A("all", "8589934592")), "vramd.io/gpus",
                   "readd n1 h gpus=1 per_gpu=8Gi"},
        // Invalid request: reported, not re-added.
        HostilePod{"AbsurdGpuCount", WithSpec(P("h", "n1", "8Gi"), "99999999999999", nullptr), "vramd.io/gpu-count",
                   ""},
        HostilePod{"GpuCountZero", WithSpec(P("h", "n1", "8Gi"), "0", nullptr), "from 1 to 64", ""},
        HostilePod{"GpuCountText", WithSpec(P("h", "n1", "8Gi"), "two", nullptr), "vramd.io/gpu-count", ""},
        HostilePod{"PeakBelowRequest", WithSpec(P("h", "n1", "8Gi"), nullptr, "1Gi"), "vramd.io/vram-peak", ""},
        HostilePod{"PeakPastInt64", WithSpec(P("h", "n1", "8Gi"), nullptr, "9999999999999999999"),
                   "vramd.io/vram-peak", ""},
        HostilePod{"RequestPastInt64", P("h", "n1", "9999999999999999999"), "invalid VRAM request", ""},
        HostilePod{"RequestNegative", P("h", "n1", "-5Gi"), "negative", ""},
        HostilePod{"RequestText", P("h", "n1", "lots"), "invalid VRAM request", ""},
        HostilePod{"RequestAbovePerGpuBound", P("h", "n1", "2Pi"), "more than the 1Pi one GPU may have", ""},
        HostilePod{"PeakAbovePerGpuBound", WithSpec(P("h", "n1", "8Gi"), nullptr, "4Ei"), "more than the 1Pi", ""}),
    [](const auto& info) { return info.param.name; });

TEST(Plan, HeldPodWithBadAnnotationsKeepsItsEntry) {
  ledger::Snapshot s = Snap({E("a", {1}, 8 * kGi, EntryState::kBound, 1000)});
  PlanResult r = Plan(s, {WithAnnotations(P("a", "n1", "8Gi"), A("0", "9999999999999999999"))}, {},
                      PlanOptions{kNow, kGrace});
  EXPECT_TRUE(r.actions.empty());
  ASSERT_EQ(r.malformed.size(), 1u);
}

TEST(Plan, TerminalAndUnboundPodsAreNotReported) {
  kube::PodInfo done = WithAnnotations(P("a", "n1", "8Gi", "Succeeded"), A("0", "x"));
  kube::PodInfo pending = WithSpec(P("b", "", "8Gi", "Pending"), "0", nullptr);
  PlanResult r = Plan(Snap({}), {done, pending}, {}, PlanOptions{kNow, kGrace});
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_TRUE(r.actions.empty());
}

TEST(Plan, ReasonIsTheSameEveryPass) {
  // The reconciler posts one Event per pod UID and reason: a reason that
  // changed once the orphan was re-added would post a second one.
  kube::PodInfo p = WithAnnotations(P("a", "n1", "8Gi"), A("0", "9999999999999999999"));
  PlanResult first = Plan(Snap({}), {p}, {}, PlanOptions{kNow, kGrace});
  ASSERT_EQ(first.actions.size(), 1u);
  PlanResult second = Plan(Snap({first.actions[0].entry}), {p}, {}, PlanOptions{kNow, kGrace});
  EXPECT_TRUE(second.actions.empty());
  EXPECT_EQ(first.malformed, second.malformed);
}

// BindAccounted (a watch event that is only a bind asks for no pass): true
// only where a pass would do nothing for the pod.
struct AccountedCase {
  const char* name;
  CaseSnapshot snap;
  kube::PodInfo pod;
  bool accounted;
};

TEST(Plan, BindAccountedOnlyWhereAPassWouldDoNothing) {
  const kube::PodInfo bound = Annotated(P("a", "n1", "8Gi", "Pending"), "1", 8 * kGi);
  ledger::Snapshot unsealed = Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)});
  unsealed.sealed = false;
  ledger::Snapshot hold_elsewhere = Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)});
  hold_elsewhere.nodes["n2"].entries.push_back(H("a", 60'000));
  kube::PodInfo two = Annotated(P("a", "n1", "8Gi", "Pending"), "1,0", 4 * kGi);  // 8Gi over two GPUs
  two.spec.gpu_count = "2";
  const AccountedCase cases[] = {
      {"vramd's bind: its reservation on the node", Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)}), bound,
       true},
      {"vramd's bind, the entry already marked bound", Snap({E("a", {1}, 8 * kGi, EntryState::kBound, 10)}), bound,
       true},
      {"two GPUs, annotations in another order", Snap({E("a", {0, 1}, 4 * kGi, EntryState::kReserved, 10)}), two,
       true},
      {"no entry (bound past vramd: an orphan)", Snap({}), bound, false},
      {"the entry is on another node",
       [] {
         ledger::Snapshot s = Snap({});
         s.nodes["n2"].entries.push_back(E("a", {0}, 8 * kGi, EntryState::kReserved, 10));
         return s;
       }(),
       bound, false},
      {"annotations name other GPUs than the entry", Snap({E("a", {0}, 8 * kGi, EntryState::kReserved, 10)}), bound,
       false},
      {"annotations claim other bytes", Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)}),
       Annotated(P("a", "n1", "8Gi", "Pending"), "1", 4 * kGi), false},
      {"the entry holds other bytes than the request", Snap({E("a", {1}, 4 * kGi, EntryState::kBound, 10)}),
       Annotated(P("a", "n1", "8Gi", "Pending"), "1", 4 * kGi), false},
      {"no placement annotations", Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)}),
       P("a", "n1", "8Gi", "Pending"), false},
      {"malformed placement annotations", Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)}),
       Annotated(P("a", "n1", "8Gi", "Pending"), "1,x", 8 * kGi), false},
      {"the entry is terminating", Snap({E("a", {1}, 8 * kGi, EntryState::kTerminating, 10)}), bound, false},
      {"only a hold for it on its node", Snap({H("a", 60'000)}), bound, false},
      {"a hold for it left on another node", std::move(hold_elsewhere), bound, false},
      {"the ledger is being rebuilt", std::move(unsealed), bound, false},
      {"the pod is being deleted", Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)}),
       Annotated(P("a", "n1", "8Gi", "Pending", /*deleting=*/true), "1", 8 * kGi), false},
      {"the pod ended", Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)}),
       Annotated(P("a", "n1", "8Gi", "Failed"), "1", 8 * kGi), false},
      {"an invalid request", Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)}),
       Annotated(P("a", "n1", "lots", "Pending"), "1", 8 * kGi), false},
      {"unbound", Snap({E("a", {1}, 8 * kGi, EntryState::kReserved, 10)}),
       Annotated(P("a", "", "8Gi", "Pending"), "1", 8 * kGi), false},
  };
  for (const AccountedCase& c : cases) {
    EXPECT_EQ(BindAccounted(c.snap.value, c.pod), c.accounted) << c.name;
    // Where it is accounted, a pass would find nothing to do for the pod
    // (a reservation's bind is still in flight when its event arrives).
    PlanResult r = Plan(c.snap.value, {c.pod}, {c.pod.uid}, PlanOptions{kNow, kGrace});
    const bool pass_acts = !r.actions.empty() || !r.malformed.empty();
    if (c.accounted) EXPECT_FALSE(pass_acts) << c.name << ": accounted, yet a pass acts";
  }
}

}  // namespace
}  // namespace vramd::reconcile
