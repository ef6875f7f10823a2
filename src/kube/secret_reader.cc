// Reading a Secret's JSON (secret_reader.h); the GET itself is the REST
// client's (rest_client.cc: RestClient is the SecretReader too).
#include "vramd/kube/secret_reader.h"

#include <nlohmann/json.hpp>
#include <utility>

namespace vramd::kube {
namespace {

int Sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

Result<std::string> Unbase64(std::string_view text) {
  if (text.size() % 4 != 0) return InvalidArgument("base64 length is not a multiple of 4");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char ch = text[i + k];
      if (ch == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0 || (v[k] = Sextet(ch)) < 0) return InvalidArgument("not base64");
    }
    const uint32_t n = static_cast<uint32_t>(v[0]) << 18 | static_cast<uint32_t>(v[1]) << 12 |
                       static_cast<uint32_t>(v[2]) << 6 | static_cast<uint32_t>(v[3]);
    out += static_cast<char>((n >> 16) & 0xFF);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(n & 0xFF);
  }
  return out;
}

Result<Secret> SecretFromJson(std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("the answer is not a JSON object");
  if (j.value("kind", "") != "Secret") return InvalidArgument("the answer is not a Secret");
  const nlohmann::json meta = j.value("metadata", nlohmann::json::object());
  if (!meta.is_object()) return InvalidArgument("metadata is not an object");
  Secret s;
  s.name = meta.value("name", "");
  s.ns = meta.value("namespace", "");
  if (auto t = j.find("type"); t != j.end() && t->is_string()) s.type = t->get<std::string>();
  if (auto l = meta.find("labels"); l != meta.end() && l->is_object()) {
    for (const auto& [k, v] : l->items()) {
      if (!v.is_string()) return InvalidArgument("label " + k + " is not a string");
      s.labels[k] = v.get<std::string>();
    }
  }
  if (auto d = j.find("data"); d != j.end() && d->is_object()) {
    for (const auto& [k, v] : d->items()) {
      if (!v.is_string()) return InvalidArgument("data." + k + " is not a string");
      Result<std::string> bytes = Unbase64(v.get<std::string>());
      if (!bytes.ok()) return InvalidArgument("data." + k + ": " + bytes.status().message());
      s.data[k] = std::move(bytes).value();
    }
  }
  return s;
}

}  // namespace vramd::kube
