// vramctl's commands: one table (commands.cc) that the dispatcher, the usage
// text, the command-line parser and shell completion all read, and one file
// per command (nodes.cc: nodes and pods; queues.cc; explain.cc; lock.cc and
// lock_run.cc; version.cc; completion.cc). Each takes the arguments after its name and
// returns the process exit status (0 ok, 1 failed, 2 usage error).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "output.h"
#include "target.h"

namespace vramctl {

// What every command gets besides its own arguments.
struct Context {
  Target target;
  Format output = Format::kTable;  // -o: each command prints table, wide or json
  std::string program = "vramctl";  // "kubectl vram" when run as a kubectl plugin
};

using Handler = int (*)(const Context&, const std::vector<std::string>&);

struct Command {
  const char* name;
  const char* synopsis;  // after the program name, e.g. "nodes [NODE]"
  const char* summary;
  std::vector<const char*> subcommands;  // lock: acquire ...; completion: bash zsh
  std::vector<const char*> flags;        // its own flags, for completion
  std::vector<const char*> value_flags;  // those of `flags` that take a value
  Handler run;
};

const std::vector<Command>& Commands();
const Command* FindCommand(std::string_view name);

// The global usage, with `program` in its usage lines.
std::string Usage(const std::string& program);

int NodesCommand(const Context& c, const std::vector<std::string>& args);
int PodsCommand(const Context& c, const std::vector<std::string>& args);
int QueuesCommand(const Context& c, const std::vector<std::string>& args);
int ExplainCommand(const Context& c, const std::vector<std::string>& args);
int LockCommand(const Context& c, const std::vector<std::string>& args);
int VersionCommand(const Context& c, const std::vector<std::string>& args);
int CompletionCommand(const Context& c, const std::vector<std::string>& args);
int RawCommand(const Context& c, const std::vector<std::string>& args);

// What `queues` prints for GET /v1/queues's answer (queues.cc): the table
// (NAME PARENT DESERVED LIMIT ALLOCATED FAIR SHARE PENDING VALID; -o wide
// adds WEIGHT, NON-PREEMPTIBLE and MESSAGE) or, for kJson, the answer.
// Returns the exit status.
int PrintQueues(const nlohmann::json& answer, Format format);

// What `explain` prints (table and wide) for /v1/explain's answer
// (explain.cc): the pod, its request, on how many nodes it fits now — or,
// for a pod not bound yet whose queue refuses it, "waits on its queue:
// REASON" — its queue's line, then one line per node. Returns the exit
// status (1 when the answer reports an error).
int PrintExplain(nlohmann::json answer);

// `lock --help` (lock.cc), with `program` in its usage lines.
std::string LockUsage(const std::string& program);

// The version label of vramd_build_info in a /metrics text (version.cc);
// nullopt when there is none.
std::optional<std::string> BuildInfoVersion(const std::string& metrics);

// The completion script for `shell` ("bash" or "zsh") for vramctl and
// kubectl-vram; "" for another shell (completion.cc).
std::string CompletionScript(const std::string& shell);

}  // namespace vramctl
