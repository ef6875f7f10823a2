#include "vramd/agent/agent.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "fakes/log_capture.h"
#include "agent/temp_tree.h"
#include "vramd/agent/nvml_source.h"
#include "test_paths.h"  // VRAMD_TEST_DATA, VRAMD_BIN_DIR, VRAMD_FAKE_NVML

namespace vramd::agent {
namespace {

using vramd::testing::LogCapture;

class FakePusher final : public Pusher {
 public:
  PushOutcome Push(const std::string& body) override {
    MutexLock l(&mu_);
    bodies_.push_back(body);
    return next_;
  }
  std::vector<std::string> bodies() {
    MutexLock l(&mu_);
    return bodies_;
  }
  void set_next(PushOutcome o) {
    MutexLock l(&mu_);
    next_ = std::move(o);
  }

 private:
  Mutex mu_;
  std::vector<std::string> bodies_ GUARDED_BY(mu_);
  PushOutcome next_ GUARDED_BY(mu_);
};

class ListSource final : public GpuSource {
 public:
  explicit ListSource(Result<std::vector<GpuReading>> r) : r_(std::move(r)) {}
  std::string_view Name() const override { return "nvml"; }
  Result<std::vector<GpuReading>> Read() override { return r_; }

 private:
  Result<std::vector<GpuReading>> r_;
};

// Waits (bounded) until pred() holds.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

TEST(Agent, WithoutAnNvmlLibraryItStaysUpIdleAndLogsOnce) {
  testing::TempTree t;
  AgentOptions o;
  o.source = "auto";
  o.nvml_library = t.Path("missing/libnvidia-ml.so.1");
  o.sys_root = t.Path("sys");
  o.proc_root = t.Path("proc");
  LogCapture log;
  FakePusher pusher;
  Agent agent([o] { return OpenSource(o); }, o.proc_root, &pusher, 5);
  agent.Start();
  ASSERT_TRUE(Eventually([&] { return agent.passes() >= 5; }));
  agent.Stop();  // returns: the loop was alive all along
  EXPECT_TRUE(pusher.bodies().empty());
  std::string text = log.text();
  const std::string line = "no GPU source on this node, idle";
  size_t first = text.find(line);
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find(line, first + 1), std::string::npos) << "logged more than once:\n" << text;
  EXPECT_NE(text.find("cannot load the NVML library " + o.nvml_library), std::string::npos) << text;
}

TEST(Agent, PushesTheReportWithPodsFromTheProcTree) {
  testing::TempTree t;
  t.Write("proc/10/cgroup", "0::/kubepods/burstable/pod0f1c2d3e-aaaa-bbbb-cccc-0123456789ab/c\n");
  t.Write("proc/11/cgroup", "0::/system.slice/xorg.service\n");  // a host process: outside pods
  GpuReading g;
  g.index = 0;
  g.uuid = "GPU-1";
  g.total_bytes = 1000;
  g.used_bytes = 600;
  g.processes = {{10, 400}, {11, 100}};
  FakePusher pusher;
  Agent agent([g]() -> Result<std::unique_ptr<GpuSource>> {
    return std::unique_ptr<GpuSource>(std::make_unique<ListSource>(std::vector<GpuReading>{g}));
  }, t.Path("proc"), &pusher, 5);
  agent.Start();
  ASSERT_TRUE(Eventually([&] { return agent.pushes() >= 2; }));
  agent.Stop();
  nlohmann::json j = nlohmann::json::parse(pusher.bodies().at(0));
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["source"], "nvml");
  EXPECT_EQ(j["agent"], AgentName());
  EXPECT_EQ(j["gpus"][0]["outside_pods_bytes"], 100);
  EXPECT_EQ(j["gpus"][0]["pods"][0]["uid"], "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab");
  EXPECT_EQ(j["gpus"][0]["pods"][0]["used_bytes"], 400);
}

// Issue 34: vramd's answer to a report names the limits; the next pass
// applies them to the pod's cgroup and its report says so. A malformed
// answer leaves nothing in force.
TEST(Agent, TheLimitsInVramdsAnswerAreAppliedAndTheNextReportSaysSo) {
  testing::TempTree t;
  const std::string uid = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab";
  t.Write("proc/10/cgroup", "0::/kubepods/burstable/pod" + uid + "/c\n");
  t.Write("cg/cgroup.controllers", "cpuset cpu io memory pids dmem\n");
  t.Write("cg/dmem.capacity", "drm/0000:03:00.0/vram0 1000\n");
  const std::string pod = "cg/kubepods/burstable/pod" + uid;
  t.Write(pod + "/dmem.max", "");
  t.Write(pod + "/dmem.min", "");
  GpuReading g;
  g.index = 0;
  g.total_bytes = 1000;
  g.used_bytes = 600;
  g.pci_bus_id = "0000:03:00.0";
  g.processes = {{10, 400}};
  FakePusher pusher;
  pusher.set_next({PushKind::kOk, 200, "",
                   R"({"node":"n","enforce":{"mode":"on","limits":[{"uid":")" + uid +
                       R"(","index":0,"soft":300,"hard":500}]}})"});
  Agent agent([g]() -> Result<std::unique_ptr<GpuSource>> {
    return std::unique_ptr<GpuSource>(std::make_unique<ListSource>(std::vector<GpuReading>{g}));
  }, t.Path("proc"), &pusher, 5, t.Path("cg"));
  agent.Start();
  ASSERT_TRUE(Eventually([&] { return agent.pushes() >= 3; }));
  agent.Stop();
  nlohmann::json first = nlohmann::json::parse(pusher.bodies().at(0));
  EXPECT_FALSE(first["gpus"][0].contains("enforcement"));  // no answer yet
  nlohmann::json later = nlohmann::json::parse(pusher.bodies().at(1));
  EXPECT_EQ(later["gpus"][0]["enforcement"]["backend"], "dmem") << later.dump();
  EXPECT_EQ(later["gpus"][0]["enforcement"]["pods"][0],
            (nlohmann::json{{"uid", uid}, {"state", "enforced"}}));
  std::ifstream max(t.Path(pod + "/dmem.max"));
  std::string line;
  std::getline(max, line);
  EXPECT_EQ(line, "drm/0000:03:00.0/vram0 500");
  std::getline(max, line);
  EXPECT_TRUE(max.eof()) << "written once, not once per pass: " << line;

  // The orders take effect when the answer arrives, before the next pass.
  {
    testing::TempTree t2;
    t2.Write("cg/cgroup.controllers", "cpuset cpu io memory pids dmem\n");
    t2.Write("cg/dmem.capacity", "drm/0000:03:00.0/vram0 1000\n");
    t2.Write(pod + "/dmem.max", "");
    t2.Write(pod + "/dmem.min", "");
    t2.Write("proc/10/cgroup", "0::/kubepods/burstable/pod" + uid + "/c\n");
    FakePusher once;
    once.set_next({PushKind::kOk, 200, "",
                   R"({"enforce":{"mode":"on","limits":[{"uid":")" + uid + R"(","index":0,"soft":300,"hard":700}]}})"});
    Agent slow([g]() -> Result<std::unique_ptr<GpuSource>> {
      return std::unique_ptr<GpuSource>(std::make_unique<ListSource>(std::vector<GpuReading>{g}));
    }, t2.Path("proc"), &once, 3'600'000, t2.Path("cg"));  // an hour between passes
    slow.Start();
    ASSERT_TRUE(Eventually([&] { return slow.pushes() >= 1; }));
    std::string written;
    ASSERT_TRUE(Eventually([&] {
      std::ifstream in(t2.Path(pod + "/dmem.max"));
      std::getline(in, written);
      return !written.empty();
    }));
    slow.Stop();
    EXPECT_EQ(written, "drm/0000:03:00.0/vram0 700");
    EXPECT_EQ(slow.passes(), 1);  // before any second pass
  }

  // A malformed answer: nothing is applied, and the agent says why.
  LogCapture log;
  Agent bad([g]() -> Result<std::unique_ptr<GpuSource>> {
    return std::unique_ptr<GpuSource>(std::make_unique<ListSource>(std::vector<GpuReading>{g}));
  }, t.Path("proc"), nullptr, 5, t.Path("cg"));
  bad.TakeAnswer(R"({"enforce":{"mode":"on","limits":[{"uid":"x","index":0,"soft":1,"hard":1}]}})");
  Result<Report> r = bad.Pass();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->gpus[0].enforcement.backend.empty());
  EXPECT_NE(log.text().find("vramd's enforcement orders are refused"), std::string::npos) << log.text();
}

TEST(Agent, ARefusedReportIsLoggedWithVramdsMessageAndNotResentAtOnce) {
  GpuReading g;
  g.total_bytes = 10;
  FakePusher pusher;
  pusher.set_next({PushKind::kRejected, 400, "{\"error\":\"unknown node gpu-9\"}", {}});
  LogCapture log;
  Agent agent([g]() -> Result<std::unique_ptr<GpuSource>> {
    return std::unique_ptr<GpuSource>(std::make_unique<ListSource>(std::vector<GpuReading>{g}));
  }, "/nonexistent", &pusher, 5);
  agent.Start();
  ASSERT_TRUE(Eventually([&] { return !pusher.bodies().empty(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // 20 intervals: none may push again
  agent.Stop();
  EXPECT_EQ(pusher.bodies().size(), 1u);
  EXPECT_NE(log.text().find("vramd refused the report (HTTP 400): {\"error\":\"unknown node gpu-9\"}"),
            std::string::npos)
      << log.text();
}

TEST(Agent, ASourceThatFailsIsReopenedAndLoggedOnce) {
  LogCapture log;
  int opened = 0;
  Agent agent([&opened]() -> Result<std::unique_ptr<GpuSource>> {
    ++opened;
    return std::unique_ptr<GpuSource>(
        std::make_unique<ListSource>(Result<std::vector<GpuReading>>(Unavailable("driver gone"))));
  }, "/nonexistent", nullptr, 5);
  EXPECT_EQ(agent.Pass().status().message(), "driver gone");
  EXPECT_EQ(agent.Pass().status().message(), "driver gone");
  EXPECT_EQ(agent.Pass().status().message(), "driver gone");
  EXPECT_EQ(opened, 3);
  std::string text = log.text();
  const std::string line = "nvml: driver gone; reopening every pass";
  size_t first = text.find(line);
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find("driver gone", first + line.size()), std::string::npos) << "logged more than once:\n" << text;
}

TEST(Agent, OpenSourceHonoursTheChoice) {
  testing::TempTree t;
  t.Write("sys/devices/0000:03:00.0/mem_info_vram_total", "1024\n");
  t.Write("sys/devices/0000:03:00.0/mem_info_vram_used", "512\n");
  t.Link("sys/class/drm/card0/device", t.Path("sys/devices/0000:03:00.0"));
  AgentOptions o;
  o.sys_root = t.Path("sys");
  o.proc_root = t.Path("proc");
  o.nvml_library = t.Path("none.so");
  o.source = "auto";  // no NVML: DRM
  Result<std::unique_ptr<GpuSource>> s = OpenSource(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->Name(), "drm");
  o.source = "nvml";  // no fallback when asked for NVML
  EXPECT_EQ(OpenSource(o).status().code(), Code::kNotFound);
  o.source = "drm";
  o.sys_root = t.Path("empty");
  EXPECT_EQ(OpenSource(o).status().code(), Code::kNotFound);
}

// ---- The agent on the fake NVML, every driver family (r470: plain entry
// points; r535: _v3 with 32-byte entries; r550: _v3 with 24-byte entries and
// nvmlDeviceGetRunningProcessDetailList), each GPU shared by three or more
// processes, in different pods and outside any.

constexpr int64_t MiB = int64_t{1} << 20, GiB = int64_t{1} << 30;
constexpr const char* kPodA = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab";
constexpr const char* kPodB = "7d6c5b4a-1111-2222-3333-444455556666";
constexpr const char* kPodC = "c0ffee00-5555-4666-8777-888899990000";

// cgroup v2, systemd driver, containerd: what the kubelet creates.
std::string KubeletCgroup(const std::string& uid) {
  std::string u = uid;
  for (char& c : u) c = c == '-' ? '_' : c;
  return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u +
         ".slice/cri-containerd-5d1f0e3c9b7a2f6e5d1f0e3c9b7a2f6e5d1f0e3c9b7a2f6e5d1f0e3c9b7a2f6e.scope";
}

class AgentOnNvml : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    setenv("FAKE_NVML_CONFIG", t_.Path("nvml.json").c_str(), 1);
    t_.Write("proc/1000/cgroup", "0::/user.slice/user-1000.slice/session-3.scope\n");  // outside any pod
    t_.Write("proc/2001/cgroup", KubeletCgroup(kPodA) + "\n");
    t_.Write("proc/2002/cgroup", KubeletCgroup(kPodB) + "\n");
    t_.Write("proc/2003/cgroup", KubeletCgroup(kPodC) + "\n");
  }
  void TearDown() override { unsetenv("FAKE_NVML_CONFIG"); }

  // One GPU (the issue's H100: total and used as it read them) with these lists.
  void Node(const nlohmann::json& compute, const nlohmann::json& extra = nlohmann::json::object()) {
    nlohmann::json gpu = {{"uuid", "GPU-5e2d0000-0000-0000-0000-000000000000"},
                          {"name", "NVIDIA H100 80GB HBM3"},
                          {"total", 85520809984},
                          {"used", 9682092032},
                          {"compute", compute}};
    for (const auto& [k, v] : extra.items()) gpu[k] = v;
    t_.Write("nvml.json", nlohmann::json{{"driver", GetParam()}, {"gpus", {gpu}}}.dump());
  }
  // One pass of a fresh agent: the report's GPU 0, as JSON.
  nlohmann::json Gpu0() {
    Agent agent([] { return OpenNvml(VRAMD_FAKE_NVML); }, t_.Path("proc"), nullptr, 5);
    Result<Report> r = agent.Pass();
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok() || r->gpus.empty()) return nullptr;
    return nlohmann::json::parse(ReportJson(*r))["gpus"][0];
  }
  static nlohmann::json Pods(const nlohmann::json& gpu) {
    return gpu.contains("pods") ? gpu["pods"] : nlohmann::json::array();
  }
  static int64_t Outside(const nlohmann::json& gpu) { return gpu.value("outside_pods_bytes", int64_t{0}); }

  testing::TempTree t_;
};

// The issue's H100 on driver 580: nvidia-smi listed 1030, 3590, 2566 and 1542
// MiB; three of the processes in pods.
TEST_P(AgentOnNvml, TheIssuesH100EveryPodIsAttributed) {
  Node({{{"pid", 1000}, {"used", 1030 * MiB}},
        {{"pid", 2001}, {"used", 3590 * MiB}},
        {{"pid", 2002}, {"used", 2566 * MiB}},
        {{"pid", 2003}, {"used", 1542 * MiB}}});
  nlohmann::json g = Gpu0();
  ASSERT_FALSE(g.is_null());
  EXPECT_EQ(g["total_bytes"], 85520809984);
  EXPECT_EQ(g["used_bytes"], 9682092032);
  EXPECT_EQ(Outside(g), 1030 * MiB) << g.dump();
  EXPECT_EQ(Pods(g), (nlohmann::json{{{"uid", kPodA}, {"used_bytes", 3590 * MiB}},
                                     {{"uid", kPodB}, {"used_bytes", 2566 * MiB}},
                                     {{"uid", kPodC}, {"used_bytes", 1542 * MiB}}}))
      << g.dump();
  EXPECT_FALSE(g.contains("processes_unavailable")) << g.dump();
}

// Bad input, each a named case; none may attribute a byte wrongly.

// The process exited between NVML's list and /proc: nobody knows its pod, so
// it is neither a pod's nor "outside pods".
TEST_P(AgentOnNvml, BadInputAPidThatNoLongerExistsIsAttributedNowhere) {
  Node({{{"pid", 2001}, {"used", 1 * GiB}}, {{"pid", 2002}, {"used", 2 * GiB}}, {{"pid", 5555}, {"used", 3 * GiB}}});
  nlohmann::json g = Gpu0();
  ASSERT_FALSE(g.is_null());
  EXPECT_EQ(Outside(g), 0) << g.dump();
  EXPECT_EQ(Pods(g), (nlohmann::json{{{"uid", kPodA}, {"used_bytes", 1 * GiB}},
                                     {{"uid", kPodB}, {"used_bytes", 2 * GiB}}}))
      << g.dump();
}

// A container made a cgroup named like another pod's inside its own: the
// kubelet's pod cgroup (the outermost pod segment under kubepods) counts.
TEST_P(AgentOnNvml, BadInputAProcessInTwoPodsCgroupsCountsForTheKubeletsPod) {
  std::string inner = std::string(kPodB);
  for (char& c : inner) c = c == '-' ? '_' : c;
  t_.Write("proc/2004/cgroup", KubeletCgroup(kPodA) + "/kubepods-besteffort-pod" + inner + ".slice/x.scope\n");
  t_.Write("proc/2005/cgroup", "0::/kubepods/burstable/pod" + std::string(kPodC) + "/4f3c2b1a/pod" +
                                   std::string(kPodB) + "/c\n");
  Node({{{"pid", 1000}, {"used", 1 * GiB}},
        {{"pid", 2002}, {"used", 2 * GiB}},
        {{"pid", 2004}, {"used", 4 * GiB}},
        {{"pid", 2005}, {"used", 8 * GiB}}});
  nlohmann::json g = Gpu0();
  ASSERT_FALSE(g.is_null());
  EXPECT_EQ(Outside(g), 1 * GiB) << g.dump();
  EXPECT_EQ(Pods(g), (nlohmann::json{{{"uid", kPodA}, {"used_bytes", 4 * GiB}},
                                     {{"uid", kPodB}, {"used_bytes", 2 * GiB}},
                                     {{"uid", kPodC}, {"used_bytes", 8 * GiB}}}))
      << g.dump();
}

// A driver whose list call answers SUCCESS with more entries than it was
// given room for: the list cannot be trusted, so nothing of it is attributed,
// and the report says the per-process figures are unavailable.
TEST_P(AgentOnNvml, BadInputADriverThatReturnsMoreEntriesThanAsked) {
  Node({{{"pid", 1000}, {"used", 1 * GiB}}, {{"pid", 2001}, {"used", 2 * GiB}}, {{"pid", 2002}, {"used", 3 * GiB}}},
       {{"count_beyond_buffer", true}});
  nlohmann::json g = Gpu0();
  ASSERT_FALSE(g.is_null());
  EXPECT_EQ(g["used_bytes"], 9682092032);  // the GPU's own figures still count
  EXPECT_EQ(Pods(g), nlohmann::json::array()) << g.dump();
  EXPECT_EQ(Outside(g), 0) << g.dump();
  EXPECT_TRUE(g.contains("processes_unavailable")) << g.dump();
}

// A list call that fails and says "0 processes": not an idle GPU.
TEST_P(AgentOnNvml, BadInputAZeroCountWithAnError) {
  for (int error : {999, 7, 4}) {  // UNKNOWN; INSUFFICIENT_SIZE with a count of 0; NO_PERMISSION
    Node({{{"pid", 1000}, {"used", 1 * GiB}}, {{"pid", 2001}, {"used", 2 * GiB}}, {{"pid", 2002}, {"used", 3 * GiB}}},
         {{"errors", {{"nvmlDeviceGetComputeRunningProcesses", error}}}});
    nlohmann::json g = Gpu0();
    ASSERT_FALSE(g.is_null());
    EXPECT_EQ(Pods(g), nlohmann::json::array()) << error << ": " << g.dump();
    EXPECT_EQ(Outside(g), 0) << error << ": " << g.dump();
    EXPECT_TRUE(g.contains("processes_unavailable")) << error << ": " << g.dump();
  }
}

// Entries no driver can mean (a pid of 0, a pid twice in one list, more bytes
// than the GPU has): the list fails validation and is not attributed.
TEST_P(AgentOnNvml, BadInputImpossibleEntriesFailTheList) {
  const nlohmann::json ok = {{{"pid", 1000}, {"used", 1 * GiB}}, {{"pid", 2001}, {"used", 2 * GiB}}};
  for (const nlohmann::json& bad : {nlohmann::json{{"pid", 0}, {"used", GiB}},
                                    nlohmann::json{{"pid", 2001}, {"used", GiB}},
                                    nlohmann::json{{"pid", 2002}, {"used", 85520809985}}}) {
    nlohmann::json compute = ok;
    compute.push_back(bad);
    Node(compute);
    nlohmann::json g = Gpu0();
    ASSERT_FALSE(g.is_null());
    EXPECT_EQ(Pods(g), nlohmann::json::array()) << bad.dump() << ": " << g.dump();
    EXPECT_EQ(Outside(g), 0) << bad.dump() << ": " << g.dump();
    EXPECT_TRUE(g.contains("processes_unavailable")) << bad.dump() << ": " << g.dump();
  }
  // NVML_VALUE_NOT_AVAILABLE is not impossible: that process is not counted, the rest is.
  nlohmann::json compute = ok;
  compute.push_back({{"pid", 2002}, {"used", -1}});
  Node(compute);
  nlohmann::json g = Gpu0();
  EXPECT_EQ(Outside(g), 1 * GiB) << g.dump();
  EXPECT_EQ(Pods(g), (nlohmann::json{{{"uid", kPodA}, {"used_bytes", 2 * GiB}}})) << g.dump();
  EXPECT_FALSE(g.contains("processes_unavailable")) << g.dump();
}

INSTANTIATE_TEST_SUITE_P(Drivers, AgentOnNvml, ::testing::Values("r470", "r535", "r550"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
}  // namespace vramd::agent
