// vramctl: a CLI over vramd's HTTP API. This file reads the command line
// (command_line.h), the token file, and dispatches; each command lives in its
// own file (commands.h), and every call to vramd goes through client.h. Run
// as kubectl-vram, it is the kubectl plugin `kubectl vram`.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "command_line.h"
#include "commands.h"
#include "output.h"

namespace {

using vramctl::Fail;

// Reads the token file into t->token; "" or the error.
std::string ReadToken(const std::string& file, vramctl::Target* t) {
  FILE* f = std::fopen(file.c_str(), "r");
  if (f == nullptr) return "cannot read token file " + file;
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  t->token.assign(buf, n);
  while (!t->token.empty() && (t->token.back() == '\n' || t->token.back() == '\r')) t->token.pop_back();
  return "";
}

// "" when each TLS file named can be opened, else what is wrong.
std::string CheckReadable(const vramctl::Tls& tls) {
  for (auto [flag, file] : {std::pair{"--cacert", &tls.ca_file}, std::pair{"--cert", &tls.cert_file},
                            std::pair{"--key", &tls.key_file}}) {
    if (file->empty()) continue;
    FILE* f = std::fopen(file->c_str(), "r");
    if (f == nullptr) return std::string("cannot read ") + flag + " " + *file + ": " + std::strerror(errno);
    std::fclose(f);
  }
  return "";
}

// True when the arguments before "--" ask for help.
bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // A server that drops a TLS connection (a refused client certificate) must
  // be an error to report, not SIGPIPE from OpenSSL's write. `lock run` gives
  // its command the default disposition back.
  std::signal(SIGPIPE, SIG_IGN);
  vramctl::Context ctx;
  ctx.program = vramctl::ProgramName(argc > 0 ? argv[0] : "vramctl");
  vramctl::Invocation inv;
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  if (std::string err = vramctl::ParseCommandLine(args, env, &inv); !err.empty()) return Fail(err, 2);
  if (inv.global.help) {
    std::cout << vramctl::Usage(ctx.program);
    return 0;
  }
  if (inv.command.empty()) {
    std::cerr << vramctl::Usage(ctx.program);
    return 2;
  }
  const vramctl::Command* cmd = vramctl::FindCommand(inv.command);
  if (cmd == nullptr) return Fail("unknown command " + inv.command + " (see " + ctx.program + " --help)", 2);
  if (WantsHelp(inv.args)) {
    if (cmd->run == vramctl::LockCommand) {
      std::cout << vramctl::LockUsage(ctx.program);
    } else {
      std::cout << "Usage: " << ctx.program << " " << cmd->synopsis << "\n\n"
                << cmd->summary << "\n(global flags, -o table|wide|json among them: " << ctx.program << " --help)\n";
    }
    return 0;
  }
  ctx.output = inv.global.output;
  ctx.target.scheme_host_port = inv.global.server;
  ctx.target.tls = inv.global.tls;
  if (!inv.global.token_file.empty()) {
    if (std::string err = ReadToken(inv.global.token_file, &ctx.target); !err.empty()) return Fail(err);
  }
  if (std::string err = CheckReadable(ctx.target.tls); !err.empty()) return Fail(err, 2);
  try {
    return cmd->run(ctx, inv.args);
  } catch (const std::exception& e) {
    // A server answer of an unexpected shape (a field of another type) is an
    // error message, never a crash.
    return Fail(std::string("unexpected answer from vramd: ") + e.what());
  }
}
