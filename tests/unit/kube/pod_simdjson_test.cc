// The pod watch's fast decoder against the reference (PodFromJson through
// nlohmann): whatever the fast one decodes equals the reference's PodInfo;
// whatever the reference rejects, the fast one leaves to it; the pods a real
// API server sends take the fast path. The kube_pod fuzz target checks the
// first property on random input.
#include "kube/pod_simdjson.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kube/watch_stream.h"
#include "test_paths.h"  // VRAMD_TEST_DATA
#include "vramd/kube/decode.h"

namespace vramd::kube {
namespace {

constexpr const char* kRes = "vramd.io/vram";

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The pods of the extender fixtures (as real kube-schedulers sent them) and
// the kube_pod fuzz seeds.
std::vector<std::pair<std::string, std::string>> Corpus() {
  std::vector<std::pair<std::string, std::string>> out;
  const std::filesystem::path data(VRAMD_TEST_DATA);
  for (const auto& f : std::filesystem::directory_iterator(data / "extender")) {
    nlohmann::json body = nlohmann::json::parse(ReadFile(f.path()), nullptr, false);
    if (body.is_object() && body.contains("Pod")) out.emplace_back(f.path().filename(), body["Pod"].dump());
  }
  for (const auto& f : std::filesystem::directory_iterator(data.parent_path().parent_path() / "fuzz/corpus/kube_pod")) {
    out.emplace_back(f.path().filename(), ReadFile(f.path()));
  }
  return out;
}

// Pods that stress the rules: duplicate keys (the last wins), nulls, owner
// references, sidecars, deletion, priority at its bounds, and the values the
// fast decoder leaves to the reference (numeric quantities, wrong types).
const char* kCases[] = {
    R"({"metadata":{"name":"p"}})",
    R"({"metadata":{"name":"p","namespace":"ml","uid":"u","resourceVersion":"7","annotations":{"a":"1","vramd.io/gpu-count":"2","vramd.io/vram-peak":"9Gi","vramd.io/model":"m","vramd.io/disposable":"true","vramd.io/idle-ttl":"1h","vramd.io/evictable":"false"},"labels":{"app":"x","vramd.io/gang":"g"}},"spec":{"nodeName":"n1","schedulerName":"s","priority":-2147483648,"priorityClassName":"high","overhead":{"vramd.io/vram":"1Gi"},"containers":[{"resources":{"requests":{"vramd.io/vram":"4Gi"},"limits":{"vramd.io/vram":"8Gi","cpu":"1"}}},{"name":"plain"}],"initContainers":[{"restartPolicy":"Always","resources":{"limits":{"vramd.io/vram":"1Gi"}}},{"restartPolicy":"OnFailure"}]},"status":{"phase":"Running"}})",
    R"({"metadata":{"name":"a","name":"b","labels":{"k":"1","k":"2"}},"spec":{"nodeName":"n1","nodeName":"n2"}})",
    R"({"metadata":{"name":"a"},"metadata":{"name":"b","uid":"u2"}})",
    R"({"metadata":{"name":"p","uid":null,"annotations":null,"labels":null,"ownerReferences":null},"spec":{"nodeName":null,"containers":null,"initContainers":null,"overhead":null,"priority":null,"priorityClassName":null},"status":{"phase":null}})",
    R"({"metadata":{"name":"p"},"spec":null,"status":null})",
    R"({"metadata":{"name":"p","ownerReferences":[{"kind":"ReplicaSet","uid":"rs","controller":true},{"kind":"Job","uid":"j","controller":true}]}})",
    R"({"metadata":{"name":"p","ownerReferences":[{"kind":"ReplicaSet","uid":"rs"},{"kind":"Job","uid":"j","controller":true}]}})",
    R"({"metadata":{"name":"p","ownerReferences":[{"kind":5,"uid":"rs","controller":true},{"kind":"Job","uid":"j","controller":true}]}})",
    R"({"metadata":{"name":"p","ownerReferences":[{"kind":"ReplicaSet","uid":"rs","controller":"true"}]}})",
    R"({"metadata":{"name":"p","ownerReferences":["x",{"kind":"Job","uid":"j","controller":true,"controller":false}]}})",
    R"({"metadata":{"name":"p","ownerReferences":{"kind":"Job"}}})",
    R"({"metadata":{"name":"p","deletionTimestamp":"2026-11-21T06:10:00.5+01:00"}})",
    R"({"metadata":{"name":"p","deletionTimestamp":"soon"}})",
    R"({"metadata":{"name":"p","deletionTimestamp":5}})",
    R"({"metadata":{"name":"p","deletionTimestamp":null}})",
    R"({"metadata":{"name":"p"},"spec":{"priority":2147483647}})",
    R"({"metadata":{"name":"p"},"spec":{"priority":2147483648}})",
    R"({"metadata":{"name":"p"},"spec":{"priority":-2147483649}})",
    R"({"metadata":{"name":"p"},"spec":{"priority":1.0}})",
    R"({"metadata":{"name":"p"},"spec":{"priority":18446744073709551615}})",
    R"({"metadata":{"name":"p"},"spec":{"priority":184467440737095516150}})",
    R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":8589934592}}}]}})",
    R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":1.5e3}}}]}})",
    R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":null}}}]}})",
    R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":true}}}]}})",
    R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":null}]}})",
    R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":[]}]}})",
    R"({"metadata":{"name":"p"},"spec":{"containers":["c"]}})",
    R"({"metadata":{"name":"p"},"spec":{"initContainers":[{"restartPolicy":1}]}})",
    R"({"metadata":{"name":"p"},"spec":{"initContainers":[{"restartPolicy":null}]}})",
    R"({"metadata":{"name":"p"},"spec":{"priorityClassName":"x","priorityClassName":1}})",
    R"({"metadata":{"name":"p","annotations":{"vramd.io/gpu-count":2}}})",
    R"({"metadata":{"name":"p","annotations":{"a":1,"a":"2"}}})",
    R"({"metadata":{"name":"p","labels":["a"]}})",
    R"({"metadata":{"name":""}})",
    R"({"metadata":{"name":5}})",
    R"({"metadata":"p"})",
    R"({"metadata":null})",
    R"({"spec":{}})",
    R"([])",
    R"({"metadata":{"name":"p"}} x)",
    R"({"metadata":{"name":"p\u00e9\ud83d\ude00","namespace":"\"q\""}})",
    "{\"metadata\":{\"name\":\"p\xff\"}}",
    "\xef\xbb\xbf{\"metadata\":{\"name\":\"bom\"}}",
};

TEST(FastPodDecoder, DecodesOnlyWhatTheReferenceDecodesTheSame) {
  FastPodDecoder fast;
  std::vector<std::pair<std::string, std::string>> all = Corpus();
  for (const char* c : kCases) all.emplace_back(c, c);
  int fast_taken = 0;
  for (const auto& [name, text] : all) {
    Result<PodInfo> ref = DecodePod(text, kRes);
    PodInfo got;
    const bool taken = fast.DecodePod(text, kRes, &got);
    fast_taken += taken;
    if (taken) {
      ASSERT_TRUE(ref.ok()) << name << ": the fast decoder took a pod the reference rejects: "
                            << ref.status().message();
      EXPECT_EQ(got, *ref) << name;
      EXPECT_EQ(got.spec, ref->spec) << name;
    }
  }
  // Most of them are well-formed and take the fast path.
  EXPECT_GT(fast_taken, static_cast<int>(all.size()) / 2) << fast_taken << " of " << all.size();
}

TEST(FastPodDecoder, TakesThePodsARealApiServerSends) {
  FastPodDecoder fast;
  int fixtures = 0;
  for (const auto& [name, text] : Corpus()) {
    if (name.rfind("filter-", 0) != 0 && name.rfind("prioritize-", 0) != 0) continue;
    ++fixtures;
    PodInfo got;
    EXPECT_TRUE(fast.DecodePod(text, kRes, &got)) << name;
  }
  EXPECT_GE(fixtures, 4);
}

TEST(FastPodDecoder, LeavesWhatItIsNotSureOfToTheReference) {
  FastPodDecoder fast;
  for (const char* text : {
           R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":8589934592}}}]}})",
           R"({"metadata":{"name":"p","annotations":{"a":1,"a":"2"}}})",  // the reference keeps the last: "2"
           R"({"metadata":{"name":"p"},"spec":{"priority":2147483648}})",
           R"({"metadata":{"name":""}})",
       }) {
    PodInfo got;
    EXPECT_FALSE(fast.DecodePod(text, kRes, &got)) << text;
  }
}

// Whole watch lines: the same events, in the same order, with the same
// statuses, through the fast path and through the reference alone.
TEST(FastPodDecoder, WatchLinesGiveTheReferencesEvents) {
  std::vector<std::string> lines;
  for (const auto& [name, text] : Corpus()) {
    for (const char* type : {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "SOMETHING"}) {
      lines.push_back(std::string(R"({"type":")") + type + R"(","object":)" + text + "}");
    }
  }
  lines.push_back(R"({"object":{"metadata":{"name":"p"}},"type":"MODIFIED","type":"DELETED"})");
  lines.push_back(R"({"type":"ADDED","object":null})");
  lines.push_back(R"({"type":null,"object":{"metadata":{"name":"p"}}})");
  lines.push_back(R"({"type":"ADDED"})");
  lines.push_back(R"({"type":"ERROR","object":{"code":410,"message":"too old","reason":"Expired"}})");
  lines.push_back(R"(not json)");
  for (const std::string& line : lines) {
    std::vector<std::pair<WatchEventType, PodInfo>> fast, ref;
    Status a = HandlePodWatchLine(line, kRes, [&](const WatchEvent<PodInfo>& e) { fast.emplace_back(e.type, e.object); });
    Status b = HandlePodWatchLineReference(line, kRes,
                                           [&](const WatchEvent<PodInfo>& e) { ref.emplace_back(e.type, e.object); });
    EXPECT_EQ(a.code(), b.code()) << line;
    EXPECT_EQ(a.message(), b.message()) << line;
    EXPECT_EQ(fast, ref) << line;
  }
}

}  // namespace
}  // namespace vramd::kube
