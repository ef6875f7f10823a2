// Issue 16's pure core, the queue half (ledger/queues.h): validation of the
// VramQueue objects, what each queue holds, fair shares (the Run:ai guide's
// two examples as written, shared/background/runai-scheduler.txt) and queue
// admission. Tables of named cases, then properties over seeded random
// queue sets.
#include "vramd/ledger/queues.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "vramd/ledger/quantity.h"

namespace vramd::ledger {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

// ---- Builders ---------------------------------------------------------------

QueueSpec Q(std::string name, int64_t deserved, int64_t weight = 1) {
  QueueSpec s;
  s.name = std::move(name);
  s.uid = "uid-" + s.name;
  s.deserved = deserved;
  s.weight = weight;
  return s;
}
QueueSpec Limit(QueueSpec s, int64_t limit) {
  s.limit = limit;
  return s;
}
QueueSpec Under(QueueSpec s, std::string parent) {
  s.parent = std::move(parent);
  return s;
}
QueueSpec Ns(QueueSpec s, std::vector<std::string> namespaces) {
  s.namespaces = std::move(namespaces);
  return s;
}
QueueSpec Created(QueueSpec s, int64_t ms) {
  s.created_ms = ms;
  return s;
}
QueueSpec Broken(QueueSpec s, std::string error) {
  s.decode_error = std::move(error);
  return s;
}
// A queue serving the namespace of its own name.
QueueSpec Team(std::string name, int64_t deserved, int64_t weight = 1) {
  QueueSpec s = Q(name, deserved, weight);
  s.namespaces = {std::move(name)};
  return s;
}

const TenancyPolicy kPolicy{};

// Leaf figures by queue name; parents get their children's sums (as
// QueueUsageOf adds them up).
struct Use {
  int64_t allocated = 0;
  int64_t pending = 0;
  int64_t nonpreemptible = 0;
};
using Uses = std::map<std::string, Use>;

std::vector<QueueUsage> UsageFor(const QueueSet& set, const Uses& uses) {
  std::vector<QueueUsage> u(set.queues.size());
  for (const auto& [name, use] : uses) {
    const int i = set.Find(name);
    EXPECT_GE(i, 0) << name;
    if (i < 0) continue;
    u[static_cast<size_t>(i)] = QueueUsage{use.allocated, use.nonpreemptible, use.pending};
  }
  for (size_t i = 0; i < set.queues.size(); ++i) {
    const int p = set.queues[i].parent;
    if (p < 0) continue;
    u[static_cast<size_t>(p)].allocated += u[i].allocated;
    u[static_cast<size_t>(p)].allocated_nonpreemptible += u[i].allocated_nonpreemptible;
    u[static_cast<size_t>(p)].pending += u[i].pending;
  }
  return u;
}

// Demand far above any capacity in these tables.
Use Hungry() { return Use{0, 1024 * kGi}; }

// ---- Fair shares --------------------------------------------------------------

struct ShareCase {
  const char* name;
  std::vector<QueueSpec> queues;
  Uses uses;
  int64_t capacity;
  std::map<std::string, int64_t> want;  // every other queue: 0
};

const std::vector<ShareCase>& ShareCases() {
  static const std::vector<ShareCase> cases = {
      // The guide's worked example: 36 GPUs in node pool A, P1 deserved 10
      // weight 2, P2 deserved 6 weight 3, P3 deserved 0 weight 1, 20 unused:
      // P2 = 6 + 20 * 3/6 = 16, P3 = 0 + 20/6, P1 = 10 + 20 * 2/6. In bytes
      // 20Gi/6 and 40Gi/6 have fractions: the byte left over goes to P1 (the
      // largest weight with a fraction); P2's part is exact.
      {"GuideWorkedExample",
       {Team("p1", 10 * kGi, 2), Team("p2", 6 * kGi, 3), Team("p3", 0, 1)},
       {{"p1", Hungry()}, {"p2", Hungry()}, {"p3", Hungry()}},
       36 * kGi,
       {{"p1", 10 * kGi + 20 * kGi * 2 / 6 + 1}, {"p2", 16 * kGi}, {"p3", 20 * kGi / 6}}},
      // The guide's second example: 20 GPUs, two queues deserving 5 each with
      // equal weight; Q2 asks for 5 and gets 5, Q1 asks for 15 and gets 15.
      {"GuideSecondExample",
       {Team("q1", 5 * kGi), Team("q2", 5 * kGi)},
       {{"q1", Use{10 * kGi, 5 * kGi}}, {"q2", Use{5 * kGi, 0}}},
       20 * kGi,
       {{"q1", 15 * kGi}, {"q2", 5 * kGi}}},
      {"EqualWeightsSplitTheRestEqually",
       {Team("a", 4 * kGi), Team("b", 4 * kGi)},
       {{"a", Hungry()}, {"b", Hungry()}},
       20 * kGi,
       {{"a", 10 * kGi}, {"b", 10 * kGi}}},
      {"ZeroWeightGetsItsDeservedButNoOverQuota",
       {Team("a", 10 * kGi, 0), Team("b", 5 * kGi, 1)},
       {{"a", Hungry()}, {"b", Hungry()}},
       30 * kGi,
       {{"a", 10 * kGi}, {"b", 20 * kGi}}},
      {"AllWeightsZeroLeaveTheRestUnshared",
       {Team("a", 10 * kGi, 0), Team("b", 5 * kGi, 0)},
       {{"a", Hungry()}, {"b", Hungry()}},
       30 * kGi,
       {{"a", 10 * kGi}, {"b", 5 * kGi}}},
      {"QueueWithNoDemandGetsNothingNotEvenItsDeserved",
       {Team("idle", 10 * kGi), Team("busy", 5 * kGi)},
       {{"busy", Hungry()}},
       30 * kGi,
       {{"idle", 0}, {"busy", 30 * kGi}}},
      {"DeservedIsCappedByDemand",
       {Team("small", 20 * kGi), Team("big", 0)},
       {{"small", Use{6 * kGi, 2 * kGi}}, {"big", Hungry()}},
       40 * kGi,
       {{"small", 8 * kGi}, {"big", 32 * kGi}}},
      {"NobodyWantsTheRest_ItStaysUnshared",
       {Team("a", 10 * kGi), Team("b", 10 * kGi)},
       {{"a", Use{3 * kGi, 0}}, {"b", Use{12 * kGi, 0}}},
       100 * kGi,
       {{"a", 3 * kGi}, {"b", 12 * kGi}}},
      {"MoreQuotaThanTheCluster_ScaledInProportion",
       {Team("a", 30 * kGi), Team("b", 15 * kGi)},
       {{"a", Hungry()}, {"b", Hungry()}},
       30 * kGi,
       {{"a", 20 * kGi}, {"b", 10 * kGi}}},
      // (10Gi + 1) / 3 has a fraction for each: the two bytes left over go
      // to the largest weight first, then by name.
      {"MoreQuotaThanTheCluster_RemainderByWeightThenName",
       {Team("a", 10 * kGi, 1), Team("b", 10 * kGi, 1), Team("c", 10 * kGi, 5)},
       {{"a", Hungry()}, {"b", Hungry()}, {"c", Hungry()}},
       10 * kGi + 1,
       {{"a", (10 * kGi + 1) / 3 + 1}, {"b", (10 * kGi + 1) / 3}, {"c", (10 * kGi + 1) / 3 + 1}}},
      {"MoreQuotaThanTheCluster_ScalesOnlyWhatIsDemanded",
       {Team("a", 30 * kGi), Team("b", 30 * kGi)},
       {{"a", Use{10 * kGi, 0}}, {"b", Hungry()}},
       20 * kGi,
       {{"a", 5 * kGi}, {"b", 15 * kGi}}},
      {"LimitCapsTheShare",
       {Limit(Team("a", 5 * kGi), 10 * kGi), Team("b", 5 * kGi)},
       {{"a", Hungry()}, {"b", Hungry()}},
       40 * kGi,
       {{"a", 10 * kGi}, {"b", 30 * kGi}}},
      {"LimitCapsTheDeservedPartToo",
       {Limit(Team("a", 8 * kGi), 8 * kGi), Team("b", 0)},
       {{"a", Use{6 * kGi, 4 * kGi}}, {"b", Hungry()}},
       10 * kGi,
       {{"a", 8 * kGi}, {"b", 2 * kGi}}},
      {"WaterFillingRefillsWhatASatisfiedQueueLeaves",
       {Team("a", 0, 1), Team("b", 0, 1), Team("c", 0, 2)},
       {{"a", Use{2 * kGi, 0}}, {"b", Hungry()}, {"c", Hungry()}},
       32 * kGi,
       {{"a", 2 * kGi}, {"b", 10 * kGi}, {"c", 20 * kGi}}},
      {"EmptyCluster",
       {Team("a", 10 * kGi)},
       {{"a", Hungry()}},
       0,
       {{"a", 0}}},
      {"DefaultQueueSharesLikeAnyOther",
       {Team("a", 10 * kGi)},
       {{"a", Hungry()}, {"default", Hungry()}},
       30 * kGi,
       {{"a", 20 * kGi}, {"default", 10 * kGi}}},
      {"InvalidQueueGetsNothing",
       {Limit(Team("bad", 40 * kGi), 32 * kGi), Team("good", 10 * kGi)},
       {{"good", Hungry()}},
       30 * kGi,
       {{"bad", 0}, {"good", 30 * kGi}}},
      // 100Gi: dept d1 (40) has t1 (20, w1) and t2 (10, w3); dept d2 (40)
      // has t3 (40), which wants 10. d2 gets its 10, d1 the other 90; in d1
      // t2 is filled to its demand 50 and t1 gets the remaining 40.
      {"ParentsThenChildren",
       {Q("d1", 40 * kGi), Q("d2", 40 * kGi), Under(Team("t1", 20 * kGi, 1), "d1"),
        Under(Team("t2", 10 * kGi, 3), "d1"), Under(Team("t3", 40 * kGi), "d2")},
       {{"t1", Use{0, 50 * kGi}}, {"t2", Use{0, 50 * kGi}}, {"t3", Use{10 * kGi, 0}}},
       100 * kGi,
       {{"d1", 90 * kGi}, {"d2", 10 * kGi}, {"t1", 40 * kGi}, {"t2", 50 * kGi}, {"t3", 10 * kGi}}},
      {"ParentWeightsDecideBetweenDepartments",
       {Q("d1", 0, 1), Q("d2", 0, 3), Under(Team("t1", 0), "d1"), Under(Team("t2", 0), "d2"),
        Under(Team("t3", 0), "d2")},
       {{"t1", Hungry()}, {"t2", Hungry()}, {"t3", Hungry()}},
       40 * kGi,
       {{"d1", 10 * kGi}, {"d2", 30 * kGi}, {"t1", 10 * kGi}, {"t2", 15 * kGi}, {"t3", 15 * kGi}}},
      {"ChildrenOverbookTheirParent_ScaledWithinIt",
       {Q("d", 10 * kGi), Under(Team("t1", 10 * kGi), "d"), Under(Team("t2", 10 * kGi), "d")},
       {{"t1", Hungry()}, {"t2", Hungry()}},
       10 * kGi,
       {{"d", 10 * kGi}, {"t1", 5 * kGi}, {"t2", 5 * kGi}}},
      {"ParentLimitCapsTheDepartment",
       {Limit(Q("d1", 0), 12 * kGi), Q("d2", 0), Under(Team("t1", 0), "d1"), Under(Team("t2", 0), "d2")},
       {{"t1", Hungry()}, {"t2", Hungry()}},
       40 * kGi,
       {{"d1", 12 * kGi}, {"d2", 28 * kGi}, {"t1", 12 * kGi}, {"t2", 28 * kGi}}},
      // d1's only child may use 20 at most: d1's demand is 20, not 100, so
      // the rest goes to d2 rather than sitting unused in d1.
      {"ChildLimitsCapTheParentsDemand",
       {Q("d1", 10 * kGi), Q("d2", 10 * kGi), Under(Limit(Team("t1", 5 * kGi), 20 * kGi), "d1"),
        Under(Team("t2", 5 * kGi), "d2")},
       {{"t1", Hungry()}, {"t2", Hungry()}},
       100 * kGi,
       {{"d1", 20 * kGi}, {"d2", 80 * kGi}, {"t1", 20 * kGi}, {"t2", 80 * kGi}}},
      // t1 has weight 0: it can take 5 of d1's share, never more, so d1's
      // demand is 5 and d2 gets the rest.
      {"AWeightZeroChildDoesNotInflateItsParent",
       {Q("d1", 10 * kGi), Q("d2", 10 * kGi), Under(Team("t1", 5 * kGi, 0), "d1"), Under(Team("t2", 5 * kGi), "d2")},
       {{"t1", Hungry()}, {"t2", Hungry()}},
       100 * kGi,
       {{"d1", 5 * kGi}, {"d2", 95 * kGi}, {"t1", 5 * kGi}, {"t2", 95 * kGi}}},
  };
  return cases;
}

TEST(FairShares, Table) {
  for (const ShareCase& c : ShareCases()) {
    SCOPED_TRACE(c.name);
    const QueueSet set = BuildQueueSet(c.queues, kPolicy);
    const std::vector<QueueUsage> usage = UsageFor(set, c.uses);
    const std::vector<int64_t> got = FairShares(set, usage, c.capacity);
    ASSERT_EQ(got.size(), set.queues.size());
    int64_t top = 0;
    for (size_t i = 0; i < set.queues.size(); ++i) {
      const std::string& name = set.queues[i].spec.name;
      auto it = c.want.find(name);
      EXPECT_EQ(got[i], it != c.want.end() ? it->second : 0)
          << name << ": " << FormatBytes(got[i]) << " (" << got[i] << " bytes)";
      if (set.queues[i].valid && set.queues[i].parent < 0) top += got[i];
    }
    EXPECT_LE(top, c.capacity);
  }
}

TEST(FairShares, GuideWorkedExampleInWholeUnits) {
  // The guide counts whole GPUs: P3 gets 3, P1 6 over its 10, P2 10 over its 6;
  // the whole 36 is shared.
  const QueueSet set = BuildQueueSet({Team("p1", 10 * kGi, 2), Team("p2", 6 * kGi, 3), Team("p3", 0, 1)}, kPolicy);
  const std::vector<int64_t> got =
      FairShares(set, UsageFor(set, {{"p1", Hungry()}, {"p2", Hungry()}, {"p3", Hungry()}}), 36 * kGi);
  EXPECT_EQ(got[static_cast<size_t>(set.Find("p1"))] / kGi, 16);
  EXPECT_EQ(got[static_cast<size_t>(set.Find("p2"))] / kGi, 16);
  EXPECT_EQ(got[static_cast<size_t>(set.Find("p3"))] / kGi, 3);
  EXPECT_EQ(std::accumulate(got.begin(), got.end(), int64_t{0}), 36 * kGi);
}

TEST(FairShares, ToleratesUsageOfTheWrongSize) {
  const QueueSet set = BuildQueueSet({Team("a", 10 * kGi)}, kPolicy);
  const std::vector<int64_t> got = FairShares(set, {}, 30 * kGi);
  EXPECT_EQ(got, std::vector<int64_t>(set.queues.size(), 0));
}

TEST(FairShares, HugeFiguresDoNotOverflow) {
  const int64_t half = kMaxQueueBytes / 2;
  const QueueSet set =
      BuildQueueSet({Team("a", half, kMaxQueueWeight), Team("b", half, kMaxQueueWeight), Team("c", 0, 1)}, kPolicy);
  const int64_t huge = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> got =
      FairShares(set, UsageFor(set, {{"a", Use{huge, huge}}, {"b", Use{huge, 0}}, {"c", Use{0, huge}}}), huge);
  const int64_t a = got[static_cast<size_t>(set.Find("a"))], b = got[static_cast<size_t>(set.Find("b"))],
                c = got[static_cast<size_t>(set.Find("c"))];
  EXPECT_GT(a, half);
  EXPECT_GE(a, b);  // equal but for a remainder byte, which goes to a first by name
  EXPECT_LE(a - b, 1);
  EXPECT_GT(c, 0);
  EXPECT_LT(c, a - half);
  EXPECT_EQ(static_cast<__int128>(a) + b + c, static_cast<__int128>(huge));  // all of it, no overflow
  // More quota than even that: in proportion.
  const QueueSet over = BuildQueueSet({Team("a", kMaxQueueBytes), Team("b", kMaxQueueBytes)}, kPolicy);
  const std::vector<int64_t> got2 = FairShares(over, UsageFor(over, {{"a", Use{huge}}, {"b", Use{huge}}}), huge);
  EXPECT_EQ(got2[static_cast<size_t>(over.Find("a"))], huge / 2 + 1);
  EXPECT_EQ(got2[static_cast<size_t>(over.Find("b"))], huge / 2);
}

// ---- Validation -------------------------------------------------------------------

struct ValidCase {
  const char* name;
  std::vector<QueueSpec> queues;
  std::map<std::string, std::string> reasons;   // queue -> reason; every other: "Valid"
  std::map<std::string, std::string> serves;    // namespace -> queue ("" = the default queue)
  std::map<std::string, std::string> messages;  // queue -> exact message
};

const std::vector<ValidCase>& ValidCases() {
  static const std::vector<ValidCase> cases = {
      {"AllValid",
       {Q("dept", 40 * kGi), Under(Team("a", 20 * kGi), "dept"), Under(Limit(Team("b", 20 * kGi), 30 * kGi), "dept"),
        Team("solo", 8 * kGi)},
       {},
       {{"a", "a"}, {"b", "b"}, {"solo", "solo"}, {"other", ""}},
       {}},
      {"DecodeErrorIsInvalid_TheRestWork",
       {Broken(Team("bad", 0), "spec.deserved: \"lots\" is not a quantity"), Team("good", 8 * kGi)},
       {{"bad", "Invalid"}},
       {{"bad", ""}, {"good", "good"}},
       {{"bad", "queue bad: spec.deserved: \"lots\" is not a quantity"}}},
      {"DeservedAboveLimit",
       {Limit(Team("a", 40 * kGi), 32 * kGi)},
       {{"a", "Invalid"}},
       {{"a", ""}},
       {{"a", "queue a: deserved 40Gi is above its limit 32Gi"}}},
      {"OutOfRangeFigures",
       {Team("neg", -1), Limit(Team("huge", 0), kMaxQueueBytes + 1), Team("heavy", 0, kMaxQueueWeight + 1),
        Team("light", 0, -1), Ns(Q("blank", 0), {"x", ""})},
       {{"neg", "Invalid"}, {"huge", "Invalid"}, {"heavy", "Invalid"}, {"light", "Invalid"}, {"blank", "Invalid"}},
       {{"x", ""}},
       {{"neg", "queue neg: deserved -1 bytes is out of range (0 to 4Ei)"},
        {"huge", "queue huge: limit 4611686018427387905 bytes is out of range (0 to 4Ei)"},
        {"heavy", "queue heavy: overQuotaWeight 1000001 is out of range (0 to 1000000)"},
        {"light", "queue light: overQuotaWeight -1 is out of range (0 to 1000000)"},
        {"blank", "queue blank: names an empty namespace"}}},
      {"ParentNotFound",
       {Under(Team("a", 0), "nowhere"), Team("b", 0)},
       {{"a", "ParentNotFound"}},
       {{"a", ""}, {"b", "b"}},
       {{"a", "queue a: parent nowhere does not exist"}}},
      {"TheSyntheticDefaultQueueIsNoParent",
       {Under(Team("a", 0), "default")},
       {{"a", "ParentNotFound"}},
       {{"a", ""}},
       {{"a", "queue a: parent default is the default queue vramd made (no VramQueue object of that name); it "
              "cannot have children"}}},
      {"OwnParentIsACycle",
       {Under(Team("a", 0), "a")},
       {{"a", "Cycle"}},
       {{"a", ""}},
       {{"a", "queue a: it names itself as its parent"}}},
      {"Cycle_TheRestStillWork",
       {Under(Q("x", 10 * kGi), "y"), Under(Q("y", 10 * kGi), "x"), Under(Team("c", 0), "x"), Team("d", 5 * kGi)},
       {{"x", "Cycle"}, {"y", "Cycle"}, {"c", "ParentInvalid"}},
       {{"c", ""}, {"d", "d"}},
       {{"x", "queue x: its parents form a cycle: x -> y -> x"},
        {"y", "queue y: its parents form a cycle: y -> x -> y"},
        {"c", "queue c: parent x is invalid (Cycle)"}}},
      {"ThreeLevelsAreTooDeep",
       {Q("org", 100 * kGi), Under(Q("dept", 50 * kGi), "org"), Under(Team("team", 10 * kGi), "dept")},
       {{"team", "TooDeep"}},
       {{"team", ""}},
       {{"team", "queue team: parent dept has a parent itself (org); queues have two levels (department -> project)"}}},
      {"ParentInvalid",
       {Limit(Q("dept", 40 * kGi), 10 * kGi), Under(Team("a", 5 * kGi), "dept")},
       {{"dept", "Invalid"}, {"a", "ParentInvalid"}},
       {{"a", ""}},
       {{"a", "queue a: parent dept is invalid (Invalid)"}}},
      {"ChildDeservedExceedsParent_SiblingStillWorks",
       {Q("dept", 16 * kGi), Under(Team("big", 20 * kGi), "dept"), Under(Team("ok", 16 * kGi), "dept")},
       {{"big", "ExceedsParent"}},
       {{"big", ""}, {"ok", "ok"}},
       {{"big", "queue big: deserved 20Gi is above the deserved 16Gi of its parent dept"}}},
      {"ChildLimitExceedsParent",
       {Limit(Q("dept", 16 * kGi), 32 * kGi), Under(Limit(Team("a", 8 * kGi), 40 * kGi), "dept"),
        Under(Team("nolimit", 8 * kGi), "dept")},
       {{"a", "ExceedsParent"}},
       {{"a", ""}, {"nolimit", "nolimit"}},
       {{"a", "queue a: limit 40Gi is above the limit 32Gi of its parent dept"}}},
      {"ChildrenMayTogetherDeserveMoreThanTheirParent",
       {Q("dept", 16 * kGi), Under(Team("a", 16 * kGi), "dept"), Under(Team("b", 16 * kGi), "dept")},
       {},
       {{"a", "a"}, {"b", "b"}},
       {}},
      {"NamespaceInTwoQueues_OlderKeepsIt_TheRestStillWork",
       {Created(Ns(Q("new", 0), {"ml", "web"}), 2000), Created(Ns(Q("old", 0), {"ml"}), 1000),
        Created(Ns(Q("other", 0), {"db"}), 3000)},
       {{"new", "NamespaceConflict"}},
       {{"ml", "old"}, {"web", ""}, {"db", "other"}},
       {{"new", "queue new: namespace ml is already served by queue old (created earlier); a namespace belongs to "
                "one queue"}}},
      {"NamespaceConflictOfTheSameAgeGoesByName",
       {Ns(Q("b", 0), {"ml", "cv"}), Ns(Q("a", 0), {"ml", "cv"})},
       {{"b", "NamespaceConflict"}},
       {{"ml", "a"}, {"cv", "a"}},
       {{"b", "queue b: namespaces ml, cv are already served by queue a (created at the same time, first by name); a "
              "namespace belongs to one queue"}}},
      {"AnInvalidQueueDoesNotHoldItsNamespaces",
       {Created(Limit(Ns(Q("old", 10 * kGi), {"ml"}), 0), 1), Created(Ns(Q("new", 0), {"ml"}), 2)},
       {{"old", "Invalid"}},
       {{"ml", "new"}},
       {}},
      {"ANamespaceRepeatedInOneQueueIsNoConflict",
       {Ns(Q("a", 0), {"ml", "ml"})},
       {},
       {{"ml", "a"}},
       {}},
      {"ParentServesNamespaces",
       {Ns(Q("dept", 20 * kGi), {"shared"}), Under(Team("a", 5 * kGi), "dept"), Team("solo", 0)},
       {{"dept", "ParentServesNamespaces"}, {"a", "ParentInvalid"}},
       {{"shared", ""}, {"a", ""}, {"solo", "solo"}},
       {{"dept", "queue dept: it has child queues (a) and names namespaces (shared); a parent serves namespaces only "
                 "through its children: move them to a child"},
        {"a", "queue a: parent dept is invalid (ParentServesNamespaces)"}}},
      {"RepeatedNameKeepsTheFirst",
       {Team("a", 5 * kGi), Ns(Q("a", 7 * kGi), {"other"})},
       {},
       {{"a", "a"}, {"other", ""}},
       {}},
  };
  return cases;
}

TEST(BuildQueueSet, Table) {
  for (const ValidCase& c : ValidCases()) {
    SCOPED_TRACE(c.name);
    const QueueSet set = BuildQueueSet(c.queues, kPolicy);
    for (const Queue& q : set.queues) {
      auto it = c.reasons.find(q.spec.name);
      const std::string want = it != c.reasons.end() ? it->second : "Valid";
      EXPECT_EQ(q.reason, want) << q.spec.name << ": " << q.message;
      EXPECT_EQ(q.valid, want == "Valid") << q.spec.name;
      if (!q.valid) {
        EXPECT_EQ(q.parent, -1) << q.spec.name;
        EXPECT_FALSE(q.message.empty()) << q.spec.name;
        EXPECT_NE(q.message.find(q.spec.name), std::string::npos) << q.message;
      }
      for (int child : q.children) {
        EXPECT_TRUE(set.queues[static_cast<size_t>(child)].valid);
        EXPECT_EQ(set.queues[static_cast<size_t>(child)].parent, &q - set.queues.data());
      }
    }
    for (const auto& [queue, message] : c.messages) {
      const int i = set.Find(queue);
      ASSERT_GE(i, 0) << queue;
      EXPECT_EQ(set.queues[static_cast<size_t>(i)].message, message);
    }
    for (const auto& [ns, queue] : c.serves) {
      const int got = set.QueueOf(ns);
      ASSERT_GE(got, 0) << ns;
      EXPECT_EQ(set.queues[static_cast<size_t>(got)].spec.name, queue.empty() ? "default" : queue) << ns;
    }
    // The map names valid leaf queues only.
    for (const auto& [ns, i] : set.by_namespace) {
      const Queue& q = set.queues[static_cast<size_t>(i)];
      EXPECT_TRUE(q.valid && q.children.empty()) << ns << " -> " << q.spec.name;
    }
  }
}

TEST(BuildQueueSet, SortedByNameWithTheSyntheticDefaultQueue) {
  const QueueSet set = BuildQueueSet({Team("zeta", 0), Team("alpha", 0)}, kPolicy);
  ASSERT_EQ(set.queues.size(), 3u);
  EXPECT_EQ(set.queues[0].spec.name, "alpha");
  EXPECT_EQ(set.queues[1].spec.name, "default");
  EXPECT_EQ(set.queues[2].spec.name, "zeta");
  EXPECT_EQ(set.objects, 2u);
  EXPECT_FALSE(set.empty());
  const Queue& d = set.queues[1];
  EXPECT_TRUE(d.synthetic);
  EXPECT_TRUE(d.unmanaged);
  EXPECT_TRUE(d.valid);
  EXPECT_EQ(d.spec.deserved, 0);
  EXPECT_FALSE(d.spec.limit.has_value());
  EXPECT_EQ(d.spec.weight, 1);
  EXPECT_EQ(set.default_queue, 1);
  EXPECT_EQ(set.QueueOf("anything"), 1);
}

TEST(BuildQueueSet, NoObjectsIsEmpty) {
  const QueueSet set = BuildQueueSet({}, kPolicy);
  EXPECT_TRUE(set.empty());
  ASSERT_EQ(set.queues.size(), 1u);
  EXPECT_TRUE(set.queues[0].synthetic);
}

TEST(BuildQueueSet, ADefaultQueueObjectIsManaged) {
  TenancyPolicy p;
  p.default_queue = "shared";
  const QueueSet set = BuildQueueSet({Limit(Q("shared", 4 * kGi), 8 * kGi), Team("a", 0)}, p);
  ASSERT_EQ(set.queues.size(), 2u);
  const int d = set.Find("shared");
  EXPECT_EQ(set.default_queue, d);
  EXPECT_FALSE(set.queues[static_cast<size_t>(d)].synthetic);
  EXPECT_FALSE(set.queues[static_cast<size_t>(d)].unmanaged);
  EXPECT_EQ(set.QueueOf("elsewhere"), d);
}

TEST(BuildQueueSet, AnInvalidOrParentDefaultQueueServesNothing) {
  const QueueSet invalid = BuildQueueSet({Limit(Q("default", 4 * kGi), 1 * kGi)}, kPolicy);
  EXPECT_EQ(invalid.default_queue, -1);
  EXPECT_EQ(invalid.QueueOf("elsewhere"), -1);
  const QueueSet parent = BuildQueueSet({Q("default", 4 * kGi), Under(Team("a", 1 * kGi), "default")}, kPolicy);
  EXPECT_EQ(parent.default_queue, -1);
  EXPECT_EQ(parent.QueueOf("elsewhere"), -1);
  EXPECT_EQ(parent.QueueOf("a"), parent.Find("a"));
}

TEST(BuildQueueSet, NoDefaultQueueConfigured) {
  TenancyPolicy p;
  p.default_queue = "";
  const QueueSet set = BuildQueueSet({Team("a", 0)}, p);
  EXPECT_EQ(set.queues.size(), 1u);
  EXPECT_EQ(set.default_queue, -1);
}

TEST(BuildQueueSet, ALongCycleIsFoundAndItsMessageStaysShort) {
  std::vector<QueueSpec> specs;
  for (int i = 0; i < 2000; ++i) specs.push_back(Under(Q("q" + std::to_string(i), 0), "q" + std::to_string((i + 1) % 2000)));
  const QueueSet set = BuildQueueSet(specs, kPolicy);
  for (const Queue& q : set.queues) {
    if (q.synthetic) continue;
    EXPECT_EQ(q.reason, "Cycle") << q.spec.name;
    EXPECT_LT(q.message.size(), 200u) << q.message;
  }
}

// ---- What each queue holds ----------------------------------------------------------

Entry Pod(std::string uid, std::string ns, int64_t per_gpu, int gpus = 1, int32_t priority = 0) {
  Entry e;
  e.pod_uid = uid;
  e.ns = std::move(ns);
  e.name = std::move(uid);
  for (int g = 0; g < gpus; ++g) e.gpus.push_back(g);
  e.per_gpu = per_gpu;
  e.state = EntryState::kBound;
  e.priority = priority;
  return e;
}

Snapshot Cluster(std::vector<std::vector<Entry>> nodes, int64_t gpu_capacity = 80 * kGi, int gpus = 8) {
  Snapshot s;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node n;
    n.name = "node-" + std::to_string(i);
    for (int g = 0; g < gpus; ++g) {
      Gpu gpu;
      gpu.index = g;
      gpu.capacity = gpu_capacity;
      n.gpus.push_back(gpu);
    }
    n.entries = std::move(nodes[i]);
    s.nodes.emplace(n.name, std::move(n));
  }
  return s;
}

PendingPod Waiting(std::string ns, int64_t total) {
  PendingPod p;
  p.uid = "pending-" + ns + "-" + std::to_string(total);
  p.ns = std::move(ns);
  p.name = p.uid;
  p.demand.total = total;
  return p;
}

TEST(QueueUsageOf, SumsEntriesPerQueueWithParentsIncludingChildren) {
  TenancyPolicy policy;
  policy.preemptible_classes = {"batch"};
  const QueueSet set = BuildQueueSet({Q("dept", 40 * kGi), Under(Ns(Q("a", 20 * kGi), {"a1", "a2"}), "dept"),
                                      Under(Team("b", 10 * kGi), "dept"), Team("solo", 0),
                                      Limit(Team("broken", 9 * kGi), 1 * kGi)},
                                     policy);
  Entry batch = Pod("batch", "a2", 3 * kGi, 1, 500);
  batch.priority_class = "batch";
  Entry victim = Pod("victim", "b", 1 * kGi, 1, 1000);
  victim.victim = true;
  Entry leaving = Pod("leaving", "solo", 2 * kGi, 1, 200);
  leaving.state = EntryState::kTerminating;
  const Snapshot snap =
      Cluster({{Pod("a-inf", "a1", 10 * kGi, 2, 200), Pod("a-train", "a1", 4 * kGi, 1, 50), batch},
               {victim, Pod("b-inf", "b", 6 * kGi, 1, 100), leaving, Pod("stray", "broken", 5 * kGi),
                Pod("nowhere", "unlisted", 7 * kGi, 1, 1000)}});
  const std::vector<PendingPod> pending = {Waiting("a1", 8 * kGi), Waiting("b", 2 * kGi),
                                                Waiting("other", 1 * kGi), Waiting("a2", 0)};
  const std::vector<QueueUsage> u = QueueUsageOf(set, snap, pending, policy);
  ASSERT_EQ(u.size(), set.queues.size());
  auto at = [&](const char* name) { return u[static_cast<size_t>(set.Find(name))]; };
  // a: 20 + 4 + 3; non-preemptible only the priority-200 pod (the class makes the batch pod preemptible).
  EXPECT_EQ(at("a").allocated, 27 * kGi);
  EXPECT_EQ(at("a").allocated_nonpreemptible, 20 * kGi);
  EXPECT_EQ(at("a").pending, 8 * kGi);
  // b: the designated victim is preemptible whatever its priority.
  EXPECT_EQ(at("b").allocated, 7 * kGi);
  EXPECT_EQ(at("b").allocated_nonpreemptible, 6 * kGi);
  EXPECT_EQ(at("b").pending, 2 * kGi);
  EXPECT_EQ(at("dept").allocated, 34 * kGi);
  EXPECT_EQ(at("dept").allocated_nonpreemptible, 26 * kGi);
  EXPECT_EQ(at("dept").pending, 10 * kGi);
  // A terminating pod still holds its VRAM.
  EXPECT_EQ(at("solo").allocated, 2 * kGi);
  EXPECT_EQ(at("solo").allocated_nonpreemptible, 2 * kGi);
  // The invalid queue's namespace falls to the default queue, with the unlisted one.
  EXPECT_EQ(at("broken").allocated, 0);
  EXPECT_EQ(at("default").allocated, 12 * kGi);
  EXPECT_EQ(at("default").allocated_nonpreemptible, 7 * kGi);
  EXPECT_EQ(at("default").pending, 1 * kGi);
}

// Issue 36: room held for a pod is its pending demand while it waits, and
// allocated once it does not (bound into the hold before its bound mark is
// written, or no longer refused): never counted twice, never nowhere.
TEST(QueueUsageOf, AHoldIsItsPodsPendingDemandWhileItWaitsAndAllocatedOtherwise) {
  TenancyPolicy policy;
  const QueueSet set = BuildQueueSet({Team("a", 16 * kGi)}, policy);
  Entry hold = Pod("held-for", "a", 8 * kGi);
  hold.state = EntryState::kHold;
  const Snapshot snap = Cluster({{hold, Pod("running", "a", 4 * kGi)}});
  PendingPod waiting = Waiting("a", 8 * kGi);
  waiting.uid = hold.pod_uid;
  const std::vector<PendingPod> pending = {waiting};
  const std::vector<QueueUsage> while_waiting = QueueUsageOf(set, snap, pending, policy);
  EXPECT_EQ(while_waiting[0].allocated, 4 * kGi);
  EXPECT_EQ(while_waiting[0].pending, 8 * kGi);
  const std::vector<QueueUsage> bound_into_it = QueueUsageOf(set, snap, {}, policy);
  EXPECT_EQ(bound_into_it[0].allocated, 12 * kGi);
  EXPECT_EQ(bound_into_it[0].pending, 0);
}

TEST(QueueUsageOf, NoDefaultQueueCountsNothingForUnlistedNamespaces) {
  TenancyPolicy policy;
  policy.default_queue = "";
  const QueueSet set = BuildQueueSet({Team("a", 0)}, policy);
  const Snapshot snap = Cluster({{Pod("x", "a", 1 * kGi), Pod("y", "elsewhere", 5 * kGi)}});
  const std::vector<QueueUsage> u = QueueUsageOf(set, snap, {}, policy);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].allocated, 1 * kGi);
}

TEST(ComputeTenancy, ComputesUsageSharesAndStatusesFromTheSnapshot) {
  auto set = std::make_shared<const QueueSet>(
      BuildQueueSet({Team("p1", 10 * kGi, 2), Team("p2", 6 * kGi, 3), Team("p3", 0, 1),
                     Limit(Team("bad", 2 * kGi), 1 * kGi)},
                    kPolicy));
  // 36Gi: 9 GPUs of 4Gi.
  const Snapshot snap = Cluster({{Pod("a", "p1", 4 * kGi, 3, 50)}, {Pod("b", "p2", 4 * kGi, 3, 500)}, {}}, 4 * kGi, 3);
  const std::vector<PendingPod> pending = {Waiting("p1", 100 * kGi), Waiting("p2", 100 * kGi),
                                                Waiting("p3", 100 * kGi)};
  const TenancyView view = ComputeTenancy(set, snap, pending, kPolicy);
  EXPECT_EQ(view.set, set);
  ASSERT_EQ(view.statuses.size(), set->queues.size());
  const QueueStatus& p2 = view.statuses[static_cast<size_t>(set->Find("p2"))];
  EXPECT_EQ(p2.name, "p2");
  EXPECT_EQ(p2.parent, "");
  EXPECT_TRUE(p2.valid);
  EXPECT_FALSE(p2.synthetic);
  EXPECT_EQ(p2.reason, "Valid");
  EXPECT_EQ(p2.deserved, 6 * kGi);
  EXPECT_EQ(p2.weight, 3);
  EXPECT_EQ(p2.allocated, 12 * kGi);
  EXPECT_EQ(p2.allocated_nonpreemptible, 12 * kGi);
  EXPECT_EQ(p2.pending, 100 * kGi);
  EXPECT_EQ(p2.fair_share, 16 * kGi);  // the guide's example on 36Gi
  const QueueStatus& p1 = view.statuses[static_cast<size_t>(set->Find("p1"))];
  EXPECT_EQ(p1.allocated, 12 * kGi);
  EXPECT_EQ(p1.allocated_nonpreemptible, 0);
  EXPECT_EQ(p1.fair_share, 10 * kGi + 20 * kGi * 2 / 6 + 1);
  const QueueStatus& bad = view.statuses[static_cast<size_t>(set->Find("bad"))];
  EXPECT_FALSE(bad.valid);
  EXPECT_EQ(bad.reason, "Invalid");
  EXPECT_EQ(bad.message, "queue bad: deserved 2Gi is above its limit 1Gi");
  EXPECT_EQ(bad.limit, std::optional<int64_t>(1 * kGi));
  EXPECT_EQ(bad.fair_share, 0);
  const QueueStatus& def = view.statuses[static_cast<size_t>(set->Find("default"))];
  EXPECT_TRUE(def.synthetic);
  EXPECT_EQ(view.fair_shares, FairShares(*set, view.usage, 36 * kGi));
  EXPECT_EQ(view.statuses, QueueStatuses(*set, view.usage, view.fair_shares));
}

TEST(ComputeTenancy, WithoutASetIsAnEmptySet) {
  const Snapshot snap = Cluster({{Pod("a", "x", 1 * kGi)}});
  const TenancyView view = ComputeTenancy(nullptr, snap, {}, kPolicy);
  ASSERT_NE(view.set, nullptr);
  EXPECT_TRUE(view.set->empty());
  ASSERT_EQ(view.statuses.size(), 1u);
  EXPECT_EQ(view.statuses[0].allocated, 1 * kGi);
}

// ---- Admission -------------------------------------------------------------------------

struct AdmitCase {
  const char* name;
  std::vector<QueueSpec> queues;
  Uses uses;
  std::string ns;
  int64_t total;
  bool preemptible;
  int64_t own;
  bool ok;
  std::string queue;   // the pod's queue ("" = none)
  std::string reason;  // exact, when refused
};

std::vector<QueueSpec> TeamB() { return {Limit(Team("team-b", 16 * kGi), 32 * kGi), Team("team-a", 16 * kGi)}; }
std::vector<QueueSpec> Dept() {
  return {Limit(Q("dept-a", 32 * kGi), 64 * kGi), Under(Limit(Team("team-b", 16 * kGi), 48 * kGi), "dept-a"),
          Under(Team("team-c", 32 * kGi), "dept-a")};
}

const std::vector<AdmitCase>& AdmitCases() {
  static const std::vector<AdmitCase> cases = {
      {"UnderTheLimit", TeamB(), {{"team-b", Use{20 * kGi}}}, "team-b", 8 * kGi, true, 0, true, "team-b", ""},
      {"ExactlyAtTheLimit", TeamB(), {{"team-b", Use{24 * kGi}}}, "team-b", 8 * kGi, true, 0, true, "team-b", ""},
      {"AboveTheLimit", TeamB(), {{"team-b", Use{30 * kGi}}}, "team-b", 8 * kGi, true, 0, false, "team-b",
       "queue team-b at its limit: 30Gi allocated + 8Gi requested > limit 32Gi"},
      {"AboveTheParentsLimit",
       Dept(),
       {{"team-b", Use{20 * kGi}}, {"team-c", Use{40 * kGi}}},
       "team-b",
       8 * kGi,
       true,
       0,
       false,
       "team-b",
       "queue team-b's parent dept-a at its limit: 60Gi allocated + 8Gi requested > limit 64Gi"},
      {"NonPreemptibleWithinDeserved", TeamB(), {{"team-b", Use{12 * kGi, 0, 8 * kGi}}}, "team-b", 8 * kGi, false, 0,
       true, "team-b", ""},
      {"NonPreemptibleAboveDeserved", TeamB(), {{"team-b", Use{12 * kGi, 0, 12 * kGi}}}, "team-b", 8 * kGi, false, 0,
       false, "team-b",
       "queue team-b: non-preemptible pods may use only its deserved 16Gi (12Gi in use, 8Gi requested); make the pod "
       "preemptible or raise the queue's deserved"},
      {"PreemptibleMayRunOverQuota", TeamB(), {{"team-b", Use{24 * kGi, 0, 16 * kGi}}}, "team-b", 8 * kGi, true, 0,
       true, "team-b", ""},
      {"NonPreemptibleAboveTheParentsDeserved",
       Dept(),
       {{"team-b", Use{8 * kGi, 0, 8 * kGi}}, {"team-c", Use{26 * kGi, 0, 22 * kGi}}},
       "team-b",
       4 * kGi,
       false,
       0,
       false,
       "team-b",
       "queue team-b: non-preemptible pods may use only the deserved 32Gi of its parent dept-a (30Gi in use there, "
       "4Gi requested); make the pod preemptible or raise dept-a's deserved"},
      {"TheLimitIsCheckedBeforeTheQuota", TeamB(), {{"team-b", Use{30 * kGi, 0, 16 * kGi}}}, "team-b", 8 * kGi, false,
       0, false, "team-b", "queue team-b at its limit: 30Gi allocated + 8Gi requested > limit 32Gi"},
      {"UnmanagedDefaultQueueAdmitsEverything", TeamB(), {{"default", Use{1024 * kGi, 0, 1024 * kGi}}}, "elsewhere",
       512 * kGi, false, 0, true, "default", ""},
      {"ADefaultQueueObjectIsManaged",
       {Limit(Q("default", 0), 4 * kGi), Team("team-a", 16 * kGi)},
       {{"default", Use{2 * kGi}}},
       "elsewhere",
       4 * kGi,
       true,
       0,
       false,
       "default",
       "queue default at its limit: 2Gi allocated + 4Gi requested > limit 4Gi"},
      {"AnInvalidQueuesNamespaceFallsToTheDefaultQueue", {Limit(Team("team-b", 16 * kGi), 8 * kGi)}, {}, "team-b",
       512 * kGi, false, 0, true, "default", ""},
      {"EmptySetAdmitsEverything", {}, {}, "team-b", 512 * kGi, false, 0, true, "default", ""},
      // An idempotent bind: the pod's own 8Gi are in the 32Gi allocated.
      {"OwnBytesAreNotCountedTwice", TeamB(), {{"team-b", Use{32 * kGi, 0, 16 * kGi}}}, "team-b", 8 * kGi, false,
       8 * kGi, true, "team-b", ""},
      {"OwnBytesCountOnce_TheRestIsJudged", TeamB(), {{"team-b", Use{32 * kGi}}}, "team-b", 8 * kGi, true, 4 * kGi,
       false, "team-b", "queue team-b at its limit: 28Gi allocated + 8Gi requested > limit 32Gi"},
  };
  return cases;
}

TEST(AdmitToQueue, Table) {
  for (const AdmitCase& c : AdmitCases()) {
    SCOPED_TRACE(c.name);
    const QueueSet set = BuildQueueSet(c.queues, kPolicy);
    const std::vector<QueueUsage> usage = UsageFor(set, c.uses);
    const Admission a = AdmitToQueue(set, usage, c.ns, c.total, c.preemptible, c.own);
    EXPECT_EQ(a.ok, c.ok) << a.reason;
    EXPECT_EQ(a.queue, c.queue.empty() ? -1 : set.Find(c.queue));
    EXPECT_EQ(a.reason, c.ok ? "" : c.reason);
  }
}

// The verbs skip the usage when AdmissionNeedsUsage says no: then no usage
// at all may make AdmitToQueue refuse (every table case, with the queues full).
TEST(AdmitToQueue, WithoutNeedForUsageNothingIsRefused) {
  int skipped = 0;
  for (const AdmitCase& c : AdmitCases()) {
    SCOPED_TRACE(c.name);
    const QueueSet set = BuildQueueSet(c.queues, kPolicy);
    if (AdmissionNeedsUsage(set, c.ns, c.preemptible)) continue;
    ++skipped;
    const std::vector<QueueUsage> full(set.queues.size(), QueueUsage{kMaxQueueBytes, kMaxQueueBytes, 0});
    EXPECT_TRUE(AdmitToQueue(set, full, c.ns, c.total, c.preemptible, 0).ok);
  }
  EXPECT_GE(skipped, 3);
  const QueueSet set = BuildQueueSet(TeamB(), kPolicy);
  EXPECT_TRUE(AdmissionNeedsUsage(set, "team-b", true));    // its limit
  EXPECT_FALSE(AdmissionNeedsUsage(set, "team-a", true));   // no limit, preemptible
  EXPECT_TRUE(AdmissionNeedsUsage(set, "team-a", false));   // the in-quota rule
  EXPECT_FALSE(AdmissionNeedsUsage(set, "elsewhere", false));  // the unmanaged default queue
  const QueueSet dept = BuildQueueSet(Dept(), kPolicy);
  EXPECT_TRUE(AdmissionNeedsUsage(dept, "team-c", true));   // its parent's limit
}

TEST(AdmitToQueue, NoQueueAtAllAdmits) {
  TenancyPolicy p;
  p.default_queue = "";
  const QueueSet set = BuildQueueSet(TeamB(), p);
  const Admission a = AdmitToQueue(set, UsageFor(set, {}), "elsewhere", 512 * kGi, false);
  EXPECT_TRUE(a.ok);
  EXPECT_EQ(a.queue, -1);
}

TEST(AdmitToQueue, HugeRequestsDoNotOverflow) {
  const QueueSet set = BuildQueueSet(TeamB(), kPolicy);
  const int64_t huge = std::numeric_limits<int64_t>::max();
  const Admission a = AdmitToQueue(set, UsageFor(set, {{"team-b", Use{30 * kGi}}}), "team-b", huge, true);
  EXPECT_FALSE(a.ok);
}

// ---- Properties over seeded random queue sets -----------------------------------------

struct Random {
  std::mt19937_64 rng;
  explicit Random(uint64_t seed) : rng(seed) {}
  int64_t Between(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
  bool Chance(int percent) { return Between(0, 99) < percent; }
};

// Up to 6 departments of up to 5 teams plus top-level teams; quotas, limits
// and weights at random (valid: a child within its parent), demands at random.
struct World {
  std::vector<QueueSpec> specs;
  Uses uses;
  int64_t capacity = 0;
};

World RandomWorld(Random& r) {
  World w;
  const int64_t unit = r.Chance(50) ? kGi : 1;  // odd byte counts too
  const int depts = static_cast<int>(r.Between(0, 6));
  auto weight = [&] { return r.Chance(15) ? 0 : r.Between(1, 10); };
  auto demand = [&] { return r.Chance(20) ? Use{} : Use{r.Between(0, 50) * unit, r.Between(0, 50) * unit}; };
  for (int d = 0; d < depts; ++d) {
    QueueSpec dept = Q("d" + std::to_string(d), r.Between(0, 80) * unit, weight());
    if (r.Chance(30)) dept = Limit(dept, dept.deserved + r.Between(0, 40) * unit);
    const int teams = static_cast<int>(r.Between(1, 5));
    for (int t = 0; t < teams; ++t) {
      QueueSpec team = Under(Team(dept.name + "-t" + std::to_string(t), r.Between(0, dept.deserved / std::max<int64_t>(unit, 1)) * unit, weight()), dept.name);
      if (r.Chance(30)) {
        const int64_t lim = team.deserved + r.Between(0, 40) * unit;
        team = Limit(team, dept.limit ? std::min(lim, *dept.limit) : lim);
        if (*team.limit < team.deserved) team.limit = team.deserved;
      }
      w.uses[team.name] = demand();
      w.specs.push_back(team);
    }
    w.specs.push_back(dept);
  }
  const int solos = static_cast<int>(r.Between(depts == 0 ? 1 : 0, 6));
  for (int s = 0; s < solos; ++s) {
    QueueSpec team = Team("s" + std::to_string(s), r.Between(0, 60) * unit, weight());
    if (r.Chance(30)) team = Limit(team, team.deserved + r.Between(0, 40) * unit);
    w.uses[team.name] = demand();
    w.specs.push_back(team);
  }
  if (r.Chance(50)) w.uses["default"] = demand();
  w.capacity = r.Between(0, 400) * unit + r.Between(0, 7);
  return w;
}

// What queue i can use (FairShares caps each share at it).
int64_t CappedDemand(const QueueSet& set, std::span<const QueueUsage> usage, size_t i) {
  const Queue& q = set.queues[i];
  int64_t d = 0;
  if (q.children.empty()) {
    d = usage[i].allocated + usage[i].pending;
  } else {
    for (int c : q.children) {
      const int64_t cd = CappedDemand(set, usage, static_cast<size_t>(c));
      const QueueSpec& child = set.queues[static_cast<size_t>(c)].spec;
      d += child.weight > 0 ? cd : std::min(cd, child.deserved);
    }
  }
  return q.spec.limit ? std::min(d, *q.spec.limit) : d;
}

TEST(FairShares, PropertiesOverRandomQueueSets) {
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Random r(seed);
    const World w = RandomWorld(r);
    const QueueSet set = BuildQueueSet(w.specs, kPolicy);
    for (const Queue& q : set.queues) ASSERT_TRUE(q.valid) << q.message;
    const std::vector<QueueUsage> usage = UsageFor(set, w.uses);
    const std::vector<int64_t> share = FairShares(set, usage, w.capacity);
    ASSERT_EQ(share.size(), set.queues.size());

    // Shares `amount` among `members`: never more than it, each at most its
    // capped demand, each its deserved (capped) when the deserved parts fit,
    // and all of it when some queue with weight wants more.
    auto check_split = [&](const std::vector<int>& members, int64_t amount) {
      int64_t sum = 0, base = 0;
      bool hungry = false;
      for (int m : members) {
        const size_t i = static_cast<size_t>(m);
        const int64_t cd = CappedDemand(set, usage, i);
        EXPECT_GE(share[i], 0);
        EXPECT_LE(share[i], cd) << set.queues[i].spec.name;
        sum += share[i];
        base += std::min(set.queues[i].spec.deserved, cd);
        if (share[i] < cd && set.queues[i].spec.weight > 0) hungry = true;
      }
      EXPECT_LE(sum, std::max<int64_t>(amount, 0));
      if (base <= amount) {
        for (int m : members) {
          const size_t i = static_cast<size_t>(m);
          EXPECT_GE(share[i], std::min(set.queues[i].spec.deserved, CappedDemand(set, usage, i)))
              << set.queues[i].spec.name;
        }
        if (hungry) {
          EXPECT_EQ(sum, amount) << "work-conserving";
        }
      } else {
        EXPECT_EQ(sum, amount) << "more quota than there is: all of it is shared";
      }
    };
    std::vector<int> top;
    for (size_t i = 0; i < set.queues.size(); ++i) {
      if (set.queues[i].parent < 0) top.push_back(static_cast<int>(i));
    }
    check_split(top, w.capacity);
    for (size_t i = 0; i < set.queues.size(); ++i) {
      if (!set.queues[i].children.empty()) check_split(set.queues[i].children, share[i]);
    }

    // Monotonic in weight: more weight never lowers a queue's share.
    const size_t pick = static_cast<size_t>(r.Between(0, static_cast<int64_t>(w.specs.size()) - 1));
    std::vector<QueueSpec> heavier = w.specs;
    heavier[pick].weight += r.Between(1, 10);
    const QueueSet set2 = BuildQueueSet(heavier, kPolicy);
    const std::vector<int64_t> share2 = FairShares(set2, UsageFor(set2, w.uses), w.capacity);
    const int i1 = set.Find(heavier[pick].name), i2 = set2.Find(heavier[pick].name);
    EXPECT_GE(share2[static_cast<size_t>(i2)], share[static_cast<size_t>(i1)]) << heavier[pick].name;
  }
}

}  // namespace
}  // namespace vramd::ledger

namespace vramd::ledger {
namespace {

// The preemptible rule (the guide's semantics by default: priority below 100
// is preemptible; listed classes and designated victims always are).
TEST(IsPreemptible, Table) {
  TenancyPolicy guide;
  TenancyPolicy listed;
  listed.preemptible_below_priority = 0;
  listed.preemptible_classes = {"train", "batch-low"};
  struct Case {
    const char* name;
    const TenancyPolicy* policy;
    int32_t priority;
    const char* klass;
    bool victim;
    bool want;
  } cases[] = {
      {"NoPriorityIsTraining", &guide, 0, "", false, true},
      {"JustBelowTheThreshold", &guide, 99, "", false, true},
      {"AtTheThresholdIsNot", &guide, 100, "", false, false},
      {"InferenceIsNot", &guide, 125, "inference", false, false},
      {"NegativePriority", &guide, -1000, "", false, true},
      {"ADesignatedVictimAlwaysIs", &guide, 1'000'000, "vramd-disposable", true, true},
      {"AListedClassWhateverItsPriority", &listed, 5000, "train", false, true},
      {"AnotherClassAboveTheThreshold", &listed, 5000, "interactive", false, false},
      {"NoClassIsNotAListedOne", &listed, 5, "", false, false},
      {"ThresholdZero_NegativeStillIs", &listed, -1, "", false, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(IsPreemptible(c.priority, c.klass, c.victim, *c.policy), c.want);
    Entry e;
    e.priority = c.priority;
    e.priority_class = c.klass;
    e.victim = c.victim;
    EXPECT_EQ(IsPreemptible(e, *c.policy), c.want);
  }
}

}  // namespace
}  // namespace vramd::ledger
