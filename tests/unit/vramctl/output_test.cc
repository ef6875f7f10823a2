// vramctl's printing (src/vramctl/output.cc, version.cc, completion.cc,
// commands.cc): wide-only columns, aligned tables, ages, the server version
// from /metrics, and the usage and completion scripts covering every command,
// flag and output format of the tables.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vramctl/command_line.h"
#include "vramctl/commands.h"
#include "vramctl/output.h"

namespace vramctl {
namespace {

struct Row {
  std::string a, b;
};

std::string Print(Format f) {
  const std::vector<Column<Row>> columns = {
      {"NAME", false, [](const Row& r) { return r.a; }},
      {"EXTRA", true, [](const Row& r) { return r.b; }},
      {"LAST", false, [](const Row& r) { return r.b + "!"; }},
  };
  ::testing::internal::CaptureStdout();
  PrintColumns(columns, std::vector<Row>{{"n1", "x"}, {"a-long-name", "yy"}}, f);
  return ::testing::internal::GetCapturedStdout();
}

TEST(VramctlTable, WideShowsTheWideOnlyColumnsAndTableHidesThem) {
  EXPECT_EQ(Print(Format::kTable),
            "NAME          LAST\n"
            "n1            x!\n"
            "a-long-name   yy!\n");
  EXPECT_EQ(Print(Format::kWide),
            "NAME          EXTRA   LAST\n"
            "n1            x       x!\n"
            "a-long-name   yy      yy!\n");
}

TEST(VramctlTable, AgesInTheLargestWholeUnit) {
  const int64_t now = 1'000'000'000'000;
  EXPECT_EQ(AgeText(now - 45'000, now), "45s");
  EXPECT_EQ(AgeText(now - 119'999, now), "119s");
  EXPECT_EQ(AgeText(now - 12 * 60'000, now), "12m");
  EXPECT_EQ(AgeText(now - 3 * 3'600'000, now), "3h");
  EXPECT_EQ(AgeText(now - 5 * 86'400'000LL, now), "5d");
  EXPECT_EQ(AgeText(now + 5'000, now), "0s") << "a clock ahead of ours is not a negative age";
  EXPECT_EQ(AgeText(0, now), "-");
  EXPECT_EQ(AgeText(nullptr, now), "-");
}

TEST(VramctlVersion, TheServersVersionIsVramdBuildInfosLabel) {
  EXPECT_EQ(BuildInfoVersion("# HELP vramd_build_info Build information (value 1).\n"
                             "# TYPE vramd_build_info gauge\n"
                             "vramd_build_info{version=\"0.1.0\"} 1\n"),
            "0.1.0");
  EXPECT_EQ(BuildInfoVersion("x 1\nvramd_build_info{commit=\"abc\",version=\"1.2.3-rc1\"} 1\n"), "1.2.3-rc1");
  EXPECT_EQ(BuildInfoVersion("vramd_build_info{go_version=\"1.2\"} 1\n"), std::nullopt)
      << "another label ending in version=";
  EXPECT_EQ(BuildInfoVersion("vramd_build_infox{version=\"9\"} 1\n"), std::nullopt);
  EXPECT_EQ(BuildInfoVersion("vramd_build_info{version=\"unterminated} 1\n"), std::nullopt);
  EXPECT_EQ(BuildInfoVersion(""), std::nullopt);
}

TEST(VramctlUsage, ListsEveryCommandAndFlagWithTheProgramName) {
  const std::string u = Usage("kubectl vram");
  EXPECT_NE(u.find("Usage: kubectl vram [FLAGS] COMMAND"), std::string::npos) << u;
  for (const Command& c : Commands()) EXPECT_NE(u.find(c.synopsis), std::string::npos) << c.name;
  for (const GlobalFlag& f : GlobalFlags()) {
    EXPECT_NE(u.find(f.name), std::string::npos) << f.name;
    if (f.env != nullptr) {
      EXPECT_NE(u.find(std::string("$") + f.env), std::string::npos) << f.env;
    }
  }
  EXPECT_NE(LockUsage("kubectl vram").find("kubectl vram lock run --node N"), std::string::npos);
  EXPECT_EQ(LockUsage("vramctl").find("PROGRAM"), std::string::npos);
}

TEST(VramctlCompletion, BothScriptsOfferEveryCommandFlagAndFormat) {
  for (const char* shell : {"bash", "zsh"}) {
    const std::string s = CompletionScript(shell);
    ASSERT_FALSE(s.empty()) << shell;
    EXPECT_NE(s.find("vramctl kubectl-vram"), std::string::npos) << shell;
    for (const Command& c : Commands()) {
      EXPECT_NE(s.find(c.name), std::string::npos) << shell << " " << c.name;
      for (const char* f : c.flags) EXPECT_NE(s.find(f), std::string::npos) << shell << " " << f;
      for (const char* sub : c.subcommands) EXPECT_NE(s.find(sub), std::string::npos) << shell << " " << sub;
    }
    for (const GlobalFlag& f : GlobalFlags()) EXPECT_NE(s.find(f.name), std::string::npos) << shell << " " << f.name;
    EXPECT_NE(s.find("table wide json"), std::string::npos) << shell;
  }
  EXPECT_EQ(CompletionScript("fish"), "");
}

TEST(VramctlCommands, EveryValueFlagIsOneOfTheCommandsFlags) {
  for (const Command& c : Commands()) {
    for (const char* v : c.value_flags) {
      bool found = false;
      for (const char* f : c.flags) found = found || std::string(f) == v;
      EXPECT_TRUE(found) << c.name << " " << v;
    }
    EXPECT_EQ(FindCommand(c.name), &c);
  }
  EXPECT_EQ(FindCommand("nope"), nullptr);
}

}  // namespace
}  // namespace vramctl
