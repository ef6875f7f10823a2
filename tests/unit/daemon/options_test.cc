// The config mapped onto each component's options (src/daemon/options.cc).
#include <gtest/gtest.h>

#include "daemon/options.h"

namespace vramd::daemon {
namespace {

TEST(DaemonOptions, ValkeyTakesTheConfigAndTheSecretsAndCapsTheConnectTimeoutAtOneSecond) {
  config::Config cfg;
  cfg.valkey_url = "redis://10.0.0.1:6380/2";
  cfg.valkey_username = "vramd";
  cfg.key_prefix = "x:";
  cfg.valkey_pool_size = 5;
  cfg.valkey_timeout_ms = 2500;
  cfg.valkey_min_replicas_ack = 1;
  cfg.valkey_wait_timeout_ms = 300;
  Secrets secrets;
  secrets.valkey_password = "pw";
  secrets.valkey_sentinel_password = "spw";
  store::ValkeyOptions v = ValkeyOptionsFrom(cfg, secrets);
  EXPECT_EQ(v.url, "redis://10.0.0.1:6380/2");
  EXPECT_EQ(v.username, "vramd");
  EXPECT_EQ(v.key_prefix, "x:");
  EXPECT_EQ(v.pool_size, 5);
  EXPECT_EQ(v.connect_timeout.count(), 1000) << "capped: a dead host is detected in a second";
  EXPECT_EQ(v.command_timeout.count(), 2500);
  EXPECT_EQ(v.min_replicas_ack, 1);
  EXPECT_EQ(v.wait_timeout.count(), 300);
  EXPECT_EQ(v.password, "pw");
  EXPECT_EQ(v.sentinel_password, "spw");

  cfg.valkey_timeout_ms = 400;
  EXPECT_EQ(ValkeyOptionsFrom(cfg, secrets).connect_timeout.count(), 400) << "below the cap: the timeout itself";
}

TEST(DaemonOptions, ExtenderAndRoutesShareTheResourceAndThePolicy) {
  config::Config cfg;
  cfg.resource_name = "example.com/vram";
  cfg.score_policy = ledger::ScorePolicy::kBinpack;
  cfg.usage_max_age_ms = 12'345;
  cfg.bind_mark_window_ms = 7;
  extender::Options e = ExtenderOptionsFrom(cfg);
  EXPECT_EQ(e.resource_name, "example.com/vram");
  EXPECT_EQ(e.policy.score, ledger::ScorePolicy::kBinpack);
  EXPECT_EQ(e.policy.usage_max_age_ms, 12'345);
  EXPECT_EQ(e.bind_in_flight_ttl_ms, config::BindInFlightMs(cfg));
  EXPECT_EQ(e.bound_mark_window_ms, 7);

  Secrets secrets;
  secrets.api_token = "t0ken";
  http::ApiServices api = ApiSettingsFrom(cfg, secrets);
  EXPECT_EQ(api.resource_name, "example.com/vram");
  EXPECT_EQ(api.policy.score, ledger::ScorePolicy::kBinpack);
  EXPECT_EQ(api.usage_max_age_ms, 12'345);
  EXPECT_EQ(api.api_token, "t0ken");
  EXPECT_EQ(api.extender, nullptr) << "the components are the caller's to add";
}

TEST(DaemonOptions, KubeTakesTheApiServerAndTheResource) {
  config::Config cfg;
  cfg.kube_api = "https://10.0.0.2:6443";
  cfg.kube_token_file = "/t";
  cfg.kube_ca_file = "/ca";
  cfg.resource_name = "example.com/vram";
  cfg.kube_timeout_ms = 3000;
  cfg.kube_max_connections = 24;
  kube::Options k = KubeOptionsFrom(cfg);
  EXPECT_EQ(k.api_url, "https://10.0.0.2:6443");
  EXPECT_EQ(k.token_file, "/t");
  EXPECT_EQ(k.ca_file, "/ca");
  EXPECT_EQ(k.resource_name, "example.com/vram");
  EXPECT_EQ(k.timeout_ms, 3000);
  EXPECT_EQ(k.max_connections, 24);
}

TEST(DaemonOptions, ServerSplitsTheListenAddressAndRejectsABadOne) {
  config::Config cfg;
  cfg.listen = "[::1]:9443";
  cfg.http_threads = 12;
  cfg.http_max_connections = 40;
  cfg.http_admission_wait_ms = 250;
  cfg.max_body_bytes = 1 << 20;
  cfg.read_timeout_ms = 700;
  cfg.http_request_timeout_ms = 3000;
  cfg.tls_cert_file = "/c";
  cfg.tls_key_file = "/k";
  cfg.tls_client_ca_file = "/ca";
  Result<http::ServerOptions> s = ServerOptionsFrom(cfg);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->host, "::1");
  EXPECT_EQ(s->port, 9443);
  EXPECT_EQ(s->threads, 12);
  EXPECT_EQ(s->max_connections, 40);
  EXPECT_EQ(s->admission_wait_ms, 250);
  EXPECT_EQ(s->max_body_bytes, size_t{1} << 20);
  EXPECT_EQ(s->read_timeout_ms, 700);
  EXPECT_EQ(s->request_timeout_ms, 3000);
  EXPECT_EQ(s->name, "listen");
  EXPECT_EQ(s->tls_cert_file, "/c");
  EXPECT_EQ(s->tls_key_file, "/k");
  EXPECT_EQ(s->tls_client_ca_file, "/ca");

  cfg.listen = "no-port";
  EXPECT_FALSE(ServerOptionsFrom(cfg).ok());
}

TEST(DaemonOptions, ApiListenerIsOffUnlessSetAndNeverAsksForAClientCertificate) {
  config::Config cfg;
  Result<std::optional<http::ServerOptions>> none = ApiServerOptionsFrom(cfg);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());

  cfg.listen = "0.0.0.0:8443";
  cfg.api_listen = "0.0.0.0:8444";
  cfg.http_threads = 6;
  cfg.read_timeout_ms = 900;
  cfg.tls_cert_file = "/c";
  cfg.tls_key_file = "/k";
  cfg.tls_client_ca_file = "/ca";
  Result<std::optional<http::ServerOptions>> api = ApiServerOptionsFrom(cfg);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  ASSERT_TRUE(api->has_value());
  const http::ServerOptions& s = **api;
  EXPECT_EQ(s.host, "0.0.0.0");
  EXPECT_EQ(s.port, 8444);
  EXPECT_EQ(s.threads, 6);
  EXPECT_EQ(s.read_timeout_ms, 900);
  EXPECT_EQ(s.name, "api_listen") << "its own connection metrics";
  EXPECT_EQ(s.tls_cert_file, "/c") << "the same server certificate as listen";
  EXPECT_EQ(s.tls_key_file, "/k");
  EXPECT_EQ(s.tls_client_ca_file, "") << "no client certificate asked for";
  EXPECT_EQ(ServerOptionsFrom(cfg)->tls_client_ca_file, "/ca") << "listen keeps asking for one";

  cfg.api_listen = "no-port";
  Result<std::optional<http::ServerOptions>> bad = ApiServerOptionsFrom(cfg);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("api_listen"), std::string::npos) << bad.status().message();
}

TEST(DaemonOptions, AdmissionListenerIsOffUnlessSetAndNeverAsksForAClientCertificate) {
  config::Config cfg;
  Result<std::optional<http::ServerOptions>> none = AdmissionServerOptionsFrom(cfg);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());

  cfg.listen = "0.0.0.0:8443";
  cfg.api_listen = "0.0.0.0:8081";
  cfg.admission_listen = "0.0.0.0:9443";
  cfg.http_threads = 5;
  cfg.tls_cert_file = "/c";
  cfg.tls_key_file = "/k";
  cfg.tls_client_ca_file = "/ca";
  cfg.tls_client_names = "vramd-scheduler";
  Result<std::optional<http::ServerOptions>> adm = AdmissionServerOptionsFrom(cfg);
  ASSERT_TRUE(adm.ok()) << adm.status().ToString();
  ASSERT_TRUE(adm->has_value());
  const http::ServerOptions& s = **adm;
  EXPECT_EQ(s.host, "0.0.0.0");
  EXPECT_EQ(s.port, 9443);
  EXPECT_EQ(s.threads, 5);
  EXPECT_EQ(s.name, "admission_listen") << "its own connection metrics";
  EXPECT_EQ(s.tls_cert_file, "/c") << "the same server certificate (the caBundle names its CA)";
  EXPECT_EQ(s.tls_key_file, "/k");
  EXPECT_EQ(s.tls_client_ca_file, "") << "the API server presents no client certificate to a webhook";
  EXPECT_TRUE(s.tls_client_names.empty());
  EXPECT_EQ(ServerOptionsFrom(cfg)->tls_client_ca_file, "/ca") << "listen keeps asking for one";

  cfg.admission_listen = "no-port";
  Result<std::optional<http::ServerOptions>> bad = AdmissionServerOptionsFrom(cfg);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("admission.listen"), std::string::npos) << bad.status().message();
}

TEST(DaemonOptions, LongPollingLockCallsLeaveHalfTheWorkersFree) {
  config::Config cfg;
  for (auto [threads, waiting] : {std::pair{8, 3}, {2, 0}, {16, 7}, {1, 0}}) {
    cfg.http_threads = threads;
    EXPECT_EQ(LockOptionsFrom(cfg).max_waiting_calls, waiting) << threads << " threads";
  }
}

}  // namespace
}  // namespace vramd::daemon
