#include "client.h"

#include <httplib.h>
#include <openssl/x509.h>

#include <chrono>

namespace vramctl {
namespace {

bool IsHttps(const Target& t) { return t.scheme_host_port.rfind("https://", 0) == 0; }

// What to do about a failed TLS handshake, from the error and the verify
// result; "" when the error is not about TLS.
std::string TlsHint(const Target& t, httplib::Error e, long verify_result) {
  if (!IsHttps(t)) return "";
  switch (e) {
    case httplib::Error::SSLServerVerification: {
      std::string why = verify_result != X509_V_OK ? X509_verify_cert_error_string(verify_result) : "hostname mismatch";
      return "; vramd's certificate is not trusted (" + why + "): pass --cacert FILE with the CA that signed it" +
             (t.tls.ca_file.empty() ? "" : " (now " + t.tls.ca_file + ")") + ", or --insecure-skip-tls-verify";
    }
    case httplib::Error::SSLLoadingCerts:
      return "; cannot load the CA file " + (t.tls.ca_file.empty() ? std::string("(system CAs)") : t.tls.ca_file);
    case httplib::Error::SSLConnection:
    case httplib::Error::Read:
    case httplib::Error::Write:
      return t.tls.cert_file.empty()
                 ? "; the TLS connection failed: if vramd requires a client certificate, pass --cert FILE --key FILE"
                 : "; the TLS connection failed: is " + t.tls.cert_file + " signed by a CA vramd trusts?";
    default:
      return "";
  }
}

Answer ToAnswer(const Target& t, const httplib::Result& res, long verify_result) {
  Answer a;
  if (!res) {
    a.error = "cannot reach vramd at " + t.scheme_host_port + ": " + httplib::to_string(res.error()) +
              TlsHint(t, res.error(), verify_result);
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
    : target_(t),
      cli_(IsHttps(t) && !t.tls.cert_file.empty()
               ? std::make_unique<httplib::Client>(t.scheme_host_port, t.tls.cert_file, t.tls.key_file)
               : std::make_unique<httplib::Client>(t.scheme_host_port)) {
  if (IsHttps(t)) {
    if (!t.tls.ca_file.empty()) cli_->set_ca_cert_path(t.tls.ca_file);
    cli_->enable_server_certificate_verification(!t.tls.skip_verify);
  }
  cli_->set_connection_timeout(3, 0);
  cli_->set_write_timeout(std::chrono::seconds(5));
  SetReadTimeoutMs(read_timeout_ms);
  if (!t.token.empty()) cli_->set_bearer_token_auth(t.token.c_str());
}

Client::~Client() = default;

void Client::SetReadTimeoutMs(int64_t ms) { cli_->set_read_timeout(std::chrono::milliseconds(ms)); }

Answer Client::Get(const std::string& path_and_query) { return Done(cli_->Get(path_and_query)); }

Answer Client::Post(const std::string& path, const nlohmann::json& body) {
  return PostText(path, body.dump(), "application/json");
}

Answer Client::PostText(const std::string& path, const std::string& body, const char* content_type) {
  return Done(cli_->Post(path.c_str(), body, content_type));
}

Answer Client::Done(const httplib::Result& res) {
  if (!cli_->is_valid()) {
    Answer a;
    a.error = "cannot use the client certificate " + target_.tls.cert_file + " with the key " + target_.tls.key_file +
              " (not PEM, or they do not match)";
    return a;
  }
  return ToAnswer(target_, res, IsHttps(target_) ? cli_->get_openssl_verify_result() : 0);
}

void Client::Stop() { cli_->stop(); }

std::string QueryParam(const std::string& s) { return httplib::detail::encode_query_param(s); }

}  // namespace vramctl
