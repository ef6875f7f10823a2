// vramctl's command line (src/vramctl/command_line.cc): global flags before
// or after the command, the environment's defaults, -o, TLS options, and the
// command's own flags and arguments left alone; the program name.
#include "vramctl/command_line.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vramctl {
namespace {

using Env = std::map<std::string, std::string>;

struct Want {
  std::string command{};
  std::vector<std::string> args{};
  Format output = Format::kTable;
  std::string server = "http://127.0.0.1:8080";
  Tls tls{};
  bool help = false;
  std::string token_file{};
};

struct ParseCase {
  std::string name;
  std::vector<std::string> argv;  // after argv[0]
  Env env;
  Want want;            // when `error` is empty
  std::string error{};  // a part of the expected error
};

std::ostream& operator<<(std::ostream& os, const ParseCase& c) { return os << c.name; }

Tls TlsOf(std::string ca, std::string cert, std::string key, bool skip = false, std::string name = "") {
  Tls t;
  t.server_name = std::move(name);
  t.ca_file = std::move(ca);
  t.cert_file = std::move(cert);
  t.key_file = std::move(key);
  t.skip_verify = skip;
  return t;
}

class ParseCommandLineTable : public ::testing::TestWithParam<ParseCase> {};

TEST_P(ParseCommandLineTable, Parses) {
  const ParseCase& c = GetParam();
  Invocation inv;
  std::string err = ParseCommandLine(c.argv, [&c](const char* name) -> std::optional<std::string> {
    auto it = c.env.find(name);
    if (it == c.env.end()) return std::nullopt;
    return it->second;
  }, &inv);
  if (!c.error.empty()) {
    EXPECT_NE(err.find(c.error), std::string::npos) << "error: \"" << err << "\"";
    return;
  }
  ASSERT_EQ(err, "");
  EXPECT_EQ(inv.command, c.want.command);
  EXPECT_EQ(inv.args, c.want.args);
  EXPECT_EQ(inv.global.output, c.want.output);
  EXPECT_EQ(inv.global.server, c.want.server);
  EXPECT_EQ(inv.global.tls.ca_file, c.want.tls.ca_file);
  EXPECT_EQ(inv.global.tls.cert_file, c.want.tls.cert_file);
  EXPECT_EQ(inv.global.tls.key_file, c.want.tls.key_file);
  EXPECT_EQ(inv.global.tls.skip_verify, c.want.tls.skip_verify);
  EXPECT_EQ(inv.global.tls.server_name, c.want.tls.server_name);
  EXPECT_EQ(inv.global.help, c.want.help);
  EXPECT_EQ(inv.global.token_file, c.want.token_file);
}

INSTANTIATE_TEST_SUITE_P(
    Vramctl, ParseCommandLineTable,
    ::testing::Values(
        // -o is global: never a node name, before or after the command, in every spelling.
        ParseCase{"PodsDashOJsonIsTheFormatNotANode", {"pods", "-o", "json"}, {}, {"pods", {}, Format::kJson}},
        ParseCase{"DashOBeforeTheCommand", {"-o", "wide", "nodes", "n1"}, {}, {"nodes", {"n1"}, Format::kWide}},
        ParseCase{"DashOBetweenNodeAndEnd", {"nodes", "-o", "json", "n1"}, {}, {"nodes", {"n1"}, Format::kJson}},
        ParseCase{"AttachedShortForm", {"pods", "-ojson"}, {}, {"pods", {}, Format::kJson}},
        ParseCase{"ShortFormWithEquals", {"pods", "-o=wide"}, {}, {"pods", {}, Format::kWide}},
        ParseCase{"LongFormWithEquals", {"pods", "--output=json"}, {}, {"pods", {}, Format::kJson}},
        ParseCase{"LongFormSeparate", {"--output", "table", "pods"}, {}, {"pods", {}, Format::kTable}},
        ParseCase{"TheLastDashOWins", {"-o", "json", "pods", "-o", "table"}, {}, {"pods", {}, Format::kTable}},
        ParseCase{"UnknownFormatIsRefused", {"pods", "-o", "yaml"}, {}, {}, "unknown output format \"yaml\""},
        ParseCase{"DashOWithoutValue", {"pods", "-o"}, {}, {}, "--output needs a value (FORMAT)"},
        // The server: flag (anywhere), environment, normalization.
        ParseCase{"ServerAfterTheCommand", {"nodes", "--server", "h:9"}, {}, {"nodes", {}, Format::kTable, "http://h:9"}},
        ParseCase{"ServerWithEquals", {"--server=https://h:9/", "nodes"}, {}, {"nodes", {}, Format::kTable, "https://h:9"}},
        ParseCase{"ShortServer", {"-s", "http://h:1", "pods"}, {}, {"pods", {}, Format::kTable, "http://h:1"}},
        ParseCase{"ServerFromTheEnvironment", {"pods"}, {{"VRAMD_SERVER", "https://v:8443"}},
                  {"pods", {}, Format::kTable, "https://v:8443"}},
        ParseCase{"TheFlagBeatsTheEnvironment", {"pods", "-s", "http://f:1"}, {{"VRAMD_SERVER", "http://e:1"}},
                  {"pods", {}, Format::kTable, "http://f:1"}},
        ParseCase{"ServerWithAnotherScheme", {"-s", "ftp://h:1", "pods"}, {}, {}, "is not http(s)://HOST[:PORT]"},
        ParseCase{"ServerWithAPath", {"-s", "http://h:1/api", "pods"}, {}, {}, "is not http(s)://HOST[:PORT]"},
        ParseCase{"ServerWithoutValue", {"pods", "--server"}, {}, {}, "--server needs a value (URL)"},
        ParseCase{"TokenFileAfterTheCommand", {"pods", "--token-file=t"}, {{"VRAMD_TOKEN_FILE", "e"}},
                  {"pods", {}, Format::kTable, "http://127.0.0.1:8080", {}, false, "t"}},
        ParseCase{"TokenFileFromTheEnvironment", {"pods"}, {{"VRAMD_TOKEN_FILE", "e"}},
                  {"pods", {}, Format::kTable, "http://127.0.0.1:8080", {}, false, "e"}},
        // Issue 33: the token travels in plain http only to loopback, or when told.
        ParseCase{"TokenOverHttpToLoopbackNames", {"-s", "http://localhost:8080", "--token-file", "t", "pods"}, {},
                  {"pods", {}, Format::kTable, "http://localhost:8080", {}, false, "t"}},
        ParseCase{"TokenOverHttpToAny127Address", {"-s", "127.8.9.10:1", "--token-file", "t", "pods"}, {},
                  {"pods", {}, Format::kTable, "http://127.8.9.10:1", {}, false, "t"}},
        ParseCase{"TokenOverHttpToIpv6Loopback", {"-s", "http://[::1]:8080", "--token-file", "t", "pods"}, {},
                  {"pods", {}, Format::kTable, "http://[::1]:8080", {}, false, "t"}},
        ParseCase{"TokenOverHttpToAnotherHostIsRefused", {"-s", "http://vramd.example:8080", "--token-file", "t", "pods"},
                  {}, {}, "refusing to send the token (--token-file) over plain http to http://vramd.example:8080"},
        ParseCase{"TokenOverHttpToAHostNamedLike127IsRefused", {"-s", "http://127.0.0.1.evil:80", "pods"},
                  {{"VRAMD_TOKEN_FILE", "t"}}, {}, "refusing to send the token"},
        ParseCase{"TokenOverHttpToAnyAddressIsRefused", {"-s", "http://0.0.0.0:1", "--token-file", "t", "pods"}, {}, {},
                  "use an https:// server, or --insecure-plaintext-token"},
        ParseCase{"TokenOverHttpWhenTold", {"-s", "http://v:1", "--token-file", "t", "--insecure-plaintext-token", "pods"},
                  {}, {"pods", {}, Format::kTable, "http://v:1", {}, false, "t"}},
        ParseCase{"TokenOverHttpWhenToldByTheEnvironment", {"-s", "http://v:1", "pods"},
                  {{"VRAMD_TOKEN_FILE", "t"}, {"VRAMD_INSECURE_PLAINTEXT_TOKEN", "true"}},
                  {"pods", {}, Format::kTable, "http://v:1", {}, false, "t"}},
        ParseCase{"TokenOverHttpsToAnyHost", {"-s", "https://vramd.example:8443", "--token-file", "t", "pods"}, {},
                  {"pods", {}, Format::kTable, "https://vramd.example:8443", {}, false, "t"}},
        ParseCase{"NoTokenOverHttpToAnyHost", {"-s", "http://vramd.example:8080", "pods"}, {},
                  {"pods", {}, Format::kTable, "http://vramd.example:8080"}},
        // TLS.
        ParseCase{"TlsFlags", {"--cacert", "ca.pem", "-s", "https://h:1", "nodes", "--cert", "c.pem", "--key", "k.pem"},
                  {}, {"nodes", {}, Format::kTable, "https://h:1", TlsOf("ca.pem", "c.pem", "k.pem")}},
        ParseCase{"TlsFromTheEnvironment", {"nodes"},
                  {{"VRAMD_SERVER", "https://h:1"}, {"VRAMD_CACERT", "a"}, {"VRAMD_CERT", "b"}, {"VRAMD_KEY", "c"},
                   {"VRAMD_INSECURE_SKIP_TLS_VERIFY", "true"}},
                  {"nodes", {}, Format::kTable, "https://h:1", TlsOf("a", "b", "c", true)}},
        ParseCase{"TlsServerName", {"-s", "https://127.0.0.1:8443", "nodes", "--tls-server-name", "vramd.ns.svc"}, {},
                  {"nodes", {}, Format::kTable, "https://127.0.0.1:8443", TlsOf("", "", "", false, "vramd.ns.svc")}},
        ParseCase{"TlsServerNameFromTheEnvironment", {"nodes"},
                  {{"VRAMD_SERVER", "https://h:1"}, {"VRAMD_TLS_SERVER_NAME", "v.svc"}},
                  {"nodes", {}, Format::kTable, "https://h:1", TlsOf("", "", "", false, "v.svc")}},
        ParseCase{"TlsServerNameWithAPort", {"-s", "https://h:1", "--tls-server-name", "v.svc:8443", "nodes"}, {}, {},
                  "--tls-server-name \"v.svc:8443\" is not a host name"},
        ParseCase{"TlsServerNameWithPlainHttp", {"--tls-server-name", "v.svc", "nodes"}, {}, {},
                  "need an https:// server"},
        ParseCase{"InsecureSwitch", {"-s", "https://h:1", "nodes", "--insecure-skip-tls-verify"}, {},
                  {"nodes", {}, Format::kTable, "https://h:1", TlsOf("", "", "", true)}},
        ParseCase{"InsecureSwitchOffBeatsTheEnvironment", {"-s", "https://h:1", "--insecure-skip-tls-verify=false", "nodes"},
                  {{"VRAMD_INSECURE_SKIP_TLS_VERIFY", "1"}}, {"nodes", {}, Format::kTable, "https://h:1"}},
        ParseCase{"InsecureNotABoolean", {"nodes"}, {{"VRAMD_INSECURE_SKIP_TLS_VERIFY", "maybe"}}, {},
                  "VRAMD_INSECURE_SKIP_TLS_VERIFY: \"maybe\" is not true or false"},
        ParseCase{"CertWithoutKey", {"-s", "https://h:1", "--cert", "c.pem", "nodes"}, {}, {},
                  "--cert and --key go together"},
        ParseCase{"KeyWithoutCert", {"-s", "https://h:1", "--key", "k.pem", "nodes"}, {}, {},
                  "--cert and --key go together"},
        ParseCase{"TlsWithPlainHttp", {"--cacert", "ca.pem", "nodes"}, {}, {},
                  "need an https:// server (now http://127.0.0.1:8080)"},
        ParseCase{"InsecureWithPlainHttp", {"--insecure-skip-tls-verify", "nodes"}, {}, {}, "need an https:// server"},
        // The command's own flags and arguments are left alone.
        ParseCase{"ALockFlagsValueMayLookLikeAGlobalFlag",
                  {"lock", "acquire", "--owner", "-o", "--node", "n", "--gpu", "0"}, {},
                  {"lock", {"acquire", "--owner", "-o", "--node", "n", "--gpu", "0"}}},
        ParseCase{"ExplainFileNamedLikeAFlag", {"explain", "-f", "--server", "-o", "json"}, {},
                  {"explain", {"-f", "--server"}, Format::kJson}},
        ParseCase{"AfterDashDashLockRunsCommandKeepsEverything",
                  {"lock", "run", "--node", "n", "-o", "json", "--", "sh", "-o", "x", "--server", "y", "--help"}, {},
                  {"lock", {"run", "--node", "n", "--", "sh", "-o", "x", "--server", "y", "--help"}, Format::kJson}},
        ParseCase{"AnUnknownFlagAfterTheCommandIsTheCommands", {"nodes", "--bogus"}, {}, {"nodes", {"--bogus"}}},
        ParseCase{"AnUnknownFlagBeforeTheCommand", {"--bogus", "nodes"}, {}, {}, "unknown flag --bogus"},
        ParseCase{"DashDashBeforeACommand", {"--", "nodes"}, {}, {}, "\"--\" before a command"},
        ParseCase{"NoCommand", {"-o", "json"}, {}, {"", {}, Format::kJson}},
        ParseCase{"AnUnknownCommandIsLeftToTheCaller", {"frobnicate", "x"}, {}, {"frobnicate", {"x"}}},
        // Help: before the command the global usage, after it the command's.
        ParseCase{"HelpBeforeTheCommand", {"-h", "nodes"}, {}, {"nodes", {}, Format::kTable, "http://127.0.0.1:8080", {}, true}},
        ParseCase{"HelpAfterTheCommand", {"lock", "--help"}, {}, {"lock", {"--help"}}}),
    [](const auto& info) { return info.param.name; });

TEST(VramctlProgramName, KubectlRunsThePluginAsKubectlVram) {
  EXPECT_EQ(ProgramName("/usr/local/bin/kubectl-vram"), "kubectl vram");
  EXPECT_EQ(ProgramName("kubectl-vram"), "kubectl vram");
  EXPECT_EQ(ProgramName("build/bin/vramctl"), "vramctl");
  EXPECT_EQ(ProgramName("kubectl-vram2"), "vramctl");
  EXPECT_EQ(ProgramName(""), "vramctl");
}

TEST(VramctlFormat, OnlyTheThreeNames) {
  EXPECT_EQ(ParseFormat("table"), Format::kTable);
  EXPECT_EQ(ParseFormat("wide"), Format::kWide);
  EXPECT_EQ(ParseFormat("json"), Format::kJson);
  EXPECT_EQ(ParseFormat("JSON"), std::nullopt);
  EXPECT_EQ(ParseFormat("yaml"), std::nullopt);
  EXPECT_EQ(ParseFormat(""), std::nullopt);
}

}  // namespace
}  // namespace vramctl
