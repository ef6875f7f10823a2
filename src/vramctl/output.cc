#include "output.h"

#include <algorithm>
#include <cstdio>

#include "vramd/ledger/quantity.h"

namespace vramctl {

std::optional<Format> ParseFormat(std::string_view name) {
  if (name == "table") return Format::kTable;
  if (name == "wide") return Format::kWide;
  if (name == "json") return Format::kJson;
  return std::nullopt;
}

int Fail(const std::string& msg, int code) {
  std::fprintf(stderr, "vramctl: %s\n", msg.c_str());
  return code;
}

const nlohmann::json& At(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string Bytes(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  return vramd::ledger::FormatBytes(v.get<int64_t>());
}

std::string RatioText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v.get<double>());
  return buf;
}

std::string AgeText(const nlohmann::json& then_ms, int64_t now_ms) {
  if (!then_ms.is_number() || then_ms.get<double>() <= 0) return "-";
  const int64_t s = std::max<int64_t>(0, (now_ms - then_ms.get<int64_t>()) / 1000);
  if (s < 120) return std::to_string(s) + "s";
  if (s < 2 * 3600) return std::to_string(s / 60) + "m";
  if (s < 2 * 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += '?';
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      out += '?';  // U+0080..U+009F: C1 controls (U+009B is a CSI to some terminals)
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string Text(const nlohmann::json& j, const std::string& absent) {
  return j.is_string() ? Printable(j.get_ref<const std::string&>()) : absent;
}

void PrintTable(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& raw_rows) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(raw_rows.size());
  for (const auto& r : raw_rows) {
    std::vector<std::string>& line = rows.emplace_back();
    for (const std::string& cell : r) line.push_back(Printable(cell));
  }
  std::vector<size_t> width(headers.size());
  for (size_t i = 0; i < headers.size(); ++i) width[i] = headers[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size() && i < width.size(); ++i) {
      out += cells[i];
      if (i + 1 < cells.size()) out.append(width[i] - cells[i].size() + 3, ' ');
    }
    std::printf("%s\n", out.c_str());
  };
  line(headers);
  for (const auto& r : rows) line(r);
}

}  // namespace vramctl
