#include "client.h"

#include <httplib.h>
#include <netdb.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <chrono>
#include <map>

namespace vramctl {
namespace {

bool IsHttps(const Target& t) { return t.scheme_host_port.rfind("https://", 0) == 0; }

// The URL httplib connects to and its host-to-address map. With
// --tls-server-name the URL names that host (so the certificate is checked
// against it and it is the SNI), mapped to the address of the host in
// --server.
struct Endpoint {
  std::string url;
  std::map<std::string, std::string> addresses;
};

Endpoint EndpointOf(const Target& t) {
  Endpoint e{t.scheme_host_port, {}};
  if (!IsHttps(t) || t.tls.server_name.empty()) return e;
  const std::string rest = t.scheme_host_port.substr(8);
  std::string host, port;  // port: ":8443" or ""
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    host = rest.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    port = close == std::string::npos ? "" : rest.substr(close + 1);
  } else {
    const size_t colon = rest.rfind(':');
    host = rest.substr(0, colon);
    port = colon == std::string::npos ? "" : rest.substr(colon);
  }
  std::string address = host;  // httplib wants a numeric address in the map
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) == 0 && found != nullptr) {
    char buf[NI_MAXHOST];
    if (getnameinfo(found->ai_addr, found->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0) address = buf;
    freeaddrinfo(found);
  }
  e.url = "https://" + t.tls.server_name + port;
  e.addresses[t.tls.server_name] = address;
  return e;
}

std::unique_ptr<httplib::Client> MakeClient(const Target& t) {
  const Endpoint e = EndpointOf(t);
  auto cli = IsHttps(t) && !t.tls.cert_file.empty()
                 ? std::make_unique<httplib::Client>(e.url, t.tls.cert_file, t.tls.key_file)
                 : std::make_unique<httplib::Client>(e.url);
  if (!e.addresses.empty()) cli->set_hostname_addr_map(e.addresses);
  return cli;
}

// What to do about a failed TLS handshake, from the error and the verify
// result; "" when the error is not about TLS.
std::string TlsHint(const Target& t, httplib::Error e, long verify_result) {
  if (!IsHttps(t)) return "";
  switch (e) {
    case httplib::Error::SSLServerVerification:
      if (verify_result == X509_V_OK) {
        return "; hostname mismatch: vramd's certificate does not name " +
               (t.tls.server_name.empty() ? "the host in " + t.scheme_host_port : t.tls.server_name) +
               " (use a name or address it holds, or --tls-server-name NAME)";
      }
      return "; vramd's certificate is not trusted (" + std::string(X509_verify_cert_error_string(verify_result)) +
             "): pass --cacert FILE with the CA that signed it" +
             (t.tls.ca_file.empty() ? "" : " (now " + t.tls.ca_file + ")") + ", or --insecure-skip-tls-verify";
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
    : target_(t), cli_(MakeClient(t)) {
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
