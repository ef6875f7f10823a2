// Enforcement in the agent (issue 34 part B): the rules as tables, and the
// Enforcer against a fake cgroup v2 tree written from the kernel's files
// (cgroup.controllers, dmem.capacity, per-cgroup dmem.max / dmem.min,
// cgroup.subtree_control; each write appends a line, as a command to the
// kernel is one write) and against the fake NVML of two driver families
// (R615 with nvmlDeviceSetMemoryLimits_v1, 580 without it).
#include "vramd/agent/enforce.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/temp_tree.h"
#include "vramd/agent/nvml_source.h"
#include "test_paths.h"  // VRAMD_FAKE_NVML, VRAMD_FAKE_NVML_R615

namespace vramd::agent {
namespace {

using ledger::EnforceMode;
using ledger::EnforceState;
using nlohmann::json;
constexpr int64_t GiB = int64_t{1} << 30;

constexpr char kUidA[] = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab";
constexpr char kUidB[] = "11111111-2222-3333-4444-555555555555";

TEST(DecodeEnforceOrders, Table) {
  struct Case {
    std::string body;
    bool ok;
    EnforceMode mode = EnforceMode::kOff;
    size_t limits = 0;
    std::string error = "";
  };
  const std::string a = kUidA;
  const Case cases[] = {
      {R"({"node":"n","updated_gpus":1})", true, EnforceMode::kOff, 0},  // a vramd before issue 34
      {R"({"enforce":{"mode":"dry-run","limits":[]}})", true, EnforceMode::kDryRun, 0},
      {R"({"enforce":{"mode":"on","limits":[{"uid":")" + a + R"(","index":0,"soft":4,"hard":8},{"uid":")" + a +
           R"(","index":1,"soft":4,"hard":4}]}})",
       true, EnforceMode::kOn, 2},
      {R"({"enforce":{"mode":"enforce"}})", false, EnforceMode::kOff, 0, "enforce.mode"},
      {R"({"enforce":{"mode":"on","limits":[{"uid":"POD","index":0,"soft":1,"hard":1}]}})", false,
       EnforceMode::kOff, 0, "canonical"},
      {R"({"enforce":{"mode":"on","limits":[{"uid":")" + a + R"(","index":0,"soft":9,"hard":8}]}})", false,
       EnforceMode::kOff, 0, "soft is above hard"},
      {R"({"enforce":{"mode":"on","limits":[{"uid":")" + a + R"(","index":0,"soft":-1,"hard":8}]}})", false,
       EnforceMode::kOff, 0, "soft must be"},
      {R"({"enforce":{"mode":"on","limits":[{"uid":")" + a + R"(","index":10000,"soft":1,"hard":8}]}})", false,
       EnforceMode::kOff, 0, "index"},
      {R"({"enforce":{"mode":"on","limits":[{"uid":")" + a + R"(","index":0,"soft":1,"hard":2000000000000000000}]}})",
       false, EnforceMode::kOff, 0, "hard must be"},
      {R"({"enforce":{"mode":"on","limits":{}}})", false, EnforceMode::kOff, 0, "array"},
      {R"(not json)", false, EnforceMode::kOff, 0, "not a JSON object"},
  };
  for (const Case& c : cases) {
    Result<EnforceOrders> o = DecodeEnforceOrders(c.body);
    ASSERT_EQ(o.ok(), c.ok) << c.body << ": " << (o.ok() ? "" : o.status().message());
    if (!c.ok) {
      EXPECT_NE(o.status().message().find(c.error), std::string::npos) << o.status().message();
      continue;
    }
    EXPECT_EQ(o->mode, c.mode) << c.body;
    EXPECT_EQ(o->limits.size(), c.limits) << c.body;
  }
}

TEST(DecodeEnforceOrders, TooManyLimitsAreRefused) {
  json limits = json::array();
  for (int i = 0; i < 10'001; ++i) limits.push_back({{"uid", kUidA}, {"index", 0}, {"soft", 1}, {"hard", 1}});
  Result<EnforceOrders> o = DecodeEnforceOrders(json{{"enforce", {{"mode", "on"}, {"limits", limits}}}}.dump());
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("more than 10000"), std::string::npos);
}

TEST(NormalizePciAddress, Table) {
  const std::pair<std::string, std::string> cases[] = {
      {"00000000:3B:00.0", "0000:3b:00.0"},  // NVML
      {"0000:3b:00.0", "0000:3b:00.0"},      // sysfs
      {"0001:C1:00.0", "0001:c1:00.0"},
      {"3b:00.0", ""},
      {"0000:3b:00", ""},
      {"0000:3g:00.0", ""},
      {"0000:3b:00.8", ""},
      {"100000000:3b:00.0", ""},
      {"", ""},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(NormalizePciAddress(in), want) << in;
}

TEST(DmemRegions, CapacityParsedAndRegionFoundByPciAddress) {
  const std::string capacity =
      "drm/0000:03:00.0/vram0 17163091968\n"
      "nvidia/0000:3b:00.0/vidmem 85520809984\n"
      "drm/0000:03:00.0/stolen 1048576\n"  // after vram0 in name order: vram0 is not it
      "garbage\n"
      "nvidia/0000:3c:00.0/vidmem notanumber\n";
  std::map<std::string, int64_t> regions = ParseDmemCapacity(capacity);
  EXPECT_EQ(regions.size(), 3u);
  EXPECT_EQ(regions["nvidia/0000:3b:00.0/vidmem"], 85520809984);
  EXPECT_EQ(DmemRegionFor(regions, "0000:3b:00.0"), "nvidia/0000:3b:00.0/vidmem");
  EXPECT_EQ(DmemRegionFor(regions, "0000:3c:00.0"), "");  // its line was malformed
  EXPECT_EQ(DmemRegionFor(regions, ""), "");
  EXPECT_EQ(DmemRegionFor(regions, "0000:04:00.0"), "");
}

TEST(PodCgroupCandidates, BothDriversAndEveryQosClass) {
  std::vector<std::string> c = PodCgroupCandidates(kUidA);
  auto has = [&](const std::string& s) { return std::find(c.begin(), c.end(), s) != c.end(); };
  EXPECT_TRUE(has("kubepods/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab"));
  EXPECT_TRUE(has("kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab"));
  EXPECT_TRUE(has("kubepods/besteffort/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab"));
  EXPECT_TRUE(has("kubepods.slice/kubepods-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice"));
  EXPECT_TRUE(has("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice"));
  EXPECT_TRUE(has("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice"));
}

TEST(ChooseBackend, Table) {
  CgroupHost no_dmem{true, "cpuset cpu io memory hugetlb pids", false, {}};
  CgroupHost dmem{true, "cpuset cpu io memory hugetlb pids dmem", true, {{"nvidia/0000:3b:00.0/vidmem", 80 * GiB}}};
  CgroupHost v1{};
  const std::string old_driver = "driver 580.159.04 older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)";
  struct Case {
    const char* name;
    CgroupHost host;
    GpuTarget gpu;
    BackendChoice want;
  };
  const Case cases[] = {
      {"dmem lists the GPU", dmem, {0, "0000:3b:00.0", false, old_driver}, {"dmem", "nvidia/0000:3b:00.0/vidmem", ""}},
      {"dmem first even with NVML limits", dmem, {0, "0000:3b:00.0", false, ""}, {"dmem", "nvidia/0000:3b:00.0/vidmem", ""}},
      {"no dmem, R615 NVML", no_dmem, {0, "0000:3b:00.0", false, ""}, {"nvml", "", ""}},
      // The H100 machine of this project: kernel 6.18 without dmem, driver 580.
      {"no dmem, driver 580", no_dmem, {0, "0000:3b:00.0", false, old_driver},
       {"none", "",
        "no dmem controller (cgroup v2 controllers: cpuset cpu io memory hugetlb pids), driver 580.159.04 older "
        "than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)"}},
      {"dmem without the GPU's region", dmem, {1, "0000:3c:00.0", false, old_driver},
       {"none", "", "dmem.capacity lists no region for 0000:3c:00.0, " + old_driver}},
      {"dmem, PCI address unknown", dmem, {1, "", false, "the drm source sets no memory limits"},
       {"none", "", "the GPU's PCI address is unknown (dmem regions are per device), the drm source sets no memory limits"}},
      {"cgroup v1", v1, {0, "0000:3b:00.0", false, old_driver},
       {"none", "", "no cgroup v2 (dmem needs the unified hierarchy), " + old_driver}},
      {"MIG", dmem, {0, "0000:3b:00.0", true, ""},
       {"none", "", "MIG mode: neither the dmem cgroup nor NVML memory limits apply to MIG instances (not supported)"}},
  };
  for (const Case& c : cases) EXPECT_EQ(ChooseBackend(c.host, c.gpu), c.want) << c.name;
}

// A source of fixed readings whose limits are set through a log (the NVML
// adapter against the real fake library is tested below).
class FixedSource final : public GpuSource {
 public:
  explicit FixedSource(std::string unsupported) : unsupported_(std::move(unsupported)) {}
  std::string_view Name() const override { return "nvml"; }
  Result<std::vector<GpuReading>> Read() override { return std::vector<GpuReading>{}; }
  std::string MemoryLimitsUnsupported(int) const override { return unsupported_; }
  Status SetMemoryLimits(int index, const std::string& dir, uint64_t soft, uint64_t hard) override {
    calls.push_back(std::to_string(index) + " " + std::to_string(soft) + " " + std::to_string(hard) + " " + dir);
    return refuse.empty() ? Status::Ok() : Internal(refuse);
  }
  std::vector<std::string> calls;
  std::string refuse;

 private:
  std::string unsupported_;
};

GpuReading Gpu(int index, std::string pci, bool mig = false) {
  GpuReading g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.total_bytes = 80 * GiB;
  g.pci_bus_id = std::move(pci);
  g.mig = mig;
  return g;
}

class EnforcerTest : public ::testing::Test {
 protected:
  // A cgroup v2 root as the kernel shows it, with or without dmem.
  void Root(bool dmem) {
    tree_.Write("cg/cgroup.controllers",
                dmem ? "cpuset cpu io memory hugetlb pids rdma misc dmem\n" : "cpuset cpu io memory hugetlb pids\n");
    tree_.Write("cg/cgroup.subtree_control", "cpu memory pids\n");
    if (dmem) {
      tree_.Write("cg/dmem.capacity",
                  "nvidia/0000:3b:00.0/vidmem 85520809984\nnvidia/0000:3c:00.0/vidmem 85520809984\n");
    }
  }
  // A pod's cgroup (relative to the root), with the dmem files when `files`.
  std::string Pod(const std::string& rel, bool files = true) {
    std::filesystem::create_directories(tree_.Path("cg/" + rel));
    if (files) {
      tree_.Write("cg/" + rel + "/dmem.max", "");
      tree_.Write("cg/" + rel + "/dmem.min", "");
    }
    return tree_.Path("cg/" + rel);
  }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static EnforceOrders Orders(EnforceMode mode, std::vector<ledger::PodLimit> limits) { return {mode, std::move(limits)}; }
  static const ledger::PodEnforcement* State(const std::map<int, ledger::GpuEnforcement>& out, int index,
                                             const std::string& uid) {
    auto g = out.find(index);
    if (g == out.end()) return nullptr;
    for (const auto& p : g->second.pods) {
      if (p.uid == uid) return &p;
    }
    return nullptr;
  }

  testing::TempTree tree_;
  std::string systemd_a_ = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1c2d3e_aaaa_bbbb_cccc_0123456789ab.slice";
  std::string cgroupfs_b_ = "kubepods/besteffort/pod11111111-2222-3333-4444-555555555555";
};

TEST_F(EnforcerTest, DmemLimitsAreWrittenForBothCgroupDriversAndEveryGpuOfAPod) {
  Root(true);
  std::string a = Pod(systemd_a_);
  std::string b = Pod(cgroupfs_b_);
  FixedSource nvml("driver 580.159.04 older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)");
  Enforcer e(tree_.Path("cg"));
  // Pod A on GPUs 0 and 1 with a peak (hard 12 GiB, soft 8); pod B on GPU 1 with its request only.
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 12 * GiB}, {kUidA, 1, 8 * GiB, 12 * GiB},
                                               {kUidB, 1, 4 * GiB, 4 * GiB}}),
                     {Gpu(0, "00000000:3B:00.0"), Gpu(1, "00000000:3C:00.0")}, &nvml, {});
  EXPECT_EQ(out[0].backend, "dmem");
  EXPECT_EQ(out[1].backend, "dmem");
  EXPECT_EQ(Read(a + "/dmem.max"), "nvidia/0000:3b:00.0/vidmem 12884901888\nnvidia/0000:3c:00.0/vidmem 12884901888\n");
  EXPECT_EQ(Read(a + "/dmem.min"), "nvidia/0000:3b:00.0/vidmem 8589934592\nnvidia/0000:3c:00.0/vidmem 8589934592\n");
  EXPECT_EQ(Read(b + "/dmem.max"), "nvidia/0000:3c:00.0/vidmem 4294967296\n");
  EXPECT_EQ(Read(b + "/dmem.min"), "nvidia/0000:3c:00.0/vidmem 4294967296\n");
  for (auto [i, uid] : {std::pair{0, kUidA}, std::pair{1, kUidA}, std::pair{1, kUidB}}) {
    const ledger::PodEnforcement* s = State(out, i, uid);
    ASSERT_NE(s, nullptr) << uid;
    EXPECT_EQ(s->state, EnforceState::kEnforced) << uid << " " << s->reason;
  }
  EXPECT_TRUE(nvml.calls.empty());

  // The next pass, nothing changed: nothing is written again.
  out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 12 * GiB}, {kUidA, 1, 8 * GiB, 12 * GiB},
                                          {kUidB, 1, 4 * GiB, 4 * GiB}}),
                {Gpu(0, "00000000:3B:00.0"), Gpu(1, "00000000:3C:00.0")}, &nvml, {});
  EXPECT_EQ(Read(b + "/dmem.max"), "nvidia/0000:3c:00.0/vidmem 4294967296\n");
  EXPECT_EQ(State(out, 1, kUidB)->state, EnforceState::kEnforced);

  // B's peak grows: written again. A's order is gone (it left the ledger) while its cgroup remains: cleared.
  out = e.Apply(Orders(EnforceMode::kOn, {{kUidB, 1, 4 * GiB, 6 * GiB}}),
                {Gpu(0, "00000000:3B:00.0"), Gpu(1, "00000000:3C:00.0")}, &nvml, {});
  EXPECT_EQ(Read(b + "/dmem.max"), "nvidia/0000:3c:00.0/vidmem 4294967296\nnvidia/0000:3c:00.0/vidmem 6442450944\n");
  EXPECT_TRUE(Read(a + "/dmem.max").ends_with("nvidia/0000:3b:00.0/vidmem max\nnvidia/0000:3c:00.0/vidmem max\n"))
      << Read(a + "/dmem.max");
  EXPECT_TRUE(Read(a + "/dmem.min").ends_with("nvidia/0000:3b:00.0/vidmem 0\nnvidia/0000:3c:00.0/vidmem 0\n"));
  EXPECT_EQ(State(out, 0, kUidA), nullptr);

  // B's pod is gone (the kubelet removed its cgroup, and the limits with it): nothing to write, nothing failed.
  std::filesystem::remove_all(b);
  out = e.Apply(Orders(EnforceMode::kOn, {}), {Gpu(0, "00000000:3B:00.0"), Gpu(1, "00000000:3C:00.0")}, &nvml, {});
  EXPECT_FALSE(std::filesystem::exists(b));
  EXPECT_TRUE(out[1].pods.empty());
}

// Scope: only the pods vramd's orders name are touched; a pod of the node
// that vramd does not account (no order) keeps its cgroup files as they were.
TEST_F(EnforcerTest, APodWithoutAnOrderIsNeverTouched) {
  Root(true);
  std::string a = Pod(systemd_a_);
  std::string other = Pod(cgroupfs_b_);  // pod B: on the node, not in vramd's ledger
  FixedSource nvml("");
  Enforcer e(tree_.Path("cg"));
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 8 * GiB}}), {Gpu(0, "00000000:3B:00.0")}, &nvml,
                     {kUidA, kUidB});
  EXPECT_EQ(State(out, 0, kUidA)->state, EnforceState::kEnforced);
  EXPECT_EQ(State(out, 0, kUidB), nullptr);
  EXPECT_EQ(Read(other + "/dmem.max"), "");
  EXPECT_EQ(Read(other + "/dmem.min"), "");
  EXPECT_TRUE(nvml.calls.empty());
}

TEST_F(EnforcerTest, DryRunFindsEverythingAndWritesNothing) {
  Root(true);
  std::string a = Pod(systemd_a_);
  FixedSource nvml("");
  Enforcer e(tree_.Path("cg"));
  auto out = e.Apply(Orders(EnforceMode::kDryRun, {{kUidA, 0, 8 * GiB, 12 * GiB}}), {Gpu(0, "00000000:3B:00.0")},
                     &nvml, {});
  const ledger::PodEnforcement* s = State(out, 0, kUidA);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->state, EnforceState::kDryRun);
  EXPECT_EQ(s->reason, "would set hard 12.00 GiB, soft 8.00 GiB through dmem (nvidia/0000:3b:00.0/vidmem)");
  EXPECT_EQ(Read(a + "/dmem.max"), "");
  EXPECT_EQ(Read(a + "/dmem.min"), "");
  EXPECT_TRUE(nvml.calls.empty());
}

TEST_F(EnforcerTest, WithoutDmemTheDriverSetsTheLimitElseTheVramIsAccountedOnly) {
  Root(false);
  std::string a = Pod(systemd_a_, /*files=*/false);
  {
    FixedSource r615("");
    Enforcer e(tree_.Path("cg"));
    auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 12 * GiB}}), {Gpu(0, "00000000:3B:00.0")}, &r615, {});
    EXPECT_EQ(out[0].backend, "nvml");
    EXPECT_EQ(State(out, 0, kUidA)->state, EnforceState::kEnforced);
    ASSERT_EQ(r615.calls.size(), 1u);
    EXPECT_EQ(r615.calls[0], "0 8589934592 12884901888 " + a);
    // Mode off: what this agent set is cleared (soft 0, hard UINT64_MAX), and nothing is reported.
    out = e.Apply(Orders(EnforceMode::kOff, {{kUidA, 0, 8 * GiB, 12 * GiB}}), {Gpu(0, "00000000:3B:00.0")}, &r615, {});
    EXPECT_TRUE(out.empty());
    ASSERT_EQ(r615.calls.size(), 2u);
    EXPECT_EQ(r615.calls[1], "0 0 18446744073709551615 " + a);
  }
  {
    FixedSource r580("driver 580.159.04 older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)");
    Enforcer e(tree_.Path("cg"));
    auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 12 * GiB}}), {Gpu(0, "00000000:3B:00.0")}, &r580, {});
    EXPECT_EQ(out[0].backend, "none");
    const ledger::PodEnforcement* s = State(out, 0, kUidA);
    ASSERT_NE(s, nullptr);
    // Accounted only, with the backends' reasons: never "enforced" without a backend.
    EXPECT_EQ(s->state, EnforceState::kAccounted);
    EXPECT_EQ(s->reason, out[0].reason);
    EXPECT_EQ(ledger::DescribeEnforcement(*s),
              "accounted only: no dmem controller (cgroup v2 controllers: cpuset cpu io memory hugetlb pids), driver "
              "580.159.04 older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)");
    EXPECT_TRUE(r580.calls.empty());
  }
}

TEST_F(EnforcerTest, AWriteTheKernelRefusesIsAFailureWithItsReasonAndIsTriedAgain) {
  Root(true);
  std::string a = Pod(systemd_a_, /*files=*/false);
  std::filesystem::create_directories(a + "/dmem.max");  // not a file: the write is refused (EISDIR)
  tree_.Write("cg/" + systemd_a_ + "/dmem.min", "");
  FixedSource nvml("");
  Enforcer e(tree_.Path("cg"));
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 12 * GiB}}), {Gpu(0, "00000000:3B:00.0")}, &nvml, {});
  const ledger::PodEnforcement* s = State(out, 0, kUidA);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->state, EnforceState::kFailed);
  EXPECT_NE(s->reason.find("dmem.max"), std::string::npos) << s->reason;
  // The kernel takes it next time: written (a failure is not remembered as applied).
  std::filesystem::remove(a + "/dmem.max");
  tree_.Write("cg/" + systemd_a_ + "/dmem.max", "");
  out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 12 * GiB}}), {Gpu(0, "00000000:3B:00.0")}, &nvml, {});
  EXPECT_EQ(State(out, 0, kUidA)->state, EnforceState::kEnforced);
  EXPECT_EQ(Read(a + "/dmem.max"), "nvidia/0000:3b:00.0/vidmem 12884901888\n");
}

TEST_F(EnforcerTest, APodCgroupWithoutDmemFilesGetsTheControllerDelegatedDownItsAncestors) {
  Root(true);
  tree_.Write("cg/kubepods.slice/cgroup.subtree_control", "cpu memory pids\n");
  tree_.Write("cg/kubepods.slice/kubepods-burstable.slice/cgroup.subtree_control", "cpu memory pids dmem\n");
  std::string a = Pod(systemd_a_, /*files=*/false);
  FixedSource nvml("");
  Enforcer e(tree_.Path("cg"));
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 12 * GiB}}), {Gpu(0, "00000000:3B:00.0")}, &nvml, {});
  EXPECT_EQ(Read(tree_.Path("cg/cgroup.subtree_control")), "cpu memory pids\n+dmem\n");
  EXPECT_EQ(Read(tree_.Path("cg/kubepods.slice/cgroup.subtree_control")), "cpu memory pids\n+dmem\n");
  // Already delegated there: not written again.
  EXPECT_EQ(Read(tree_.Path("cg/kubepods.slice/kubepods-burstable.slice/cgroup.subtree_control")),
            "cpu memory pids dmem\n");
  // A plain directory grows no dmem.max as the kernel's would: the pod fails, saying why.
  const ledger::PodEnforcement* s = State(out, 0, kUidA);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->state, EnforceState::kFailed);
  EXPECT_EQ(s->reason, "the pod's cgroup has no dmem.max after enabling +dmem");
}

TEST_F(EnforcerTest, APodWithoutACgroupIsNotStartedUnlessItsProcessesRun) {
  Root(true);
  FixedSource nvml("");
  Enforcer e(tree_.Path("cg"));
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 8 * GiB}, {kUidB, 0, 4 * GiB, 4 * GiB}}),
                     {Gpu(0, "00000000:3B:00.0")}, &nvml, {kUidB});
  EXPECT_EQ(State(out, 0, kUidA)->state, EnforceState::kAccounted);
  EXPECT_EQ(State(out, 0, kUidA)->reason, "pod cgroup not found yet (not started on this node)");
  // B's processes hold the GPU, so its cgroup exists somewhere this agent does not look.
  EXPECT_EQ(State(out, 0, kUidB)->state, EnforceState::kFailed);
  EXPECT_NE(State(out, 0, kUidB)->reason.find("the pod's cgroup is not under"), std::string::npos);
}

// The real node of this project's tests: cgroup v1 (hybrid), cgroupfs driver.
TEST_F(EnforcerTest, OnACgroupV1HostThePodIsFoundAndTheVramIsAccountedOnlyForWantOfCgroupV2) {
  std::filesystem::create_directories(tree_.Path("cg/memory/kubepods/besteffort/pod" + std::string(kUidB)));
  std::filesystem::create_directories(tree_.Path("cg/pids/kubepods/besteffort/pod" + std::string(kUidB)));
  FixedSource nvml("driver 580.159.04 older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)");
  Enforcer e(tree_.Path("cg"));
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidB, 0, 4 * GiB, 4 * GiB}}), {Gpu(0, "00000000:3B:00.0")}, &nvml, {});
  const ledger::PodEnforcement* s = State(out, 0, kUidB);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->state, EnforceState::kAccounted);
  EXPECT_EQ(s->reason,
            "no cgroup v2 (dmem needs the unified hierarchy), driver 580.159.04 older than R615 (NVML has no "
            "nvmlDeviceSetMemoryLimits_v1)");  // found: not "pod cgroup not found yet"
}

TEST_F(EnforcerTest, AReasonVramdWouldRefuseIsMadePrintableAndCut) {
  Root(true);
  std::string a = Pod(systemd_a_, /*files=*/false);
  std::filesystem::create_directories(a + "/dmem.max");  // refused: the reason names the path
  tree_.Write("cg/" + systemd_a_ + "/dmem.min", "");
  FixedSource nvml("");
  nvml.refuse = "unused";
  // A root with a control byte and 300 more characters: the reason names it.
  Enforcer e(tree_.Path("cg") + "/\x01" + std::string(300, 'x'));
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, GiB, GiB}}), {Gpu(0, "00000000:3B:00.0")}, &nvml, {kUidA});
  const ledger::PodEnforcement* s = State(out, 0, kUidA);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->state, EnforceState::kFailed);  // its processes run: the cgroup must be somewhere
  EXPECT_EQ(s->reason.size(), ledger::kMaxEnforceReason);
  EXPECT_NE(s->reason.find("/?xxx"), std::string::npos) << s->reason;
  EXPECT_TRUE(ledger::IsEnforceReason(s->reason)) << s->reason.size();
  EXPECT_TRUE(ledger::CheckGpuEnforcement(0, out[0]).ok()) << ledger::CheckGpuEnforcement(0, out[0]).message();
}

TEST_F(EnforcerTest, MigGpusAreNotSupportedAndSaySo) {
  Root(true);
  Pod(systemd_a_);
  FixedSource nvml("");
  Enforcer e(tree_.Path("cg"));
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 8 * GiB}}), {Gpu(0, "00000000:3B:00.0", true)},
                     &nvml, {});
  EXPECT_EQ(out[0].backend, "none");
  EXPECT_EQ(State(out, 0, kUidA)->state, EnforceState::kAccounted);
  EXPECT_NE(State(out, 0, kUidA)->reason.find("MIG"), std::string::npos);
  EXPECT_TRUE(nvml.calls.empty());
}

TEST_F(EnforcerTest, AGpuNotReadThisPassKeepsItsLimit) {
  Root(true);
  std::string a = Pod(systemd_a_);
  FixedSource nvml("");
  Enforcer e(tree_.Path("cg"));
  e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 8 * GiB}}), {Gpu(0, "00000000:3B:00.0")}, &nvml, {});
  e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 8 * GiB}}), {}, &nvml, {});  // GPU 0 skipped this pass
  EXPECT_EQ(Read(a + "/dmem.max"), "nvidia/0000:3b:00.0/vidmem 8589934592\n");  // not cleared
}

// The NVML adapter against the fake library, built from NVML's bytes.
class NvmlLimitsTest : public EnforcerTest {
 protected:
  void SetUp() override {
    setenv("FAKE_NVML_CONFIG", tree_.Path("nvml.json").c_str(), 1);
    setenv("FAKE_NVML_LIMITS_LOG", tree_.Path("limits.log").c_str(), 1);
  }
  void TearDown() override {
    unsetenv("FAKE_NVML_CONFIG");
    unsetenv("FAKE_NVML_LIMITS_LOG");
  }
  void Config(const std::string& driver) {
    json gpu = {{"uuid", "GPU-aaaa"}, {"name", "NVIDIA H100 80GB HBM3"}, {"total", 85520809984}, {"used", 0},
                {"pci", "00000000:3B:00.0"}};
    tree_.Write("nvml.json", json{{"driver", driver}, {"gpus", {gpu}}}.dump());
  }
};

TEST_F(NvmlLimitsTest, AnR615DriverSetsTheLimitsWithTheStructsLayout) {
  Config("r615");
  Root(false);
  std::string a = Pod(systemd_a_, /*files=*/false);
  Result<std::unique_ptr<GpuSource>> src = OpenNvml(VRAMD_FAKE_NVML_R615);
  ASSERT_TRUE(src.ok()) << src.status().message();
  Result<std::vector<GpuReading>> r = (*src)->Read();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].pci_bus_id, "00000000:3B:00.0");  // nvmlPciInfo_t's busId @36
  EXPECT_EQ((*src)->MemoryLimitsUnsupported(0), "");
  Enforcer e(tree_.Path("cg"));
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 12 * GiB}}), *r, src->get(), {});
  EXPECT_EQ(out[0].backend, "nvml");
  EXPECT_EQ(State(out, 0, kUidA)->state, EnforceState::kEnforced);
  // What the fake read at nameSpace @0, softLimit @8, hardLimit @16.
  EXPECT_EQ(Read(tree_.Path("limits.log")), "GPU-aaaa 8589934592 12884901888 " + a + "\n");
}

TEST_F(NvmlLimitsTest, ADriverBeforeR615HasNoLimitsAndTheAgentSaysWhichDriver) {
  Config("r550");
  Root(false);
  Pod(systemd_a_, /*files=*/false);
  Result<std::unique_ptr<GpuSource>> src = OpenNvml(VRAMD_FAKE_NVML);
  ASSERT_TRUE(src.ok()) << src.status().message();
  Result<std::vector<GpuReading>> r = (*src)->Read();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*src)->MemoryLimitsUnsupported(0),
            "driver 580.159.04 older than R615 (NVML has no nvmlDeviceSetMemoryLimits_v1)");
  Enforcer e(tree_.Path("cg"));
  auto out = e.Apply(Orders(EnforceMode::kOn, {{kUidA, 0, 8 * GiB, 12 * GiB}}), *r, src->get(), {});
  EXPECT_EQ(out[0].backend, "none");
  EXPECT_EQ(State(out, 0, kUidA)->state, EnforceState::kAccounted);
  EXPECT_FALSE(std::filesystem::exists(tree_.Path("limits.log")));
}

}  // namespace
}  // namespace vramd::agent
