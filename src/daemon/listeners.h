// The daemon's HTTP(S) listeners. `listen` serves every route (the extender
// verbs included) and asks for a client certificate when tls.client_ca_file
// is set; `api_listen`, when set, serves the same routes but the extender
// verbs (http::RegisterApiListenerRoutes), with the same server certificate
// and never asking for a client certificate: with mTLS on `listen`, only a
// client holding a certificate reaches the verbs, while probes, Prometheus,
// node agents and vramctl use `api_listen`. `admission.listen`, when set,
// serves the admission webhook and nothing else (same certificate, no client
// certificate asked for): a NetworkPolicy can open that port to the API
// server without opening the API. All share the request metrics.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "vramd/config/config.h"
#include "vramd/gpulock/locks.h"
#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/metrics/registry.h"
#include "vramd/status.h"

namespace vramd::daemon {

class Listeners {
 public:
  // kInvalidArgument when `listen`, `api_listen` or `admission.listen` is not HOST:PORT.
  static Result<std::unique_ptr<Listeners>> Create(const config::Config& cfg, metrics::Registry* registry);

  // Registers the routes on each listener (before Start).
  void Register(const http::ApiServices& api, gpulock::LockService* locks);
  // The admission webhook: on admission.listen when there is one, else on
  // api_listen (the API server presents no client certificate), else on listen.
  void RegisterAdmission(http::AdmissionServices admission);
  // Binds and serves each; when one cannot, those started are stopped again.
  Status Start();
  // Stops accepting on each and lets in-flight requests finish.
  void Stop();
  // Re-reads the certificate and key on each (SIGHUP).
  Status ReloadTls();
  // "https://0.0.0.0:8443" and, with api_listen, " (api: https://0.0.0.0:8444)",
  // with admission.listen " (admission: https://0.0.0.0:8445)", with the bound
  // ports (after Start).
  std::string Describe() const;

 private:
  Listeners() = default;

  std::string scheme_;
  http::ServerOptions main_opts_;
  std::unique_ptr<http::Server> main_;
  std::optional<http::ServerOptions> api_opts_;  // nullopt: no api_listen
  std::unique_ptr<http::Server> api_;
  std::optional<http::ServerOptions> admission_opts_;  // nullopt: no admission.listen
  std::unique_ptr<http::Server> admission_;
};

}  // namespace vramd::daemon
