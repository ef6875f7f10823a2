#include "kube/api_status.h"

#include <nlohmann/json.hpp>

namespace vramd::kube {

std::string ApiMessage(std::string_view body) {
  if (body.empty()) return "";
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded() && j.is_object()) {
    auto it = j.find("message");
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  constexpr size_t kMax = 300;
  std::string out;
  for (char c : body.substr(0, kMax)) out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  if (body.size() > kMax) out += "...";
  return out;
}

std::string ApiMessageWithCauses(std::string_view body) {
  std::string out = ApiMessage(body);
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return out;
  auto details = j.find("details");
  if (details == j.end() || !details->is_object()) return out;
  auto causes = details->find("causes");
  if (causes == details->end() || !causes->is_array()) return out;
  std::string listed;
  for (const nlohmann::json& c : *causes) {
    if (!c.is_object()) continue;
    auto m = c.find("message");
    if (m == c.end() || !m->is_string() || m->get_ref<const std::string&>().empty()) continue;
    if (!listed.empty()) listed += "; ";
    listed += m->get<std::string>();
  }
  if (listed.empty()) return out;
  return out.empty() ? listed : out + " (" + listed + ")";
}

Status StatusFromHttp(int http_status, std::string_view what, std::string_view api_message) {
  const std::string msg(api_message);
  const std::string prefix = std::string(what) + ": HTTP " + std::to_string(http_status);
  switch (http_status) {
    case 404:
      return NotFound(prefix + ": " + msg);
    case 409:
      return Conflict(prefix + ": " + msg);
    case 410:
      return Conflict("410 Gone: " + std::string(what) + ": " + msg);
    case 400:
    case 422:
      return InvalidArgument(prefix + ": " + msg);
    case 401:
      return Internal(prefix + " (unauthorized: check vramd's API credentials, the token file): " + msg);
    case 403:
      return Internal(prefix + " (forbidden: check vramd's RBAC role and service account): " + msg);
    case 429:
      return Unavailable(prefix + " (throttled): " + msg);
    default:
      if (http_status >= 500 && http_status <= 599) return Unavailable(prefix + ": " + msg);
      return Internal(prefix + ": " + msg);
  }
}

}  // namespace vramd::kube
