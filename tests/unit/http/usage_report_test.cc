// The usage report's decoder (http::DecodeUsageReport) and the ledger's
// checks of it (ledger/usage.h): named cases, accepted and refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vramd/http/routes.h"
#include "vramd/ledger/capacity.h"
#include "vramd/ledger/usage.h"

namespace vramd::http {
namespace {

using ::testing::HasSubstr;

constexpr const char* kUid1 = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab";
constexpr const char* kUid2 = "11111111-2222-3333-4444-555555555555";

// One GPU object of a version-2 report, with `extra` appended inside it.
std::string Gpu(int index, const std::string& extra = "") {
  std::string g = R"({"index":)" + std::to_string(index) + R"(,"total_bytes":85520809984,"used_bytes":4294967296)";
  return g + extra + "}";
}
std::string Report(const std::string& gpus) { return R"({"version":2,"agent":"vramd-agent/0.2.0","gpus":[)" + gpus + "]}"; }

TEST(DecodeUsageReport, TheContractsExampleDecodes) {
  const std::string body = R"({"version": 2, "agent": "vramd-agent/0.2.0", "source": "nvml",
   "gpus": [{"index": 0, "uuid": "GPU-5e2d0a", "name": "NVIDIA H100 80GB HBM3",
             "total_bytes": 85520809984, "used_bytes": 4294967296,
             "outside_pods_bytes": 104857600, "mig": false,
             "pods": [{"uid": "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab", "used_bytes": 4190109696}]}]})";
  Result<ledger::UsageReport> r = DecodeUsageReport(body);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, 2);
  EXPECT_EQ(r->agent, "vramd-agent/0.2.0");
  EXPECT_EQ(r->source, "nvml");
  ASSERT_EQ(r->gpus.size(), 1u);
  const ledger::GpuUsage& g = r->gpus[0];
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.uuid, "GPU-5e2d0a");
  EXPECT_EQ(g.total, 85520809984);
  EXPECT_EQ(g.used, 4294967296);
  EXPECT_EQ(g.outside_pods, 104857600);
  ASSERT_EQ(g.pods.size(), 1u);
  EXPECT_EQ(g.pods[0].uid, kUid1);
  EXPECT_EQ(g.pods[0].used, 4190109696);
}

TEST(DecodeUsageReport, OptionalPartsMayBeAbsentAndGpusComeBackSorted) {
  Result<ledger::UsageReport> r =
      DecodeUsageReport(R"({"gpus":[{"index":3,"total_bytes":10,"used_bytes":2},{"index":1,"total_bytes":10,"used_bytes":0}]})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, 2);
  ASSERT_EQ(r->gpus.size(), 2u);
  EXPECT_EQ(r->gpus[0].index, 1);
  EXPECT_EQ(r->gpus[1].index, 3);
  EXPECT_EQ(r->gpus[1].used, 2);
  EXPECT_TRUE(r->gpus[1].uuid.empty());
  EXPECT_TRUE(r->gpus[1].pods.empty());
  EXPECT_EQ(r->gpus[1].outside_pods, 0);
}

// Issue 31: a GPU the agent has no per-process figures for says why, and
// how many process lists it refused.
TEST(DecodeUsageReport, ProcessesUnavailableAndRefusedListsDecode) {
  Result<ledger::UsageReport> r = DecodeUsageReport(
      Report(Gpu(0, R"(,"processes_unavailable":"nvmlDeviceGetRunningProcessDetailList: 3 entries for 2, refused",)"
                    R"("invalid_process_lists":5)") +
             "," + Gpu(1)));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->gpus.size(), 2u);
  EXPECT_EQ(r->gpus[0].processes_unavailable, "nvmlDeviceGetRunningProcessDetailList: 3 entries for 2, refused");
  EXPECT_EQ(r->gpus[0].invalid_process_lists, 5);
  EXPECT_TRUE(r->gpus[1].processes_unavailable.empty());
  EXPECT_EQ(r->gpus[1].invalid_process_lists, 0);
}

TEST(DecodeUsageReport, UnknownKeysAreIgnored) {
  Result<ledger::UsageReport> r = DecodeUsageReport(Report(Gpu(0, R"(,"temperature_c":61)")).insert(1, R"("hostname":"x",)"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->gpus.size(), 1u);
}

TEST(DecodeUsageReport, TheOldReportStillDecodes) {
  Result<ledger::UsageReport> r = DecodeUsageReport(R"({"gpus":{"1":"10Gi","0":1024}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, 1);
  ASSERT_EQ(r->gpus.size(), 2u);
  EXPECT_EQ(r->gpus[0].index, 0);
  EXPECT_EQ(r->gpus[0].used, 1024);
  EXPECT_EQ(r->gpus[1].index, 1);
  EXPECT_EQ(r->gpus[1].used, int64_t{10} << 30);
  EXPECT_EQ(r->gpus[1].total, 0);  // not reported
}

TEST(DecodeUsageReport, ASamePodOnTwoGpusIsFine) {
  const std::string pod = R"(,"pods":[{"uid":")" + std::string(kUid1) + R"(","used_bytes":5}])";
  Result<ledger::UsageReport> r = DecodeUsageReport(Report(Gpu(0, pod) + "," + Gpu(1, pod)));
  ASSERT_TRUE(r.ok()) << r.status().message();
}

struct Refused {
  const char* name;
  std::string body;
  const char* says;
};

// Issue 32: the agent's activity evidence, per pod ("active") and per GPU.
TEST(DecodeUsageReport, ActivityDecodes) {
  const std::string body = Report(Gpu(0, ",\"utilization_percent\":37,\"pods\":[{\"uid\":\"" + std::string(kUid1) +
                                             "\",\"used_bytes\":5,\"active\":true},{\"uid\":\"" +
                                             std::string(kUid2) + "\",\"used_bytes\":6,\"active\":false}]"));
  Result<ledger::UsageReport> r = DecodeUsageReport(body);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->gpus[0].pods.size(), 2u);
  EXPECT_TRUE(r->gpus[0].pods[0].active);
  EXPECT_FALSE(r->gpus[0].pods[1].active);
  // Absent: not active (the older agents).
  r = DecodeUsageReport(Report(Gpu(0, ",\"pods\":[{\"uid\":\"" + std::string(kUid1) + "\",\"used_bytes\":5}]")));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->gpus[0].pods[0].active);
}

// Issue 34: the agent's enforcement per GPU.
TEST(DecodeUsageReport, EnforcementDecodesSortedAndIsChecked) {
  const std::string e = R"(,"enforcement":{"backend":"none","reason":"no dmem controller","pods":[{"uid":")" +
                        std::string(kUid2) + R"(","state":"accounted","reason":"no dmem controller"},{"uid":")" +
                        std::string(kUid1) + R"(","state":"failed","reason":"EACCES"}]})";
  Result<ledger::UsageReport> r = DecodeUsageReport(Report(Gpu(0, e)));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ledger::GpuEnforcement& g = r->gpus[0].enforcement;
  EXPECT_EQ(g.backend, "none");
  EXPECT_EQ(g.reason, "no dmem controller");
  ASSERT_EQ(g.pods.size(), 2u);
  EXPECT_EQ(g.pods[0].uid, kUid1);  // sorted
  EXPECT_EQ(g.pods[0].state, ledger::EnforceState::kFailed);
  // Absent: nothing reported (an agent before issue 34, or enforce.mode off).
  r = DecodeUsageReport(Report(Gpu(0)));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->gpus[0].enforcement.backend.empty());
  const struct {
    std::string extra;
    const char* error;
  } bad[] = {
      {R"(,"enforcement":"dmem")", "enforcement must be an object"},
      {R"(,"enforcement":{"backend":"cuda"})", "backend"},
      {R"(,"enforcement":{"backend":"none"})", "needs a reason"},
      {R"(,"enforcement":{"backend":"dmem","pods":[{"uid":")" + std::string(kUid1) + R"(","state":"capped"}]})", "state must be"},
      {R"(,"enforcement":{"backend":"dmem","pods":[{"uid":")" + std::string(kUid1) + R"(","state":"failed"}]})", "without a reason"},
      {R"(,"enforcement":{"backend":"dmem","pods":[{"uid":"x","state":"enforced"}]})", "canonical"},
      {R"(,"enforcement":{"backend":"dmem","pods":[{"uid":")" + std::string(kUid1) + R"(","state":"enforced"},{"uid":")" +
           std::string(kUid1) + R"(","state":"enforced"}]})",
       "twice"},
      {R"(,"enforcement":{"backend":"dmem","pods":{}})", "must be an array"},
  };
  for (const auto& c : bad) {
    Result<ledger::UsageReport> x = DecodeUsageReport(Report(Gpu(0, c.extra)));
    ASSERT_FALSE(x.ok()) << c.extra;
    EXPECT_THAT(x.status().message(), HasSubstr(c.error)) << c.extra;
  }
}

TEST(DecodeUsageReport, RefusesWithAMessageThatNamesThePart) {
  const std::string p1 = R"({"uid":")" + std::string(kUid1) + R"(","used_bytes":1})";
  const std::string p2 = R"({"uid":")" + std::string(kUid2) + R"(","used_bytes":1})";
  const std::string many_gpus = [] {
    std::string s;
    for (int i = 0; i <= ledger::kMaxReportGpus; ++i) s += (i ? "," : "") + Gpu(i);
    return s;
  }();
  const std::vector<Refused> cases = {
      {"not JSON", "{gpus:", "not valid JSON"},
      {"not an object", "[]", "body must be"},
      {"no gpus", R"({"version":2})", "body must be"},
      {"gpus a number", R"({"gpus":7})", "gpus must be an array"},
      {"gpus empty", R"({"gpus":[]})", "non-empty array"},
      {"a GPU not an object", R"({"gpus":[1]})", "gpus[0] must be an object"},
      {"version 3", R"({"version":3,"gpus":[)" + Gpu(0) + "]}", "version must be 2"},
      {"version a string", R"({"version":"2","gpus":[)" + Gpu(0) + "]}", "version must be 2"},
      {"agent not a string", R"({"agent":5,"gpus":[)" + Gpu(0) + "]}", "agent must be a string"},
      {"processes_unavailable not a string", Report(Gpu(0, R"(,"processes_unavailable":1)")),
       "GPU 0: processes_unavailable must be a string"},
      {"processes_unavailable too long", Report(Gpu(0, R"(,"processes_unavailable":")" + std::string(257, 'x') + "\"")),
       "processes_unavailable is longer than 256"},
      {"processes_unavailable with a control character", Report(Gpu(0, R"(,"processes_unavailable":"a\nb")")),
       "not printable ASCII"},
      {"invalid_process_lists negative", Report(Gpu(0, R"(,"invalid_process_lists":-1)")),
       "invalid_process_lists must be a whole number"},
      {"invalid_process_lists a string", Report(Gpu(0, R"(,"invalid_process_lists":"3")")),
       "invalid_process_lists must be a whole number"},
      {"no index", R"({"gpus":[{"total_bytes":1,"used_bytes":0}]})", "gpus[0].index must be a whole number"},
      {"index -1", R"({"gpus":[{"index":-1,"total_bytes":1,"used_bytes":0}]})", "index must be a whole number"},
      {"index 10000", R"({"gpus":[{"index":10000,"total_bytes":1,"used_bytes":0}]})", "from 0 to 9999"},
      {"index 1.0", R"({"gpus":[{"index":1.0,"total_bytes":1,"used_bytes":0}]})", "index must be a whole number"},
      {"no total", R"({"gpus":[{"index":0,"used_bytes":0}]})", "GPU 0: total_bytes is required"},
      {"no used", R"({"gpus":[{"index":0,"total_bytes":5}]})", "GPU 0: used_bytes is required"},
      {"total 0", R"({"gpus":[{"index":0,"total_bytes":0,"used_bytes":0}]})", "total_bytes must be above 0"},
      {"used > total", R"({"gpus":[{"index":0,"total_bytes":5,"used_bytes":6}]})",
       "GPU 0: used_bytes 6 is larger than total_bytes 5"},
      {"used negative", R"({"gpus":[{"index":0,"total_bytes":5,"used_bytes":-1}]})", "GPU 0: used_bytes is negative"},
      {"used a fraction", R"({"gpus":[{"index":0,"total_bytes":5,"used_bytes":1.5}]})",
       "used_bytes must be a whole number of bytes (not a fraction"},
      {"used in exponent form", R"({"gpus":[{"index":0,"total_bytes":5000,"used_bytes":1e3}]})",
       "must be a whole number of bytes"},
      {"used NaN", R"({"gpus":[{"index":0,"total_bytes":5,"used_bytes":NaN}]})", "not valid JSON"},
      {"used a quantity string", R"({"gpus":[{"index":0,"total_bytes":5,"used_bytes":"1Gi"}]})",
       "must be a whole number of bytes"},
      {"used 2^63", R"({"gpus":[{"index":0,"total_bytes":5,"used_bytes":9223372036854775808}]})",
       "larger than 2^63-1"},
      {"total above 1 PiB", R"({"gpus":[{"index":0,"total_bytes":1125899906842625,"used_bytes":0}]})",
       "above 1 PiB"},
      {"outside negative", Report(Gpu(0, R"(,"outside_pods_bytes":-5)")), "outside_pods_bytes is negative"},
      {"outside > total", Report(Gpu(0, R"(,"outside_pods_bytes":85520809985)")), "is larger than total_bytes"},
      {"duplicate GPU", Report(Gpu(2) + "," + Gpu(2)), "GPU index 2 is given more than once"},
      {"too many GPUs", Report(many_gpus), "more than 1024 GPUs"},
      {"uuid a number", Report(Gpu(0, R"(,"uuid":5)")), "uuid must be a string"},
      {"uuid with a space", Report(Gpu(0, R"(,"uuid":"GPU 1")")), "uuid is longer than 128 characters or has"},
      {"uuid too long", Report(Gpu(0, R"(,"uuid":")" + std::string(129, 'a') + "\"")), "uuid is longer than 128"},
      {"mig a string", Report(Gpu(0, R"(,"mig":"no")")), "mig must be true or false"},
      {"pod active a string", Report(Gpu(0, ",\"pods\":[{\"uid\":\"" + std::string(kUid1) +
                                                 "\",\"used_bytes\":1,\"active\":\"yes\"}]")),
       "GPU 0: active of pod 0f1c2d3e-aaaa-bbbb-cccc-0123456789ab must be true or false"},
      {"utilization above 100", Report(Gpu(0, R"(,"utilization_percent":101)")),
       "GPU 0: utilization_percent must be a whole number from 0 to 100"},
      {"utilization negative", Report(Gpu(0, R"(,"utilization_percent":-1)")), "utilization_percent must be"},
      {"utilization a fraction", Report(Gpu(0, R"(,"utilization_percent":0.5)")), "utilization_percent must be"},
      {"pods an object", Report(Gpu(0, R"(,"pods":{})")), "pods must be an array"},
      {"pod not an object", Report(Gpu(0, R"(,"pods":[1])")), "each of pods must be an object"},
      {"pod without uid", Report(Gpu(0, R"(,"pods":[{"used_bytes":1}])")), "a pod's uid must be a string"},
      {"pod without used", Report(Gpu(0, R"(,"pods":[{"uid":")" + std::string(kUid1) + "\"}]")),
       "a pod's used_bytes is required"},
      {"pod uid upper case", Report(Gpu(0, R"(,"pods":[{"uid":"0F1C2D3E-AAAA-BBBB-CCCC-0123456789AB","used_bytes":1}])")),
       "is not a canonical UID"},
      {"pod uid without dashes", Report(Gpu(0, R"(,"pods":[{"uid":"0f1c2d3eaaaabbbbcccc0123456789ab","used_bytes":1}])")),
       "is not a canonical UID"},
      {"pod uid a path", Report(Gpu(0, R"(,"pods":[{"uid":"../../etc/passwd","used_bytes":1}])")),
       "is not a canonical UID"},
      {"pod used negative", Report(Gpu(0, ",\"pods\":[{\"uid\":\"" + std::string(kUid1) + "\",\"used_bytes\":-1}]")),
       "is negative"},
      {"pod used > total", Report(Gpu(0, ",\"pods\":[{\"uid\":\"" + std::string(kUid1) +
                                             "\",\"used_bytes\":85520809985}]")),
       "is larger than total_bytes"},
      {"pod used a fraction", Report(Gpu(0, ",\"pods\":[{\"uid\":\"" + std::string(kUid1) + "\",\"used_bytes\":0.5}]")),
       "whole number of bytes"},
      {"duplicate pod", Report(Gpu(0, ",\"pods\":[" + p1 + "," + p2 + "," + p1 + "]")),
       "pod uid 0f1c2d3e-aaaa-bbbb-cccc-0123456789ab is given more than once"},
      // The old report keeps its messages (tests/integration/bad_input_test.cc).
      {"old: empty", R"({"gpus":{}})", "non-empty object"},
      {"old: index x", R"({"gpus":{"x":1}})", "is not a whole number"},
      {"old: index twice", R"({"gpus":{"0":1,"00":2}})", "given more than once"},
      {"old: negative", R"({"gpus":{"0":-1}})", "is negative"},
      {"old: fraction", R"({"gpus":{"0":1.5}})", "must be a byte count or a quantity string"},
      {"old: above 1 PiB", R"({"gpus":{"0":1125899906842625}})", "above 1 PiB"},
  };
  for (const Refused& c : cases) {
    Result<ledger::UsageReport> r = DecodeUsageReport(c.body);
    EXPECT_FALSE(r.ok()) << c.name;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.name;
      EXPECT_THAT(r.status().message(), HasSubstr(c.says)) << c.name;
    }
  }
}

TEST(DecodeUsageReport, TooManyPodFiguresAreRefused) {
  std::string pods;
  for (size_t i = 0; i <= ledger::kMaxReportPodFigures; ++i) {
    char uid[40];
    std::snprintf(uid, sizeof uid, "%08zx-0000-0000-0000-000000000000", i);
    pods += std::string(i ? "," : "") + R"({"uid":")" + uid + R"(","used_bytes":1})";
  }
  Result<ledger::UsageReport> r = DecodeUsageReport(Report(Gpu(0, ",\"pods\":[" + pods + "]")));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("more than 10000 per-pod figures"));
}

TEST(IsCanonicalPodUid, Cases) {
  EXPECT_TRUE(ledger::IsCanonicalPodUid(kUid1));
  EXPECT_TRUE(ledger::IsCanonicalPodUid("00000000-0000-0000-0000-000000000000"));
  EXPECT_FALSE(ledger::IsCanonicalPodUid(""));
  EXPECT_FALSE(ledger::IsCanonicalPodUid("0f1c2d3e-aaaa-bbbb-cccc-0123456789a"));    // one short
  EXPECT_FALSE(ledger::IsCanonicalPodUid("0f1c2d3e-aaaa-bbbb-cccc-0123456789abc"));  // one long
  EXPECT_FALSE(ledger::IsCanonicalPodUid("0f1c2d3e-aaaa-bbbb-cccc-0123456789aB"));   // upper case
  EXPECT_FALSE(ledger::IsCanonicalPodUid("0f1c2d3e_aaaa-bbbb-cccc-0123456789ab"));   // not a dash
  EXPECT_FALSE(ledger::IsCanonicalPodUid("0f1c2d3eaaaaa-bbb-cccc-0123456789ab"));    // dash misplaced
  EXPECT_FALSE(ledger::IsCanonicalPodUid("0f1c2d3g-aaaa-bbbb-cccc-0123456789ab"));   // not hex
}

TEST(CheckUsageReport, IndicesMustAscend) {
  ledger::UsageReport r;
  r.gpus = {{.index = 1, .total = 10, .used = 1}, {.index = 0, .total = 10, .used = 1}};
  EXPECT_THAT(ledger::CheckUsageReport(r).message(), HasSubstr("not in ascending order"));
  r.gpus = {};
  EXPECT_THAT(ledger::CheckUsageReport(r).message(), HasSubstr("names no GPU"));
  r.gpus = {{.index = 0, .total = 10, .used = 1}};
  r.version = 7;
  EXPECT_THAT(ledger::CheckUsageReport(r).message(), HasSubstr("version 7 is not 1 or 2"));
}

TEST(CheckReportAgainstNode, EveryGpuMustBeTheNodes) {
  ledger::Node n;
  n.name = "n1";
  n.gpus = {ledger::Gpu{0, "", 80}, ledger::Gpu{2, "", 80}};
  ledger::UsageReport r;
  r.gpus = {{.index = 0, .total = 10, .used = 1}, {.index = 2, .total = 10, .used = 1}};
  EXPECT_TRUE(ledger::CheckReportAgainstNode(r, n).ok());
  r.gpus.push_back({.index = 3, .total = 10, .used = 1});
  Status s = ledger::CheckReportAgainstNode(r, n);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "node n1 has no GPU 3");
}

}  // namespace
}  // namespace vramd::http
