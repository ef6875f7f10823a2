// Logging set-up: plain text or structured JSON lines (one object per line,
// message and fields written by AppendJsonString), each with the id of the
// HTTP request the thread is serving (X-Request-Id, or generated), when
// there is one.
// Per-request lines are logged at debug level only.
#pragma once

#include <string>

namespace vramd::daemon {

void SetupLogging(const std::string& level, bool json);

}  // namespace vramd::daemon
