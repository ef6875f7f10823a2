#include "vramd/agent/agent.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "agent/temp_tree.h"

namespace vramd::agent {
namespace {

// Captures what the agent logs for the duration of a test.
class LogCapture {
 public:
  LogCapture() : old_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(old_); }
  std::string text() {
    spdlog::default_logger()->flush();
    return out_.str();
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> old_;
};

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

TEST(Agent, ARefusedReportIsLoggedWithVramdsMessageAndNotResentAtOnce) {
  GpuReading g;
  g.total_bytes = 10;
  FakePusher pusher;
  pusher.set_next({PushKind::kRejected, 400, "{\"error\":\"unknown node gpu-9\"}"});
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

}  // namespace
}  // namespace vramd::agent
