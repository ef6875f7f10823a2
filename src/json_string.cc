// The one JSON string writer (vramd/json_string.h).
#include "vramd/json_string.h"

#include <cstdint>
#include <cstring>

namespace vramd {
namespace {

// The length of the well-formed UTF-8 sequence that starts at s[i] (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) n = 3;
  else if (c == 0xED) n = 3, hi = 0x9F;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (s.size() - i < n) return 0;
  const auto c1 = static_cast<unsigned char>(s[i + 1]);
  if (c1 < lo || c1 > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    const auto ck = static_cast<unsigned char>(s[i + k]);
    if (ck < 0x80 || ck > 0xBF) return 0;
  }
  return n;
}

}  // namespace

namespace {

// Whether any of the 8 bytes in x needs attention in a JSON string: a
// control character, '"', '\\' or a byte of a multi-byte UTF-8 sequence.
bool AnySpecialByte(uint64_t x) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  const auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
  return ((x - kOnes * 0x20) & ~x & kHigh) | has_zero(x ^ (kOnes * '"')) | has_zero(x ^ (kOnes * '\\')) |
         (x & kHigh);
}

// Whether s has no byte that AnySpecialByte looks for: 8 bytes at a time,
// the last (partial) word read as the final 8 bytes (overlapping) or, for a
// string shorter than 8, padded with a plain byte.
bool PlainText(std::string_view s) {
  const size_t n = s.size();
  uint64_t x;
  if (n < 8) {
    x = 0x6161616161616161ULL;  // 'a' in every byte
    if (n > 0) std::memcpy(&x, s.data(), n);
    return !AnySpecialByte(x);
  }
  for (size_t i = 0; i + 8 <= n; i += 8) {
    std::memcpy(&x, s.data() + i, 8);
    if (AnySpecialByte(x)) return false;
  }
  std::memcpy(&x, s.data() + n - 8, 8);
  return !AnySpecialByte(x);
}

// AppendJsonString for text with something to escape; kept out of line so
// that the plain path stays a small leaf.
[[gnu::noinline]] void AppendEscaped(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  // Runs of printable ASCII other than '"' and '\\' are appended in one go,
  // found 8 bytes at a time: node names and reasons are nearly all such
  // bytes, and a byte at a time was most of the cost of writing a
  // 5,000-node filter result.
  size_t run = 0;
  size_t i = 0;
  while (i < s.size()) {
    if (s.size() - i >= 8) {
      uint64_t x;
      std::memcpy(&x, s.data() + i, 8);
      if (!AnySpecialByte(x)) {
        i += 8;
        continue;
      }
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    out->append(s.data() + run, i - run);
    if (c >= 0x80) {
      // Text echoed from a request (a quantity cut at 64 bytes) may not be
      // UTF-8; the answer stays valid JSON.
      size_t n = Utf8Length(s, i);
      if (n == 0) {
        *out += "\\ufffd";
        i += 1;
      } else {
        out->append(s.substr(i, n));
        i += n;
      }
      run = i;
      continue;
    }
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        *out += "\\u00";
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
    }
    run = ++i;
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

}  // namespace

void AppendJsonString(std::string_view s, std::string* out) {
  if (!PlainText(s)) {
    AppendEscaped(s, out);
    return;
  }
  // Nothing to escape (node names, reasons): the quotes and the bytes in
  // one step. Most of the cost of a 5,000-name filter answer was the
  // per-byte checks of names' last bytes and three appends per name.
  const size_t at = out->size();
  out->resize(at + s.size() + 2);
  char* p = out->data() + at;
  p[0] = '"';
  if (!s.empty()) std::memcpy(p + 1, s.data(), s.size());
  p[s.size() + 1] = '"';
}

}  // namespace vramd
