#include "vramd/agent/cgroup.h"

#include <gtest/gtest.h>

#include "agent/temp_tree.h"
#include "vramd/agent/attribution.h"

namespace vramd::agent {
namespace {

constexpr const char* kUid = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab";

struct CgroupCase {
  const char* name;
  const char* file;  // /proc/PID/cgroup as the kernel writes it
  const char* want;  // pod UID, or nullptr: no pod
};

// The shapes of real files: cgroup v1 (one line per hierarchy) and v2
// ("0::"), kubelet's cgroupfs and systemd drivers, containerd, CRI-O, docker.
const CgroupCase kCases[] = {
    {"v2_systemd_containerd_burstable",
     "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice/"
     "cri-containerd-5d1f0e3c9b7a.scope\n",
     kUid},
    {"v2_systemd_crio_besteffort",
     "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice/"
     "crio-9a8b7c6d5e4f.scope\n",
     kUid},
    {"v2_systemd_guaranteed_docker",
     "0::/kubepods.slice/kubepods-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice/docker-1234abcd.scope\n", kUid},
    {"v2_systemd_crio_conmon",
     "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice/"
     "crio-conmon-9a8b7c6d5e4f.scope\n",
     kUid},
    {"v2_cgroupfs_containerd",
     "0::/kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/5d1f0e3c9b7a2f\n", kUid},
    {"v2_cgroupfs_guaranteed", "0::/kubepods/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/5d1f0e3c9b7a2f\n", kUid},
    {"v1_cgroupfs_docker_besteffort",
     "12:pids:/kubepods/besteffort/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/0d9c8b7a6f5e\n"
     "11:memory:/kubepods/besteffort/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/0d9c8b7a6f5e\n"
     "1:name=systemd:/kubepods/besteffort/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/0d9c8b7a6f5e\n"
     "0::/\n",
     kUid},
    {"v1_systemd_first_lines_name_no_pod",
     "13:rdma:/\n"
     "12:cpuset:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice/"
     "docker-0d9c8b7a6f5e.scope\n",
     kUid},
    {"v2_relative_to_the_readers_namespace",
     "0::/../../kubepods-burstable-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice/cri-containerd-5d1f.scope\n",
     kUid},
    {"kind_nested_kubelet_slice",
     "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
     "kubelet-kubepods-besteffort-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice/cri-containerd-5d1f.scope\n",
     kUid},
    {"upper_case_hex_is_made_canonical",
     "0::/kubepods/burstable/pod0F1C2D3E-AAAA-BBBB-CCCC-0123456789AB/5d1f\n", kUid},
    {"pod_level_cgroup_without_container", "0::/kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab\n", kUid},
    {"v2_relative_cgroupfs_same_qos", "0::/../../pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/5d1f\n", kUid},
    {"v2_relative_cgroupfs_other_qos", "0::/../../../besteffort/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/5d1f\n",
     kUid},
    // Bad input: a process in two pods' cgroups. The kubelet's pod cgroup is
    // the outermost pod segment under kubepods; a container can create
    // cgroups only below its own, so an inner one never counts.
    {"nested_pod_cgroup_in_a_pod_systemd",
     "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice/"
     "cri-containerd-5d1f.scope/kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice/x.scope\n",
     kUid},
    {"nested_pod_cgroup_in_a_pod_cgroupfs",
     "0::/kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/5d1f/pod11111111-2222-3333-4444-555555555555/x\n",
     kUid},
    {"v1_lines_naming_two_pods_name_none",
     "12:memory:/kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/5d1f\n"
     "1:name=systemd:/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/5d1f\n",
     nullptr},
    {"v1_lines_naming_one_pod_twice", "12:memory:/kubepods/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/5d1f\n"
     "1:name=systemd:/kubepods/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/5d1f\n0::/\n", kUid},
    // A pod-shaped cgroup anywhere but under kubepods is no pod (a user's
    // systemd can create slices with any name under user@UID.service).
    {"pod_slices_under_a_users_systemd",
     "0::/user.slice/user-1000.slice/user@1000.service/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice/x.scope\n",
     nullptr},
    {"pod_segment_under_system_slice", "0::/system.slice/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/x\n", nullptr},
    {"relative_path_to_a_users_slice",
     "0::/../../../../user.slice/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab.slice/x.scope\n", nullptr},
    {"host_process_systemd_service", "0::/system.slice/containerd.service\n", nullptr},
    {"host_user_session", "0::/user.slice/user-1000.slice/session-3.scope\n", nullptr},
    {"kubepods_qos_slice_only", "0::/kubepods.slice/kubepods-burstable.slice\n", nullptr},
    {"static_pod_hash_is_not_an_api_uid", "0::/kubepods/burstable/pod6f3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d/5d1f\n",
     nullptr},
    {"mixed_separators_are_not_a_uid", "0::/kubepods/burstable/pod0f1c2d3e-aaaa_bbbb-cccc-0123456789ab/5d1f\n",
     nullptr},
    {"non_hex_digit", "0::/kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ag/5d1f\n", nullptr},
    {"pod_word_inside_a_name_is_not_a_pod",
     "0::/system.slice/mypod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab.service\n", nullptr},
    {"root_only", "0::/\n", nullptr},
    {"empty_file", "", nullptr},
    {"garbage_without_colons", "kubepods pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab\n", nullptr},
};

TEST(AgentCgroup, PodUidOfEveryShape) {
  for (const CgroupCase& c : kCases) {
    std::optional<std::string> got = PodUidFromCgroupFile(c.file);
    if (c.want == nullptr) {
      EXPECT_FALSE(got.has_value()) << c.name << ": " << got.value_or("");
    } else {
      EXPECT_EQ(got.value_or("<none>"), c.want) << c.name;
    }
  }
}

TEST(AgentCgroup, ThePathAloneNamesThePod) {
  EXPECT_EQ(PodUidFromCgroupPath("/kubepods/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/x").value_or(""), kUid);
  EXPECT_FALSE(PodUidFromCgroupPath("").has_value());
  EXPECT_FALSE(PodUidFromCgroupPath("/").has_value());
}

TEST(AgentAttribution, ReadsEachProcessOnceAndSkipsTheGoneAndTheHost) {
  testing::TempTree proc;
  proc.Write("100/cgroup", "0::/kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/c1\n");
  proc.Write("200/cgroup", "0::/system.slice/sshd.service\n");
  proc.Write("300/cgroup",
             "0::/kubepods.slice/kubepods-pod11111111_2222_3333_4444_555555555555.slice/crio-1.scope\n");
  // pid 400 has exited: no /proc/400.
  std::vector<GpuReading> readings(2);
  readings[0].processes = {{100, 1}, {200, 2}, {400, 3}};
  readings[1].processes = {{100, 4}, {300, 5}};
  PodOfPid pods = ProcAttribution(proc.root()).Attribute(readings);
  // 200 is in no pod (absent: outside pods); 400 is gone: its pod is unknown.
  EXPECT_EQ(pods, (PodOfPid{{100, kUid}, {300, "11111111-2222-3333-4444-555555555555"}, {400, kNotAttributed}}));
}

TEST(AgentAttribution, AProcessWhoseCgroupLinesNameTwoPodsIsNotAttributed) {
  testing::TempTree proc;
  proc.Write("100/cgroup", "12:memory:/kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/c\n"
                           "1:name=systemd:/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/c\n");
  std::vector<GpuReading> readings(1);
  readings[0].processes = {{100, 1}};
  EXPECT_EQ(ProcAttribution(proc.root()).Attribute(readings), (PodOfPid{{100, kNotAttributed}}));
  EXPECT_EQ(PodOfCgroupFile("12:memory:/kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/c\n"
                            "1:name=systemd:/kubepods/burstable/pod11111111-2222-3333-4444-555555555555/c\n")
                .kind,
            CgroupPod::kAmbiguous);
}

}  // namespace
}  // namespace vramd::agent
