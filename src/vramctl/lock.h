// `vramctl lock ...`: acquire, heartbeat, release, list and run (hold a GPU
// lock with heartbeats while a command runs). Usage in kLockUsage.
#pragma once

#include <string>
#include <vector>

#include "target.h"

namespace vramctl {

extern const char* const kLockUsage;

// args: what follows "lock". Returns the process exit status.
int LockCommand(const Target& t, const std::vector<std::string>& args);

}  // namespace vramctl
