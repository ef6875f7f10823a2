// Kubernetes resource quantities, restricted to whole byte amounts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vramd/status.h"

namespace vramd::ledger {

// Parses a Kubernetes quantity ("54Gi", "1500M", "16k", "1e9", "137438953472",
// "1.5Gi") into bytes. Accepts binary suffixes (Ki Mi Gi Ti Pi Ei), decimal
// suffixes (n u m k M G T P E) and decimal exponents (e/E). Errors, with a
// message that quotes the input: empty or malformed text, negative values,
// amounts that are not a whole number of bytes ("0.5", "1500m"), and values
// above INT64_MAX bytes.
Result<int64_t> ParseBytes(std::string_view text);

// Renders bytes for humans and reasons: exact binary units where the amount
// is a whole number of them ("38Gi", "512Mi"), otherwise one decimal in the
// largest binary unit ("1.5Gi"), and plain bytes below 1Ki ("900").
std::string FormatBytes(int64_t bytes);

}  // namespace vramd::ledger
