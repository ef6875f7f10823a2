#include "vramd/extender/wire.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "vramd/kube/decode.h"
#include "vramd/ledger/pod_request.h"
#include "test_paths.h"  // VRAMD_TEST_DATA, VRAMD_BIN_DIR, VRAMD_FAKE_NVML

namespace vramd::extender {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(VRAMD_TEST_DATA) + "/extender/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Wire, DecodesRealFilterBodyWithInitAndSidecarContainers) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(Fixture("filter-multicontainer-initcontainer.json"), "vramd.io/vram", &a).ok());
  EXPECT_TRUE(a.cache_mode);
  EXPECT_EQ(a.node_names, (std::vector<std::string_view>{"ness-linux3", "ness-server2", "ness-legion1", "cpu-only"}));
  EXPECT_EQ(a.pod.name, "hermes-beast");
  EXPECT_EQ(a.pod.ns, "default");
  EXPECT_EQ(a.pod.uid, "fa0e8038-ccff-4777-944f-8e5ce19b3dd9");
  EXPECT_EQ(a.pod.model, "hermes-beast");
  EXPECT_EQ(a.pod.vram_peak, "40Gi");
  EXPECT_EQ(a.pod.priority, -1000);
  ASSERT_EQ(a.pod.containers.size(), 2u);
  EXPECT_EQ(a.pod.containers[0].limit, "30Gi");
  EXPECT_EQ(a.pod.containers[1].request, "2Gi");
  ASSERT_EQ(a.pod.init_containers.size(), 1u);
  EXPECT_EQ(a.pod.init_containers[0].limit, "1Gi");
  Result<ledger::VramRequest> r = ledger::ComputeVramRequest(a.pod);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->total, 32 * kGi);
  EXPECT_EQ(r->peak_per_gpu, 40 * kGi);
}

TEST(Wire, DecodesGpuCountAndPlainByteQuantity) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(Fixture("filter-gpu-count-2.json"), "vramd.io/vram", &a).ok());
  Result<ledger::VramRequest> r = ledger::ComputeVramRequest(a.pod);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->total, 137438953472);
  EXPECT_EQ(r->gpu_count, 2);
  EXPECT_EQ(r->per_gpu, 64 * kGi);
}

TEST(Wire, DecodesPriorityClassAndPrioritizeBodies) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(Fixture("filter-priorityclass.json"), "vramd.io/vram", &a).ok());
  EXPECT_EQ(a.pod.priority, 100000);
  ASSERT_TRUE(d.Decode(Fixture("prioritize-multicontainer.json"), "vramd.io/vram", &a).ok());
  EXPECT_EQ(a.node_names.size(), 4u);
}

TEST(Wire, DecodesPriorityClassNameAndTheDisposableAnnotation) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(Fixture("filter-priorityclass.json"), "vramd.io/vram", &a).ok());
  EXPECT_EQ(a.pod.priority_class, "homelab-critical");
  EXPECT_FALSE(a.pod.disposable.has_value());
  ASSERT_TRUE(d.Decode(R"({"Pod":{"metadata":{"annotations":{"vramd.io/disposable":"true"}},)"
                       R"("spec":{"priority":-2147483648,"priorityClassName":"vramd-disposable"}},"NodeNames":[]})",
                       "vramd.io/vram", &a)
                  .ok());
  EXPECT_EQ(a.pod.disposable, "true");
  EXPECT_EQ(a.pod.priority, -2147483648);
  EXPECT_EQ(a.pod.priority_class, "vramd-disposable");
  ASSERT_TRUE(d.Decode(R"({"Pod":{"spec":{"priority":null,"priorityClassName":null}},"NodeNames":[]})",
                       "vramd.io/vram", &a)
                  .ok());
  EXPECT_EQ(a.pod.priority, 0);
  EXPECT_EQ(a.pod.priority_class, "");
}

TEST(Wire, DecodesTheIdleTtlAnnotation) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(Fixture("filter-priorityclass.json"), "vramd.io/vram", &a).ok());
  EXPECT_FALSE(a.pod.idle_ttl.has_value());
  ASSERT_TRUE(d.Decode(R"({"Pod":{"metadata":{"annotations":{"vramd.io/idle-ttl":"10m"}}},"NodeNames":[]})",
                       "vramd.io/vram", &a)
                  .ok());
  EXPECT_EQ(a.pod.idle_ttl, "10m");
  Status s = d.Decode(R"({"Pod":{"metadata":{"annotations":{"vramd.io/idle-ttl":600}}},"NodeNames":[]})",
                      "vramd.io/vram", &a);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("vramd.io/idle-ttl"), std::string::npos) << s.message();
}

// Issue 32: the controller, the opt-in and the gang, read the way the
// Kubernetes decoder reads them (bind takes the filter's demand when this
// replica filtered the pod, else the API server's pod: both must agree).
TEST(Wire, OwnerEvictableAndGangAsTheKubernetesDecoderReadsThem) {
  const std::vector<std::string> metadata = {
      R"("labels":{"batch.kubernetes.io/job-name":"train","app":"x"},"annotations":{"vramd.io/evictable":"TRUE"},)"
      R"("ownerReferences":[{"kind":"Node","uid":"n"},{"kind":"Job","uid":"job-uid","controller":true}])",
      R"("labels":{"leaderworkerset.sigs.k8s.io/group-index":"2","leaderworkerset.sigs.k8s.io/name":"lws"})",
      R"("labels":{"job-name":"j"},"annotations":{"scheduling.k8s.io/group-name":"vg"})",
      R"("labels":{"job-name":5,"jobset.sigs.k8s.io/jobset-name":"js"})",
      R"("labels":null,"ownerReferences":null)",
      R"("ownerReferences":[{"kind":"ReplicaSet","uid":"rs","controller":"true"}])",
      R"("ownerReferences":[{"kind":5,"uid":"rs","controller":true}])",
      R"("ownerReferences":["rs",{"kind":"ReplicaSet","uid":"rs","controller":true}])",
      R"("ownerReferences":{"kind":"ReplicaSet"})",
      R"("ownerReferences":[{"kind":"ReplicaSet","uid":")" + std::string(254, 'u') + R"(","controller":true}])",
      R"("labels":{"job-name":")" + std::string(400, 'j') + R"("})",
  };
  for (const std::string& md : metadata) {
    SCOPED_TRACE(md);
    const std::string pod = R"({"metadata":{"name":"p","namespace":"ml",)" + md + "}}";
    ArgsDecoder d;
    ExtenderArgs a;
    ASSERT_TRUE(d.Decode(R"({"Pod":)" + pod + R"(,"NodeNames":[]})", "vramd.io/vram", &a).ok());
    Result<kube::PodInfo> k = kube::DecodePod(pod, "vramd.io/vram");
    if (!k.ok()) {  // the Kubernetes decoder is strict about label types; the wire one skips them
      EXPECT_NE(md.find("\"job-name\":5"), std::string::npos) << k.status().ToString();
      EXPECT_EQ(a.pod.gang, "jobset/js");
      continue;
    }
    EXPECT_EQ(a.pod.owner_kind, k->spec.owner_kind);
    EXPECT_EQ(a.pod.owner_uid, k->spec.owner_uid);
    EXPECT_EQ(a.pod.evictable, k->spec.evictable);
    EXPECT_EQ(a.pod.gang, k->spec.gang);
  }
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(R"({"Pod":{"metadata":{)" + metadata[0] + R"(}},"NodeNames":[]})", "vramd.io/vram", &a).ok());
  EXPECT_EQ(a.pod.owner_kind, "Job");
  EXPECT_EQ(a.pod.owner_uid, "job-uid");
  EXPECT_EQ(a.pod.gang, "job/train");
  Result<ledger::VramRequest> r = ledger::ComputeVramRequest(a.pod);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->evictable);
}

TEST(Wire, APriorityClassNameLongerThanKubernetesAllowsIsRejected) {
  ArgsDecoder d;
  ExtenderArgs a;
  const std::string ok = std::string(ledger::kMaxPriorityClassName, 'c');
  const auto body = [](const std::string& cls) {
    return R"({"Pod":{"spec":{"priorityClassName":")" + cls + R"("}},"NodeNames":[]})";
  };
  ASSERT_TRUE(d.Decode(body(ok), "vramd.io/vram", &a).ok());
  EXPECT_EQ(a.pod.priority_class, ok);
  Status s = d.Decode(body(ok + "c"), "vramd.io/vram", &a);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("priorityClassName is longer than 253 bytes"), std::string::npos) << s.message();
}

// The two decoders of a pod (this one for extender calls, kube::DecodePod for
// the API server's objects) give the same view of the same pod, so the demand
// and the entry see one priority whichever way the pod came.
TEST(Wire, SeesThePodAsTheKubernetesDecoderDoes) {
  for (const char* name : {"filter-multicontainer-initcontainer.json", "filter-priorityclass.json",
                           "filter-gpu-count-2.json"}) {
    SCOPED_TRACE(name);
    const std::string body = Fixture(name);
    ArgsDecoder d;
    ExtenderArgs a;
    ASSERT_TRUE(d.Decode(body, "vramd.io/vram", &a).ok());
    Result<kube::PodInfo> pod = kube::DecodePod(nlohmann::json::parse(body).at("Pod").dump(), "vramd.io/vram");
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    EXPECT_EQ(a.pod, pod->spec);
  }
}

TEST(Wire, OtherResourceNameSeesNoVram) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(Fixture("filter-multicontainer-initcontainer.json"), "example.com/vram", &a).ok());
  Result<ledger::VramRequest> r = ledger::ComputeVramRequest(a.pod);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->wants_vram());
}

TEST(Wire, NonCacheModeKeepsNodeObjects) {
  std::string body =
      R"({"Pod":{"metadata":{"name":"p","namespace":"d","uid":"u"},"spec":{"containers":[]}},)"
      R"("Nodes":{"items":[{"metadata":{"name":"a","labels":{"x":"1"}}},{"metadata":{"name":"b"}}]},"NodeNames":null})";
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(body, "vramd.io/vram", &a).ok());
  EXPECT_FALSE(a.cache_mode);
  EXPECT_EQ(a.node_names, (std::vector<std::string_view>{"a", "b"}));
  ledger::FilterResult r;
  r.fits = {"b"};
  r.failed = {{"a", "full"}};
  std::string out;
  WriteFilterResult(r, a, &out);
  auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(j["NodeNames"].is_null());
  ASSERT_EQ(j["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(j["Nodes"]["items"][0]["metadata"]["name"], "b");
  EXPECT_EQ(j["FailedNodes"]["a"], "full");
}

TEST(Wire, UnresolvableNodesAreAlsoInFailedNodesForOldSchedulers) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(R"({"Pod":{},"NodeNames":["a","b","c"]})", "vramd.io/vram", &a).ok());
  ledger::FilterResult r;
  r.fits = {"a"};
  r.failed = {{"b", "busy"}};
  r.unresolvable = {{"c", "too small"}};
  std::string out;
  WriteFilterResult(r, a, &out);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["FailedNodes"], (nlohmann::json{{"b", "busy"}, {"c", "too small"}}));
  EXPECT_EQ(j["FailedAndUnresolvableNodes"], (nlohmann::json{{"c", "too small"}}));
}

TEST(Wire, AReasonSharedByManyNodesIsWrittenForEachOfThem) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(R"({"Pod":{},"NodeNames":["a","b","c","d"]})", "vramd.io/vram", &a).ok());
  ledger::FilterResult r;
  const std::string_view shared = r.reasons.emplace_back("needs \"8Gi\"\n\u00e9");  // escapes
  const std::string_view other = r.reasons.emplace_back("other");
  r.failed = {{"a", shared}, {"b", shared}, {"c", other}, {"d", shared}};
  std::string out;
  WriteFilterResult(r, a, &out);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["FailedNodes"], (nlohmann::json{{"a", "needs \"8Gi\"\n\u00e9"},
                                              {"b", "needs \"8Gi\"\n\u00e9"},
                                              {"c", "other"},
                                              {"d", "needs \"8Gi\"\n\u00e9"}}));
}

TEST(Wire, CaseInsensitiveTopLevelKeysLikeGo) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(R"({"pod":{"metadata":{"name":"p"}},"nodenames":["n1"]})", "vramd.io/vram", &a).ok());
  EXPECT_EQ(a.node_names, (std::vector<std::string_view>{"n1"}));
}

TEST(Wire, EscapedNodeNamesRoundTrip) {
  ArgsDecoder d;
  ExtenderArgs a;
  ASSERT_TRUE(d.Decode(R"({"Pod":{},"NodeNames":["a\"b","c\\d"]})", "vramd.io/vram", &a).ok());
  ledger::FilterResult r;
  r.fits = a.node_names;
  std::string out;
  WriteFilterResult(r, a, &out);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["NodeNames"][0], "a\"b");
  EXPECT_EQ(j["NodeNames"][1], "c\\d");
}

struct BadBody {
  const char* name;
  const char* body;
  const char* message_part;
};

class WireRejects : public ::testing::TestWithParam<BadBody> {};

TEST_P(WireRejects, WithPreciseMessage) {
  ArgsDecoder d;
  ExtenderArgs a;
  Status s = d.Decode(GetParam().body, "vramd.io/vram", &a);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find(GetParam().message_part), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(
    Wire, WireRejects,
    ::testing::Values(
        BadBody{"Empty", "", "invalid extender request"}, BadBody{"NotJson", "hello", "invalid extender request"},
        BadBody{"Array", "[1,2]", "must be a JSON object"}, BadBody{"Truncated", R"({"Pod":{"metadata":)", "invalid"},
        BadBody{"MissingPod", R"({"NodeNames":["a"]})", "missing Pod"},
        BadBody{"NullPod", R"({"Pod":null,"NodeNames":["a"]})", "Pod is null"},
        BadBody{"NoNodes", R"({"Pod":{},"NodeNames":null,"Nodes":null})", "neither NodeNames nor Nodes"},
        BadBody{"NodeNamesWrongType", R"({"Pod":{},"NodeNames":5})", "NodeNames must be"},
        BadBody{"NodeNameNotString", R"({"Pod":{},"NodeNames":[1]})", "NodeNames[] must be a string"},
        BadBody{"ContainersNotArray", R"({"Pod":{"spec":{"containers":{}}},"NodeNames":[]})", "containers must be"},
        BadBody{"LimitsWrongType", R"({"Pod":{"spec":{"containers":[{"resources":{"limits":[]}}]}},"NodeNames":[]})",
                "limits must be an object"},
        BadBody{"QuantityWrongType",
                R"({"Pod":{"spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":true}}}]}},"NodeNames":[]})",
                "quantity"},
        BadBody{"AnnotationNotString", R"({"Pod":{"metadata":{"annotations":{"vramd.io/gpu-count":2}}},"NodeNames":[]})",
                "gpu-count] must be a string"},
        BadBody{"PriorityNotInteger", R"({"Pod":{"spec":{"priority":"high"}},"NodeNames":[]})",
                "Pod.spec.priority must be a 32-bit integer"},
        BadBody{"PriorityOutOfRange", R"({"Pod":{"spec":{"priority":3000000000}},"NodeNames":[]})",
                "Pod.spec.priority must be a 32-bit integer"},
        BadBody{"PriorityFraction", R"({"Pod":{"spec":{"priority":1.5}},"NodeNames":[]})",
                "Pod.spec.priority must be a 32-bit integer"},
        BadBody{"PriorityClassNotString", R"({"Pod":{"spec":{"priorityClassName":7}},"NodeNames":[]})",
                "Pod.spec.priorityClassName must be a string"},
        BadBody{"DisposableNotString",
                R"({"Pod":{"metadata":{"annotations":{"vramd.io/disposable":true}}},"NodeNames":[]})",
                "disposable] must be a string"},
        BadBody{"TrailingGarbage", R"({"Pod":{},"NodeNames":[]} xx)", "invalid extender request: body"},
        BadBody{"NodeWithoutName", R"({"Pod":{},"Nodes":{"items":[{"metadata":{}}]}})", "metadata.name"}),
    [](const auto& info) { return info.param.name; });

TEST(Wire, BindArgs) {
  Result<BindArgs> b = DecodeBindArgs(
      R"({"PodName":"hermes-beast","PodNamespace":"default","PodUID":"fa0e8038","Node":"cpu-only"})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->pod_name, "hermes-beast");
  EXPECT_EQ(b->node, "cpu-only");
  EXPECT_FALSE(DecodeBindArgs(R"({"PodName":"x"})").ok());
  EXPECT_FALSE(DecodeBindArgs(R"({"PodName":1,"PodNamespace":"a","PodUID":"b","Node":"c"})").ok());
  EXPECT_FALSE(DecodeBindArgs("nope").ok());
}

TEST(Wire, BindFixtureDecodes) {
  Result<BindArgs> b = DecodeBindArgs(Fixture("bind.json"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->pod_uid, "fa0e8038-ccff-4777-944f-8e5ce19b3dd9");
}

TEST(Wire, ResultsAreValidJsonWithExactKeys) {
  std::string out;
  WriteHostPriorities({{"n1", 7}, {"n\"2", 0}}, &out);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j[0]["Host"], "n1");
  EXPECT_EQ(j[0]["Score"], 7);
  EXPECT_EQ(j[1]["Host"], "n\"2");
  out.clear();
  WriteBindResult("bad \n thing", &out);
  EXPECT_EQ(nlohmann::json::parse(out)["Error"], "bad \n thing");
  out.clear();
  WriteFilterError("down", &out);
  j = nlohmann::json::parse(out);
  EXPECT_EQ(j["Error"], "down");
  EXPECT_TRUE(j["NodeNames"].is_null());
}

// Found by fuzz/bind_fuzz.cc: a message that echoes request bytes cut in the
// middle of a UTF-8 sequence ("invalid quantity" quotes 64 bytes) made the
// answer invalid JSON.
TEST(Wire, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  std::string out;
  AppendJsonString("caf\xc3\xa9 \xc3 \xff \xed\xa0\x80 \xf0\x9f\x98\x80", &out);
  EXPECT_EQ(out, "\"caf\xc3\xa9 \\ufffd \\ufffd \\ufffd\\ufffd\\ufffd \xf0\x9f\x98\x80\"");
  EXPECT_EQ(nlohmann::json::parse(out), "caf\u00e9 \ufffd \ufffd \ufffd\ufffd\ufffd \U0001F600");
}

// AppendJsonString reads 8 bytes at a time and the last word overlapping
// (or padded, under 8 bytes): a byte that needs escaping is found at every
// position of every length, against a byte-at-a-time reference escaper.
TEST(Wire, EveryByteThatNeedsEscapingIsFoundAtEveryPositionAndLength) {
  const auto reference = [](std::string_view s) {
    std::string r = "\"";
    for (unsigned char c : s) {
      if (c == '"') r += "\\\"";
      else if (c == '\\') r += "\\\\";
      else if (c == '\n') r += "\\n";
      else if (c == 0x01) r += "\\u0001";
      else if (c == 0xff) r += "\\ufffd";
      else r.push_back(static_cast<char>(c));
    }
    return r + "\"";
  };
  int cases = 0;
  for (size_t len = 0; len <= 25; ++len) {
    std::string plain;
    for (size_t i = 0; i < len; ++i) plain.push_back(static_cast<char>('a' + i % 26));
    std::string out = "x";
    AppendJsonString(plain, &out);
    EXPECT_EQ(out, "x" + reference(plain)) << len;
    for (size_t pos = 0; pos < len; ++pos) {
      for (char special : {'"', '\\', '\n', '\x01', '\xff'}) {
        std::string s = plain;
        s[pos] = special;
        out = "x";
        AppendJsonString(s, &out);
        ASSERT_EQ(out, "x" + reference(s)) << "length " << len << ", byte " << pos;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 5 * (25 * 26 / 2));
}

}  // namespace
}  // namespace vramd::extender
