// Which watch events wake the reconcile loop (pod_watch.h): a table of pod
// and node changes and the verdict for each.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "vramd/reconcile/plan.h"
#include "vramd/reconcile/pod_watch.h"
#include "vramd/reconcile/reconciler.h"

namespace vramd::reconcile {
namespace {

kube::PodInfo VramPod() {
  kube::PodInfo p;
  p.uid = "u1";
  p.ns = "default";
  p.name = "train";
  p.phase = "Pending";
  p.scheduler_name = "default-scheduler";
  p.resource_version = "10";
  p.spec.containers.push_back({std::string("8Gi"), std::string("8Gi"), false});
  return p;
}

kube::PodInfo PlainPod() {
  kube::PodInfo p = VramPod();
  p.spec.containers = {{std::nullopt, std::nullopt, false}};
  return p;
}

struct PodCase {
  const char* name;
  bool held;  // the watcher held a copy before the event
  kube::PodInfo before;
  std::function<void(kube::PodInfo&)> change;
  bool matters;
};

TEST(PodChangeMattersTest, Table) {
  const PodCase cases[] = {
      {"new pod that wants VRAM", false, VramPod(), [](kube::PodInfo&) {}, true},
      {"new pod that wants no VRAM", false, PlainPod(), [](kube::PodInfo&) {}, false},
      {"new pod with an invalid request", false, VramPod(),
       [](kube::PodInfo& p) { p.spec.containers[0].request = "lots"; }, true},
      {"status heartbeat: only the resourceVersion moved", true, VramPod(),
       [](kube::PodInfo& p) { p.resource_version = "11"; }, false},
      {"bound to a node", true, VramPod(), [](kube::PodInfo& p) { p.node_name = "n1"; }, true},
      {"phase changed", true, VramPod(), [](kube::PodInfo& p) { p.phase = "Succeeded"; }, true},
      {"deletion started", true, VramPod(), [](kube::PodInfo& p) { p.deleting = true; }, true},
      {"annotations written by a bind", true, VramPod(),
       [](kube::PodInfo& p) { p.annotations["vramd.io/gpus"] = "0"; }, true},
      {"request resized in place", true, VramPod(),
       [](kube::PodInfo& p) { p.spec.containers[0].request = "16Gi"; }, true},
      {"request removed (the watcher must drop its copy)", true, VramPod(),
       [](kube::PodInfo& p) { p.spec.containers[0] = {std::nullopt, std::nullopt, false}; }, true},
      {"gpu-count annotation read into the request", true, VramPod(),
       [](kube::PodInfo& p) { p.spec.gpu_count = "2"; }, true},
  };
  for (const PodCase& c : cases) {
    kube::PodInfo after = c.before;
    c.change(after);
    EXPECT_EQ(PodChangeMatters(c.held ? &c.before : nullptr, after), c.matters) << c.name;
  }
}

// Which events are only a bind (plan.h's OnlyBound): spec.nodeName set and
// nothing else changed but vramd's placement annotations.
TEST(OnlyBoundTest, Table) {
  auto bind = [](kube::PodInfo& p) {
    p.node_name = "n1";
    p.annotations["vramd.io/gpus"] = "0";
    p.annotations["vramd.io/vram-per-gpu"] = "8589934592";
    p.annotations["vramd.io/gpu-uuids"] = "GPU-0";
    p.resource_version = "11";
  };
  const PodCase cases[] = {
      {"a Binding with vramd's annotations", true, VramPod(), bind, true},
      {"a Binding without annotations (another scheduler)", true, VramPod(),
       [](kube::PodInfo& p) { p.node_name = "n1"; }, true},
      {"bound and its phase moved in the same update", true, VramPod(),
       [&](kube::PodInfo& p) {
         bind(p);
         p.phase = "Running";
       },
       false},
      {"bound while being deleted", true, VramPod(),
       [&](kube::PodInfo& p) {
         bind(p);
         p.deleting = true;
       },
       false},
      {"bound and another annotation changed", true, VramPod(),
       [&](kube::PodInfo& p) {
         bind(p);
         p.annotations["team"] = "b";
       },
       false},
      {"bound and its request changed", true, VramPod(),
       [&](kube::PodInfo& p) {
         bind(p);
         p.spec.containers[0].request = "16Gi";
       },
       false},
      {"bound and its scheduler changed", true, VramPod(),
       [&](kube::PodInfo& p) {
         bind(p);
         p.scheduler_name = "other";
       },
       false},
      {"not bound: annotations only", true, VramPod(),
       [](kube::PodInfo& p) { p.annotations["vramd.io/gpus"] = "0"; }, false},
      {"moved from one node to another", true,
       [] {
         kube::PodInfo p = VramPod();
         p.node_name = "n2";
         return p;
       }(),
       [](kube::PodInfo& p) { p.node_name = "n1"; }, false},
  };
  for (const PodCase& c : cases) {
    kube::PodInfo after = c.before;
    c.change(after);
    EXPECT_EQ(OnlyBound(c.before, after), c.matters) << c.name;
  }
}

kube::NodeInfo GpuNode() {
  kube::NodeInfo n;
  n.name = "n1";
  n.uid = "nu1";
  n.labels = {{"nvidia.com/gpu.count", "8"}, {"nvidia.com/gpu.memory", "81920"}};
  n.resource_version = "5";
  return n;
}

struct NodeCase {
  const char* name;
  bool held;
  std::function<void(kube::NodeInfo&)> change;
  bool matters;
};

TEST(NodeChangeMattersTest, Table) {
  const NodeCase cases[] = {
      {"new node", false, [](kube::NodeInfo&) {}, true},
      {"status heartbeat: only the resourceVersion moved", true,
       [](kube::NodeInfo& n) { n.resource_version = "6"; }, false},
      {"vramd's own scheduler nudge", true, [](kube::NodeInfo& n) { n.labels[kFreedLabel] = "12345"; }, false},
      {"GPU count label changed", true, [](kube::NodeInfo& n) { n.labels["nvidia.com/gpu.count"] = "4"; }, true},
      {"GPU label removed", true, [](kube::NodeInfo& n) { n.labels.erase("nvidia.com/gpu.memory"); }, true},
      {"capacity annotation added", true,
       [](kube::NodeInfo& n) { n.annotations["vramd.io/capacity"] = "80Gi,80Gi"; }, true},
      {"nudge and a real change together", true,
       [](kube::NodeInfo& n) {
         n.labels[kFreedLabel] = "1";
         n.labels["nvidia.com/gpu.count"] = "2";
       },
       true},
  };
  for (const NodeCase& c : cases) {
    const kube::NodeInfo before = GpuNode();
    kube::NodeInfo after = before;
    c.change(after);
    EXPECT_EQ(NodeChangeMatters(c.held ? &before : nullptr, after), c.matters) << c.name;
  }
}

}  // namespace
}  // namespace vramd::reconcile
