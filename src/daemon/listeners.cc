#include "daemon/listeners.h"

#include "daemon/options.h"

namespace vramd::daemon {

Result<std::unique_ptr<Listeners>> Listeners::Create(const config::Config& cfg, metrics::Registry* registry) {
  Result<http::ServerOptions> main_opts = ServerOptionsFrom(cfg);
  if (!main_opts.ok()) return main_opts.status();
  Result<std::optional<http::ServerOptions>> api_opts = ApiServerOptionsFrom(cfg);
  if (!api_opts.ok()) return api_opts.status();
  Result<std::optional<http::ServerOptions>> admission_opts = AdmissionServerOptionsFrom(cfg);
  if (!admission_opts.ok()) return admission_opts.status();
  std::unique_ptr<Listeners> l(new Listeners());
  l->scheme_ = cfg.tls_cert_file.empty() ? "http" : "https";
  l->main_opts_ = *main_opts;
  l->main_ = std::make_unique<http::Server>(*main_opts, registry);
  if (*api_opts) {
    l->api_opts_ = **api_opts;
    l->api_ = std::make_unique<http::Server>(**api_opts, registry);
  }
  if (*admission_opts) {
    l->admission_opts_ = **admission_opts;
    l->admission_ = std::make_unique<http::Server>(**admission_opts, registry);
  }
  return l;
}

void Listeners::Register(const http::ApiServices& api, gpulock::LockService* locks) {
  http::RegisterRoutes(*main_, api);
  const http::LockTargetCheck known = http::LedgerLockTargets(api.store);
  std::shared_ptr<http::Authenticator> auth =
      api.auth ? api.auth : std::make_shared<http::Authenticator>(http::SharedTokenOnly(api.api_token),
                                                                 nullptr, api.clock);
  http::RegisterLockRoutes(*main_, locks, auth, known);
  if (api_) {
    http::RegisterApiListenerRoutes(*api_, api);
    http::RegisterLockRoutes(*api_, locks, auth, known);
  }
}

void Listeners::RegisterAdmission(http::AdmissionServices admission) {
  http::RegisterAdmissionRoutes(admission_ ? *admission_ : api_ ? *api_ : *main_, std::move(admission));
}

Status Listeners::Start() {
  if (Status s = main_->Start(); !s.ok()) return s;
  if (api_) {
    if (Status s = api_->Start(); !s.ok()) {
      main_->Stop();
      return Status(s.code(), "api_listen: " + s.message());
    }
  }
  if (admission_) {
    if (Status s = admission_->Start(); !s.ok()) {
      if (api_) api_->Stop();
      main_->Stop();
      return Status(s.code(), "admission.listen: " + s.message());
    }
  }
  return Status::Ok();
}

void Listeners::Stop() {
  if (admission_) admission_->Stop();
  if (api_) api_->Stop();
  main_->Stop();
}

Status Listeners::ReloadTls() {
  Status s = main_->ReloadTls();
  if (api_) {
    if (Status a = api_->ReloadTls(); !a.ok() && s.ok()) s = Status(a.code(), "api_listen: " + a.message());
  }
  if (admission_) {
    if (Status a = admission_->ReloadTls(); !a.ok() && s.ok()) {
      s = Status(a.code(), "admission.listen: " + a.message());
    }
  }
  return s;
}

std::string Listeners::Describe() const {
  auto url = [this](const http::ServerOptions& o, int port) {
    std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
    return scheme_ + "://" + host + ":" + std::to_string(port);
  };
  std::string d = url(main_opts_, main_->port());
  if (api_) d += " (api: " + url(*api_opts_, api_->port()) + ")";
  if (admission_) d += " (admission: " + url(*admission_opts_, admission_->port()) + ")";
  return d;
}

}  // namespace vramd::daemon
