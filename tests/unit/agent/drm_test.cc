#include "vramd/agent/drm.h"

#include <gtest/gtest.h>
#include <grp.h>

#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/temp_tree.h"

namespace vramd::agent {
namespace {

constexpr int64_t KiB = 1024, MiB = 1024 * KiB;

// fdinfo blocks in the kernel's formats (docs.kernel.org, "DRM client usage stats").
constexpr const char* kAmdgpuLegacy =  // amdgpu before drm-total/resident (5.19–6.3)
    "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1026\n"
    "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t12\npasid:\t32771\n"
    "drm-memory-vram:\t145408 KiB\ndrm-memory-gtt: \t12288 KiB\ndrm-memory-cpu: \t0 KiB\n"
    "drm-engine-gfx:\t22847298 ns\n";
constexpr const char* kAmdgpuCurrent =  // amdgpu with the common keys (6.4+), legacy kept
    "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1026\n"
    "drm-driver:\tamdgpu\ndrm-client-id:\t27\ndrm-pdev:\t0000:0c:00.0\npasid:\t32773\n"
    "drm-total-gtt:\t2 MiB\ndrm-resident-gtt:\t2 MiB\n"
    "drm-total-vram:\t20 MiB\ndrm-shared-vram:\t0\ndrm-active-vram:\t0\n"
    "drm-resident-vram:\t16 MiB\ndrm-purgeable-vram:\t0\n"
    "drm-memory-vram:\t15360 KiB\ndrm-memory-gtt: \t2048 KiB\ndrm-engine-gfx:\t0 ns\n";
constexpr const char* kTotalOnly =  // a driver that gives totals only, in bytes
    "drm-driver:\txe\ndrm-pdev:\t0000:00:02.0\ndrm-client-id:\t5\ndrm-total-vram0:\t4096\n"
    "drm-total-vram:\t8192\n";
constexpr const char* kI915 =  // integrated GPU: no VRAM key
    "pos:\t0\nflags:\t02100002\ndrm-driver:\ti915\ndrm-pdev:\t0000:00:02.0\ndrm-client-id:\t7\n"
    "drm-engine-render:\t9288864 ns\ndrm-engine-copy:\t0 ns\n";
constexpr const char* kOldKernel =  // no drm-client-id: cannot be deduplicated, not counted
    "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-memory-vram:\t1024 KiB\n";
constexpr const char* kSocket = "pos:\t0\nflags:\t02000002\nmnt_id:\t9\nino:\t31337\n";

struct FdinfoCase {
  const char* name;
  const char* text;
  std::optional<DrmClient> want;
};

TEST(AgentDrm, FdinfoBlocks) {
  const FdinfoCase cases[] = {
      {"amdgpu_legacy_memory_key", kAmdgpuLegacy, DrmClient{"amdgpu", "0000:03:00.0", 12, 145408 * KiB, true, 22847298}},
      {"resident_beats_legacy_and_total", kAmdgpuCurrent, DrmClient{"amdgpu", "0000:0c:00.0", 27, 16 * MiB, true, 0}},
      {"total_when_alone_and_regions_with_numbers_ignored", kTotalOnly, DrmClient{"xe", "0000:00:02.0", 5, 8192}},
      {"no_vram_key_is_zero", kI915, DrmClient{"i915", "0000:00:02.0", 7, 0, true, 9288864}},
      {"no_client_id", kOldKernel, std::nullopt},
      {"not_a_drm_fd", kSocket, std::nullopt},
      {"empty", "", std::nullopt},
      {"bad_vram_unit_is_ignored",
       "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t1\ndrm-resident-vram:\t5 TiB\n",
       DrmClient{"amdgpu", "0000:03:00.0", 1, 0}},
      {"engine_times_add_up_capacity_and_total_cycles_are_not_busy_time",
       "drm-driver:\txe\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t2\ndrm-engine-capacity-vcs:\t2\n"
       "drm-cycles-rcs:\t700\ndrm-total-cycles-rcs:\t99999999\ndrm-engine-ccs:\t300 ns\ndrm-engine-bcs:\tbad ns\n",
       DrmClient{"xe", "0000:03:00.0", 2, 0, true, 1000}},
      {"bad_client_id", "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t-1\n", std::nullopt},
  };
  for (const FdinfoCase& c : cases) {
    EXPECT_EQ(ParseDrmFdinfo(c.text), c.want) << c.name;
  }
}

TEST(AgentDrm, MemoryValuesAndUnits) {
  EXPECT_EQ(ParseDrmMemory("0"), 0);
  EXPECT_EQ(ParseDrmMemory("4096"), 4096);
  EXPECT_EQ(ParseDrmMemory("145408 KiB"), 145408 * KiB);
  EXPECT_EQ(ParseDrmMemory("16 MiB"), 16 * MiB);
  EXPECT_EQ(ParseDrmMemory("2 GiB"), 2048 * MiB);
  EXPECT_EQ(ParseDrmMemory("  7 KiB  "), 7 * KiB);
  EXPECT_EQ(ParseDrmMemory("1 kB"), std::nullopt);
  EXPECT_EQ(ParseDrmMemory("-1 KiB"), std::nullopt);
  EXPECT_EQ(ParseDrmMemory("KiB"), std::nullopt);
  EXPECT_EQ(ParseDrmMemory("99999999999999999999 KiB"), std::nullopt);
  EXPECT_EQ(ParseDrmMemory("9007199254740992 MiB"), std::nullopt);  // 2^53 MiB > INT64_MAX bytes
}

TEST(AgentDrm, SysfsByteCounts) {
  EXPECT_EQ(ParseSysfsBytes("17163091968\n"), 17163091968);
  EXPECT_EQ(ParseSysfsBytes("0\n"), 0);
  EXPECT_EQ(ParseSysfsBytes(""), std::nullopt);
  EXPECT_EQ(ParseSysfsBytes("12 KiB\n"), std::nullopt);
  EXPECT_EQ(ParseSysfsBytes("-5\n"), std::nullopt);
  EXPECT_EQ(ParseSysfsBytes("18446744073709551615\n"), std::nullopt);
}

TEST(AgentDrm, CombineCountsASharedClientOnceForItsLowestPid) {
  std::vector<DrmCard> cards = {
      {1, "0000:0c:00.0", "", "", 8 * 1024 * MiB, 1024 * MiB},
      {0, "0000:03:00.0", "AMD Radeon RX 7900 XTX", "a1b2", 24 * 1024 * MiB, 2048 * MiB},
  };
  std::vector<std::pair<int, DrmClient>> clients = {
      {300, {"amdgpu", "0000:03:00.0", 12, 100 * MiB}},  // fd 5 of pid 300
      {300, {"amdgpu", "0000:03:00.0", 12, 100 * MiB}},  // fd 6, the same client
      {200, {"amdgpu", "0000:03:00.0", 12, 100 * MiB}},  // inherited by a child: still once, for 200
      {300, {"amdgpu", "0000:03:00.0", 13, 50 * MiB}},   // a second client of pid 300
      {400, {"amdgpu", "0000:0c:00.0", 12, 10 * MiB}},   // same id, other GPU: another client
      {500, {"amdgpu", "0000:99:00.0", 1, 1 * MiB}},     // a GPU without VRAM figures: ignored
  };
  std::vector<GpuReading> got = CombineDrm(cards, clients);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].index, 0);
  EXPECT_EQ(got[0].name, "AMD Radeon RX 7900 XTX");
  EXPECT_EQ(got[0].uuid, "a1b2");
  EXPECT_EQ(got[0].total_bytes, 24 * 1024 * MiB);
  EXPECT_EQ(got[0].used_bytes, 2048 * MiB);
  EXPECT_EQ(got[0].processes, (std::vector<ProcessUsage>{{200, 100 * MiB}, {300, 50 * MiB}}));
  EXPECT_EQ(got[1].index, 1);
  EXPECT_EQ(got[1].processes, (std::vector<ProcessUsage>{{400, 10 * MiB}}));
}

// Issue 32: a client whose busy time grew since the last read ran work; the
// first read knows nothing of activity; a new client with busy time ran
// since; a card with a client whose driver gives no engine time has
// unknown activity.
TEST(AgentDrm, ActivityIsGrowthOfAClientsBusyTimeSinceTheLastRead) {
  std::vector<DrmCard> cards = {{0, "0000:03:00.0", "", "", 24 * 1024 * MiB, 2048 * MiB},
                                {1, "0000:0c:00.0", "", "", 8 * 1024 * MiB, 0}};
  auto client = [](const char* pdev, uint64_t id, uint64_t busy, bool has = true) {
    return DrmClient{"amdgpu", pdev, id, MiB, has, busy};
  };
  std::vector<std::pair<int, DrmClient>> before = {
      {10, client("0000:03:00.0", 1, 5000)}, {11, client("0000:03:00.0", 2, 7000)},
      {12, client("0000:0c:00.0", 3, 0, false)}};
  std::vector<GpuReading> first = CombineDrm(cards, before);
  EXPECT_FALSE(first[0].activity_known);
  EXPECT_FALSE(first[1].activity_known);
  EXPECT_EQ(first[0].processes, (std::vector<ProcessUsage>{{10, MiB, false}, {11, MiB, false}}));
  const DrmBusy busy = BusyOf(before);
  EXPECT_EQ(busy.size(), 2u);  // the client without engine keys has no busy time
  std::vector<std::pair<int, DrmClient>> after = {
      {10, client("0000:03:00.0", 1, 5000)},    // unchanged: idle
      {11, client("0000:03:00.0", 2, 7001)},    // grew: ran
      {13, client("0000:03:00.0", 4, 20)},      // new since, with busy time: ran
      {14, client("0000:03:00.0", 5, 0)},       // new, none
      {12, client("0000:0c:00.0", 3, 0, false)}};
  std::vector<GpuReading> second = CombineDrm(cards, after, &busy);
  EXPECT_TRUE(second[0].activity_known);
  EXPECT_EQ(second[0].processes,
            (std::vector<ProcessUsage>{{10, MiB, false}, {11, MiB, true}, {13, MiB, true}, {14, MiB, false}}));
  EXPECT_FALSE(second[1].activity_known);
}

TEST(AgentDrm, SourceReadsAFakeSysAndProcTree) {
  testing::TempTree t;
  // sysfs: card0 (amdgpu, VRAM figures), card1 (no VRAM files: skipped),
  // card0-DP-1 (a connector), renderD128 (not a card).
  t.Write("sys/devices/pci0000:00/0000:03:00.0/mem_info_vram_total", "25753026560\n");
  t.Write("sys/devices/pci0000:00/0000:03:00.0/mem_info_vram_used", "1073741824\n");
  t.Write("sys/devices/pci0000:00/0000:03:00.0/product_name", "AMD Radeon RX 7900 XTX\n");
  t.Link("sys/class/drm/card0/device", t.Path("sys/devices/pci0000:00/0000:03:00.0"));
  t.Write("sys/devices/pci0000:00/0000:00:02.0/vendor", "0x8086\n");
  t.Link("sys/class/drm/card1/device", t.Path("sys/devices/pci0000:00/0000:00:02.0"));
  t.Write("sys/class/drm/card0-DP-1/status", "connected\n");
  t.Write("sys/class/drm/renderD128/dev", "226:128\n");
  // proc: pid 42 holds one client through two fds; fd 3 is a socket.
  t.Write("proc/42/fdinfo/3", kSocket);
  t.Link("proc/42/fd/3", "socket:[31337]");
  t.Write("proc/42/fdinfo/5", kAmdgpuLegacy);
  t.Link("proc/42/fd/5", "/dev/dri/renderD128");
  t.Write("proc/42/fdinfo/6", kAmdgpuLegacy);
  t.Link("proc/42/fd/6", "/dev/dri/card0");
  // A file whose fdinfo looks like DRM but is not a DRM device node: not read.
  t.Write("proc/43/fdinfo/4", kAmdgpuCurrent);
  t.Link("proc/43/fd/4", "/home/u/notes.txt");
  t.Write("proc/self/fdinfo/5", kAmdgpuLegacy);  // not a pid
  DrmSource source(t.Path("sys"), t.Path("proc"));
  Result<std::vector<GpuReading>> got = source.Read();
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), 1u);
  const GpuReading& g = (*got)[0];
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.name, "AMD Radeon RX 7900 XTX");
  EXPECT_EQ(g.total_bytes, 25753026560);
  EXPECT_EQ(g.used_bytes, 1073741824);
  EXPECT_EQ(g.processes, (std::vector<ProcessUsage>{{42, 145408 * KiB}}));
  EXPECT_FALSE(g.activity_known);  // a first read: no earlier busy time to compare
  EXPECT_EQ(DrmSource::ReadCards(t.Path("sys"))[0].pdev, "0000:03:00.0");
  // The next read: the client's engine time grew, the process ran.
  Result<std::vector<GpuReading>> same = source.Read();
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE((*same)[0].activity_known);
  EXPECT_EQ((*same)[0].processes, (std::vector<ProcessUsage>{{42, 145408 * KiB, false}}));
  std::string grown = kAmdgpuLegacy;
  grown.replace(grown.find("22847298"), 8, "22847299");
  t.Write("proc/42/fdinfo/5", grown);
  t.Write("proc/42/fdinfo/6", grown);
  Result<std::vector<GpuReading>> ran = source.Read();
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ((*ran)[0].processes, (std::vector<ProcessUsage>{{42, 145408 * KiB, true}}));
}

// A process whose fds the agent may not inspect (another user's, without
// CAP_SYS_PTRACE): per-process figures are unavailable on every card, with
// the fix. Root reads every mode, so as root (CI) the read runs in a child
// (a gtest death test, re-executed) that dropped to nobody, as the chart's
// agent runs; tests/system/agent_test.py runs the whole agent as nobody too.
TEST(AgentDrm, FdsThatCannotBeInspectedMakePerProcessFiguresUnavailable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing::TempTree t;
  ASSERT_EQ(::chmod(t.root().c_str(), 0755), 0);  // mkdtemp's 0700 would hide the whole tree from nobody
  t.Write("sys/devices/pci0000:00/0000:03:00.0/mem_info_vram_total", "25753026560\n");
  t.Write("sys/devices/pci0000:00/0000:03:00.0/mem_info_vram_used", "1073741824\n");
  t.Link("sys/class/drm/card0/device", t.Path("sys/devices/pci0000:00/0000:03:00.0"));
  t.Write("proc/42/fdinfo/5", kAmdgpuLegacy);
  t.Link("proc/42/fd/5", "/dev/dri/renderD128");
  t.Write("proc/43/fdinfo/5", kAmdgpuLegacy);
  t.Link("proc/43/fd/5", "/dev/dri/renderD128");
  ASSERT_EQ(::chmod(t.Path("proc/43/fd").c_str(), 0), 0);
  const auto read_unprivileged = [&] {
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      std::fprintf(stderr, "cannot drop to nobody\n");
      std::_Exit(2);
    }
    DrmSource source(t.Path("sys"), t.Path("proc"));
    Result<std::vector<GpuReading>> got = source.Read();
    std::string bad;
    if (!got.ok()) {
      bad = got.status().message();
    } else if (got->size() != 1) {
      bad = std::to_string(got->size()) + " cards";
    } else if (!(*got)[0].processes.empty()) {
      bad = "processes attributed";
    } else if ((*got)[0].processes_unavailable !=
               "cannot read /proc/PID/fdinfo of 1 process(es) (permission denied, e.g. pid 43): run the agent as "
               "root with CAP_SYS_PTRACE") {
      bad = "processes_unavailable: \"" + (*got)[0].processes_unavailable + "\"";
    } else if ((*got)[0].used_bytes != 1073741824) {
      bad = "used_bytes " + std::to_string((*got)[0].used_bytes);
    }
    std::fprintf(stderr, "%s\n", bad.empty() ? "per-process figures unavailable, as expected" : bad.c_str());
    std::_Exit(bad.empty() ? 0 : 1);
  };
  EXPECT_EXIT(read_unprivileged(), ::testing::ExitedWithCode(0), "per-process figures unavailable, as expected");
  ::chmod(t.Path("proc/43/fd").c_str(), 0755);
}

TEST(AgentDrm, NoCardIsUnavailable) {
  testing::TempTree t;
  DrmSource source(t.Path("sys"), t.Path("proc"));
  Result<std::vector<GpuReading>> got = source.Read();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace vramd::agent
