// The command table and the global usage built from it.
#include "commands.h"

#include "command_line.h"

namespace vramctl {

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"nodes", "nodes [NODE]", "per node and GPU: capacity, allocation, usage and the six metrics", {}, {}, {},
       NodesCommand},
      {"pods", "pods [NODE]", "reservations per pod: node, GPUs, VRAM per GPU, used (agent), state, limit (enforced or not)", {}, {}, {}, PodsCommand},
      {"queues", "queues",
       "VRAM queues: deserved quota, limit, allocated, fair share, pending, whether each is valid", {}, {}, {},
       QueuesCommand},
      {"explain", "explain NS/POD | -f POD.json",
       "per node: does the pod (or a Pod manifest) fit now, on which GPUs; if not, why; its queue",
       {}, {"-f"}, {"-f"}, ExplainCommand},
      {"lock", "lock SUBCOMMAND ...", "GPU locks: acquire, heartbeat, release, list, run (see `lock --help`)",
       {"acquire", "heartbeat", "release", "list", "run"},
       {"--node", "--gpu", "--owner", "--ttl", "--wait", "--heartbeat", "--stop-on-loss"},
       {"--node", "--gpu", "--owner", "--ttl", "--wait", "--heartbeat"}, LockCommand},
      {"version", "version [--client]", "vramctl's version and the server's (--client: vramctl's only)", {},
       {"--client"}, {}, VersionCommand},
      {"raw", "raw GET|POST PATH [-f FILE]", "one request to any path; the answer's body on stdout", {"GET", "POST"},
       {"-f"}, {"-f"}, RawCommand},
      {"completion", "completion bash|zsh", "a shell completion script (commands, flags, -o values)",
       {"bash", "zsh"}, {}, {}, CompletionCommand},
  };
  return commands;
}

const Command* FindCommand(std::string_view name) {
  for (const Command& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::string Usage(const std::string& program) {
  std::string u = program + " - command-line client of vramd\n\nUsage: " + program +
                  " [FLAGS] COMMAND [ARGS] (flags may also follow the command)\n\nCommands:\n";
  auto row = [&u](std::string left, const std::string& right) {
    left = "  " + left;
    if (left.size() < 34) left.append(34 - left.size(), ' ');
    else left += "\n" + std::string(34, ' ');
    u += left + right + "\n";
  };
  for (const Command& c : Commands()) row(c.synopsis, c.summary);
  u += "\nFlags (the variable, when set, gives the default):\n";
  for (const GlobalFlag& f : GlobalFlags()) {
    std::string left = f.short_name != nullptr ? std::string(f.short_name) + ", " + f.name : f.name;
    if (f.value != nullptr) left += std::string(" ") + f.value;
    row(left, std::string(f.help) + (f.env != nullptr ? std::string(" [$") + f.env + "]" : ""));
  }
  u += "\nRun as kubectl-vram (a symlink to vramctl on PATH), it is the kubectl plugin `kubectl vram`.\n";
  return u;
}

}  // namespace vramctl
