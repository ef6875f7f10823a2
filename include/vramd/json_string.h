// The one JSON string writer of vramd: the extender's answers, the JSON log
// lines and the ledger's entries all escape text through it. Standard
// library only.
#pragma once

#include <string>
#include <string_view>

namespace vramd {

// Appends s as a JSON string literal (with quotes) to out. Bytes that are
// not well-formed UTF-8 become U+FFFD, so the result is always valid JSON.
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace vramd
