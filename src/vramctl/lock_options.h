// The options and small rules shared by the `vramctl lock` subcommands
// (lock.cc: acquire, heartbeat, release, list; lock_run.cc: run).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "target.h"

namespace vramctl::lock {

// Exit status when the lock was not granted within --wait.
inline constexpr int kExitNotGranted = 3;

struct Options {
  std::string node;
  std::string gpu;
  std::string owner;
  std::optional<int64_t> ttl_ms, wait_ms, heartbeat_ms;
  bool stop_on_loss = false;
  std::vector<std::string> command;  // after "--"
};

// Parses the flags after the subcommand; returns an error message or "".
std::string ParseOptions(const std::vector<std::string>& args, size_t from, Options* o);

// "500ms", "30s", "2m", "1h" or a bare number of seconds; nullopt when not a
// duration or above 1e12 ms.
std::optional<int64_t> ParseDurationMs(const std::string& s);
std::string DurationText(int64_t ms);

// POD_UID/INSTANCE: $POD_UID (or "local") and $HOSTNAME (or the host name),
// with "-PID" when `with_pid`; characters an owner may not hold become '-'.
std::string DefaultOwner(bool with_pid);

// "/v1/locks/NODE/GPU/OP".
std::string LockPath(const Options& o, const char* op);

// An error message for missing --node/--gpu (when `need_target`) or a TTL
// out of 100ms..24h; "" when the options are usable.
std::string Check(const Options& o, bool need_target);

// `vramctl lock run` (lock_run.cc); returns the exit status.
int Run(const Target& t, Options o);

}  // namespace vramctl::lock
