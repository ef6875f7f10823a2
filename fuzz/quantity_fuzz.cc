// Fuzzes the quantity parser (ledger::ParseBytes) and FormatBytes.
// Properties:
//  - ParseBytes never crashes and never accepts a negative amount;
//  - for every accepted input x, FormatBytes(x) that is exact (no decimal
//    point) parses back to x; an inexact rendering is within 5 % of x;
//  - the same for the first 8 bytes read as an int64 (any non-negative value).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "vramd/ledger/quantity.h"

namespace {

void CheckRoundTrip(int64_t x) {
  std::string f = vramd::ledger::FormatBytes(x);
  FUZZ_CHECK(!f.empty());
  if (x < 0) {
    FUZZ_CHECK(f[0] == '-');
    return;
  }
  vramd::Result<int64_t> back = vramd::ledger::ParseBytes(f);
  if (f.find('.') == std::string::npos) {
    FUZZ_CHECK_MSG(back.ok(), f + ": " + (back.ok() ? "" : back.status().message()));
    FUZZ_CHECK_MSG(*back == x, std::to_string(x) + " -> " + f + " -> " + std::to_string(*back));
  } else if (back.ok()) {
    // "1.5Gi" is exact when it is a whole number of bytes; one decimal is
    // within 5 % of the value (the unit is at least 1Ki, the mantissa >= 1).
    long double diff = static_cast<long double>(*back) - static_cast<long double>(x);
    FUZZ_CHECK_MSG(std::abs(diff) <= static_cast<long double>(x) * 0.05L, f + " for " + std::to_string(x));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  vramd::Result<int64_t> r = vramd::ledger::ParseBytes(text);
  if (r.ok()) {
    FUZZ_CHECK_MSG(*r >= 0, std::string(text));
    CheckRoundTrip(*r);
  } else {
    FUZZ_CHECK(!r.status().message().empty());
  }
  if (size >= 8) {
    int64_t x;
    std::memcpy(&x, data, sizeof x);
    CheckRoundTrip(x);
    CheckRoundTrip(x & INT64_MAX);
  }
  return 0;
}
