// vramctl: a CLI over vramd's HTTP API. This file reads the global flags and
// dispatches; each command lives in its own file (commands.h), and every call
// to vramd goes through client.h.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "output.h"
#include "target.h"

namespace {

using vramctl::Fail;
using vramctl::Target;

const char* kUsage = R"(vramctl - command-line client of vramd

Usage: vramctl [--server URL] [--token-file FILE] COMMAND

Commands:
  nodes [NODE]        per node and GPU: capacity, allocation, usage and the six metrics
  nodes -o json       the same as JSON
  pods [NODE]         reservations per pod: node, GPUs, VRAM per GPU, used (agent), state
  explain NS/POD      per node: does the pod fit now, on which GPUs, and if not, why
  explain -f POD.json the same for a Pod manifest (JSON) that is not created yet
  lock ...            GPU locks: acquire, heartbeat, release, list, run (see `vramctl lock --help`)

Options:
  --server URL        vramd's address (default $VRAMD_SERVER or http://127.0.0.1:8080)
  --token-file FILE   bearer token for mutating calls (default $VRAMD_TOKEN_FILE)
)";

}  // namespace

int main(int argc, char** argv) {
  Target t;
  const char* env_server = std::getenv("VRAMD_SERVER");
  t.scheme_host_port = env_server ? env_server : "http://127.0.0.1:8080";
  std::string token_file = std::getenv("VRAMD_TOKEN_FILE") ? std::getenv("VRAMD_TOKEN_FILE") : "";
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--server" || a == "-s") && i + 1 < argc) {
      t.scheme_host_port = argv[++i];
    } else if (a.rfind("--server=", 0) == 0) {
      t.scheme_host_port = a.substr(9);
    } else if (a == "--token-file" && i + 1 < argc) {
      token_file = argv[++i];
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      rest.assign(argv + i, argv + argc);
      break;
    }
  }
  if (!token_file.empty()) {
    FILE* f = std::fopen(token_file.c_str(), "r");
    if (f == nullptr) return Fail("cannot read token file " + token_file);
    char buf[4096];
    size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    t.token.assign(buf, n);
    while (!t.token.empty() && (t.token.back() == '\n' || t.token.back() == '\r')) t.token.pop_back();
  }
  if (t.scheme_host_port.find("://") == std::string::npos) t.scheme_host_port = "http://" + t.scheme_host_port;
  if (rest.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  std::string cmd = rest[0];
  std::vector<std::string> args(rest.begin() + 1, rest.end());
  if (cmd == "nodes") return vramctl::NodesCommand(t, args);
  if (cmd == "pods") return vramctl::PodsCommand(t, args);
  if (cmd == "explain") return vramctl::ExplainCommand(t, args);
  if (cmd == "lock") return vramctl::LockCommand(t, args);
  return Fail("unknown command " + cmd + " (see --help)");
}
