#include "vramd/ledger/quantity.h"

#include <cstdio>
#include <limits>

namespace vramd::ledger {
namespace {

using i128 = __int128;
constexpr i128 kMax = std::numeric_limits<int64_t>::max();

Status Bad(std::string_view text, std::string_view why) {
  return InvalidArgument("invalid quantity \"" + std::string(text) + "\": " + std::string(why));
}

struct Suffix {
  std::string_view name;
  int base;      // 2 or 10
  int exponent;  // power of base
};

// Longest names first so "Ki" wins over "k"-like prefixes.
constexpr Suffix kSuffixes[] = {
    {"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
    {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"k", 10, 3},  {"M", 10, 6},  {"G", 10, 9},
    {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18},
};

}  // namespace

Result<int64_t> ParseBytes(std::string_view text) {
  if (text.empty()) return Bad(text, "empty");
  if (text.size() > 64) return Bad(text.substr(0, 64), "too long");
  size_t i = 0;
  bool negative = false;
  if (text[i] == '+' || text[i] == '-') {
    negative = text[i] == '-';
    ++i;
  }
  // Mantissa: digits with at most one '.', kept as an exact integer plus a
  // count of fractional digits. Digits beyond 40 cannot be represented.
  i128 mantissa = 0;
  int frac_digits = 0;
  int digits = 0;
  bool seen_dot = false;
  bool overflow = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (seen_dot) return Bad(text, "more than one decimal point");
      seen_dot = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    ++digits;
    if (mantissa > kMax * 1000) {
      // Further digits only matter if they are fractional zeros; track overflow.
      if (!seen_dot) overflow = true;
      if (c != '0' && seen_dot) return Bad(text, "too many digits");
      if (seen_dot) ++frac_digits;
      continue;
    }
    mantissa = mantissa * 10 + (c - '0');
    if (seen_dot) ++frac_digits;
  }
  if (digits == 0) return Bad(text, "no digits");
  // Suffix: binary/decimal SI, or a decimal exponent.
  std::string_view rest = text.substr(i);
  int base = 10;
  int exponent = 0;
  if (!rest.empty()) {
    // "E" and "Ei" are suffixes (exa, exbi); otherwise e/E starts an exponent.
    bool found = false;
    for (const Suffix& s : kSuffixes) {
      if (rest == s.name) {
        base = s.base;
        exponent = s.exponent;
        found = true;
        break;
      }
    }
    if (!found && (rest[0] == 'e' || rest[0] == 'E')) {
      std::string_view exp = rest.substr(1);
      bool exp_neg = false;
      size_t j = 0;
      if (j < exp.size() && (exp[j] == '+' || exp[j] == '-')) {
        exp_neg = exp[j] == '-';
        ++j;
      }
      if (j == exp.size()) return Bad(text, "exponent without digits");
      int e = 0;
      for (; j < exp.size(); ++j) {
        if (exp[j] < '0' || exp[j] > '9') return Bad(text, "malformed exponent");
        e = e * 10 + (exp[j] - '0');
        if (e > 1000) return Bad(text, "exponent out of range");
      }
      exponent = exp_neg ? -e : e;
      found = true;
    }
    if (!found) return Bad(text, "unknown suffix \"" + std::string(rest) + "\"");
  }
  if (negative && mantissa != 0) return Bad(text, "negative amounts of memory are not allowed");
  if (overflow) return Bad(text, "larger than the maximum of 9223372036854775807 bytes");
  if (mantissa == 0) return int64_t{0};

  // value = mantissa * base^exponent / 10^frac_digits, exactly.
  i128 num = mantissa;
  i128 den = 1;
  auto mul_checked = [&](i128& v, i128 f) -> bool {
    if (v > (kMax * 1000) / f) return false;
    v *= f;
    return true;
  };
  for (int k = 0; k < frac_digits; ++k) {
    if (!mul_checked(den, 10)) return Bad(text, "too many fractional digits");
  }
  if (base == 2) {
    for (int k = 0; k < exponent; ++k) {
      if (!mul_checked(num, 2)) return Bad(text, "larger than the maximum of 9223372036854775807 bytes");
    }
  } else if (exponent >= 0) {
    for (int k = 0; k < exponent; ++k) {
      if (!mul_checked(num, 10)) return Bad(text, "larger than the maximum of 9223372036854775807 bytes");
    }
  } else {
    for (int k = 0; k < -exponent; ++k) {
      if (!mul_checked(den, 10)) return Bad(text, "not a whole number of bytes");
    }
  }
  if (num % den != 0) return Bad(text, "not a whole number of bytes");
  i128 value = num / den;
  if (value > kMax) return Bad(text, "larger than the maximum of 9223372036854775807 bytes");
  return static_cast<int64_t>(value);
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  bool neg = bytes < 0;
  // Work in unsigned to handle INT64_MIN.
  uint64_t mag = neg ? (~static_cast<uint64_t>(bytes) + 1) : static_cast<uint64_t>(bytes);
  std::string sign = neg ? "-" : "";
  if (mag < 1024) return sign + std::to_string(mag);
  int unit = -1;
  uint64_t div = 1;
  while (unit < 5 && mag >= div * 1024) {
    div *= 1024;
    ++unit;
  }
  if (mag % div == 0) return sign + std::to_string(mag / div) + kUnits[unit];
  // Not a whole number of units: the decimal stays, so that the text never
  // reads as an exact amount ("2.0Ki" for 2000 bytes, not "2Ki").
  char buf[48];
  double v = static_cast<double>(mag) / static_cast<double>(div);
  std::snprintf(buf, sizeof buf, "%.1f", v);
  if (std::string_view(buf) == "1024.0" && unit < 5) {
    ++unit;
    std::snprintf(buf, sizeof buf, "%.1f", v / 1024);
  }
  return sign + buf + kUnits[unit];
}

}  // namespace vramd::ledger
