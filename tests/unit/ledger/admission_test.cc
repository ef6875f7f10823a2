// The admission webhook's rules (issue 34, part A) as tables: what is
// refused at `kubectl apply`, and what a created VRAM pod gets added.
#include "vramd/ledger/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramd::ledger {
namespace {

using ::testing::HasSubstr;

constexpr const char* kVramd = "system:serviceaccount:vramd-system:vramd";

AdmissionPolicy Policy() {
  AdmissionPolicy p;
  p.vramd_users = {kVramd};
  p.scheduler_name = "vramd-scheduler";
  p.opt_out_label = "vramd.io/direct-bind=allowed";
  return p;
}

AdmissionPod Pod(const char* vram, std::map<std::string, std::string> annotations = {}) {
  AdmissionPod p;
  p.spec.ns = "team-a";
  p.spec.name = "train";
  if (vram != nullptr) p.spec.containers.push_back(ContainerAmount{std::string(vram), std::string(vram), false});
  p.annotations = annotations;
  for (const auto& [k, v] : annotations) {
    if (k == "vramd.io/gpu-count") p.spec.gpu_count = v;
    if (k == "vramd.io/vram-peak") p.spec.vram_peak = v;
    if (k == "vramd.io/idle-ttl") p.spec.idle_ttl = v;
  }
  p.containers.push_back(AdmissionContainer{"main", {}, false});
  return p;
}

struct Case {
  const char* name;
  AdmissionRequest in;
  const char* refused;  // nullptr: allowed; else a part of the message
};

AdmissionRequest Create(AdmissionPod pod, std::string user = "alice") {
  AdmissionRequest r;
  r.pod = std::move(pod);
  r.username = std::move(user);
  return r;
}

AdmissionRequest Update(AdmissionPod old, AdmissionPod now, std::string user = "alice") {
  AdmissionRequest r = Create(std::move(now), std::move(user));
  r.create = false;
  r.old = std::move(old);
  return r;
}

TEST(ValidateAdmission, Table) {
  AdmissionPod on_node = Pod("4Gi");
  on_node.node_name = "gpu-1";
  AdmissionRequest opted_out = Create(on_node);
  opted_out.namespace_may_bind_directly = true;
  AdmissionPod plain_on_node = Pod(nullptr);
  plain_on_node.node_name = "gpu-1";
  const std::map<std::string, std::string> placed = {{"vramd.io/gpus", "0"}, {"vramd.io/vram-per-gpu", "4294967296"}};
  const Case cases[] = {
      {"a VRAM pod", Create(Pod("4Gi")), nullptr},
      {"a pod without VRAM", Create(Pod(nullptr)), nullptr},
      {"a malformed request", Create(Pod("4Gx")), "invalid VRAM request"},
      {"a fractional byte request", Create(Pod("1500m")), "invalid VRAM request"},
      {"a malformed gpu-count", Create(Pod("4Gi", {{"vramd.io/gpu-count", "two"}})), "invalid VRAM request"},
      {"a malformed idle-ttl", Create(Pod("4Gi", {{"vramd.io/idle-ttl", "3d"}})), "vramd.io/idle-ttl"},
      {"a user writes vramd.io/gpus", Create(Pod("4Gi", {{"vramd.io/gpus", "0"}})), "written by vramd"},
      {"a user writes vramd.io/gpu-uuids", Create(Pod(nullptr, {{"vramd.io/gpu-uuids", "GPU-1"}})), "written by vramd"},
      {"vramd writes placement", Create(Pod("4Gi", placed), kVramd), nullptr},
      {"an update keeps vramd's placement", Update(Pod("4Gi", placed), Pod("4Gi", placed)), nullptr},
      {"an update changes vramd's placement", Update(Pod("4Gi", placed), Pod("4Gi", {{"vramd.io/gpus", "1"}})),
       "written by vramd"},
      // An object that was unreadable before the update (created before its
      // namespace was labelled) stays updatable: a controller removes a finalizer.
      {"an update leaves a malformed gpu-count as it was",
       Update(Pod("4Gi", {{"vramd.io/gpu-count", "two"}}), Pod("4Gi", {{"vramd.io/gpu-count", "two"}})), nullptr},
      {"an update leaves a malformed request as it was", Update(Pod("4Gx"), Pod("4Gx")), nullptr},
      {"an update makes a readable pod malformed",
       Update(Pod("4Gi"), Pod("4Gi", {{"vramd.io/gpu-count", "two"}})), "invalid VRAM request"},
      {"an update changes why a pod is malformed",
       Update(Pod("4Gi", {{"vramd.io/gpu-count", "two"}}), Pod("4Gi", {{"vramd.io/gpu-count", "three"}})),
       "invalid VRAM request"},
      {"an update of a malformed pod still may not write placement",
       Update(Pod("4Gx"), Pod("4Gx", {{"vramd.io/gpus", "0"}})), "written by vramd"},
      {"a create is never excused", Create(Pod("4Gi", {{"vramd.io/gpu-count", "two"}})), "invalid VRAM request"},
      {"a VRAM pod created on a node", Create(on_node), "bypasses vramd"},
      {"... in a namespace that opted out", opted_out, nullptr},
      {"a pod without VRAM on a node", Create(plain_on_node), nullptr},
  };
  for (const Case& c : cases) {
    std::optional<std::string> got = ValidateAdmission(c.in, Policy());
    if (c.refused == nullptr) {
      EXPECT_FALSE(got.has_value()) << c.name << ": " << got.value_or("");
    } else {
      ASSERT_TRUE(got.has_value()) << c.name;
      EXPECT_THAT(*got, HasSubstr(c.refused)) << c.name;
    }
  }
}

TEST(ValidateAdmission, TheMessageIsFiltersOwn) {
  Result<VramRequest> filter_view = ComputeVramRequest(Pod("4Gx").spec, Policy().victim_classes);
  ASSERT_FALSE(filter_view.ok());
  EXPECT_EQ(*ValidateAdmission(Create(Pod("4Gx")), Policy()), "invalid VRAM request: " + filter_view.status().message());
}

TEST(MutateAdmission, AVramPodGetsTheSchedulerAndTheGpuEnvironment) {
  AdmissionPod pod = Pod("4Gi");
  pod.containers.push_back(AdmissionContainer{"sidecar", {"CUDA_DEVICE_ORDER"}, true});
  AdmissionMutation m = MutateAdmission(Create(pod), Policy());
  ASSERT_TRUE(m.scheduler_name.has_value());
  EXPECT_EQ(*m.scheduler_name, "vramd-scheduler");
  EXPECT_FALSE(m.runtime_class.has_value());
  std::vector<std::string> main_vars, sidecar_vars;
  for (const AddedEnv& e : m.env) (e.container == 0 ? main_vars : sidecar_vars).push_back(e.name);
  EXPECT_EQ(main_vars, (std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "VRAMD_GPUS", "POD_UID"}));
  EXPECT_EQ(sidecar_vars, (std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES", "VRAMD_GPUS", "POD_UID"}))
      << "what the user set is never overwritten";
  EXPECT_EQ(m.env[0].field_path, "metadata.annotations['vramd.io/gpu-uuids']");
  EXPECT_EQ(m.env[1].value, "PCI_BUS_ID");
  EXPECT_THAT(m.added, ::testing::Contains("schedulerName"));
  EXPECT_THAT(m.added, ::testing::Contains("env:main/POD_UID"));
}

TEST(MutateAdmission, Table) {
  AdmissionPod other_scheduler = Pod("4Gi");
  other_scheduler.scheduler_name = "volcano";
  AdmissionPod on_node = Pod("4Gi");
  on_node.node_name = "gpu-1";
  AdmissionPolicy runtime = Policy();
  runtime.runtime_class = "nvidia";
  AdmissionPolicy wiring_b = Policy();
  wiring_b.scheduler_name = "";  // the default scheduler carries the extender
  AdmissionPod has_runtime = Pod("4Gi");
  has_runtime.runtime_class = "kata";
  struct M {
    const char* name;
    AdmissionRequest in;
    AdmissionPolicy policy;
    bool scheduler, runtime_class, env;
  } cases[] = {
      {"a VRAM pod", Create(Pod("4Gi")), Policy(), true, false, true},
      {"a pod without VRAM", Create(Pod(nullptr)), Policy(), false, false, false},
      {"an invalid request (validation refuses it)", Create(Pod("4Gx")), Policy(), false, false, false},
      {"another scheduler chosen", Create(other_scheduler), Policy(), false, false, true},
      {"already on a node", Create(on_node), Policy(), false, false, true},
      {"wiring (b)", Create(Pod("4Gi")), wiring_b, false, false, true},
      {"a runtime class configured", Create(Pod("4Gi")), runtime, true, true, true},
      {"the user's own runtime class", Create(has_runtime), runtime, true, false, true},
      {"an update", Update(Pod("4Gi"), Pod("4Gi")), Policy(), false, false, false},
  };
  for (const M& c : cases) {
    AdmissionMutation m = MutateAdmission(c.in, c.policy);
    EXPECT_EQ(m.scheduler_name.has_value(), c.scheduler) << c.name;
    EXPECT_EQ(m.runtime_class.has_value(), c.runtime_class) << c.name;
    EXPECT_EQ(!m.env.empty(), c.env) << c.name;
  }
}

}  // namespace
}  // namespace vramd::ledger
