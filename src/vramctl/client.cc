#include "client.h"

#include <httplib.h>

#include <chrono>

namespace vramctl {
namespace {

Answer ToAnswer(const Target& t, const httplib::Result& res) {
  Answer a;
  if (!res) {
    a.error = "cannot reach vramd at " + t.scheme_host_port + ": " + httplib::to_string(res.error());
    return a;
  }
  a.reached = true;
  a.status = res->status;
  a.text = res->body;
  a.body = nlohmann::json::parse(res->body, nullptr, false);
  a.json = !a.body.is_discarded();
  if (!a.json) a.body = nlohmann::json::object();
  if (a.status != 200) {
    a.error = a.body.is_object() && a.body.contains("error") && a.body["error"].is_string()
                  ? a.body["error"].get<std::string>()
                  : "HTTP " + std::to_string(a.status);
  }
  return a;
}

}  // namespace

std::string Describe(const Answer& a) {
  if (!a.reached) return a.error;
  if (a.status == 401) return "vramd refused the token (HTTP 401): " + a.error + " (check --token-file)";
  return "HTTP " + std::to_string(a.status) + ": " + a.error;
}

Client::Client(const Target& t, int64_t read_timeout_ms)
    : target_(t), cli_(std::make_unique<httplib::Client>(t.scheme_host_port)) {
  cli_->set_connection_timeout(3, 0);
  cli_->set_write_timeout(std::chrono::seconds(5));
  SetReadTimeoutMs(read_timeout_ms);
  if (!t.token.empty()) cli_->set_bearer_token_auth(t.token.c_str());
}

Client::~Client() = default;

void Client::SetReadTimeoutMs(int64_t ms) { cli_->set_read_timeout(std::chrono::milliseconds(ms)); }

Answer Client::Get(const std::string& path_and_query) { return ToAnswer(target_, cli_->Get(path_and_query)); }

Answer Client::Post(const std::string& path, const nlohmann::json& body) {
  return PostText(path, body.dump(), "application/json");
}

Answer Client::PostText(const std::string& path, const std::string& body, const char* content_type) {
  return ToAnswer(target_, cli_->Post(path.c_str(), body, content_type));
}

void Client::Stop() { cli_->stop(); }

std::string QueryParam(const std::string& s) { return httplib::detail::encode_query_param(s); }

}  // namespace vramctl
