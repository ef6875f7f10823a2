// Bounded, non-throwing number parsing for text that comes from outside the
// process: pod and node annotations and labels, Valkey replies, HTTP paths and
// bodies, command lines. Every function reads the WHOLE text (no leading or
// trailing whitespace, no trailing bytes, no '+'), never throws, and answers
// nullopt for anything that is not a number of the wanted kind or lies outside
// its bounds — a 19-digit annotation is an error to report, not a crash
// (std::stoll and friends throw std::out_of_range on it). Standard library only.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

namespace vramd {

// A decimal integer with an optional leading '-' ("0", "-12", "007"), within
// [min, max].
inline std::optional<int64_t> ParseInt64(std::string_view text, int64_t min = std::numeric_limits<int64_t>::min(),
                                         int64_t max = std::numeric_limits<int64_t>::max()) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < min || v > max) return std::nullopt;
  return v;
}

// Digits only ("0".."max"): no sign at all, not even "-0". For counts,
// indices and byte amounts written by machines.
inline std::optional<uint64_t> ParseDigits(std::string_view text,
                                           uint64_t max = std::numeric_limits<uint64_t>::max()) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || v > max) return std::nullopt;
  return v;
}

// ParseDigits for an int-sized bound (GPU indices, ports, counts).
inline std::optional<int> ParseSmallInt(std::string_view text, int max) {
  if (max < 0) return std::nullopt;
  std::optional<uint64_t> v = ParseDigits(text, static_cast<uint64_t>(max));
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

// A finite decimal floating-point number ("1.5", "-2", "1e9", ".5"), within
// [min, max]. Rejects "inf", "nan", hexadecimal and out-of-range exponents
// ("1e400").
inline std::optional<double> ParseDouble(std::string_view text, double min = -std::numeric_limits<double>::max(),
                                         double max = std::numeric_limits<double>::max()) {
  if (text.empty()) return std::nullopt;
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
  if (ec != std::errc() || p != end || !std::isfinite(v) || v < min || v > max) return std::nullopt;
  return v;
}

}  // namespace vramd
