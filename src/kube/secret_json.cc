// The Secret body of `vramd ensure-secrets` (secrets.h).
#include <nlohmann/json.hpp>

#include "vramd/kube/secrets.h"

namespace vramd::kube {

std::string Base64(const std::string& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (size_t rest = bytes.size() - i; rest > 0) {
    uint32_t v = at(i) << 16 | (rest == 2 ? at(i + 1) << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string SecretJson(const Secret& s) {
  nlohmann::json meta = {{"name", s.name}, {"namespace", s.ns}};
  if (!s.labels.empty()) meta["labels"] = s.labels;
  nlohmann::json data = nlohmann::json::object();
  for (const auto& [k, v] : s.data) data[k] = Base64(v);
  nlohmann::json body = {
      {"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", std::move(meta)}, {"type", s.type}, {"data", std::move(data)},
  };
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace vramd::kube
