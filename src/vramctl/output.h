// How vramctl prints: errors on stderr; data as a table (`-o table`), a table
// with more columns (`-o wide`) or the API's JSON (`-o json`); byte amounts and
// ratios in tables.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vramctl {

enum class Format { kTable, kWide, kJson };

// The names -o accepts, in the order usage and completion list them.
inline constexpr const char* kFormatNames[] = {"table", "wide", "json"};

// "table", "wide" or "json"; nullopt for anything else.
std::optional<Format> ParseFormat(std::string_view name);

// Prints "vramctl: MSG" on stderr; returns `code` (the exit status).
int Fail(const std::string& msg, int code = 1);

// "24Gi" for a number of bytes, "-" for anything else.
// j[key] when j is an object holding key, else null: vramctl reads the
// server's JSON without trusting its shape (a missing field prints "-";
// nlohmann's const operator[] asserts on a missing key).
const nlohmann::json& At(const nlohmann::json& j, const char* key);

std::string Bytes(const nlohmann::json& v);

// "0.50" for a number, the text itself for a string ("+Inf"), "-" otherwise.
std::string RatioText(const nlohmann::json& v);

// "45s", "12m", "3h", "5d": the time from `then_ms` to `now_ms` (Unix ms);
// "-" when `then_ms` is not a positive number.
std::string AgeText(const nlohmann::json& then_ms, int64_t now_ms);

// `text` with each control character (C0, DEL, and C1 written as UTF-8)
// replaced by '?': a name from the cluster cannot move the cursor, start an
// escape sequence or break a table's line.
std::string Printable(std::string_view text);

// j as text when it is a string (Printable), else `absent`.
std::string Text(const nlohmann::json& j, const std::string& absent = "-");

// One column of a table over rows of type Row: its header, whether only
// `-o wide` shows it, and how a row's cell is written. A command's columns
// are one list, so a column is added with one line.
template <typename Row>
struct Column {
  const char* header;
  bool wide_only;
  std::function<std::string(const Row&)> cell;
};

// Prints `rows` under `headers` on stdout: each column as wide as its widest
// cell plus three spaces (the last column unpadded); an empty cell stays
// empty; every cell is written Printable.
void PrintTable(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows);

// The columns that `format` shows (every column for kWide, those not
// wide_only otherwise), as PrintTable prints them.
template <typename Row>
void PrintColumns(const std::vector<Column<Row>>& columns, const std::vector<Row>& rows, Format format) {
  std::vector<const Column<Row>*> shown;
  for (const Column<Row>& c : columns) {
    if (format == Format::kWide || !c.wide_only) shown.push_back(&c);
  }
  std::vector<std::string> headers;
  for (const Column<Row>* c : shown) headers.emplace_back(c->header);
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    std::vector<std::string>& line = cells.emplace_back();
    for (const Column<Row>* c : shown) line.push_back(c->cell(r));
  }
  PrintTable(headers, cells);
}

}  // namespace vramctl
