// The HTTP(S) server: one port for the extender verbs, the /v1 API, health
// and metrics. Routes are registered by the owner; handlers get the request
// body and path parameters and return a status, content type and body.
// The server owns its listener thread; Stop() is immediate and waits for it.
// Slow or idle clients cannot starve the others (issue 30): each connection
// has its own thread, up to max_connections, and every wait on a client is
// bounded (src/http/guarded_server.h).
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
  std::string name = "listen";     // the `listener` label of the connection metrics
  // Each open connection is served on a thread of its own; this many idle
  // threads are kept for the next connections, the others end.
  int threads = 8;
  // Connections served at once. A new one beyond closes the open connection
  // that has waited longest on its client (idle, still sending its request,
  // or in its TLS handshake), never one being answered; when every one is
  // being answered, the new one waits up to admission_wait_ms for one to
  // end (the accept loop with it), then is refused (503 on plain HTTP).
  int max_connections = 256;
  int admission_wait_ms = 1000;
  size_t max_body_bytes = 4 << 20;
  int read_timeout_ms = 5000;      // one read (or write) waits at most this; also the keep-alive idle time
  // A request's line, headers and body must arrive within this of its first
  // byte (and its answer be written within this of its first byte).
  int request_timeout_ms = 10000;
  int tls_handshake_timeout_ms = 5000;  // from accept to the end of the handshake
  // A connection serves at most this many requests and lives at most this
  // long; then its answer says Connection: close (<= 0: no limit).
  int max_requests_per_connection = 1000;
  int64_t max_connection_age_ms = 300'000;
  std::string tls_cert_file;       // HTTPS when set (with tls_key_file)
  std::string tls_key_file;
  std::string tls_client_ca_file;  // require client certificates when set
  std::vector<std::string> tls_client_names;  // and (non-empty) one naming one of these (CN or DNS SAN)
  int tls_reload_check_ms = 2000;  // how often the cert/key files are checked for changes
};

// What one route accepts beyond the server's limits. Both apply before the
// request's body is read.
struct RouteLimits {
  // 0: the server's max_body_bytes; else the smaller of the two. A larger
  // Content-Length is answered 413 (the body is then dropped unread and the
  // connection closed).
  size_t max_body_bytes = 0;
  // 0: no limit; else at most this many requests of the route are read and
  // answered at once on this server; another waits up to 2 s for its turn,
  // then is answered 503.
  int max_concurrent = 0;
};

class Server {
 public:
  Server(ServerOptions opts, metrics::Registry* registry);
  ~Server();

  // Registers a route. `pattern` may contain `{name}` segments. `verb` labels
  // the request metrics (e.g. "filter"); routes with the same verb share series.
  void Route(const std::string& method, const std::string& pattern, const std::string& verb, Handler h,
             RouteLimits limits = {});

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
