// The NVML source against the fake NVML (tests/fakes/fake_nvml), loaded with
// dlopen exactly as the real library is.
#include "vramd/agent/nvml_source.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "agent/temp_tree.h"

namespace vramd::agent {
namespace {

using nlohmann::json;
constexpr int64_t GiB = int64_t{1} << 30, MiB = int64_t{1} << 20;

class NvmlSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FAKE_NVML_CONFIG", tree_.Path("nvml.json").c_str(), 1);
    setenv("FAKE_NVML_CALL_LOG", tree_.Path("calls.log").c_str(), 1);
  }
  void TearDown() override {
    unsetenv("FAKE_NVML_CONFIG");
    unsetenv("FAKE_NVML_CALL_LOG");
  }
  void Config(const json& j) { tree_.Write("nvml.json", j.dump()); }
  std::string Calls() {
    std::ifstream in(tree_.Path("calls.log"));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static json H100(const std::string& uuid, json compute = json::array(), json graphics = json::array()) {
    return {{"uuid", uuid}, {"name", "NVIDIA H100 80GB HBM3"}, {"total", 85520809984}, {"used", 4 * GiB},
            {"compute", compute}, {"graphics", graphics}};
  }
  std::unique_ptr<GpuSource> Open(const char* library = VRAMD_FAKE_NVML) {
    Result<std::unique_ptr<GpuSource>> s = OpenNvml(library);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::vector<GpuReading> Read(GpuSource* s) {
    Result<std::vector<GpuReading>> r = s->Read();
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::vector<GpuReading>{};
  }

  testing::TempTree tree_;
};

TEST_F(NvmlSourceTest, ReadsGpusAndProcessesThroughTheNewestEntryPoints) {
  Config({{"gpus",
           {H100("GPU-aaaa", {{{"pid", 4242}, {"used", 3 * GiB}}, {{"pid", 4243}, {"used", 512 * MiB}}},
                 {{{"pid", 77}, {"used", 64 * MiB}}}),
            H100("GPU-bbbb")}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->Name(), "nvml");
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].index, 0);
  EXPECT_EQ(got[0].uuid, "GPU-aaaa");
  EXPECT_EQ(got[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(got[0].total_bytes, 85520809984);
  EXPECT_EQ(got[0].used_bytes, 4 * GiB);  // total − free: the reserve _v2 reports apart is included
  EXPECT_FALSE(got[0].mig);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{77, 64 * MiB}, {4242, 3 * GiB}, {4243, 512 * MiB}}));
  EXPECT_EQ(got[1].uuid, "GPU-bbbb");
  EXPECT_TRUE(got[1].processes.empty());
  std::string calls = Calls();
  EXPECT_NE(calls.find("nvmlInit_v2\n"), std::string::npos) << calls;
  EXPECT_NE(calls.find("nvmlDeviceGetCount_v2\n"), std::string::npos);
  EXPECT_NE(calls.find("nvmlDeviceGetHandleByIndex_v2\n"), std::string::npos);
  EXPECT_NE(calls.find("nvmlDeviceGetMemoryInfo_v2\n"), std::string::npos);
  EXPECT_NE(calls.find("nvmlDeviceGetComputeRunningProcesses_v3\n"), std::string::npos);
  EXPECT_NE(calls.find("nvmlDeviceGetGraphicsRunningProcesses_v3\n"), std::string::npos);
  s.reset();
  EXPECT_NE(Calls().find("nvmlShutdown\n"), std::string::npos);
}

TEST_F(NvmlSourceTest, AnOldLibraryWithTheUnversionedEntryPointsOnly) {
  Config({{"gpus", {H100("GPU-aaaa", {{{"pid", 4242}, {"used", 3 * GiB}}}, {{{"pid", 77}, {"used", 64 * MiB}}})}}});
  std::unique_ptr<GpuSource> s = Open(VRAMD_FAKE_NVML_LEGACY);
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].uuid, "GPU-aaaa");
  EXPECT_EQ(got[0].total_bytes, 85520809984);
  EXPECT_EQ(got[0].used_bytes, 4 * GiB);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{77, 64 * MiB}, {4242, 3 * GiB}}));
  std::string calls = Calls();
  EXPECT_NE(calls.find("nvmlInit\n"), std::string::npos) << calls;
  EXPECT_NE(calls.find("nvmlDeviceGetComputeRunningProcesses\n"), std::string::npos);
  EXPECT_EQ(calls.find("_v"), std::string::npos) << calls;
}

TEST_F(NvmlSourceTest, AProcessListLargerThanTheBufferIsReadWhole) {
  json procs = json::array();
  for (int i = 0; i < 300; ++i) procs.push_back({{"pid", 1000 + i}, {"used", MiB * (i + 1)}});
  Config({{"gpus", {H100("GPU-aaaa", procs)}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].processes.size(), 300u);
  EXPECT_EQ(got[0].processes[299], (ProcessUsage{1299, 300 * MiB}));
}

TEST_F(NvmlSourceTest, AListThatKeepsGrowingIsRetriedThenLeftEmpty) {
  json gpu = H100("GPU-aaaa", {{{"pid", 5}, {"used", GiB}}});
  gpu["insufficient_rounds"] = 2;  // grew twice between calls: the third read succeeds
  Config({{"gpus", {gpu}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{5, GiB}}));

  gpu["insufficient_rounds"] = 100;  // never settles: the GPU is still reported, without processes
  Config({{"gpus", {gpu}}});
  got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].used_bytes, 4 * GiB);
  EXPECT_TRUE(got[0].processes.empty());
}

TEST_F(NvmlSourceTest, AGpuThatVanishesIsSkippedAndComesBack) {
  json lost = H100("GPU-bbbb");
  lost["lost"] = true;
  Config({{"gpus", {H100("GPU-aaaa"), lost, H100("GPU-cccc")}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].uuid, "GPU-aaaa");
  EXPECT_EQ(got[1].index, 2);
  EXPECT_EQ(got[1].uuid, "GPU-cccc");

  // Lost in the middle of a pass (after its handle): still skipped.
  lost["lost"] = false;
  lost["errors"] = {{"nvmlDeviceGetMemoryInfo", 15}};
  Config({{"gpus", {H100("GPU-aaaa"), lost, H100("GPU-cccc")}}});
  EXPECT_EQ(Read(s.get()).size(), 2u);

  Config({{"gpus", {H100("GPU-aaaa"), H100("GPU-bbbb"), H100("GPU-cccc")}}});  // the driver recovered it
  got = Read(s.get());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].uuid, "GPU-bbbb");
}

TEST_F(NvmlSourceTest, PerCallErrors) {
  json no_uuid = H100("GPU-aaaa");
  no_uuid["errors"] = {{"nvmlDeviceGetUUID", 3}, {"nvmlDeviceGetName", 999}};  // NOT_SUPPORTED, UNKNOWN
  json no_memory = H100("GPU-bbbb");
  no_memory["errors"] = {{"nvmlDeviceGetMemoryInfo", 4}};  // NO_PERMISSION on both versions
  json no_compute = H100("GPU-cccc", {{{"pid", 1}, {"used", GiB}}}, {{{"pid", 2}, {"used", MiB}}});
  no_compute["errors"] = {{"nvmlDeviceGetComputeRunningProcesses", 3}};
  Config({{"gpus", {no_uuid, no_memory, no_compute}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].index, 0);
  EXPECT_EQ(got[0].uuid, "");
  EXPECT_EQ(got[0].name, "");
  EXPECT_EQ(got[0].total_bytes, 85520809984);
  EXPECT_EQ(got[1].index, 2);
  EXPECT_EQ(got[1].processes, (std::vector<ProcessUsage>{{2, MiB}}));
}

TEST_F(NvmlSourceTest, MemoryInfoV2VersionMismatchFallsBackToV1) {
  json gpu = H100("GPU-aaaa");
  gpu["errors"] = {{"nvmlDeviceGetMemoryInfo_v2", 25}};  // ARGUMENT_VERSION_MISMATCH
  Config({{"gpus", {gpu}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].used_bytes, 4 * GiB);
  EXPECT_NE(Calls().find("nvmlDeviceGetMemoryInfo\n"), std::string::npos);
}

TEST_F(NvmlSourceTest, MigModeIsReportedWhole) {
  json gpu = H100("GPU-aaaa", {{{"pid", 9}, {"used", GiB}}});
  gpu["mig"] = true;
  Config({{"gpus", {gpu}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].mig);
  EXPECT_EQ(got[0].total_bytes, 85520809984);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{9, GiB}}));
}

TEST_F(NvmlSourceTest, UnknownProcessMemoryIsNotCountedAndAPidIsListedOnce) {
  Config({{"gpus",
           {H100("GPU-aaaa", {{{"pid", 1}, {"used", -1}}, {{"pid", 2}, {"used", GiB}}},
                 {{{"pid", 2}, {"used", 2 * GiB}}})}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{2, 2 * GiB}}));
}

TEST_F(NvmlSourceTest, InitFailureIsUnavailableWithNvmlsMessage) {
  Config({{"init_error", 9}, {"gpus", json::array()}});  // DRIVER_NOT_LOADED
  Result<std::unique_ptr<GpuSource>> s = OpenNvml(VRAMD_FAKE_NVML);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kUnavailable);
  EXPECT_EQ(s.status().message(), "nvmlInit failed: Driver Not Loaded (9)");
}

TEST_F(NvmlSourceTest, CountFailureFailsTheRead) {
  Config({{"gpus", {H100("GPU-aaaa")}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  Config({{"count_error", 15}, {"gpus", {H100("GPU-aaaa")}}});
  Result<std::vector<GpuReading>> r = s->Read();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("nvmlDeviceGetCount"), std::string::npos);
}

TEST_F(NvmlSourceTest, AMissingLibraryIsNotFoundAndNamesThePath) {
  Result<std::unique_ptr<GpuSource>> s = OpenNvml(tree_.Path("no/libnvidia-ml.so.1"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kNotFound);
  EXPECT_NE(s.status().message().find("cannot load the NVML library " + tree_.Path("no/libnvidia-ml.so.1")),
            std::string::npos);
}

TEST_F(NvmlSourceTest, ALibraryThatIsNotNvmlIsRefused) {
  Result<std::unique_ptr<GpuSource>> s = OpenNvml("libm.so.6");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kNotFound);
  EXPECT_NE(s.status().message().find("is not a usable NVML library: it lacks nvmlInit"), std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace vramd::agent
