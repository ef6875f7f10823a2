#include "vramd/kube/decode.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "vramd/ledger/pod_request.h"
#include "test_paths.h"  // VRAMD_TEST_DATA, VRAMD_BIN_DIR, VRAMD_FAKE_NVML

namespace vramd::kube {
namespace {

constexpr const char* kRes = "vramd.io/vram";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The Pod object a real kube-scheduler sent in a filter call.
std::string FixturePod() {
  std::string body = ReadFile(std::string(VRAMD_TEST_DATA) + "/extender/filter-multicontainer-initcontainer.json");
  return nlohmann::json::parse(body).at("Pod").dump();
}

TEST(DecodePod, FixturePodGivesNamesPhaseAndAnnotations) {
  Result<PodInfo> pod = DecodePod(FixturePod(), kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->name, "hermes-beast");
  EXPECT_EQ(pod->ns, "default");
  EXPECT_EQ(pod->uid, "fa0e8038-ccff-4777-944f-8e5ce19b3dd9");
  EXPECT_EQ(pod->resource_version, "206");
  EXPECT_EQ(pod->node_name, "");
  EXPECT_EQ(pod->phase, "Pending");
  EXPECT_EQ(pod->scheduler_name, "default-scheduler");
  EXPECT_FALSE(pod->deleting);
  EXPECT_EQ(pod->annotations.at("vramd.io/model"), "hermes-beast");
  EXPECT_EQ(pod->annotations.at("vramd.io/vram-peak"), "40Gi");
}

TEST(DecodePod, FixturePodSpecViewHasContainersInitAndAnnotations) {
  Result<PodInfo> pod = DecodePod(FixturePod(), kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  const ledger::PodSpecView& s = pod->spec;
  EXPECT_EQ(s.name, "hermes-beast");
  EXPECT_EQ(s.ns, "default");
  EXPECT_EQ(s.uid, "fa0e8038-ccff-4777-944f-8e5ce19b3dd9");
  ASSERT_EQ(s.containers.size(), 2u);
  EXPECT_EQ(s.containers[0].request, "30Gi");
  EXPECT_EQ(s.containers[0].limit, "30Gi");
  EXPECT_EQ(s.containers[1].request, "2Gi");
  EXPECT_EQ(s.containers[1].limit, "2Gi");
  ASSERT_EQ(s.init_containers.size(), 1u);
  EXPECT_EQ(s.init_containers[0].request, "1Gi");
  EXPECT_FALSE(s.init_containers[0].sidecar);
  EXPECT_FALSE(s.overhead.has_value());
  EXPECT_FALSE(s.gpu_count.has_value());
  EXPECT_EQ(s.vram_peak, "40Gi");
  EXPECT_EQ(s.model, "hermes-beast");
  EXPECT_EQ(s.priority, -1000);

  // And the ledger counts it as kube-scheduler does: max(30+2, 1) = 32Gi.
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(s);
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_EQ(req->total, int64_t{32} << 30);
}

TEST(DecodePod, IdleTtlAnnotationReachesTheDemand) {
  Result<PodInfo> pod = DecodePod(FixturePod(), kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_FALSE(pod->spec.idle_ttl.has_value());
  pod = DecodePod(R"({"metadata":{"name":"p","namespace":"ml","annotations":{"vramd.io/idle-ttl":"1h30m"}},
                      "spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":"1Gi"}}}]}})",
                  kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->spec.idle_ttl, "1h30m");
  Result<ledger::Demand> d = ledger::ComputeVramRequest(pod->spec);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->idle_ttl_ms, 5'400'000);
}

TEST(DecodePod, PriorityClassAndDisposableAnnotationReachTheDemand) {
  Result<PodInfo> pod = DecodePod(FixturePod(), kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->spec.priority_class, "homelab-disposable");
  EXPECT_FALSE(pod->spec.disposable.has_value());

  pod = DecodePod(R"({"metadata":{"name":"p","namespace":"ml","annotations":{"vramd.io/disposable":"true"}},
                      "spec":{"priority":-5,"priorityClassName":"batch",
                              "containers":[{"resources":{"limits":{"vramd.io/vram":"1Gi"}}}]}})",
                  kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->spec.disposable, "true");
  Result<ledger::Demand> d = ledger::ComputeVramRequest(pod->spec);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->ns, "ml");
  EXPECT_EQ(d->priority, -5);
  EXPECT_EQ(d->priority_class, "batch");
  EXPECT_TRUE(d->victim);
}

// Issue 32: the controller, the opt-in and the gang reach the pod's spec view.
TEST(DecodePod, ControllerEvictableAndGang) {
  Result<PodInfo> pod = DecodePod(R"({"metadata":{"name":"p","namespace":"ml","uid":"u1",
      "labels":{"batch.kubernetes.io/job-name":"train","app":"x"},
      "annotations":{"vramd.io/evictable":"true"},
      "ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n","uid":"node-uid"},
                         {"apiVersion":"batch/v1","kind":"Job","name":"train","uid":"job-uid","controller":true}]},
      "spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":"1Gi"}}}]}})",
                                  kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->spec.owner_kind, "Job");
  EXPECT_EQ(pod->spec.owner_uid, "job-uid");
  EXPECT_EQ(pod->spec.evictable, "true");
  EXPECT_EQ(pod->spec.gang, "job/train");
}

// Owner references the API server would never send leave the pod bare (kept
// from vramd's own evictions), never fail the decode.
TEST(DecodePod, OddOwnerReferencesLeaveThePodBare) {
  const std::vector<std::string> refs = {
      R"("ownerReferences":[{"kind":"ReplicaSet","uid":"rs"}])",                                // no controller
      R"("ownerReferences":[{"kind":"ReplicaSet","uid":"rs","controller":"true"}])",            // not a bool
      R"("ownerReferences":[{"kind":5,"uid":"rs","controller":true}])",                         // kind not a string
      R"("ownerReferences":[{"kind":"ReplicaSet","controller":true}])",                         // no uid
      R"("ownerReferences":[{"kind":"","uid":"rs","controller":true}])",                        // empty kind
      R"("ownerReferences":[{"kind":"ReplicaSet","uid":")" + std::string(254, 'u') + R"(","controller":true}])",
      R"("ownerReferences":{"kind":"ReplicaSet"})",                                            // not an array
      R"("ownerReferences":["rs"])",                                                            // not objects
      R"("ownerReferences":null)",
  };
  for (const std::string& r : refs) {
    SCOPED_TRACE(r);
    Result<PodInfo> pod = DecodePod(R"({"metadata":{"name":"p",)" + r + "}}", kRes);
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    EXPECT_EQ(pod->spec.owner_kind, "");
    EXPECT_EQ(pod->spec.owner_uid, "");
  }
}

TEST(DecodePod, OtherResourceNamesAreNotPickedUp) {
  Result<PodInfo> pod = DecodePod(FixturePod(), "nvidia.com/gpu");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  ASSERT_EQ(pod->spec.containers.size(), 2u);
  EXPECT_FALSE(pod->spec.containers[0].request.has_value());
  EXPECT_FALSE(pod->spec.containers[0].limit.has_value());
}

TEST(DecodePod, InitContainerWithRestartPolicyAlwaysIsASidecar) {
  const char* json = R"({
    "metadata": {"name": "p", "namespace": "ml", "uid": "u1",
                 "annotations": {"vramd.io/gpu-count": "2"}},
    "spec": {
      "nodeName": "n1",
      "initContainers": [
        {"name": "proxy", "restartPolicy": "Always",
         "resources": {"limits": {"vramd.io/vram": "2Gi"}}},
        {"name": "warmup", "resources": {"requests": {"vramd.io/vram": "5Gi"},
                                         "limits": {"vramd.io/vram": "5Gi"}}}
      ],
      "containers": [{"name": "main", "resources": {"limits": {"vramd.io/vram": "4Gi"}}}],
      "overhead": {"vramd.io/vram": "512Mi"}
    },
    "status": {"phase": "Running"}
  })";
  Result<PodInfo> pod = DecodePod(json, kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->node_name, "n1");
  EXPECT_EQ(pod->phase, "Running");
  ASSERT_EQ(pod->spec.init_containers.size(), 2u);
  EXPECT_TRUE(pod->spec.init_containers[0].sidecar);
  EXPECT_FALSE(pod->spec.init_containers[0].request.has_value());
  EXPECT_EQ(pod->spec.init_containers[0].limit, "2Gi");
  EXPECT_FALSE(pod->spec.init_containers[1].sidecar);
  EXPECT_EQ(pod->spec.overhead, "512Mi");
  EXPECT_EQ(pod->spec.gpu_count, "2");
  // max(4 + 2 sidecar, 2 + 5 init) + 0.5 overhead = 7.5Gi.
  Result<ledger::VramRequest> req = ledger::ComputeVramRequest(pod->spec);
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_EQ(req->total, (int64_t{15} << 30) / 2);
}

TEST(DecodePod, DeletionTimestampMarksDeleting) {
  Result<PodInfo> pod = DecodePod(
      R"({"metadata":{"name":"p","deletionTimestamp":"2026-11-21T06:10:00Z","deletionGracePeriodSeconds":30}})",
      kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_TRUE(pod->deleting);
  EXPECT_EQ(pod->deletion_ms, 1'795'241'400'000);  // 2026-11-21T06:10:00Z
  // An unreadable time still marks the pod deleting; its time is unknown (0).
  pod = DecodePod(R"({"metadata":{"name":"p","deletionTimestamp":"soon"}})", kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_TRUE(pod->deleting);
  EXPECT_EQ(pod->deletion_ms, 0);
}

TEST(DecodePod, OnlyANameIsRequired) {
  Result<PodInfo> pod = DecodePod(R"({"metadata":{"name":"bare"}})", kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->name, "bare");
  EXPECT_EQ(pod->ns, "");
  EXPECT_EQ(pod->uid, "");
  EXPECT_EQ(pod->phase, "");
  EXPECT_FALSE(pod->deleting);
  EXPECT_TRUE(pod->annotations.empty());
  EXPECT_TRUE(pod->spec.containers.empty());
  EXPECT_TRUE(pod->spec.init_containers.empty());
  EXPECT_EQ(pod->spec.priority, 0);
  EXPECT_EQ(pod->spec.model, "");
}

TEST(DecodePod, NullFieldsAreTreatedAsAbsent) {
  Result<PodInfo> pod = DecodePod(R"({
    "metadata": {"name": "p", "annotations": null, "deletionTimestamp": null},
    "spec": {"containers": [{"name": "c", "resources": {"limits": null, "requests": {"vramd.io/vram": null}}}],
             "initContainers": null, "overhead": null, "priority": null, "nodeName": null},
    "status": null
  })",
                                  kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_FALSE(pod->deleting);
  ASSERT_EQ(pod->spec.containers.size(), 1u);
  EXPECT_FALSE(pod->spec.containers[0].request.has_value());
  EXPECT_FALSE(pod->spec.containers[0].limit.has_value());
}

TEST(DecodePod, NumericQuantitiesBecomeDecimalText) {
  Result<PodInfo> pod = DecodePod(R"({
    "metadata": {"name": "p"},
    "spec": {"containers": [
      {"resources": {"limits": {"vramd.io/vram": 137438953472}}},
      {"resources": {"limits": {"vramd.io/vram": 2.5e9}}},
      {"resources": {"limits": {"vramd.io/vram": 0.5}}}
    ]}
  })",
                                  kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->spec.containers[0].limit, "137438953472");
  EXPECT_EQ(pod->spec.containers[1].limit, "2500000000");
  EXPECT_EQ(pod->spec.containers[2].limit, "0.5");  // the quantity parser rejects it later
}

TEST(DecodePod, FixtureWithPlainByteCountKeepsTheText) {
  std::string body = ReadFile(std::string(VRAMD_TEST_DATA) + "/extender/filter-gpu-count-2.json");
  Result<PodInfo> pod = DecodePod(nlohmann::json::parse(body).at("Pod").dump(), kRes);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  ASSERT_FALSE(pod->spec.containers.empty());
  EXPECT_EQ(pod->spec.containers[0].limit, "137438953472");
  EXPECT_EQ(pod->spec.gpu_count, "2");
}

struct BadPodCase {
  const char* name;
  const char* json;
  const char* message_part;  // the error names the offending field
};

class DecodePodRejects : public ::testing::TestWithParam<BadPodCase> {};

TEST_P(DecodePodRejects, WithAnErrorNamingTheField) {
  Result<PodInfo> pod = DecodePod(GetParam().json, kRes);
  ASSERT_FALSE(pod.ok());
  EXPECT_EQ(pod.status().code(), Code::kInvalidArgument);
  EXPECT_NE(pod.status().message().find(GetParam().message_part), std::string::npos) << pod.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    DecodePod, DecodePodRejects,
    ::testing::Values(
        BadPodCase{"NotJson", R"({"metadata":)", "not valid JSON"},
        BadPodCase{"Empty", "", "not valid JSON"},
        BadPodCase{"NotAnObject", "[1,2]", "expected a JSON object"},
        BadPodCase{"NoMetadata", R"({"spec":{}})", "metadata"},
        BadPodCase{"NoName", R"({"metadata":{"namespace":"x"}})", "metadata.name"},
        BadPodCase{"NameIsNumber", R"({"metadata":{"name":5}})", "metadata.name: expected string"},
        BadPodCase{"MetadataIsString", R"({"metadata":"p"})", "metadata: expected object"},
        BadPodCase{"AnnotationsIsArray", R"({"metadata":{"name":"p","annotations":[]}})",
                   "metadata.annotations: expected object"},
        BadPodCase{"AnnotationValueIsNumber", R"({"metadata":{"name":"p","annotations":{"vramd.io/gpu-count":2}}})",
                   "metadata.annotations[vramd.io/gpu-count]"},
        BadPodCase{"SpecIsArray", R"({"metadata":{"name":"p"},"spec":[]})", "spec: expected object"},
        BadPodCase{"ContainersIsObject", R"({"metadata":{"name":"p"},"spec":{"containers":{}}})",
                   "spec.containers: expected array"},
        BadPodCase{"ContainerIsString", R"({"metadata":{"name":"p"},"spec":{"containers":["c"]}})",
                   "spec.containers[0]: expected object"},
        BadPodCase{"LimitsIsArray",
                   R"({"metadata":{"name":"p"},"spec":{"containers":[{},{"resources":{"limits":[]}}]}})",
                   "spec.containers[1].resources.limits: expected object"},
        BadPodCase{"QuantityIsBool",
                   R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"vramd.io/vram":true}}}]}})",
                   "spec.containers[0].resources.limits[vramd.io/vram]"},
        BadPodCase{"RestartPolicyIsNumber",
                   R"({"metadata":{"name":"p"},"spec":{"initContainers":[{"restartPolicy":1}]}})",
                   "spec.initContainers[0].restartPolicy"},
        BadPodCase{"OverheadIsString", R"({"metadata":{"name":"p"},"spec":{"overhead":"1Gi"}})",
                   "spec.overhead: expected object"},
        BadPodCase{"PriorityIsString", R"({"metadata":{"name":"p"},"spec":{"priority":"high"}})",
                   "spec.priority: expected integer"},
        BadPodCase{"PriorityOutOfRange", R"({"metadata":{"name":"p"},"spec":{"priority":3000000000}})",
                   "spec.priority"},
        BadPodCase{"PriorityClassIsNumber", R"({"metadata":{"name":"p"},"spec":{"priorityClassName":1}})",
                   "spec.priorityClassName: expected string"},
        BadPodCase{"PriorityClassTooLong",
                   R"({"metadata":{"name":"p"},"spec":{"priorityClassName":")"
                   "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
                   "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
                   "cccccccccccccccccccccccccccccccccccccccccccccccccccccc"
                   R"("}})",
                   "spec.priorityClassName: longer than 253 bytes"},
        BadPodCase{"DisposableIsBool",
                   R"({"metadata":{"name":"p","annotations":{"vramd.io/disposable":true}}})",
                   "metadata.annotations[vramd.io/disposable]"},
        BadPodCase{"PhaseIsObject", R"({"metadata":{"name":"p"},"status":{"phase":{}}})", "status.phase"},
        BadPodCase{"LabelsIsArray", R"({"metadata":{"name":"p","labels":["a"]}})", "metadata.labels: expected object"},
        BadPodCase{"EvictableIsBool", R"({"metadata":{"name":"p","annotations":{"vramd.io/evictable":true}}})",
                   "metadata.annotations[vramd.io/evictable]"},
        BadPodCase{"NodeNameIsArray", R"({"metadata":{"name":"p"},"spec":{"nodeName":["n"]}})", "spec.nodeName"}),
    [](const ::testing::TestParamInfo<BadPodCase>& info) { return std::string(info.param.name); });

TEST(DecodeNode, NameLabelsAnnotationsAndVersion) {
  Result<NodeInfo> node = DecodeNode(R"({
    "kind": "Node", "apiVersion": "v1",
    "metadata": {"name": "ness-linux3", "uid": "n-uid", "resourceVersion": "77",
                 "labels": {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "98304"},
                 "annotations": {"vramd.io/capacity": "80Gi,80Gi"}},
    "status": {"capacity": {"cpu": "8"}}
  })");
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->name, "ness-linux3");
  EXPECT_EQ(node->uid, "n-uid");
  EXPECT_EQ(node->resource_version, "77");
  EXPECT_EQ(node->labels.at("nvidia.com/gpu.memory"), "98304");
  EXPECT_EQ(node->annotations.at("vramd.io/capacity"), "80Gi,80Gi");
}

TEST(DecodeNode, WrongTypesAreErrors) {
  EXPECT_EQ(DecodeNode(R"({"metadata":{"name":"n","labels":"x"}})").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeNode(R"({"metadata":{"name":"n","labels":{"a":1}}})").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeNode(R"({"metadata":{}})").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeNode("null").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeNode("{").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace vramd::kube
