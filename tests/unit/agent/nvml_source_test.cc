// The NVML source against the fake NVML (tests/fakes/fake_nvml), loaded with
// dlopen exactly as the real library is.
#include "vramd/agent/nvml_source.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "agent/temp_tree.h"
#include "fakes/log_capture.h"
#include "test_paths.h"  // VRAMD_TEST_DATA, VRAMD_BIN_DIR, VRAMD_FAKE_NVML

// NVML's opaque C types, by name (the fake's raw entry points are called below).
struct nvmlDevice_st;
struct nvmlProcessDetailList_v1;
struct nvmlProcessUtilizationSample;

namespace vramd::agent {
namespace {

using nlohmann::json;
constexpr int64_t GiB = int64_t{1} << 30, MiB = int64_t{1} << 20;

using vramd::testing::LogCapture;

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
  // The fake's default family (R550+): the versioned request struct; never _v3 (its stride depends on the driver).
  EXPECT_NE(calls.find("nvmlDeviceGetRunningProcessDetailList\n"), std::string::npos);
  EXPECT_EQ(calls.find("RunningProcesses"), std::string::npos) << calls;
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

// ---- Every driver family (tests/fakes/fake_nvml: its own layouts, chosen
// by the config's "driver"): r470 (plain entry points only), r535 (_v3 with
// 32-byte entries), r550 (_v3 with 24-byte entries, and
// nvmlDeviceGetRunningProcessDetailList). Each multi-process test shares a GPU
// between three or more processes.

class NvmlFamilyTest : public NvmlSourceTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void Config(json j) {
    j["driver"] = GetParam();
    NvmlSourceTest::Config(j);
  }
};

// The H100 (driver 580): four CUDA processes of 1030, 3590, 2566 and
// 1542 MiB, one outside any pod; and a graphics process. A second GPU with
// three processes shares the agent's buffers.
TEST_P(NvmlFamilyTest, EveryProcessOfASharedGpuIsReadWhole) {
  Config({{"gpus",
           {H100("GPU-aaaa",
                 {{{"pid", 1000}, {"used", 1030 * MiB}},
                  {{"pid", 2001}, {"used", 3590 * MiB}},
                  {{"pid", 2002}, {"used", 2566 * MiB}},
                  {{"pid", 2003}, {"used", 1542 * MiB}}},
                 {{{"pid", 3000}, {"used", 64 * MiB}}}),
            H100("GPU-bbbb",
                 {{{"pid", 4001}, {"used", 5 * GiB}}, {{"pid", 4002}, {"used", 6 * GiB}},
                  {{"pid", 4003}, {"used", 7 * GiB}}})}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  for (int pass = 0; pass < 2; ++pass) {  // the buffers kept between passes hold nothing stale
    std::vector<GpuReading> got = Read(s.get());
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{1000, 1030 * MiB},
                                                          {2001, 3590 * MiB},
                                                          {2002, 2566 * MiB},
                                                          {2003, 1542 * MiB},
                                                          {3000, 64 * MiB}}))
        << "driver " << GetParam() << ", pass " << pass;
    EXPECT_EQ(got[1].processes, (std::vector<ProcessUsage>{{4001, 5 * GiB}, {4002, 6 * GiB}, {4003, 7 * GiB}}))
        << "driver " << GetParam() << ", pass " << pass;
  }
}

// Which entry point serves the lists: the versioned request struct where the
// driver has it, else _v2 (24 bytes on every driver that has it), else the
// plain one; never _v3, whose entries are 32 bytes on R535 and 24 on R550+.
TEST_P(NvmlFamilyTest, EachFamilyIsReadThroughAnEntryPointOfKnownLayout) {
  Config({{"gpus",
           {H100("GPU-aaaa", {{{"pid", 11}, {"used", GiB}}, {{"pid", 12}, {"used", 2 * GiB}},
                              {{"pid", 13}, {"used", 3 * GiB}}})}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{11, GiB}, {12, 2 * GiB}, {13, 3 * GiB}}));
  const std::string calls = Calls();
  const std::string family = GetParam();
  const char* want = family == "r550"   ? "nvmlDeviceGetRunningProcessDetailList\n"
                     : family == "r535" ? "nvmlDeviceGetComputeRunningProcesses_v2\n"
                                        : "nvmlDeviceGetComputeRunningProcesses\n";
  EXPECT_NE(calls.find(want), std::string::npos) << calls;
  EXPECT_EQ(calls.find("RunningProcesses_v3"), std::string::npos) << calls;  // never the _v3 lists
  // A second pass goes straight to the entry point that answered.
  tree_.Write("calls.log", "");
  Read(s.get());
  const std::string again = Calls();
  if (family != "r550") {
    EXPECT_EQ(again.find("nvmlDeviceGetRunningProcessDetailList"), std::string::npos) << again;
  }
  if (family == "r470") {
    EXPECT_EQ(again.find("RunningProcesses_v2"), std::string::npos) << again;
  }
}

TEST_P(NvmlFamilyTest, AListLargerThanTheBufferIsReadWhole) {
  json procs = json::array();
  for (int i = 0; i < 300; ++i) procs.push_back({{"pid", 1000 + i}, {"used", MiB * (i + 1)}});
  Config({{"gpus", {H100("GPU-aaaa", procs)}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].processes.size(), 300u);
  for (int i = 0; i < 300; ++i) ASSERT_EQ(got[0].processes[i], (ProcessUsage{1000 + i, MiB * (i + 1)})) << i;
}

TEST_P(NvmlFamilyTest, AListThatGrowsBetweenCallsIsReadAgain) {
  json gpu = H100("GPU-aaaa", {{{"pid", 5}, {"used", GiB}}, {{"pid", 6}, {"used", 2 * GiB}},
                               {{"pid", 7}, {"used", 3 * GiB}}});
  gpu["insufficient_rounds"] = 2;
  Config({{"gpus", {gpu}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{5, GiB}, {6, 2 * GiB}, {7, 3 * GiB}}));
}

INSTANTIATE_TEST_SUITE_P(Drivers, NvmlFamilyTest, ::testing::Values("r470", "r535", "r550"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

TEST_P(NvmlFamilyTest, AListFailingValidationIsCountedLoggedOnceAndNotAttributed) {
  LogCapture log;
  // pid 12 twice in one list: no driver means that.
  json gpu = H100("GPU-aaaa", {{{"pid", 11}, {"used", GiB}}, {{"pid", 12}, {"used", 2 * GiB}},
                               {{"pid", 12}, {"used", 3 * GiB}}},
                  {{{"pid", 13}, {"used", MiB}}});
  Config({{"gpus", {gpu}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<GpuReading> got = Read(s.get());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].processes.empty()) << pass;  // the graphics list was fine: not attributed either
    EXPECT_EQ(got[0].invalid_process_lists, 1) << pass;
    EXPECT_NE(got[0].processes_unavailable.find("the compute process list of "), std::string::npos)
        << got[0].processes_unavailable;
    EXPECT_NE(got[0].processes_unavailable.find("fails validation (3 entries for room for 64: 1 repeated pid)"),
              std::string::npos)
        << got[0].processes_unavailable;
    EXPECT_EQ(got[0].used_bytes, 4 * GiB);
  }
  std::string text = log.text();
  size_t first = text.find("fails validation");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find("fails validation", first + 1), std::string::npos) << "logged more than once:\n" << text;
  EXPECT_NE(text.find("per-process figures unavailable"), std::string::npos) << text;

  gpu["compute"] = {{{"pid", 11}, {"used", GiB}}, {{"pid", 12}, {"used", 2 * GiB}}, {{"pid", 14}, {"used", GiB}}};
  Config({{"gpus", {gpu}}});
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{11, GiB}, {12, 2 * GiB}, {13, MiB}, {14, GiB}}));
  EXPECT_EQ(got[0].processes_unavailable, "");
  EXPECT_EQ(got[0].invalid_process_lists, 0);
  EXPECT_NE(log.text().find("the compute process list is read again"), std::string::npos) << log.text();
}

TEST_P(NvmlFamilyTest, BadInputMoreEntriesThanAskedAndZeroCountWithAnError) {
  json beyond = H100("GPU-aaaa", {{{"pid", 11}, {"used", GiB}}, {{"pid", 12}, {"used", 2 * GiB}},
                                  {{"pid", 13}, {"used", 3 * GiB}}});
  beyond["count_beyond_buffer"] = true;
  json zero = H100("GPU-bbbb", {{{"pid", 21}, {"used", GiB}}, {{"pid", 22}, {"used", 2 * GiB}},
                                {{"pid", 23}, {"used", 3 * GiB}}});
  zero["errors"] = {{"nvmlDeviceGetGraphicsRunningProcesses", 999}};
  Config({{"gpus", {beyond, zero}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].processes.empty());
  EXPECT_EQ(got[0].invalid_process_lists, 2);  // compute and graphics both answered 65 for 64
  EXPECT_NE(got[0].processes_unavailable.find("65 entries for room for 64: more entries than asked"),
            std::string::npos)
      << got[0].processes_unavailable;
  EXPECT_TRUE(got[1].processes.empty());
  EXPECT_EQ(got[1].invalid_process_lists, 0);  // an error, not a list that failed validation
  EXPECT_NE(got[1].processes_unavailable.find("the graphics process list: "), std::string::npos)
      << got[1].processes_unavailable;
  EXPECT_NE(got[1].processes_unavailable.find("Unknown Error (999) (count 0, room 64)"), std::string::npos)
      << got[1].processes_unavailable;
}

// dlsym finds the newest entry point, the driver does not implement it for
// this GPU (NOT_SUPPORTED) or this struct version: the next one is used.
TEST_F(NvmlSourceTest, ANewerEntryPointTheGpuOrDriverRefusesFallsBackToAnOlderOne) {
  for (int error : {3, 25}) {  // NOT_SUPPORTED (this call only), ARGUMENT_VERSION_MISMATCH (given up)
    json gpu = H100("GPU-aaaa", {{{"pid", 11}, {"used", GiB}}, {{"pid", 12}, {"used", 2 * GiB}},
                                 {{"pid", 13}, {"used", 3 * GiB}}});
    gpu["errors"] = {{"nvmlDeviceGetRunningProcessDetailList", error}};
    Config({{"gpus", {gpu}}});
    std::unique_ptr<GpuSource> s = Open();
    ASSERT_TRUE(s);
    tree_.Write("calls.log", "");
    std::vector<GpuReading> got = Read(s.get());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{11, GiB}, {12, 2 * GiB}, {13, 3 * GiB}})) << error;
    EXPECT_EQ(got[0].processes_unavailable, "") << error;
    EXPECT_NE(Calls().find("nvmlDeviceGetComputeRunningProcesses_v2\n"), std::string::npos) << error;
  }
}

// The legacy library: no versioned symbol at all (dlsym finds none), three processes.
TEST_F(NvmlSourceTest, ALegacyLibraryIsReadThroughThePlainEntryPoints) {
  Config({{"gpus", {H100("GPU-aaaa", {{{"pid", 11}, {"used", GiB}}, {{"pid", 12}, {"used", 2 * GiB}},
                                      {{"pid", 13}, {"used", 3 * GiB}}})}}});
  std::unique_ptr<GpuSource> s = Open(VRAMD_FAKE_NVML_LEGACY);
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{11, GiB}, {12, 2 * GiB}, {13, 3 * GiB}}));
}

// The fake itself: each family writes its own stride through _v3 (what the
// issue measured on a real 580 driver), and the versioned request struct of
// nvmlDeviceGetRunningProcessDetailList. Read here byte by byte, with no
// struct of the agent's.
TEST_F(NvmlSourceTest, TheFakesFamiliesWriteTheirOwnLayouts) {
  void* lib = dlopen(VRAMD_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
  auto handle = reinterpret_cast<int (*)(unsigned int, nvmlDevice_st**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto v3 = reinterpret_cast<int (*)(nvmlDevice_st*, unsigned int*, void*)>(
      dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
  auto detail = reinterpret_cast<int (*)(nvmlDevice_st*, nvmlProcessDetailList_v1*)>(
      dlsym(lib, "nvmlDeviceGetRunningProcessDetailList"));
  ASSERT_TRUE(init && shutdown && handle && v3 && detail);
  auto u32 = [](const unsigned char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  auto u64 = [](const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  for (const char* family : {"r535", "r550"}) {
    json gpu = H100("GPU-aaaa", {{{"pid", 101}, {"used", GiB}}, {{"pid", 102}, {"used", 2 * GiB}}});
    Config({{"driver", family}, {"gpus", {gpu}}});
    ASSERT_EQ(init(), 0);
    nvmlDevice_st* d = nullptr;
    ASSERT_EQ(handle(0, &d), 0);
    unsigned char buf[256] = {};
    unsigned int count = 4;
    ASSERT_EQ(v3(d, &count, buf), 0);
    ASSERT_EQ(count, 2u);
    const size_t stride = std::string(family) == "r535" ? 32 : 24;
    EXPECT_EQ(u32(buf), 101u) << family;
    EXPECT_EQ(u64(buf + 8), uint64_t(GiB)) << family;
    EXPECT_EQ(u32(buf + 16), 0xFFFFFFFFu) << family;  // gpuInstanceId: not MIG
    EXPECT_EQ(u32(buf + stride), 102u) << family;
    EXPECT_EQ(u64(buf + stride + 8), uint64_t(2 * GiB)) << family;

    unsigned char list[24] = {};  // nvmlProcessDetailList_v1_t
    const uint32_t version = 24u | (1u << 24), mode = 0, room = 4;
    unsigned char* entries = buf;
    std::memset(buf, 0, sizeof buf);
    std::memcpy(list, &version, 4);
    std::memcpy(list + 4, &mode, 4);
    std::memcpy(list + 8, &room, 4);
    std::memcpy(list + 16, &entries, sizeof entries);
    int r = detail(d, reinterpret_cast<nvmlProcessDetailList_v1*>(list));
    if (std::string(family) == "r535") {
      EXPECT_EQ(r, 13);  // NVML_ERROR_FUNCTION_NOT_FOUND
    } else {
      ASSERT_EQ(r, 0);
      EXPECT_EQ(u32(list + 8), 2u);
      EXPECT_EQ(u32(buf + 32), 102u);  // 32-byte nvmlProcessDetail_v1_t
      EXPECT_EQ(u64(buf + 40), uint64_t(2 * GiB));
      const uint32_t wrong = version + 1;
      std::memcpy(list, &wrong, 4);
      EXPECT_EQ(detail(d, reinterpret_cast<nvmlProcessDetailList_v1*>(list)), 25);  // ARGUMENT_VERSION_MISMATCH
    }
    ASSERT_EQ(shutdown(), 0);
  }
  dlclose(lib);
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


// ---- Activity (issue 32): the evidence idle eviction counts -----------------

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A process with a utilization sample above 0 is active; one with only
// zero samples, or none, is not; "no sample newer than the last one seen"
// (NOT_FOUND) is known inactivity, not unknown.
TEST_F(NvmlSourceTest, ProcessUtilizationSamplesMarkTheProcessesThatRan) {
  json gpu = H100("GPU-aaaa", {{{"pid", 11}, {"used", GiB}}, {{"pid", 12}, {"used", GiB}}, {{"pid", 13}, {"used", GiB}}});
  gpu["samples"] = {{{"pid", 11}, {"sm", 37}}, {{"pid", 12}}, {{"pid", 13}, {"dec", 4}}};
  gpu["utilization"] = 40;
  json idle = H100("GPU-bbbb", {{{"pid", 21}, {"used", GiB}}});
  Config({{"gpus", {gpu, idle}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  std::vector<GpuReading> got = Read(s.get());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].activity_known);
  EXPECT_EQ(got[0].utilization_percent, 40);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{11, GiB, true}, {12, GiB, false}, {13, GiB, true}}));
  EXPECT_TRUE(got[1].activity_known);  // NOT_FOUND: nothing ran
  EXPECT_EQ(got[1].utilization_percent, 0);
  EXPECT_EQ(got[1].processes, (std::vector<ProcessUsage>{{21, GiB, false}}));
  EXPECT_NE(Calls().find("nvmlDeviceGetProcessUtilization"), std::string::npos);
}

// The agent asks only for samples newer than the last it saw: a sample of
// the past counts once, a process running now (stamped at each call) every pass.
TEST_F(NvmlSourceTest, ASampleCountsOnceAndARunningProcessEveryPass) {
  json gpu = H100("GPU-aaaa", {{{"pid", 11}, {"used", GiB}}, {{"pid", 12}, {"used", GiB}}});
  gpu["samples"] = {{{"pid", 11}, {"sm", 50}, {"ts", 1000}}, {{"pid", 12}, {"mem", 3}}};
  Config({{"gpus", {gpu}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  EXPECT_EQ(Read(s.get())[0].processes, (std::vector<ProcessUsage>{{11, GiB, true}, {12, GiB, true}}));
  EXPECT_EQ(Read(s.get())[0].processes, (std::vector<ProcessUsage>{{11, GiB, false}, {12, GiB, true}}));
}

// A driver or GPU without per-process utilization: activity unknown (the
// report then takes the GPU's own utilization), logged once, read again
// when it answers.
TEST_F(NvmlSourceTest, PerProcessUtilizationRefusedLeavesActivityUnknown) {
  LogCapture log;
  json gpu = H100("GPU-aaaa", {{{"pid", 11}, {"used", GiB}}});
  gpu["samples"] = {{{"pid", 11}, {"sm", 50}}};
  gpu["utilization"] = 7;
  gpu["errors"] = {{"nvmlDeviceGetProcessUtilization", 3}};
  Config({{"gpus", {gpu}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  for (int pass = 0; pass < 3; ++pass) {
    GpuReading g = Read(s.get())[0];
    EXPECT_FALSE(g.activity_known);
    EXPECT_EQ(g.utilization_percent, 7);
    EXPECT_EQ(g.processes, (std::vector<ProcessUsage>{{11, GiB, false}}));
  }
  EXPECT_EQ(Occurrences(log.text(), "per-process utilization unavailable (nvmlDeviceGetProcessUtilization: Not Supported (3))"),
            1u) << log.text();
  gpu["errors"] = json::object();
  gpu["utilization"] = 8;  // the file must change for the fake to reread it
  Config({{"gpus", {gpu}}});
  GpuReading g = Read(s.get())[0];
  EXPECT_TRUE(g.activity_known);
  EXPECT_TRUE(g.processes[0].active);
  EXPECT_EQ(Occurrences(log.text(), "per-process utilization is read again"), 1u);
  // Without the GPU's own figure either, nothing is known.
  gpu["errors"] = {{"nvmlDeviceGetProcessUtilization", 3}, {"nvmlDeviceGetUtilizationRates", 3}};
  Config({{"gpus", {gpu}}});
  g = Read(s.get())[0];
  EXPECT_FALSE(g.activity_known);
  EXPECT_EQ(g.utilization_percent, -1);
}

// Samples read with a wrong layout would carry timestamps as pids and
// utilizations far above 100: an answer with such a sample is refused whole.
// Many samples are read whole through the count/buffer protocol.
TEST_F(NvmlSourceTest, ImpossibleSamplesAreRefusedAndManyAreReadWhole) {
  json procs = json::array(), samples = json::array();
  for (int pid = 100; pid < 300; ++pid) {
    procs.push_back({{"pid", pid}, {"used", MiB}});
    samples.push_back({{"pid", pid}, {"sm", pid % 2}});
  }
  json gpu = H100("GPU-aaaa", procs);
  gpu["samples"] = samples;
  Config({{"gpus", {gpu}}});
  std::unique_ptr<GpuSource> s = Open();
  ASSERT_TRUE(s);
  GpuReading g = Read(s.get())[0];
  ASSERT_TRUE(g.activity_known);
  ASSERT_EQ(g.processes.size(), 200u);
  EXPECT_EQ(std::count_if(g.processes.begin(), g.processes.end(), [](const ProcessUsage& p) { return p.active; }),
            100);
  gpu["samples"] = {{{"pid", 100}, {"sm", 5}}, {{"pid", 101}, {"sm", 250}}};
  Config({{"gpus", {gpu}}});
  LogCapture log;
  g = Read(s.get())[0];
  EXPECT_FALSE(g.activity_known);
  EXPECT_FALSE(g.processes[0].active);
  EXPECT_EQ(Occurrences(log.text(), "1 of 2 samples with a pid of 0 or above 2^31-1, or a utilization above 100"), 1u) << log.text();
}

// The fake's sample layout, read byte by byte with no struct of the agent's.
TEST_F(NvmlSourceTest, TheFakeWritesProcessUtilizationSamplesAtNvmlsOffsets) {
  json gpu = H100("GPU-aaaa");
  gpu["samples"] = {{{"pid", 4242}, {"ts", 123456789}, {"sm", 37}, {"mem", 5}, {"enc", 2}, {"dec", 1}}};
  Config({{"gpus", {gpu}}});
  void* lib = dlopen(VRAMD_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
  auto handle = reinterpret_cast<int (*)(unsigned int, nvmlDevice_st**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto util = reinterpret_cast<int (*)(nvmlDevice_st*, nvmlProcessUtilizationSample*, unsigned int*,
                                       unsigned long long)>(dlsym(lib, "nvmlDeviceGetProcessUtilization"));
  auto samples = [](unsigned char* b) { return reinterpret_cast<nvmlProcessUtilizationSample*>(b); };
  ASSERT_TRUE(init && shutdown && handle && util);
  ASSERT_EQ(init(), 0);
  nvmlDevice_st* d = nullptr;
  ASSERT_EQ(handle(0, &d), 0);
  unsigned int count = 0;
  EXPECT_EQ(util(d, nullptr, &count, 0), 7);  // INSUFFICIENT_SIZE, with the count needed
  EXPECT_EQ(count, 1u);
  unsigned char buf[64] = {};
  count = 2;
  ASSERT_EQ(util(d, samples(buf), &count, 0), 0);
  ASSERT_EQ(count, 1u);
  uint32_t u32[4];
  uint64_t ts;
  std::memcpy(&u32[0], buf, 4);
  std::memcpy(&ts, buf + 8, 8);
  EXPECT_EQ(u32[0], 4242u);
  EXPECT_EQ(ts, 123456789u);
  for (int i = 0; i < 4; ++i) std::memcpy(&u32[i], buf + 16 + 4 * i, 4);
  EXPECT_EQ(u32[0], 37u);
  EXPECT_EQ(u32[1], 5u);
  EXPECT_EQ(u32[2], 2u);
  EXPECT_EQ(u32[3], 1u);
  count = 2;
  EXPECT_EQ(util(d, samples(buf), &count, 123456789), 6);  // NOT_FOUND: nothing newer
  ASSERT_EQ(shutdown(), 0);
  dlclose(lib);
}

}  // namespace
}  // namespace vramd::agent
