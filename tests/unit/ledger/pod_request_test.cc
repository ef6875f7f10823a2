#include "vramd/ledger/pod_request.h"

#include <gtest/gtest.h>

namespace vramd::ledger {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

ContainerAmount Req(const char* q) { return ContainerAmount{std::string(q), std::string(q), false}; }
ContainerAmount LimitOnly(const char* q) { return ContainerAmount{std::nullopt, std::string(q), false}; }
ContainerAmount Sidecar(const char* q) { return ContainerAmount{std::string(q), std::string(q), true}; }
ContainerAmount None() { return ContainerAmount{}; }

struct RequestCase {
  const char* name;
  PodSpecView pod;
  int64_t total;
  int gpu_count;
  int64_t per_gpu;
};

class VramRequestTable : public ::testing::TestWithParam<RequestCase> {};

TEST_P(VramRequestTable, CountsLikeKubeScheduler) {
  Result<VramRequest> r = ComputeVramRequest(GetParam().pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->total, GetParam().total);
  EXPECT_EQ(r->gpu_count, GetParam().gpu_count);
  EXPECT_EQ(r->per_gpu, GetParam().per_gpu);
}

PodSpecView Pod(std::vector<ContainerAmount> apps, std::vector<ContainerAmount> inits = {},
                std::optional<std::string> overhead = std::nullopt,
                std::optional<std::string> gpu_count = std::nullopt) {
  PodSpecView p;
  p.containers = std::move(apps);
  p.init_containers = std::move(inits);
  p.overhead = std::move(overhead);
  p.gpu_count = std::move(gpu_count);
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    PodRequest, VramRequestTable,
    ::testing::Values(
        RequestCase{"SingleContainer", Pod({Req("24Gi")}), 24 * kGi, 1, 24 * kGi},
        RequestCase{"AppContainersAreSummed", Pod({Req("30Gi"), Req("2Gi")}), 32 * kGi, 1, 32 * kGi},
        // The fixture pod: apps 30Gi + 2Gi, init 1Gi: max(32, 1) = 32Gi.
        RequestCase{"SmallInitContainerIsHidden", Pod({Req("30Gi"), Req("2Gi")}, {Req("1Gi")}), 32 * kGi, 1,
                    32 * kGi},
        RequestCase{"LargeInitContainerWins", Pod({Req("4Gi")}, {Req("10Gi"), Req("6Gi")}), 10 * kGi, 1,
                    10 * kGi},
        RequestCase{"OverheadIsAdded", Pod({Req("4Gi")}, {}, "1Gi"), 5 * kGi, 1, 5 * kGi},
        RequestCase{"OverheadAddsToInitMax", Pod({Req("4Gi")}, {Req("10Gi")}, "1Gi"), 11 * kGi, 1, 11 * kGi},
        RequestCase{"RequestDefaultsToLimit", Pod({LimitOnly("8Gi")}), 8 * kGi, 1, 8 * kGi},
        RequestCase{"ContainersWithoutResourceCountZero", Pod({None(), Req("3Gi")}), 3 * kGi, 1, 3 * kGi},
        RequestCase{"SidecarAddsToApps", Pod({Req("4Gi")}, {Sidecar("2Gi")}), 6 * kGi, 1, 6 * kGi},
        // sidecar 2Gi then init 5Gi: the init runs with the sidecar: 7Gi > apps+sidecar 6Gi.
        RequestCase{"InitCountsWithEarlierSidecars", Pod({Req("4Gi")}, {Sidecar("2Gi"), Req("5Gi")}), 7 * kGi,
                    1, 7 * kGi},
        // init 5Gi before the sidecar: runs alone (5Gi) < 6Gi.
        RequestCase{"InitBeforeSidecarRunsAlone", Pod({Req("4Gi")}, {Req("5Gi"), Sidecar("2Gi")}), 6 * kGi, 1,
                    6 * kGi},
        RequestCase{"GpuCountSpreadsEvenly", Pod({Req("128Gi")}, {}, std::nullopt, "2"), 128 * kGi, 2,
                    64 * kGi},
        RequestCase{"GpuCountRoundsUp", Pod({Req("10")}, {}, std::nullopt, "3"), 10, 3, 4},
        RequestCase{"NoVram", Pod({None()}), 0, 1, 0}),
    [](const auto& info) { return info.param.name; });

struct ErrorCase {
  const char* name;
  PodSpecView pod;
  const char* message_part;
};

class VramRequestErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(VramRequestErrors, RejectsWithMessage) {
  Result<VramRequest> r = ComputeVramRequest(GetParam().pod);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(GetParam().message_part), std::string::npos) << r.status().message();
}

PodSpecView WithPeak(PodSpecView p, const char* peak) {
  p.vram_peak = peak;
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    PodRequest, VramRequestErrors,
    ::testing::Values(
        ErrorCase{"BadQuantityNamesContainer", Pod({Req("4Gi"), Req("lots")}), "container 1"},
        ErrorCase{"BadInitQuantity", Pod({Req("4Gi")}, {Req("-1")}), "init container 0"},
        ErrorCase{"BadOverhead", Pod({Req("4Gi")}, {}, "0.5"), "overhead"},
        ErrorCase{"GpuCountZero", Pod({Req("4Gi")}, {}, std::nullopt, "0"), "gpu-count"},
        ErrorCase{"GpuCountNotNumber", Pod({Req("4Gi")}, {}, std::nullopt, "two"), "gpu-count"},
        ErrorCase{"GpuCountTooLarge", Pod({Req("4Gi")}, {}, std::nullopt, "65"), "gpu-count"},
        ErrorCase{"GpuCountNegative", Pod({Req("4Gi")}, {}, std::nullopt, "-1"), "gpu-count"},
        // Hostile shapes (issue 11): no int overflow on the way to the error.
        ErrorCase{"GpuCountFourteenDigits", Pod({Req("4Gi")}, {}, std::nullopt, "99999999999999"), "gpu-count"},
        ErrorCase{"GpuCountPastUint64", Pod({Req("4Gi")}, {}, std::nullopt, std::string(40, '9')), "gpu-count"},
        ErrorCase{"GpuCountWhitespace", Pod({Req("4Gi")}, {}, std::nullopt, " 2"), "gpu-count"},
        ErrorCase{"GpuCountPlus", Pod({Req("4Gi")}, {}, std::nullopt, "+2"), "gpu-count"},
        ErrorCase{"GpuCountEmpty", Pod({Req("4Gi")}, {}, std::nullopt, ""), "gpu-count"},
        ErrorCase{"SumOverflows", Pod({Req("8Ei"), Req("8Ei")}), "maximum"},
        ErrorCase{"SumOverflowsBelowMax", Pod({Req("7Ei"), Req("7Ei")}), "overflows"},
        ErrorCase{"PeakBelowRequest", WithPeak(Pod({Req("8Gi")}), "4Gi"), "below"},
        ErrorCase{"PeakGarbage", WithPeak(Pod({Req("8Gi")}), "big"), "vram-peak"}),
    [](const auto& info) { return info.param.name; });

struct IdleTtlCase {
  const char* name;
  const char* text;
  int64_t ms;  // 0: an error whose message contains `why`
  const char* why;
};

class IdleTtlTable : public ::testing::TestWithParam<IdleTtlCase> {};

TEST_P(IdleTtlTable, ParsesGoStyleDurations) {
  const IdleTtlCase& c = GetParam();
  Result<int64_t> r = ParseIdleTtl(c.text);
  if (c.ms > 0) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, c.ms);
  } else {
    ASSERT_FALSE(r.ok()) << *r;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.why), std::string::npos) << r.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    PodRequest, IdleTtlTable,
    ::testing::Values(IdleTtlCase{"Seconds", "90s", 90'000, ""}, IdleTtlCase{"Minutes", "10m", 600'000, ""},
                      IdleTtlCase{"Hours", "2h", 7'200'000, ""},
                      IdleTtlCase{"HoursAndMinutes", "1h30m", 5'400'000, ""},
                      IdleTtlCase{"AllUnits", "1h1m1s1ms", 3'661'001, ""},
                      IdleTtlCase{"Milliseconds", "500ms", 500, ""},
                      IdleTtlCase{"FractionOfAnHour", "1.5h", 5'400'000, ""},
                      IdleTtlCase{"FractionWithoutWholePart", ".5m", 30'000, ""},
                      IdleTtlCase{"SubMillisecondFractionIsDropped", "1.9ms", 1, ""},
                      IdleTtlCase{"ExactlyThirtyDays", "720h", kMaxIdleTtlMs, ""},
                      IdleTtlCase{"ThirtyDaysInParts", "719h60m", kMaxIdleTtlMs, ""},
                      IdleTtlCase{"LongFractionIsBounded", "1.00000000000000000001h", 3'600'000, ""},
                      IdleTtlCase{"Empty", "", 0, "empty"}, IdleTtlCase{"Negative", "-5m", 0, "negative"},
                      IdleTtlCase{"Zero", "0", 0, "zero"}, IdleTtlCase{"ZeroSeconds", "0s", 0, "zero"},
                      IdleTtlCase{"LessThanAMillisecond", "0.5ms", 0, "zero"},
                      IdleTtlCase{"OneMillisecondPastThirtyDays", "720h1ms", 0, "30 days"},
                      IdleTtlCase{"Days", "31d", 0, "unknown unit \"d\""},
                      IdleTtlCase{"Microseconds", "500us", 0, "unknown unit \"us\""},
                      IdleTtlCase{"Nanoseconds", "5ns", 0, "unknown unit"},
                      IdleTtlCase{"NoUnit", "90", 0, "missing unit"},
                      IdleTtlCase{"TrailingNumber", "1h30", 0, "missing unit"},
                      IdleTtlCase{"NoNumber", "m", 0, "not a duration"},
                      IdleTtlCase{"LonelyDot", ".s", 0, "not a duration"},
                      IdleTtlCase{"Plus", "+5m", 0, "not a duration"},
                      IdleTtlCase{"Space", "5 m", 0, "not a duration"},
                      IdleTtlCase{"UpperCaseUnit", "5M", 0, "unknown unit"},
                      // Hostile shapes: no overflow on the way to the error.
                      IdleTtlCase{"TwentyDigits", "99999999999999999999ms", 0, "30 days"},
                      IdleTtlCase{"ManyParts", "700h700h700h", 0, "30 days"}),
    [](const auto& info) { return info.param.name; });

TEST(PodRequest, IdleTtlReachesTheDemandAndTheEntry) {
  PodSpecView p = Pod({Req("8Gi")});
  Result<Demand> d = ComputeVramRequest(p);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->idle_ttl_ms, 0);  // no annotation: none
  p.idle_ttl = "10m";
  d = ComputeVramRequest(p);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->idle_ttl_ms, 600'000);
  Entry e;
  RecordDemand(*d, &e);
  EXPECT_EQ(e.idle_ttl_ms, 600'000);
}

TEST(PodRequest, ABadIdleTtlIsAnErrorNamingTheAnnotationAndValue) {
  PodSpecView p = Pod({Req("8Gi")});
  p.idle_ttl = "-5m";
  Result<Demand> d = ComputeVramRequest(p);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(d.status().message(), "annotation vramd.io/idle-ttl=\"-5m\": negative: the TTL must be greater than zero");
}

TEST(PodRequest, PeakSpreadsOverGpus) {
  PodSpecView p = Pod({Req("8Gi")}, {}, std::nullopt, "2");
  p.vram_peak = "12Gi";
  Result<VramRequest> r = ComputeVramRequest(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->peak_per_gpu, 6 * kGi);
  EXPECT_EQ(r->per_gpu, 4 * kGi);
}

TEST(PodRequest, TheDemandCarriesNamespacePriorityClassAndVictim) {
  PodSpecView p = Pod({Req("8Gi")});
  p.ns = "ml";
  p.priority = -1000;
  p.priority_class = "vramd-disposable";
  p.model = "llama";
  Result<Demand> d = ComputeVramRequest(p);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->ns, "ml");
  EXPECT_EQ(d->priority, -1000);
  EXPECT_EQ(d->priority_class, "vramd-disposable");
  EXPECT_TRUE(d->victim);
  EXPECT_EQ(d->model, "llama");

  p.priority_class = "homelab-critical";
  p.priority = 100000;
  d = ComputeVramRequest(p);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->priority, 100000);
  EXPECT_FALSE(d->victim);
}

struct VictimCase {
  const char* name;
  std::string priority_class;
  std::optional<std::string> disposable;  // annotation vramd.io/disposable
  bool victim;
};

class DesignatedVictim : public ::testing::TestWithParam<VictimCase> {};

TEST_P(DesignatedVictim, ByClassOrAnnotation) {
  PodSpecView p = Pod({Req("1Gi")});
  p.priority_class = GetParam().priority_class;
  p.disposable = GetParam().disposable;
  EXPECT_EQ(IsDesignatedVictim(p), GetParam().victim);
  Result<Demand> d = ComputeVramRequest(p);
  ASSERT_TRUE(d.ok()) << d.status().ToString();  // never an error, whatever the annotation says
  EXPECT_EQ(d->victim, GetParam().victim);
}

INSTANTIATE_TEST_SUITE_P(
    PodRequest, DesignatedVictim,
    ::testing::Values(VictimCase{"Nothing", "", std::nullopt, false},
                      VictimCase{"DefaultVictimClass", "vramd-disposable", std::nullopt, true},
                      VictimCase{"OtherClass", "homelab-disposable", std::nullopt, false},
                      VictimCase{"ClassNameIsCaseSensitive", "VRAMD-DISPOSABLE", std::nullopt, false},
                      VictimCase{"AnnotationTrue", "", "true", true},
                      VictimCase{"AnnotationTrueAnyCase", "", "True", true},
                      VictimCase{"AnnotationTrueUpper", "homelab-critical", "TRUE", true},
                      VictimCase{"AnnotationFalse", "", "false", false},
                      VictimCase{"AnnotationYesIsNotTrue", "", "yes", false},
                      VictimCase{"AnnotationEmpty", "", "", false},
                      VictimCase{"AnnotationTrueWithSpace", "", "true ", false},
                      VictimCase{"ClassWinsOverFalseAnnotation", "vramd-disposable", "false", true}),
    [](const auto& info) { return info.param.name; });

TEST(PodRequest, VictimClassesCanBeGiven) {
  PodSpecView p = Pod({Req("1Gi")});
  p.priority_class = "batch-low";
  constexpr std::string_view kClasses[] = {"spot", "batch-low"};
  EXPECT_TRUE(IsDesignatedVictim(p, kClasses));
  EXPECT_FALSE(IsDesignatedVictim(p));
  p.priority_class = "vramd-disposable";
  EXPECT_FALSE(IsDesignatedVictim(p, kClasses));
}

TEST(PodRequest, RecordDemandWritesWhatTheDemandSaysIntoTheEntry) {
  Demand d;
  d.ns = "ml";
  d.model = "llama";
  d.per_gpu = 4 * kGi;
  d.peak_per_gpu = 6 * kGi;
  d.priority = 7;
  d.priority_class = "c";
  d.victim = true;
  d.owner_kind = "Job";
  d.owner_uid = "job-uid";
  d.evictable = true;
  d.gang = "job/train";
  Entry e;
  e.pod_uid = "u";
  e.name = "p";
  e.gpus = {1};
  e.per_gpu = 4 * kGi;
  RecordDemand(d, &e);
  EXPECT_EQ(e.ns, "ml");
  EXPECT_EQ(e.model, "llama");
  EXPECT_EQ(e.peak_per_gpu, 6 * kGi);
  EXPECT_EQ(e.priority, 7);
  EXPECT_EQ(e.priority_class, "c");
  EXPECT_TRUE(e.victim);
  EXPECT_EQ(e.owner_kind, "Job");
  EXPECT_EQ(e.owner_uid, "job-uid");
  EXPECT_TRUE(e.evictable);
  EXPECT_EQ(e.gang, "job/train");
  EXPECT_EQ(e.pod_uid, "u");
  EXPECT_EQ(e.name, "p");
  EXPECT_EQ(e.gpus, std::vector<int>{1});

  Entry named;
  named.ns = "from-the-binding";
  RecordDemand(d, &named);
  EXPECT_EQ(named.ns, "from-the-binding");  // the caller's namespace stands
}

TEST(PodRequest, OwnerEvictableAndGangReachTheDemand) {
  PodSpecView p;
  p.containers = {ContainerAmount{"1Gi", std::nullopt}};
  p.owner_kind = "ReplicaSet";
  p.owner_uid = "rs-1";
  p.gang = "jobset/j";
  for (const auto& [value, want] : std::vector<std::pair<std::optional<std::string>, bool>>{
           {std::nullopt, false}, {"true", true}, {"TRUE", true}, {"yes", false}, {"", false}, {"true ", false}}) {
    p.evictable = value;
    Result<VramRequest> r = ComputeVramRequest(p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->evictable, want) << (value ? *value : "(none)");
    EXPECT_EQ(r->owner_kind, "ReplicaSet");
    EXPECT_EQ(r->owner_uid, "rs-1");
    EXPECT_EQ(r->gang, "jobset/j");
  }
}

// Issue 32: the gang of a pod, from the labels and annotations of the
// schedulers and controllers that run gangs.
TEST(GangKey, Table) {
  using M = std::map<std::string, std::string>;
  struct Case {
    const char* name;
    M labels, annotations;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"None", {{"app", "web"}}, {}, ""},
      {"Coscheduling", {{"scheduling.x-k8s.io/pod-group", "pg"}, {"job-name", "j"}}, {}, "pod-group/pg"},
      {"OlderCoscheduling", {{"pod-group.scheduling.sigs.k8s.io", "pg"}}, {}, "pod-group/pg"},
      {"Volcano", {{"job-name", "j"}}, {{"scheduling.k8s.io/group-name", "vg"}}, "pod-group/vg"},
      {"LeaderWorkerSetGroup",
       {{"leaderworkerset.sigs.k8s.io/name", "lws"}, {"leaderworkerset.sigs.k8s.io/group-index", "3"}},
       {},
       "lws/lws/3"},
      {"JobSetBeforeJob", {{"jobset.sigs.k8s.io/jobset-name", "js"}, {"batch.kubernetes.io/job-name", "js-w-0"}}, {},
       "jobset/js"},
      {"Job", {{"batch.kubernetes.io/job-name", "train"}, {"job-name", "other"}}, {}, "job/train"},
      {"OldJobLabel", {{"job-name", "train"}}, {}, "job/train"},
      {"EmptyValuesSayNothing", {{"scheduling.x-k8s.io/pod-group", ""}, {"job-name", "j"}}, {}, "job/j"},
      {"TooLong", {{"job-name", std::string(kMaxGangKey, 'j')}}, {}, ""},
      {"AtTheBound", {{"job-name", std::string(kMaxGangKey - 4, 'j')}}, {}, "job/" + std::string(kMaxGangKey - 4, 'j')},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(GangKey(c.labels, c.annotations), c.want);
  }
}

}  // namespace
}  // namespace vramd::ledger
