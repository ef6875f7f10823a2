// The HTTP(S) server: one port for the extender verbs, the /v1 API, health
// and metrics. Routes are registered by the owner; handlers get the request
// body and path parameters and return a status, content type and body.
// The server owns its listener thread; Stop() is immediate and waits for it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "vramd/metrics/registry.h"
#include "vramd/status.h"

namespace vramd::http {

struct Request {
  std::string method;
  std::string path;
  std::string_view body;  // the request's body, valid during the handler's call (not copied:
                          // a filter of 5,000 names is ~100 KB)
  std::map<std::string, std::string> params;   // path parameters by name
  std::multimap<std::string, std::string> query;
  std::string authorization;                   // the Authorization header
  std::string request_id;                      // X-Request-Id or generated
};

// vramd's JSON answers are never compressed: kube-scheduler's Go client asks
// for gzip on every call, and cpp-httplib compresses a body whose type is
// exactly "application/json" — on loopback or a cluster network that is
// CPU on both ends for nothing (it was 3 % of vramd's CPU under a
// scheduling burst). With the charset parameter it is sent as is; a test
// asks with Accept-Encoding: gzip and checks the answer stays plain.
inline constexpr const char* kJsonContentType = "application/json; charset=utf-8";

struct Reply {
  int status = 200;
  std::string content_type = kJsonContentType;
  std::string body;
};

using Handler = std::function<Reply(const Request&)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0 = pick a free port
  int threads = 8;
  size_t max_body_bytes = 4 << 20;
  int read_timeout_ms = 5000;
  std::string tls_cert_file;       // HTTPS when set (with tls_key_file)
  std::string tls_key_file;
  std::string tls_client_ca_file;  // require client certificates when set
  int tls_reload_check_ms = 2000;  // how often the cert/key files are checked for changes
};

class Server {
 public:
  Server(ServerOptions opts, metrics::Registry* registry);
  ~Server();

  // Registers a route. `pattern` may contain `{name}` segments. `verb` labels
  // the request metrics (e.g. "filter"); routes with the same verb share series.
  void Route(const std::string& method, const std::string& pattern, const std::string& verb, Handler h);

  // Binds and starts serving on a background thread.
  Status Start();
  int port() const { return port_; }
  // Stops accepting, lets in-flight requests finish, joins the thread.
  void Stop();
  // Re-reads the TLS certificate and key files (SIGHUP, or on change).
  Status ReloadTls();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// Splits "host:port" (host may be [v6]).
Status ParseListen(const std::string& listen, std::string* host, int* port);

// Compares a presented Authorization header with "Bearer <token>" in
// constant time. An empty configured token accepts everything.
bool BearerMatches(const std::string& authorization, const std::string& token);

// The id of the request the calling thread is serving ("" outside a request);
// set by the server around each handler, read by the log formatter.
const std::string& CurrentRequestId();

// A JSON error body: {"error": message}.
Reply ErrorReply(int status, const std::string& message);

}  // namespace vramd::http
