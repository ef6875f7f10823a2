// The REST SecretReader (secret_reader.h): one GET per call, a connection of
// its own (ensure-secrets reads at most three Secrets, once).
#include "vramd/kube/secret_reader.h"

#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "kube/api_status.h"
#include "kube/api_url.h"
#include "kube/token_source.h"

#ifndef VRAMD_VERSION
#define VRAMD_VERSION "dev"
#endif

namespace vramd::kube {
namespace {

constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

int Sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

class RestSecretReader final : public SecretReader {
 public:
  RestSecretReader(Options opts, ApiEndpoint endpoint, std::string ca_file, std::unique_ptr<TokenSource> token)
      : opts_(std::move(opts)), endpoint_(std::move(endpoint)), ca_file_(std::move(ca_file)), token_(std::move(token)) {}

  Result<Secret> GetSecret(const std::string& ns, const std::string& name) override {
    const std::string what = "get secret " + ns + "/" + name;
    std::unique_ptr<httplib::ClientImpl> c;
    if (endpoint_.tls) {
      auto ssl = std::make_unique<httplib::SSLClient>(endpoint_.host, endpoint_.port);
      if (!ca_file_.empty()) ssl->set_ca_cert_path(ca_file_);
      ssl->enable_server_certificate_verification(true);
      c = std::move(ssl);
    } else {
      c = std::make_unique<httplib::ClientImpl>(endpoint_.host, endpoint_.port);
    }
    const time_t s = opts_.timeout_ms / 1000, us = (opts_.timeout_ms % 1000) * 1000;
    c->set_connection_timeout(s, us);
    c->set_read_timeout(s, us);
    c->set_write_timeout(s, us);
    c->set_url_encode(false);
    httplib::Headers h{{"Accept", "application/json"}, {"User-Agent", "vramd/" VRAMD_VERSION}};
    if (std::string token = token_->Get(); !token.empty()) h.emplace("Authorization", "Bearer " + token);
    const std::string path =
        endpoint_.base_path + "/api/v1/namespaces/" + PercentEncode(ns) + "/secrets/" + PercentEncode(name);
    httplib::Result res = c->Get(path, h);
    if (!res) return Unavailable(what + ": " + endpoint_.Origin() + ": transport error: " + httplib::to_string(res.error()));
    if (res->status < 200 || res->status > 299) return StatusFromHttp(res->status, what, ApiMessage(res->body));
    Result<Secret> secret = SecretFromJson(res->body);
    if (!secret.ok()) return Internal(what + ": " + secret.status().message());
    return secret;
  }

 private:
  const Options opts_;
  const ApiEndpoint endpoint_;
  const std::string ca_file_;
  const std::unique_ptr<TokenSource> token_;
};

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

Result<std::unique_ptr<SecretReader>> NewSecretReader(const Options& opts) {
  if (opts.timeout_ms <= 0) return InvalidArgument("kube client: timeout_ms must be > 0");
  std::string url = opts.api_url, token_file = opts.token_file, ca_file = opts.ca_file;
  if (url.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || *host == '\0') {
      return InvalidArgument("kube client: no API URL configured and not running in a cluster "
                             "(KUBERNETES_SERVICE_HOST is unset)");
    }
    std::string h = host;
    if (h.find(':') != std::string::npos) h = "[" + h + "]";
    url = "https://" + h + ":" + (port != nullptr && *port != '\0' ? port : "443");
    if (token_file.empty()) token_file = std::string(kServiceAccountDir) + "/token";
    if (ca_file.empty()) ca_file = std::string(kServiceAccountDir) + "/ca.crt";
  }
  Result<ApiEndpoint> ep = ParseApiUrl(url);
  if (!ep.ok()) return ep.status();
  if (!ep->tls) ca_file.clear();
  auto token = std::make_unique<TokenSource>(token_file);
  if (Status s = token->Load(); !s.ok()) return InvalidArgument("kube client: " + s.message());
  return std::unique_ptr<SecretReader>(
      std::make_unique<RestSecretReader>(opts, std::move(ep).value(), ca_file, std::move(token)));
}

}  // namespace vramd::kube
