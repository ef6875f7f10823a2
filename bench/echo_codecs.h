// The three ways of answering a filter call that only echoes the candidate
// names (the "limit" baselines of issue 6): nlohmann_json DOM (parse + dump),
// nlohmann_json SAX (no DOM, result written by hand) and simdjson on-demand
// (result written by hand). Used by micro_bench and baseline_server, so the
// micro numbers and the HTTP numbers measure the same code.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace vramd::bench {

// Appends s as a JSON string: runs of bytes that need no escape in one go,
// found 8 bytes at a time (as vramd's writer does).
inline void AppendQuoted(std::string_view s, std::string* out) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  const auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
  out->push_back('"');
  size_t run = 0, i = 0;
  while (i < s.size()) {
    if (s.size() - i >= 8) {
      uint64_t x;
      std::memcpy(&x, s.data() + i, 8);
      if (!(((x - kOnes * 0x20) & ~x & kHigh) | has_zero(x ^ (kOnes * '"')) | has_zero(x ^ (kOnes * '\\')))) {
        i += 8;
        continue;
      }
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    out->append(s.data() + run, i - run);
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", c);
    *out += buf;
    run = ++i;
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

// Appends an ExtenderFilterResult that keeps every name. Names that need no
// escaping (all real node names) are copied straight into a buffer sized
// once; the others go through AppendQuoted.
inline void AppendEcho(const std::vector<std::string_view>& names, std::string* out) {
  static constexpr std::string_view kHead = "{\"NodeNames\":[";
  static constexpr std::string_view kTail =
      "],\"Nodes\":null,\"FailedNodes\":{},\"FailedAndUnresolvableNodes\":{},\"Error\":\"\"}";
  // No control character, '"' or '\\' in n: checked 8 bytes at a time.
  auto plain = [](std::string_view n) {
    constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
    const auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
    const auto special = [&](uint64_t x) {
      return ((x - kOnes * 0x20) & ~x & kHigh) | has_zero(x ^ (kOnes * '"')) | has_zero(x ^ (kOnes * '\\'));
    };
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= n.size(); i += 8) {
      uint64_t x;
      std::memcpy(&x, n.data() + i, 8);
      acc |= special(x);
    }
    if (i < n.size()) {
      uint64_t x = kOnes * 'a';
      std::memcpy(&x, n.data() + i, n.size() - i);
      acc |= special(x);
    }
    return acc == 0;
  };
  size_t bytes = kHead.size() + kTail.size();
  for (std::string_view n : names) bytes += n.size() + 3;
  const size_t start = out->size();
  out->resize(start + bytes);
  char* p = out->data() + start;
  std::memcpy(p, kHead.data(), kHead.size());
  p += kHead.size();
  for (size_t i = 0; i < names.size(); ++i) {
    if (!plain(names[i])) {  // rare: finish with the escaping writer
      out->resize(static_cast<size_t>(p - out->data()));
      for (size_t k = i; k < names.size(); ++k) {
        if (k) out->push_back(',');
        AppendQuoted(names[k], out);
      }
      out->append(kTail);
      return;
    }
    if (i) *p++ = ',';
    *p++ = '"';
    std::memcpy(p, names[i].data(), names[i].size());
    p += names[i].size();
    *p++ = '"';
  }
  std::memcpy(p, kTail.data(), kTail.size());
  p += kTail.size();
  out->resize(static_cast<size_t>(p - out->data()));
}

// Parses the whole body into a DOM, builds the result as a DOM and dumps it.
inline bool EchoNlohmannDom(std::string_view body, std::string* out) {
  nlohmann::json args = nlohmann::json::parse(body, nullptr, false);
  if (args.is_discarded() || !args.is_object()) return false;
  nlohmann::json result = {{"NodeNames", nlohmann::json::array()},
                           {"Nodes", nullptr},
                           {"FailedNodes", nlohmann::json::object()},
                           {"FailedAndUnresolvableNodes", nlohmann::json::object()},
                           {"Error", ""}};
  auto it = args.find("NodeNames");
  if (it != args.end() && it->is_array()) {
    for (const auto& n : *it) {
      if (!n.is_string()) return false;
      result["NodeNames"].push_back(n);
    }
  }
  *out = result.dump();
  return true;
}

// SAX: keeps the strings of the top-level NodeNames array, builds no DOM.
class NamesSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<std::string> names;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t& s) override {
    if (in_names_ && depth_ == 2) names.push_back(std::move(s));
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1) names_key_ = k == "NodeNames";
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    if (depth_ == 2 && names_key_) in_names_ = true;
    return true;
  }
  bool end_array() override {
    if (depth_ == 2) in_names_ = false;
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  int depth_ = 0;
  bool names_key_ = false;
  bool in_names_ = false;
};

inline bool EchoNlohmannSax(std::string_view body, std::string* out) {
  NamesSax sax;
  if (!nlohmann::json::sax_parse(body, &sax, nlohmann::json::input_format_t::json, true)) return false;
  std::vector<std::string_view> views(sax.names.begin(), sax.names.end());
  AppendEcho(views, out);
  return true;
}

// simdjson on-demand; one per thread (owns the parser and the padded copy).
class SimdjsonEcho {
 public:
  bool Echo(std::string_view body, std::string* out) {
    if (buf_.size() < body.size() + simdjson::SIMDJSON_PADDING) {
      buf_.resize(body.size() + simdjson::SIMDJSON_PADDING);
    }
    std::memcpy(buf_.data(), body.data(), body.size());
    names_.clear();
    simdjson::ondemand::document doc;
    if (parser_.iterate(buf_.data(), body.size(), buf_.size()).get(doc)) return false;
    simdjson::ondemand::object top;
    if (doc.get_object().get(top)) return false;
    for (auto field : top) {
      std::string_view key;
      if (field.unescaped_key().get(key)) return false;
      if (key != "NodeNames") continue;
      simdjson::ondemand::array arr;
      if (field.value().get_array().get(arr)) return false;
      for (auto elem : arr) {
        std::string_view name;
        if (elem.get_string().get(name)) return false;
        names_.push_back(name);
      }
    }
    AppendEcho(names_, out);
    return true;
  }

 private:
  simdjson::ondemand::parser parser_;
  std::string buf_;
  std::vector<std::string_view> names_;
};

}  // namespace vramd::bench
