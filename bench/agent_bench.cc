// vramd-agent's pass (issue 14): 8 GPUs and 500 processes on the node, read
// through the fake NVML (dlopen, as the real library) or a fake DRM tree,
// attributed through a fake /proc, built into the report's JSON.
//
//   build/bin/agent_bench                        # the benchmarks (CPU time per pass)
//   build/bin/agent_bench --write-node DIR       # writes the fake node (DIR/proc, DIR/nvml.json)
//                                                # for measuring vramd-agent's RSS (docs/performance.md)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "vramd/agent/agent.h"
#include "vramd/agent/drm.h"
#include "vramd/agent/nvml_source.h"
#include "test_paths.h"  // VRAMD_FAKE_NVML

namespace vramd::agent {
namespace {

constexpr int kGpus = 8;
constexpr int kProcesses = 500;
constexpr int64_t kGi = int64_t{1} << 30;

void Write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// The cgroup file of process i: 9 in 10 in a pod (three drivers' shapes,
// 100 pods), the rest on the host.
std::string Cgroup(int i) {
  char uid[40];
  std::snprintf(uid, sizeof uid, "%08x-aaaa-bbbb-cccc-%012d", i % 100, i % 100);
  std::string u = uid;
  std::string under = u;
  for (char& c : under) c = c == '-' ? '_' : c;
  switch (i % 10) {
    case 0: return "0::/system.slice/containerd.service\n";
    case 1: case 2: case 3:
      return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + under +
             ".slice/cri-containerd-5d1f0e3c9b7a2f.scope\n";
    case 4: case 5: case 6:
      return "12:memory:/kubepods/besteffort/pod" + u + "/0d9c8b7a6f5e\n11:pids:/kubepods/besteffort/pod" + u +
             "/0d9c8b7a6f5e\n0::/\n";
    default:
      return "0::/kubepods.slice/kubepods-pod" + under + ".slice/crio-9a8b7c6d5e4f.scope\n";
  }
}

// DIR/proc/<pid>/cgroup for 500 processes and DIR/nvml.json with 8 H100s
// sharing them; DRM: DIR/sys with 8 amdgpu cards and an fdinfo per process
// (plus 8 other fds each, as a real process has).
void WriteNode(const std::filesystem::path& dir) {
  std::string gpus;
  for (int g = 0; g < kGpus; ++g) {
    std::string procs;
    for (int i = g; i < kProcesses; i += kGpus) {
      if (!procs.empty()) procs += ",";
      procs += "{\"pid\":" + std::to_string(10000 + i) + ",\"used\":" + std::to_string((i + 1) << 20) + "}";
    }
    if (!gpus.empty()) gpus += ",";
    gpus += "{\"uuid\":\"GPU-0000000" + std::to_string(g) + "-1111-2222-3333-444444444444\","
            "\"name\":\"NVIDIA H100 80GB HBM3\",\"total\":85520809984,\"used\":" + std::to_string(20 * kGi) +
            ",\"compute\":[" + procs + "]}";
    char pdev[32];
    std::snprintf(pdev, sizeof pdev, "0000:%02x:00.0", 0x10 + g);
    std::filesystem::path dev = dir / "sys/devices" / pdev;
    Write(dev / "mem_info_vram_total", "25753026560\n");
    Write(dev / "mem_info_vram_used", "3221225472\n");
    std::filesystem::create_directories(dir / ("sys/class/drm/card" + std::to_string(g)));
    std::filesystem::create_symlink(dev, dir / ("sys/class/drm/card" + std::to_string(g)) / "device");
  }
  Write(dir / "nvml.json", "{\"gpus\":[" + gpus + "]}");
  for (int i = 0; i < kProcesses; ++i) {
    std::filesystem::path p = dir / "proc" / std::to_string(10000 + i);
    Write(p / "cgroup", Cgroup(i));
    for (int fd = 0; fd < 9; ++fd) {
      std::filesystem::create_directories(p / "fd");
      if (fd == 8) {
        char pdev[32];
        std::snprintf(pdev, sizeof pdev, "0000:%02x:00.0", 0x10 + i % kGpus);
        Write(p / "fdinfo" / "8", std::string("pos:\t0\nflags:\t02100002\nmnt_id:\t24\ndrm-driver:\tamdgpu\n") +
                                      "drm-pdev:\t" + pdev + "\ndrm-client-id:\t" + std::to_string(i) +
                                      "\ndrm-memory-vram:\t1024 KiB\ndrm-memory-gtt: \t0 KiB\n");
        std::filesystem::create_symlink("/dev/dri/renderD128", p / "fd" / "8");
      } else {
        Write(p / "fdinfo" / std::to_string(fd), "pos:\t0\nflags:\t02\nmnt_id:\t9\nino:\t123\n");
        std::filesystem::create_symlink("socket:[123]", p / "fd" / std::to_string(fd));
      }
    }
  }
}

struct Node {
  std::filesystem::path dir;
  Node() {
    char t[] = "/tmp/vramd-agent-bench-XXXXXX";
    dir = mkdtemp(t);
    WriteNode(dir);
    setenv("FAKE_NVML_CONFIG", (dir / "nvml.json").c_str(), 1);
  }
  ~Node() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

Node& TheNode() {
  static Node node;
  return node;
}

// The whole pass as the loop runs it: NVML read, attribution, report, JSON.
void BM_AgentPassNvml(benchmark::State& state) {
  Node& n = TheNode();
  std::string proc = (n.dir / "proc").string();
  Agent agent([] { return OpenNvml(VRAMD_FAKE_NVML); }, proc, nullptr, 5000);
  size_t bytes = 0;
  for (auto _ : state) {
    Result<Report> r = agent.Pass();
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    std::string json = ReportJson(*r);
    bytes = json.size();
    benchmark::DoNotOptimize(json);
  }
  state.counters["report_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_AgentPassNvml)->Unit(benchmark::kMicrosecond);

// Its parts: the NVML read alone (8 GPUs, 500 processes through the fake) …
void BM_NvmlRead(benchmark::State& state) {
  TheNode();
  Result<std::unique_ptr<GpuSource>> s = OpenNvml(VRAMD_FAKE_NVML);
  if (!s.ok()) {
    state.SkipWithError(s.status().message().c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize((*s)->Read());
}
BENCHMARK(BM_NvmlRead)->Unit(benchmark::kMicrosecond);

// … the attribution (500 cgroup files) and the report (pure).
void BM_AttributeAndBuild(benchmark::State& state) {
  Node& n = TheNode();
  Result<std::unique_ptr<GpuSource>> s = OpenNvml(VRAMD_FAKE_NVML);
  if (!s.ok()) {
    state.SkipWithError(s.status().message().c_str());
    return;
  }
  std::vector<GpuReading> readings = *(*s)->Read();
  ProcAttribution attribution((n.dir / "proc").string());
  for (auto _ : state) {
    PodOfPid pods = attribution.Attribute(readings);
    benchmark::DoNotOptimize(ReportJson(BuildReport("vramd-agent/bench", "nvml", readings, pods)));
  }
}
BENCHMARK(BM_AttributeAndBuild)->Unit(benchmark::kMicrosecond);

// The DRM pass: 8 cards, 500 processes with 9 fds each (one DRM client).
void BM_AgentPassDrm(benchmark::State& state) {
  Node& n = TheNode();
  std::string proc = (n.dir / "proc").string(), sys = (n.dir / "sys").string();
  Agent agent([sys, proc]() -> Result<std::unique_ptr<GpuSource>> {
    return std::unique_ptr<GpuSource>(std::make_unique<DrmSource>(sys, proc));
  }, proc, nullptr, 5000);
  for (auto _ : state) {
    Result<Report> r = agent.Pass();
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(ReportJson(*r));
  }
}
BENCHMARK(BM_AgentPassDrm)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace vramd::agent

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write-node") == 0) {
    vramd::agent::WriteNode(argv[2]);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
