#include "daemon/options.h"

#include <algorithm>
#include <chrono>

namespace vramd::daemon {

store::ValkeyOptions ValkeyOptionsFrom(const config::Config& cfg, const Secrets& secrets) {
  store::ValkeyOptions v;
  v.url = cfg.valkey_url;
  v.username = cfg.valkey_username;
  v.key_prefix = cfg.key_prefix;
  v.pool_size = cfg.valkey_pool_size;
  v.connect_timeout = std::chrono::milliseconds(std::min(cfg.valkey_timeout_ms, 1000));
  v.command_timeout = std::chrono::milliseconds(cfg.valkey_timeout_ms);
  v.password = secrets.valkey_password;
  v.min_replicas_ack = cfg.valkey_min_replicas_ack;
  v.wait_timeout = std::chrono::milliseconds(cfg.valkey_wait_timeout_ms);
  v.sentinel_password = secrets.valkey_sentinel_password;
  return v;
}

kube::Options KubeOptionsFrom(const config::Config& cfg) {
  kube::Options k;
  k.api_url = cfg.kube_api;
  k.token_file = cfg.kube_token_file;
  k.ca_file = cfg.kube_ca_file;
  k.resource_name = cfg.resource_name;
  k.timeout_ms = cfg.kube_timeout_ms;
  k.max_connections = cfg.kube_max_connections;
  return k;
}

extender::Options ExtenderOptionsFrom(const config::Config& cfg) {
  extender::Options e;
  e.resource_name = cfg.resource_name;
  e.policy.score = cfg.score_policy;
  e.policy.usage_max_age_ms = cfg.usage_max_age_ms;
  e.policy.max_peak_ratio = cfg.burst_max_peak_ratio;
  e.policy.victim_classes = cfg.burst_victim_classes;
  e.bind_in_flight_ttl_ms = config::BindInFlightMs(cfg);
  e.rebuild_quiet_ms = config::RebuildQuietMs(cfg);
  e.bound_mark_window_ms = cfg.bind_mark_window_ms;
  return e;
}

Result<http::ServerOptions> ServerOptionsFrom(const config::Config& cfg) {
  http::ServerOptions s;
  if (Status st = http::ParseListen(cfg.listen, &s.host, &s.port); !st.ok()) return st;
  s.threads = cfg.http_threads;
  s.max_connections = cfg.http_max_connections;
  s.admission_wait_ms = cfg.http_admission_wait_ms;
  s.max_body_bytes = static_cast<size_t>(cfg.max_body_bytes);
  s.read_timeout_ms = cfg.read_timeout_ms;
  s.request_timeout_ms = cfg.http_request_timeout_ms;
  s.tls_cert_file = cfg.tls_cert_file;
  s.tls_key_file = cfg.tls_key_file;
  s.tls_client_ca_file = cfg.tls_client_ca_file;
  if (Result<std::vector<std::string>> names = config::ParseCertNameList(cfg.tls_client_names); names.ok()) {
    s.tls_client_names = std::move(*names);
  }
  return s;
}

Result<std::optional<http::ServerOptions>> ApiServerOptionsFrom(const config::Config& cfg) {
  if (cfg.api_listen.empty()) return std::optional<http::ServerOptions>();
  config::Config api = cfg;
  api.listen = cfg.api_listen;
  api.tls_client_ca_file.clear();
  Result<http::ServerOptions> s = ServerOptionsFrom(api);
  if (!s.ok()) return Status(s.status().code(), "api_listen: " + s.status().message());
  s->name = "api_listen";
  return std::optional<http::ServerOptions>(std::move(s).value());
}

Result<std::optional<http::ServerOptions>> AdmissionServerOptionsFrom(const config::Config& cfg) {
  if (cfg.admission_listen.empty()) return std::optional<http::ServerOptions>();
  config::Config adm = cfg;
  adm.listen = cfg.admission_listen;
  adm.tls_client_ca_file.clear();  // the API server presents no client certificate to a webhook
  adm.tls_client_names.clear();
  Result<http::ServerOptions> s = ServerOptionsFrom(adm);
  if (!s.ok()) return Status(s.status().code(), "admission.listen: " + s.status().message());
  s->name = "admission_listen";
  return std::optional<http::ServerOptions>(std::move(s).value());
}

gpulock::LockOptions LockOptionsFrom(const config::Config& cfg) {
  gpulock::LockOptions l;
  l.max_waiting_calls = (cfg.http_threads - 1) / 2;  // long polls waiting at once (each holds a connection)
  return l;
}

http::AdmissionServices AdmissionOptionsFrom(const config::Config& cfg) {
  http::AdmissionServices a;
  a.resource_name = cfg.resource_name;
  a.policy.victim_classes = cfg.burst_victim_classes;
  a.policy.scheduler_name = cfg.admission_scheduler_name;
  a.policy.runtime_class = cfg.admission_runtime_class;
  if (Result<std::vector<std::string>> users = config::ParseUserList(cfg.admission_vramd_users); users.ok()) {
    a.policy.vramd_users.insert(users->begin(), users->end());
  }
  a.policy.opt_out_label = "vramd.io/direct-bind=allowed";
  return a;
}

http::AuthOptions AuthOptionsFrom(const config::Config& cfg, const Secrets& secrets) {
  http::AuthOptions a = http::SharedTokenOnly(secrets.api_token);
  a.identities = cfg.auth_identities;
  a.audience = cfg.auth_audience;
  if (Result<std::pair<std::string, std::string>> sa = config::ParseServiceAccount(cfg.auth_agent_service_account);
      sa.ok()) {
    a.agent_namespace = sa->first;
    a.agent_service_account = sa->second;
  }
  return a;
}

http::ApiServices ApiSettingsFrom(const config::Config& cfg, const Secrets& secrets) {
  http::ApiServices a;
  a.usage_max_age_ms = cfg.usage_max_age_ms;
  a.api_token = secrets.api_token;
  a.resource_name = cfg.resource_name;
  a.policy = ExtenderOptionsFrom(cfg).policy;
  return a;
}

}  // namespace vramd::daemon
