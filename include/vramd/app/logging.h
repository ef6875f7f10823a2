// Logging set-up: plain text or structured JSON lines (one object per line,
// message and fields JSON-escaped), each with the id of the HTTP request the
// thread is serving (X-Request-Id, or generated), when there is one.
// Per-request lines are logged at debug level only.
#pragma once

#include <string>

namespace vramd::app {

void SetupLogging(const std::string& level, bool json);

// Escapes s for inclusion inside a JSON string literal (no quotes added).
std::string JsonEscape(const std::string& s);

}  // namespace vramd::app
