// The daemon's informational flags: --help/-h, --version, --help-config.
#pragma once

#include <optional>

namespace vramd::daemon {

// When argv holds one of the informational flags: prints what it asks for
// to stdout and returns the exit status (0). Otherwise nullopt: the caller
// loads the config from the same argv.
std::optional<int> HandleInfoFlags(int argc, char** argv);

}  // namespace vramd::daemon
