// vramctl's commands, one file each (nodes.cc: nodes and pods; explain.cc;
// lock.cc and lock_run.cc). Each takes the arguments after its name and
// returns the process exit status.
#pragma once

#include <string>
#include <vector>

#include "target.h"

namespace vramctl {

int NodesCommand(const Target& t, const std::vector<std::string>& args);
int PodsCommand(const Target& t, const std::vector<std::string>& args);
int ExplainCommand(const Target& t, const std::vector<std::string>& args);

extern const char* const kLockUsage;
int LockCommand(const Target& t, const std::vector<std::string>& args);

}  // namespace vramctl
