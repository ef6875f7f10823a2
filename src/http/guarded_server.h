// cpp-httplib's server with vramd's own connection handling (issue 30):
// httplib 0.11 serves a connection on one of a fixed pool of workers for its
// whole life, with timeouts per read only, and queues accepted sockets
// without bound, so a few clients that keep connections open or send a byte
// every few seconds hold every worker. GuardedServer overrides the
// per-connection step (httplib::Server::process_and_close_socket) and runs
// its own loop around httplib's request parser (process_request):
//
//   - every connection has a thread of its own, at most max_connections per
//     listener (connections.h: who is closed to make room, who waits for
//     room and who is refused);
//   - between requests it waits at most idle_timeout_ms for the next one;
//   - a request's line, headers and body must arrive within
//     request_timeout_ms of its first byte, each read waiting at most
//     read_timeout_ms; its answer must be written within request_timeout_ms
//     of its first byte, each write waiting at most write_timeout_ms;
//   - a connection serves at most max_requests requests and lives at most
//     max_age_ms (then its answer says Connection: close);
//   - with TLS, the handshake is done here on a non-blocking socket and must
//     finish within handshake_timeout_ms; the SSL_CTX is TlsContext's, so a
//     certificate reload swaps it whole.
//
// Handlers reach the connection serving them through CurrentRequest().
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "http/connections.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/status.h"

namespace vramd::http {

struct GuardOptions {
  std::string listener = "listen";  // the `listener` label of the connection metrics
  int max_connections = 256;
  // At max_connections with every connection being answered, a new one
  // waits this long for one to end before it is refused (0: at once).
  int admission_wait_ms = 1000;
  int keep_idle_threads = 8;
  int read_timeout_ms = 5000;
  int write_timeout_ms = 5000;
  int idle_timeout_ms = 5000;
  int request_timeout_ms = 10000;
  int handshake_timeout_ms = 5000;
  int max_requests = 1000;
  int64_t max_age_ms = 300'000;
  int backlog = 512;  // the listening socket's accept backlog
};

// The server certificate, key and (optional) client CA as one SSL_CTX;
// Reload builds a new one from the files and swaps it in (connections under
// way keep theirs). Thread-safe.
class TlsContext {
 public:
  // With a client CA and `client_names`, a client certificate is accepted
  // only when it names one of them (its CN or a DNS subjectAltName; issue
  // 33: a shared CA signs more certificates than the scheduler's).
  TlsContext(std::string cert_file, std::string key_file, std::string client_ca_file,
             std::vector<std::string> client_names = {});
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool ok() const;
  // Why the files could not be loaded at construction (ok when they could).
  const Status& load_status() const { return load_status_; }
  // Re-reads the files; on failure the previous context stays.
  Status Reload();
  // A server SSL on `fd` (null when there is no valid context).
  SSL* NewSsl(int fd);
  // When the certificate served now expires (its notAfter, seconds since
  // the epoch); 0 without one.
  int64_t NotAfterSeconds() const;

 private:
  Result<SSL_CTX*> Build() const;

  const std::string cert_, key_, ca_;
  const std::vector<std::string> client_names_;
  Status load_status_;
  mutable Mutex mu_;
  SSL_CTX* ctx_ GUARDED_BY(mu_) = nullptr;
};

// The request the calling thread serves, seen from its handlers (the
// pre-routing handler runs after the headers and before the body is read;
// the route handlers after the body is read).
class RequestScope {
 public:
  // The request is read; its handler runs (it is no longer a connection that
  // waits on its client, so it is never closed to make room).
  void MarkBusy();
  // The request is answered without reading its body: after the answer, up
  // to `unread_body_bytes` are read and dropped (so that the client reads the
  // answer instead of a reset; within the request's deadline), then the
  // connection is closed.
  void CloseAfter(uint64_t unread_body_bytes);
  // Runs `f` once the request is done, whether or not its body was read.
  void AtEnd(std::function<void()> f);
  // The request's deadline (its first byte + request_timeout_ms).
  conn::TimePoint deadline() const { return deadline_; }

 private:
  friend class GuardedServer;
  conn::ConnectionTable* table_ = nullptr;
  uint64_t id_ = 0;
  conn::TimePoint deadline_ = conn::kNoDeadline;
  bool close_after_ = false;
  uint64_t discard_ = 0;
  std::vector<std::function<void()>> at_end_;
};

// Null outside a request served by a GuardedServer.
RequestScope* CurrentRequest();

class GuardedServer : public httplib::Server {
 public:
  // `tls` null: plain HTTP.
  GuardedServer(GuardOptions opts, std::shared_ptr<TlsContext> tls, metrics::Registry* registry);
  ~GuardedServer() override;

  bool is_valid() const override;
  // After bind_to_port: the accept backlog becomes opts.backlog (httplib
  // listens with 5).
  void WidenBacklog();
  // Stops serving: connections waiting for a request end now, the listener
  // closes (httplib's stop()), and listen_after_bind returns once the
  // connections under way have finished their request.
  void Shutdown();

  const GuardOptions& options() const { return opts_; }

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Serves the admitted connection on `fd` until it ends (the caller closes it).
  void Serve(int fd);
  void Refuse(int fd);
  void Closed(const char* reason);

  const GuardOptions opts_;
  std::shared_ptr<TlsContext> tls_;
  conn::ConnectionTable table_;
  metrics::Gauge* open_gauge_;
  metrics::Family<metrics::Counter>* closed_;
  metrics::Counter* waited_;
};

}  // namespace vramd::http
