// Reading the small files of /proc and /sys: one open, read, close, no
// iostreams. Private to the agent.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace vramd::agent {

// The first `max` bytes of the file at `path` into *out; false when it
// cannot be opened or read (a process that exited, a file that is absent).
// A read shorter than the 4 KiB buffer ends the file (as it does for regular
// files and the kernel's /proc and /sys files).
// With `error`, the errno of a failure there (0 on success).
bool ReadSmallFile(const std::string& path, std::string* out, size_t max = 64 * 1024, int* error = nullptr);

// The names of the entries of directory `path` (without "." and ".."), or
// empty when it cannot be read; with `error`, the errno of a failure to open
// it there (0 otherwise).
std::vector<std::string> ListDir(const std::string& path, int* error = nullptr);

}  // namespace vramd::agent
