// How vramctl prints: errors on stderr, byte amounts and ratios in tables.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace vramctl {

// Prints "vramctl: MSG" on stderr; returns `code` (the exit status).
int Fail(const std::string& msg, int code = 1);

// "24Gi" for a number of bytes, "-" for anything else.
std::string Bytes(const nlohmann::json& v);

// "0.50" for a number, the text itself for a string ("+Inf"), "-" otherwise.
std::string RatioText(const nlohmann::json& v);

}  // namespace vramctl
