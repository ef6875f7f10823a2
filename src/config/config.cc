#include "vramd/config/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "vramd/config/env_names.h"
#include "vramd/ledger/capacity.h"
#include "vramd/ledger/enforcement.h"
#include "vramd/ledger/pod_request.h"
#include "vramd/ledger/quantity.h"
#include "vramd/store/valkey_url.h"

extern char** environ;

namespace vramd::config {
namespace {

using Setter = std::function<Status(Config*, const std::string&)>;
using Getter = std::function<std::string(const Config&)>;

struct Key {
  KeyInfo info;
  Setter set;
  Getter get;
};

Status BadValue(const std::string& key, const std::string& value, const std::string& why) {
  return InvalidArgument("config key " + key + ": invalid value \"" + value + "\": " + why);
}

Result<int64_t> ParseInt(const std::string& s, int64_t lo, int64_t hi) {
  if (s.empty()) return InvalidArgument("empty");
  size_t i = 0;
  bool neg = s[0] == '-';
  if (neg) i = 1;
  if (i == s.size()) return InvalidArgument("not a whole number");
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return InvalidArgument("not a whole number");
    if (v > (INT64_MAX - 9) / 10) return InvalidArgument("out of range");
    v = v * 10 + (s[i] - '0');
  }
  if (neg) v = -v;
  if (v < lo || v > hi) {
    return InvalidArgument("must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  return v;
}

template <typename T>
Key IntKey(std::string json, std::string flag, std::string env, std::string help, T Config::*field,
           int64_t lo, int64_t hi) {
  Key k;
  k.info = {json, flag, env, "", std::move(help)};
  k.set = [json, field, lo, hi](Config* c, const std::string& v) -> Status {
    Result<int64_t> r = ParseInt(v, lo, hi);
    if (!r.ok()) return BadValue(json, v, r.status().message());
    c->*field = static_cast<T>(*r);
    return Status::Ok();
  };
  k.get = [field](const Config& c) { return std::to_string(c.*field); };
  return k;
}

Key BytesKey(std::string json, std::string flag, std::string env, std::string help, int64_t Config::*field) {
  Key k;
  k.info = {json, flag, env, "", std::move(help)};
  k.set = [json, field](Config* c, const std::string& v) -> Status {
    Result<int64_t> r = ledger::ParseBytes(v);
    if (!r.ok()) return BadValue(json, v, r.status().message());
    c->*field = *r;
    return Status::Ok();
  };
  k.get = [field](const Config& c) { return ledger::FormatBytes(c.*field); };
  return k;
}

// `shown` is how a rejected value is echoed in the error (a URL's password
// is redacted); the value itself when null.
Key StringKey(std::string json, std::string flag, std::string env, std::string help,
              std::string Config::*field, std::function<Status(const std::string&)> check = nullptr,
              std::function<std::string(const std::string&)> shown = nullptr) {
  Key k;
  k.info = {json, flag, env, "", std::move(help)};
  k.set = [json, field, check, shown](Config* c, const std::string& v) -> Status {
    if (check) {
      Status s = check(v);
      if (!s.ok()) return BadValue(json, shown ? shown(v) : v, s.message());
    }
    c->*field = v;
    return Status::Ok();
  };
  k.get = [field](const Config& c) { return c.*field; };
  return k;
}

Key BoolKey(std::string json, std::string flag, std::string env, std::string help, bool Config::*field) {
  Key k;
  k.info = {json, flag, env, "", std::move(help)};
  k.set = [json, field](Config* c, const std::string& v) -> Status {
    if (v == "true" || v == "1" || v == "yes") c->*field = true;
    else if (v == "false" || v == "0" || v == "no") c->*field = false;
    else return BadValue(json, v, "expected true or false");
    return Status::Ok();
  };
  k.get = [field](const Config& c) { return std::string(c.*field ? "true" : "false"); };
  return k;
}

Status CheckHostPort(const std::string& v) {
  auto colon = v.rfind(':');
  if (colon == std::string::npos || colon == 0) return InvalidArgument("expected host:port");
  Result<int64_t> port = ParseInt(v.substr(colon + 1), 0, 65535);
  if (!port.ok()) return InvalidArgument("port " + port.status().message());
  return Status::Ok();
}

Status CheckValkeyUrl(const std::string& v) {
  if (v.rfind("redis://", 0) != 0 && v.rfind("valkey://", 0) != 0 && v.rfind("redis+sentinel://", 0) != 0 &&
      v.rfind("valkey+sentinel://", 0) != 0) {
    return InvalidArgument(
        "expected redis://[user:password@]host:port[/db] or "
        "redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]");
  }
  // The same parser the client uses (the message redacts the password).
  return store::ValidateValkeyUrl(v);
}

Status CheckLogLevel(const std::string& v) {
  for (const char* l : {"trace", "debug", "info", "warn", "error", "off"}) {
    if (v == l) return Status::Ok();
  }
  return InvalidArgument("expected trace, debug, info, warn, error or off");
}

Status CheckNotEmpty(const std::string& v) {
  return v.empty() ? InvalidArgument("must not be empty") : Status::Ok();
}

Status CheckMode(const std::string& v) {
  if (v == "off" || v == "dry-run" || v == "enforce") return Status::Ok();
  return InvalidArgument("expected off, dry-run or enforce");
}

Status CheckIdlePolicy(const std::string& v) {
  if (v == "on-demand" || v == "always") return Status::Ok();
  return InvalidArgument("expected on-demand or always");
}

// A DNS subdomain (RFC 1123), as Kubernetes names a PriorityClass: at most
// 253 characters, dot-separated labels of lowercase letters, digits and '-'
// that begin and end with a letter or digit.
bool IsDnsSubdomain(std::string_view v) {
  if (v.empty() || v.size() > 253) return false;
  size_t label = 0;
  char prev = '.';
  for (char ch : v) {
    const bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
    if (ch == '.') {
      if (label == 0 || prev == '-') return false;
      label = 0;
    } else if (ch == '-') {
      if (label == 0) return false;
      ++label;
    } else if (alnum) {
      ++label;
    } else {
      return false;
    }
    prev = ch;
  }
  return label > 0 && prev != '-';
}

// queues.default_queue: a VramQueue name (an object name: a DNS subdomain).
Status CheckQueueName(const std::string& v) {
  return IsDnsSubdomain(v) ? Status::Ok()
                           : InvalidArgument("expected a VramQueue name (lowercase letters, digits, '-' and '.')");
}

// burst.victim_classes: a comma-separated list of priority class names (a
// JSON array in the config file is joined with commas first).
Key VictimClassesKey() {
  Key k;
  k.info = {"burst.victim_classes", "--burst-victim-classes", "VRAMD_BURST_VICTIM_CLASSES", "",
            "priority classes whose pods are designated victims (comma-separated; pods may also say "
            "vramd.io/disposable: \"true\")"};
  k.set = [](Config* c, const std::string& v) -> Status {
    Result<std::vector<std::string>> names = ParseClassList(v);
    if (!names.ok()) return InvalidArgument("config key burst.victim_classes names nothing: " + names.status().message());
    if (names->empty()) {
      return InvalidArgument("config key burst.victim_classes names nothing: give at least one priority class name");
    }
    c->burst_victim_classes = std::move(*names);
    return Status::Ok();
  };
  k.get = [](const Config& c) {
    std::string out;
    for (const std::string& n : c.burst_victim_classes) out += (out.empty() ? "" : ",") + n;
    return out;
  };
  return k;
}

std::vector<Key> BuildKeys() {
  std::vector<Key> k;
  k.push_back(StringKey("listen", "--listen", "VRAMD_LISTEN", "address and port of the HTTP(S) server",
                        &Config::listen, CheckHostPort));
  k.push_back(StringKey("api_listen", "--api-listen", "VRAMD_API_LISTEN",
                        "address and port of a second listener serving /healthz, /readyz, /metrics and /v1 but "
                        "not the extender verbs (/scheduler/*), never asking for a client certificate; empty: none",
                        &Config::api_listen, [](const std::string& v) {
                          return v.empty() ? Status::Ok() : CheckHostPort(v);
                        }));
  k.push_back(IntKey("http_threads", "--http-threads", "VRAMD_HTTP_THREADS",
                     "idle HTTP worker threads kept per listener for the next connections (each open "
                     "connection has a thread of its own; idle threads beyond these wait 30 s for a connection "
                     "before they end)",
                     &Config::http_threads, 1, 256));
  k.push_back(IntKey("http_max_connections", "--http-max-connections", "VRAMD_HTTP_MAX_CONNECTIONS",
                     "connections each listener serves at once; a new one beyond closes the connection that has "
                     "waited longest on its client (idle, or still sending its request), or, when every one is "
                     "being answered, waits http_admission_wait_ms for one to end and is then refused",
                     &Config::http_max_connections, 1, 16384));
  k.push_back(IntKey("http_admission_wait_ms", "--http-admission-wait-ms", "VRAMD_HTTP_ADMISSION_WAIT_MS",
                     "how long a new connection waits at http_max_connections, every connection being answered, "
                     "for one to end before it is refused (503); later connections wait in the listen backlog "
                     "meanwhile; 0: refused at once",
                     &Config::http_admission_wait_ms, 0, 60'000));
  k.push_back(BytesKey("max_body_bytes", "--max-body-bytes", "VRAMD_MAX_BODY_BYTES",
                       "request bodies above this are answered 413", &Config::max_body_bytes));
  k.push_back(IntKey("read_timeout_ms", "--read-timeout-ms", "VRAMD_READ_TIMEOUT_MS",
                     "a client that sends nothing for this long is disconnected", &Config::read_timeout_ms, 10,
                     600'000));
  k.push_back(IntKey("http_request_timeout_ms", "--http-request-timeout-ms", "VRAMD_HTTP_REQUEST_TIMEOUT_MS",
                     "a request's line, headers and body must arrive within this of its first byte (and its "
                     "answer be written within this), however steadily the bytes come",
                     &Config::http_request_timeout_ms, 100, 600'000));
  k.push_back(StringKey("tls.cert_file", "--tls-cert-file", "VRAMD_TLS_CERT_FILE",
                        "serve HTTPS with this certificate (PEM)", &Config::tls_cert_file));
  k.push_back(StringKey("tls.key_file", "--tls-key-file", "VRAMD_TLS_KEY_FILE", "private key for tls.cert_file",
                        &Config::tls_key_file));
  k.push_back(StringKey("tls.client_ca_file", "--tls-client-ca-file", "VRAMD_TLS_CLIENT_CA_FILE",
                        "require client certificates signed by this CA", &Config::tls_client_ca_file));
  k.push_back(StringKey("tls.client_names", "--tls-client-names", "VRAMD_TLS_CLIENT_NAMES",
                        "comma-separated names a client certificate must hold (its CN or a DNS subjectAltName), "
                        "besides the CA's signature; empty: any certificate the CA signed",
                        &Config::tls_client_names, [](const std::string& v) { return ParseCertNameList(v).status(); }));
  k.push_back(StringKey("api_token_file", "--api-token-file", "VRAMD_API_TOKEN_FILE",
                        "bearer token required by mutating /v1 calls", &Config::api_token_file));
  k.push_back(BoolKey("admission.enabled", "--admission-enabled", "VRAMD_ADMISSION_ENABLED",
                      "serve the admission webhook (POST /admission/{mutate,validate,validate-direct-bind}) on "
                      "admission.listen, else api_listen (listen without either); the API server calls it over TLS",
                      &Config::admission_enabled));
  k.push_back(StringKey("admission.listen", "--admission-listen", "VRAMD_ADMISSION_LISTEN",
                        "address and port of a listener of its own for the admission webhook: it serves "
                        "/admission/* and nothing else (so a NetworkPolicy can open it to the API server alone), "
                        "over TLS, never asking for a client certificate; empty: the webhook is on api_listen "
                        "(listen without it)",
                        &Config::admission_listen, [](const std::string& v) {
                          return v.empty() ? Status::Ok() : CheckHostPort(v);
                        }));
  k.push_back(StringKey("admission.scheduler_name", "--admission-scheduler-name", "VRAMD_ADMISSION_SCHEDULER_NAME",
                        "the schedulerName the webhook sets on VRAM pods left to default-scheduler (empty: never, "
                        "for a default scheduler that carries the extender)",
                        &Config::admission_scheduler_name));
  k.push_back(StringKey("admission.runtime_class", "--admission-runtime-class", "VRAMD_ADMISSION_RUNTIME_CLASS",
                        "the runtimeClassName the webhook sets on VRAM pods without one (empty: never)",
                        &Config::admission_runtime_class));
  k.push_back(StringKey("admission.vramd_users", "--admission-vramd-users", "VRAMD_ADMISSION_VRAMD_USERS",
                        "comma-separated usernames that may write the placement annotations (vramd's own "
                        "ServiceAccount, system:serviceaccount:NS:NAME); nobody else may",
                        &Config::admission_vramd_users,
                        [](const std::string& v) { return ParseUserList(v).status(); }));
  k.push_back(StringKey("enforce.mode", "--enforce-mode", "VRAMD_ENFORCE_MODE",
                        "what node agents do with each pod's granted VRAM (docs/operations.md, \"What vramd "
                        "enforces\"): off (nothing), dry-run (find each pod's cgroup and backend, log what would "
                        "be written, report it), on (write the limits: dmem.max/dmem.min, else NVML's memory limits)",
                        &Config::enforce_mode, [](const std::string& v) {
                          ledger::EnforceMode m{};
                          return ledger::ParseEnforceMode(v, &m) ? Status::Ok()
                                                                 : InvalidArgument("must be off, dry-run or on");
                        }));
  k.push_back(StringKey("enforce.node_modes", "--enforce-node-modes", "VRAMD_ENFORCE_NODE_MODES",
                        "comma-separated KEY=VALUE:MODE node-label rules, the first a node matches giving its "
                        "enforce.mode (a node pool by label); empty: enforce.mode everywhere",
                        &Config::enforce_node_modes,
                        [](const std::string& v) { return ledger::ParseNodeModeRules(v).status(); }));
  k.push_back(BoolKey("auth.identities", "--auth-identities", "VRAMD_AUTH_IDENTITIES",
                      "accept Kubernetes tokens (TokenReview) as identities: usage only from the node's own agent, "
                      "GPU locks owned by the calling pod, reads scoped to what the caller may get; the API token "
                      "then reads only",
                      &Config::auth_identities));
  k.push_back(StringKey("auth.audience", "--auth-audience", "VRAMD_AUTH_AUDIENCE",
                        "the audience identity tokens must be minted for", &Config::auth_audience, CheckNotEmpty));
  k.push_back(StringKey("auth.agent_service_account", "--auth-agent-service-account",
                        "VRAMD_AUTH_AGENT_SERVICE_ACCOUNT",
                        "NAMESPACE/NAME of the node agents' ServiceAccount (with auth.identities, the only "
                        "identity that reports usage)",
                        &Config::auth_agent_service_account, [](const std::string& v) {
                          return v.empty() ? Status::Ok() : ParseServiceAccount(v).status();
                        }));
  k.push_back(StringKey("valkey.url", "--valkey", "VRAMD_VALKEY",
                        "Valkey URL, redis://host:port[/db] or redis+sentinel://host:port,.../master[/db] "
                        "(no password here)",
                        &Config::valkey_url, CheckValkeyUrl,
                        [](const std::string& v) { return store::RedactValkeyUrl(v); }));
  k.push_back(StringKey("valkey.username", "--valkey-username", "VRAMD_VALKEY_USERNAME", "Valkey ACL user",
                        &Config::valkey_username));
  k.push_back(StringKey("valkey.password_file", "--valkey-password-file", "VRAMD_VALKEY_PASSWORD_FILE",
                        "file holding the Valkey password", &Config::valkey_password_file));
  k.push_back(StringKey("valkey.key_prefix", "--key-prefix", "VRAMD_KEY_PREFIX", "prefix of every Valkey key",
                        &Config::key_prefix, CheckNotEmpty));
  k.push_back(IntKey("valkey.pool_size", "--valkey-pool-size", "VRAMD_VALKEY_POOL_SIZE",
                     "Valkey connections", &Config::valkey_pool_size, 1, 128));
  k.push_back(IntKey("valkey.timeout_ms", "--valkey-timeout-ms", "VRAMD_VALKEY_TIMEOUT_MS",
                     "connect and command timeout", &Config::valkey_timeout_ms, 10, 60'000));
  k.push_back(StringKey("valkey.sentinel_password_file", "--valkey-sentinel-password-file",
                        "VRAMD_VALKEY_SENTINEL_PASSWORD_FILE",
                        "file holding the sentinels' own password (redis+sentinel:// only; empty: no AUTH)",
                        &Config::valkey_sentinel_password_file));
  k.push_back(IntKey("valkey.min_replicas_ack", "--valkey-min-replicas-ack", "VRAMD_VALKEY_MIN_REPLICAS_ACK",
                     "replicas that must acknowledge a reservation (WAIT) before bind goes on; 0: none",
                     &Config::valkey_min_replicas_ack, 0, 64));
  k.push_back(IntKey("valkey.wait_timeout_ms", "--valkey-wait-timeout-ms", "VRAMD_VALKEY_WAIT_TIMEOUT_MS",
                     "how long a write waits for valkey.min_replicas_ack replicas", &Config::valkey_wait_timeout_ms,
                     1, 60'000));
  k.push_back(BoolKey("valkey.epoch_watch", "", "VRAMD_VALKEY_EPOCH_WATCH",
                      "follow ledger changes by pub/sub, so filter and prioritize skip the epoch read "
                      "(bind always reads it)",
                      &Config::valkey_epoch_watch));
  k.push_back(StringKey("resource_name", "--resource-name", "VRAMD_RESOURCE_NAME",
                        "extended resource that carries a pod's VRAM request", &Config::resource_name,
                        CheckNotEmpty));
  {
    Key p;
    p.info = {"policy", "--policy", "VRAMD_POLICY", "", "node scoring: headroom (warm node, most headroom) or binpack"};
    p.set = [](Config* c, const std::string& v) -> Status {
      if (!ledger::ParseScorePolicy(v, &c->score_policy)) {
        return BadValue("policy", v, "expected headroom or binpack");
      }
      return Status::Ok();
    };
    p.get = [](const Config& c) { return std::string(ledger::ScorePolicyName(c.score_policy)); };
    k.push_back(p);
  }
  {
    Key p;
    p.info = {"reserve.percent", "--reserve-percent", "VRAMD_RESERVE_PERCENT", "",
              "per-GPU reserve for driver and CUDA context, percent of physical VRAM"};
    p.set = [](Config* c, const std::string& v) -> Status {
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !std::isfinite(d) || d < 0 || d >= 100) {
        return BadValue("reserve.percent", v, "expected a number from 0 to below 100");
      }
      c->reserve_percent = d;
      return Status::Ok();
    };
    p.get = [](const Config& c) {
      std::ostringstream o;
      o << c.reserve_percent;
      return o.str();
    };
    k.push_back(p);
  }
  k.push_back(BytesKey("reserve.min_bytes", "--reserve-min", "VRAMD_RESERVE_MIN",
                       "per-GPU reserve minimum (quantity)", &Config::reserve_min_bytes));
  k.push_back(IntKey("usage_max_age_ms", "--usage-max-age-ms", "VRAMD_USAGE_MAX_AGE_MS",
                     "usage reports older than this fall back to allocation", &Config::usage_max_age_ms, 1,
                     86'400'000));
  {
    Key p;
    p.info = {"burst.max_peak_ratio", "--burst-max-peak-ratio", "VRAMD_BURST_MAX_PEAK_RATIO", "",
              "a GPU's peak demand (vramd.io/vram-peak) may exceed its capacity only while designated victims "
              "cover the overshoot, and never beyond this times capacity (1 to 10)"};
    p.set = [](Config* c, const std::string& v) -> Status {
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !std::isfinite(d) || d < 1 || d > 10) {
        return BadValue("burst.max_peak_ratio", v, "expected a number from 1 to 10");
      }
      c->burst_max_peak_ratio = d;
      return Status::Ok();
    };
    p.get = [](const Config& c) {
      std::ostringstream o;
      o << c.burst_max_peak_ratio;
      return o.str();
    };
    k.push_back(p);
  }
  k.push_back(VictimClassesKey());
  k.push_back(BoolKey("kube.enabled", "", "VRAMD_KUBE_ENABLED",
                      "talk to Kubernetes (--no-kube sets false: standalone on `nodes`)", &Config::kube_enabled));
  k.push_back(StringKey("kube.api", "--kube-api", "VRAMD_KUBE_API", "API server URL; empty: in-cluster",
                        &Config::kube_api));
  k.push_back(StringKey("kube.token_file", "--kube-token-file", "VRAMD_KUBE_TOKEN_FILE",
                        "bearer token file for the API server", &Config::kube_token_file));
  k.push_back(StringKey("kube.ca_file", "--kube-ca-file", "VRAMD_KUBE_CA_FILE", "CA bundle of the API server",
                        &Config::kube_ca_file));
  k.push_back(IntKey("kube.timeout_ms", "--kube-timeout-ms", "VRAMD_KUBE_TIMEOUT_MS",
                     "timeout of one Kubernetes API call", &Config::kube_timeout_ms, 100, 60'000));
  k.push_back(IntKey("kube.max_connections", "--kube-max-connections", "VRAMD_KUBE_MAX_CONNECTIONS",
                     "kept-alive connections to the API server for calls other than watches (binds, patches, "
                     "evictions, lists); a call waits at most kube.timeout_ms for a free one",
                     &Config::kube_max_connections, 1, 1024));
  k.push_back(IntKey("node_sync_interval_ms", "--node-sync-interval-ms", "VRAMD_NODE_SYNC_INTERVAL_MS",
                     "how often node capacities are read from Kubernetes", &Config::node_sync_interval_ms, 100,
                     3'600'000));
  k.push_back(StringKey("node_sync.agent_capacity_labels", "--node-sync-agent-capacity-labels",
                        "VRAMD_NODE_SYNC_AGENT_CAPACITY_LABELS",
                        "comma-separated KEY=VALUE node labels, any of which lets a node without configured, "
                        "annotated or GFD-labelled capacity take its agent's reported GPUs as capacity (empty: "
                        "none); a node without one gets no capacity from a report",
                        &Config::node_sync_agent_capacity_labels,
                        [](const std::string& v) { return ParseLabelPairs(v).status(); }));
  k.push_back(IntKey("reconcile_interval_ms", "--reconcile-interval-ms", "VRAMD_RECONCILE_INTERVAL_MS",
                     "reconcile pass interval", &Config::reconcile_interval_ms, 100, 3'600'000));
  k.push_back(IntKey("reconcile_min_gap_ms", "--reconcile-min-gap-ms", "VRAMD_RECONCILE_MIN_GAP_MS",
                     "least time between two reconcile passes that watch events trigger (a burst of events is "
                     "one pass)",
                     &Config::reconcile_min_gap_ms, 0, 60'000));
  k.push_back(IntKey("reservation_grace_ms", "--reservation-grace-ms", "VRAMD_RESERVATION_GRACE_MS",
                     "a reservation whose pod never shows up bound is freed after this",
                     &Config::reservation_grace_ms, 1000, 86'400'000));
  k.push_back(IntKey("rebuild_quiet_ms", "--rebuild-quiet-ms", "VRAMD_REBUILD_QUIET_MS",
                     "after the store lost data, the rebuilt ledger is sealed (VRAM granted again) no earlier than "
                     "this after the rebuild began, so binds granted before the loss have created their Binding; "
                     "-1: as long as a bind is marked in flight (3 x kube.timeout_ms + 2 s)",
                     &Config::rebuild_quiet_ms, -1, 600'000));
  k.push_back(IntKey("bind_mark_window_ms", "--bind-mark-window-ms", "VRAMD_BIND_MARK_WINDOW_MS",
                     "after a bind is answered, its pod's ledger entry is marked bound together with the other "
                     "binds' of this many ms, in one Valkey call (until then the entry is reserved and its bind "
                     "in flight, which hold the VRAM alike); 0 (and standalone): each bind marks its pod before "
                     "it answers",
                     &Config::bind_mark_window_ms, 0, 1000));
  k.push_back(IntKey("leader_lease_ms", "--leader-lease-ms", "VRAMD_LEADER_LEASE_MS",
                     "leader lease in Valkey; renewed every third of it, taken over when it lapses",
                     &Config::leader_lease_ms, 300, 600'000));
  k.push_back(StringKey("watchdog.mode", "--watchdog-mode", "VRAMD_WATCHDOG_MODE",
                        "the pressure watchdog (leader): off, dry-run (an Event and a count, nothing evicted) or "
                        "enforce (evicts through the Eviction API)",
                        &Config::watchdog_mode, CheckMode));
  k.push_back(StringKey("watchdog.floor", "--watchdog-floor", "VRAMD_WATCHDOG_FLOOR",
                        "a GPU is under pressure when its physical free VRAM (total - observed used) is below this: "
                        "a quantity (1.5Gi) or a percent of the GPU's VRAM (10%)",
                        &Config::watchdog_floor, [](const std::string& v) { return ParseFloor(v).status(); }));
  k.push_back(StringKey("watchdog.protected_classes", "--watchdog-protected-classes",
                        "VRAMD_WATCHDOG_PROTECTED_CLASSES",
                        "comma-separated priority classes whose pods are never evicted, in any namespace",
                        &Config::watchdog_protected_classes,
                        [](const std::string& v) { return ParseClassList(v).status(); }));
  k.push_back(StringKey("watchdog.system_namespaces", "--watchdog-system-namespaces",
                        "VRAMD_WATCHDOG_SYSTEM_NAMESPACES",
                        "comma-separated namespaces where system-cluster-critical, system-node-critical and a "
                        "priority of 2e9 or more protect a pod from eviction (any namespace may use those classes)",
                        &Config::watchdog_system_namespaces,
                        [](const std::string& v) { return ParseClassList(v).status(); }));
  k.push_back(IntKey("watchdog.interval_ms", "--watchdog-interval-ms", "VRAMD_WATCHDOG_INTERVAL_MS",
                     "least time between two passes of the watchdog and idle eviction", &Config::watchdog_interval_ms,
                     100, 3'600'000));
  k.push_back(IntKey("watchdog.cooldown_ms", "--watchdog-cooldown-ms", "VRAMD_WATCHDOG_COOLDOWN_MS",
                     "at most one action per GPU (watchdog) or per pod (idle eviction) within this",
                     &Config::watchdog_cooldown_ms, 0, 86'400'000));
  k.push_back(IntKey("watchdog.max_actions_per_minute", "--watchdog-max-actions-per-minute",
                     "VRAMD_WATCHDOG_MAX_ACTIONS_PER_MINUTE",
                     "at most this many watchdog and idle actions in any minute, over the whole cluster",
                     &Config::watchdog_max_actions_per_minute, 1, 10'000));
  k.push_back(BytesKey("watchdog.min_over_budget", "--watchdog-min-over-budget", "VRAMD_WATCHDOG_MIN_OVER_BUDGET",
                       "a pod counts as over its budget only when its usage on the GPU exceeds what it declared by "
                       "more than this (quantity; a CUDA context's overhead is not a runaway)",
                       &Config::watchdog_min_over_budget_bytes));
  k.push_back(IntKey("watchdog.pressure_reports", "--watchdog-pressure-reports", "VRAMD_WATCHDOG_PRESSURE_REPORTS",
                     "the watchdog acts only on pressure (with a cause) seen in this many consecutive usage reports "
                     "of the GPU: one report below the floor is a spike, not a runaway",
                     &Config::watchdog_pressure_reports, 1, 100));
  k.push_back(IntKey("eviction.hold_ms", "--eviction-hold-ms", "VRAMD_EVICTION_HOLD_MS",
                     "room an enforced eviction made for a pending pod (reclaim, priority preemption, idle "
                     "eviction) is held for that pod this long: spent for every other pod until it binds, ends or "
                     "the hold expires (0: no holds)",
                     &Config::eviction_hold_ms, 0, 3'600'000));
  k.push_back(StringKey("idle.mode", "--idle-mode", "VRAMD_IDLE_MODE",
                        "idle eviction of pods with vramd.io/idle-ttl (leader): off, dry-run or enforce",
                        &Config::idle_mode, CheckMode));
  k.push_back(StringKey("idle.policy", "--idle-policy", "VRAMD_IDLE_POLICY",
                        "on-demand: evict idle pods only to make room for a pod vramd refused for VRAM; always: "
                        "once the TTL has passed",
                        &Config::idle_policy, CheckIdlePolicy));
  k.push_back(BytesKey("idle.usage_change_bytes", "--idle-usage-change", "VRAMD_IDLE_USAGE_CHANGE",
                       "a change of a pod's observed usage above this counts as activity (quantity)",
                       &Config::idle_usage_change_bytes));
  k.push_back(IntKey("idle.pending_max_age_ms", "--idle-pending-max-age-ms", "VRAMD_IDLE_PENDING_MAX_AGE_MS",
                     "a pod vramd refused for VRAM counts as waiting for this long after the refusal",
                     &Config::idle_pending_max_age_ms, 1000, 3'600'000));
  k.push_back(BoolKey("queues.enabled", "--queues-enabled", "VRAMD_QUEUES_ENABLED",
                      "tenants: watch VramQueue objects (the chart installs their CRD) and apply quotas, fair share "
                      "and reclaim; with no VramQueue object nothing changes",
                      &Config::queues_enabled));
  k.push_back(StringKey("queues.default_queue", "--queues-default-queue", "VRAMD_QUEUES_DEFAULT_QUEUE",
                        "the queue of namespaces no VramQueue names; without an object of this name it has no "
                        "quota and refuses nothing",
                        &Config::queues_default_queue, CheckQueueName));
  k.push_back(IntKey("queues.preemptible_below_priority", "--queues-preemptible-below-priority",
                     "VRAMD_QUEUES_PREEMPTIBLE_BELOW_PRIORITY",
                     "a pod whose priority is below this is preemptible: it may run over its queue's quota and "
                     "be reclaimed",
                     &Config::queues_preemptible_below_priority, -2'000'000'000, 2'000'000'000));
  k.push_back(StringKey("queues.preemptible_classes", "--queues-preemptible-classes",
                        "VRAMD_QUEUES_PREEMPTIBLE_CLASSES",
                        "comma-separated priority classes whose pods are preemptible whatever their priority",
                        &Config::queues_preemptible_classes,
                        [](const std::string& v) { return ParseClassList(v).status(); }));
  k.push_back(IntKey("queues.min_runtime_ms", "--queues-min-runtime-ms", "VRAMD_QUEUES_MIN_RUNTIME_MS",
                     "guaranteed minimum runtime: a preemptible pod bound less than this ago is never reclaimed",
                     &Config::queues_min_runtime_ms, 0, 604'800'000));
  k.push_back(BoolKey("queues.reclaim_unqueued", "--queues-reclaim-unqueued", "VRAMD_QUEUES_RECLAIM_UNQUEUED",
                      "pods of namespaces no VramQueue names (the default queue without an object) may be victims "
                      "of reclaim and priority preemption; off: creating one queue never makes the rest of the "
                      "cluster evictable",
                      &Config::queues_reclaim_unqueued));
  k.push_back(StringKey("queues.reclaim_mode", "--queues-reclaim-mode", "VRAMD_QUEUES_RECLAIM_MODE",
                        "reclaim and priority preemption (leader): off, dry-run (an Event and a count) or enforce "
                        "(the Eviction API)",
                        &Config::queues_reclaim_mode, CheckMode));
  k.push_back(IntKey("queues.interval_ms", "--queues-interval-ms", "VRAMD_QUEUES_INTERVAL_MS",
                     "least time between two queue passes of the leader (status of the VramQueue objects, "
                     "reclaim)",
                     &Config::queues_interval_ms, 100, 3'600'000));
  k.push_back(IntKey("queues.reclaim_cooldown_ms", "--queues-reclaim-cooldown-ms",
                     "VRAMD_QUEUES_RECLAIM_COOLDOWN_MS",
                     "after evicting for a pending pod, wait this long before evicting for it again",
                     &Config::queues_reclaim_cooldown_ms, 0, 86'400'000));
  k.push_back(IntKey("queues.max_reclaims_per_minute", "--queues-max-reclaims-per-minute",
                     "VRAMD_QUEUES_MAX_RECLAIMS_PER_MINUTE",
                     "at most this many reclaim and priority-preemption plans acted on in any minute",
                     &Config::queues_max_reclaims_per_minute, 1, 10'000));
  k.push_back(StringKey("log.level", "--log-level", "VRAMD_LOG_LEVEL", "trace, debug, info, warn, error, off",
                        &Config::log_level, CheckLogLevel));
  k.push_back(BoolKey("log.json", "--log-json", "VRAMD_LOG_JSON", "structured JSON log lines", &Config::log_json));
  Config defaults;
  for (Key& key : k) key.info.default_value = key.get(defaults);
  return k;
}

const std::vector<Key>& AllKeys() {
  static const std::vector<Key> keys = BuildKeys();
  return keys;
}

const Key* FindEnv(const std::string& name) {
  for (const Key& k : AllKeys()) {
    if (k.info.env == name) return &k;
  }
  return nullptr;
}

const Key* FindJson(const std::string& name) {
  for (const Key& k : AllKeys()) {
    if (k.info.json_key == name) return &k;
  }
  return nullptr;
}

// Scalars are handed to the setters as text, so a file, a variable and a flag
// are validated by the same code.
Result<std::string> ScalarText(const std::string& key, const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return std::string(v.get<bool>() ? "true" : "false");
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return v.dump();
  return InvalidArgument("config key " + key + ": expected a string, number or boolean, got " +
                         std::string(v.type_name()));
}

// Keys whose value is a list: in a file, a JSON array of strings or one
// comma-separated string; as a flag or variable, the comma-separated string.
const std::set<std::string>& ListKeys() {
  static const std::set<std::string> keys = {"burst.victim_classes", "watchdog.protected_classes",
                                             "watchdog.system_namespaces", "tls.client_names",
                                             "node_sync.agent_capacity_labels", "admission.vramd_users", "enforce.node_modes",
                                             "queues.preemptible_classes"};
  return keys;
}

Result<std::string> ListText(const std::string& key, const nlohmann::json& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return InvalidArgument("config key " + key + ": expected a list of strings");
    const std::string item = v[i].get<std::string>();
    if (item.find(',') != std::string::npos) {
      return InvalidArgument("config key " + key + ": item " + std::to_string(i) + " holds a comma");
    }
    if (i > 0) out += ',';
    out += item;
  }
  return out;
}

Status ApplyObject(const nlohmann::json& obj, const std::string& prefix, Config* cfg) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (key == "nodes") {
      if (!it->is_array()) return InvalidArgument("config key nodes: expected an array of {name, gpus}");
      cfg->nodes.clear();
      for (size_t i = 0; i < it->size(); ++i) {
        const nlohmann::json& n = (*it)[i];
        std::string where = "config key nodes[" + std::to_string(i) + "]";
        if (!n.is_object()) return InvalidArgument(where + ": expected an object");
        StaticNode sn;
        for (auto f = n.begin(); f != n.end(); ++f) {
          if (f.key() == "name" && f->is_string()) {
            sn.name = f->get<std::string>();
          } else if (f.key() == "gpus" && f->is_array()) {
            for (size_t g = 0; g < f->size(); ++g) {
              const nlohmann::json& gv = (*f)[g];
              std::string gw = where + ".gpus[" + std::to_string(g) + "]";
              StaticGpu sg;
              std::string cap;
              if (gv.is_string()) {
                cap = gv.get<std::string>();
              } else if (gv.is_object() && gv.contains("capacity") && gv["capacity"].is_string()) {
                cap = gv["capacity"].get<std::string>();
                for (auto gf = gv.begin(); gf != gv.end(); ++gf) {
                  if (gf.key() == "uuid" && gf->is_string()) sg.uuid = gf->get<std::string>();
                  else if (gf.key() != "capacity") return InvalidArgument(gw + ": unknown key " + gf.key());
                }
              } else {
                return InvalidArgument(gw + ": expected a quantity string or {capacity, uuid}");
              }
              Result<int64_t> b = ledger::ParseBytes(cap);
              if (!b.ok()) return InvalidArgument(gw + ": " + b.status().message());
              sg.capacity = *b;
              sn.gpus.push_back(sg);
            }
          } else {
            return InvalidArgument(where + ": unknown key or wrong type: " + f.key());
          }
        }
        if (sn.name.empty()) return InvalidArgument(where + ": name is required");
        for (const StaticNode& other : cfg->nodes) {
          if (other.name == sn.name) return InvalidArgument(where + ": node " + sn.name + " is listed twice");
        }
        cfg->nodes.push_back(std::move(sn));
      }
      continue;
    }
    if (it->is_object()) {
      if (Status s = ApplyObject(*it, key, cfg); !s.ok()) return s;
      continue;
    }
    const Key* k = FindJson(key);
    if (k == nullptr) return InvalidArgument("unknown config key: " + key);
    Result<std::string> text = ListKeys().contains(key) && it->is_array() ? ListText(key, *it) : ScalarText(key, *it);
    if (!text.ok()) return text.status();
    if (Status s = k->set(cfg, *text); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

const std::vector<KeyInfo>& Keys() {
  static const std::vector<KeyInfo> infos = [] {
    std::vector<KeyInfo> v;
    for (const Key& k : AllKeys()) v.push_back(k.info);
    return v;
  }();
  return infos;
}

Status ApplyJson(const std::string& text, Config* cfg) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("config file is not valid JSON");
  if (!j.is_object()) return InvalidArgument("config file must hold a JSON object");
  return ApplyObject(j, "", cfg);
}

int64_t BindInFlightMs(const Config& cfg) { return 3 * static_cast<int64_t>(cfg.kube_timeout_ms) + 2000; }

int64_t RebuildQuietMs(const Config& cfg) {
  return cfg.rebuild_quiet_ms >= 0 ? cfg.rebuild_quiet_ms : BindInFlightMs(cfg);
}

Result<Floor> ParseFloor(const std::string& v) {
  Floor f;
  if (!v.empty() && v.back() == '%') {
    const std::string num = v.substr(0, v.size() - 1);
    char* end = nullptr;
    const double d = std::strtod(num.c_str(), &end);
    if (num.empty() || *end != '\0' || !std::isfinite(d) || d <= 0 || d >= 100) {
      return InvalidArgument("a percent must be a number above 0 and below 100");
    }
    f.percent = d;
    return f;
  }
  Result<int64_t> b = ledger::ParseBytes(v);
  if (!b.ok()) return InvalidArgument("expected a quantity (1.5Gi) or a percent (10%): " + b.status().message());
  if (*b <= 0) return InvalidArgument("the floor must be above 0");
  f.bytes = *b;
  return f;
}

namespace {

// A comma-separated list, each item trimmed of spaces; `why_not(item)` says
// why an item is refused ("" when it is taken). "" is the empty list.
Result<std::vector<std::string>> SplitList(const std::string& v, const char* what,
                                           const std::function<std::string(const std::string&)>& why_not) {
  std::vector<std::string> out;
  if (v.empty()) return out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t comma = v.find(',', start);
    if (comma == std::string::npos) comma = v.size();
    std::string name = v.substr(start, comma - start);
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (name.empty()) return InvalidArgument(std::string("an empty ") + what + " in the list");
    if (std::string why = why_not(name); !why.empty()) {
      return InvalidArgument("\"" + name.substr(0, 64) + "\" is not a " + what + " (" + why + ")");
    }
    out.push_back(std::move(name));
    start = comma + 1;
  }
  return out;
}

// A certificate name or a username: printable ASCII without spaces.
std::string PrintableNameWhyNot(const std::string& name) {
  const bool ok = name.size() <= 253 && std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 0x7f; });
  return ok ? "" : "printable ASCII without spaces, at most 253 characters";
}

}  // namespace

Result<std::vector<std::string>> ParseCertNameList(const std::string& v) {
  return SplitList(v, "certificate name", PrintableNameWhyNot);
}

Result<std::vector<std::string>> ParseUserList(const std::string& v) {
  return SplitList(v, "username", PrintableNameWhyNot);
}

Result<std::vector<std::string>> ParseClassList(const std::string& v) {
  return SplitList(v, "priority class name", [](const std::string& name) -> std::string {
    return IsDnsSubdomain(name) ? "" : "a DNS subdomain: lowercase letters, digits, '-' and '.', at most 253 characters";
  });
}

Result<std::vector<std::pair<std::string, std::string>>> ParseLabelPairs(const std::string& v) {
  Result<std::vector<std::string>> items = SplitList(v, "KEY=VALUE label", [](const std::string& item) -> std::string {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return "KEY=VALUE";
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto label_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; };
    size_t slash = key.rfind('/');
    const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
    if (slash != std::string::npos && !IsDnsSubdomain(key.substr(0, slash))) return "the key's prefix is a DNS subdomain";
    if (name.empty() || name.size() > 63 || !std::all_of(name.begin(), name.end(), label_char)) {
      return "the key's name is 1 to 63 of [A-Za-z0-9._-]";
    }
    if (value.size() > 63 || !std::all_of(value.begin(), value.end(), label_char)) {
      return "the value is at most 63 of [A-Za-z0-9._-]";
    }
    return "";
  });
  if (!items.ok()) return items.status();
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& item : *items) {
    size_t eq = item.find('=');
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return out;
}

bool HasAnyLabel(const std::map<std::string, std::string>& labels,
                 const std::vector<std::pair<std::string, std::string>>& pairs) {
  return std::any_of(pairs.begin(), pairs.end(), [&](const auto& p) {
    auto it = labels.find(p.first);
    return it != labels.end() && it->second == p.second;
  });
}

Result<std::pair<std::string, std::string>> ParseServiceAccount(const std::string& v) {
  size_t slash = v.find('/');
  if (slash == std::string::npos || v.find('/', slash + 1) != std::string::npos) {
    return InvalidArgument("a ServiceAccount is NAMESPACE/NAME");
  }
  std::string ns = v.substr(0, slash), name = v.substr(slash + 1);
  if (!IsDnsSubdomain(ns) || ns.size() > 63 || ns.find('.') != std::string::npos) {
    return InvalidArgument("\"" + ns.substr(0, 64) + "\" is not a namespace name");
  }
  if (!IsDnsSubdomain(name)) return InvalidArgument("\"" + name.substr(0, 64) + "\" is not a ServiceAccount name");
  return std::make_pair(ns, name);
}

int64_t ApplyReserve(const Config& cfg, int64_t physical) {
  return ledger::CapacityAfterReserve(physical, cfg.reserve_percent, cfg.reserve_min_bytes);
}

Result<Config> Load(int argc, const char* const* argv, const char* const* env) {
  Config cfg;
  // 1. The file named by --config (or VRAMD_CONFIG).
  std::string file;
  const char* const* envp = env ? env : environ;
  for (const char* const* e = envp; e && *e; ++e) {
    std::string_view kv(*e);
    if (kv.rfind("VRAMD_CONFIG=", 0) == 0) file = std::string(kv.substr(13));
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) file = argv[i + 1];
    else if (a.rfind("--config=", 0) == 0) file = a.substr(9);
  }
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return InvalidArgument("cannot read config file " + file);
    std::stringstream ss;
    ss << in.rdbuf();
    if (Status s = ApplyJson(ss.str(), &cfg); !s.ok()) return Status(s.code(), file + ": " + s.message());
  }
  // 2. Environment variables. The prefix is shared (env_names.h): an unknown
  // name is a warning, an error only when it looks like a key's variable and
  // its value is invalid for that key.
  for (const char* const* e = envp; e && *e; ++e) {
    std::string_view kv(*e);
    if (kv.rfind("VRAMD_", 0) != 0) continue;
    auto eq = kv.find('=');
    std::string name(kv.substr(0, eq));
    std::string value(eq == std::string_view::npos ? "" : kv.substr(eq + 1));
    EnvClass c = ClassifyEnv(name, value);
    switch (c.kind) {
      case EnvKind::kIgnored:
      case EnvKind::kServiceLink:
        break;
      case EnvKind::kKey:
        for (const Key& k : AllKeys()) {
          if (k.info.env != name) continue;
          if (Status s = k.set(&cfg, value); !s.ok()) return Status(s.code(), name + ": " + s.message());
        }
        break;
      case EnvKind::kNearKey:
        if (const Key* k = FindEnv(c.closest)) {
          Config scratch;
          if (Status s = k->set(&scratch, value); !s.ok()) {
            return InvalidArgument("unknown environment variable " + name + " (did you mean " + c.closest +
                                   "?) with a value invalid for " + c.closest + ": " + s.message());
          }
        }
        cfg.warnings.push_back("unknown environment variable " + name + " (did you mean " + c.closest +
                               "?); ignored");
        break;
      case EnvKind::kUnknown:
        cfg.warnings.push_back("unknown environment variable " + name + " (ignored; the closest known is " +
                               c.closest + ")");
        break;
    }
  }
  // 3. Flags.
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config") {
      ++i;
      continue;
    }
    if (a.rfind("--config=", 0) == 0) continue;
    if (a == "--no-kube") {
      cfg.kube_enabled = false;
      continue;
    }
    std::string name = a, value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    const Key* key = nullptr;
    for (const Key& k : AllKeys()) {
      if (!k.info.flag.empty() && k.info.flag == name) key = &k;
    }
    if (key == nullptr) return InvalidArgument("unknown flag " + name + " (see --help)");
    if (!has_value) {
      if (key->info.default_value == "true" || key->info.default_value == "false") {
        value = "true";  // boolean flags without a value
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return InvalidArgument("flag " + name + " needs a value");
      }
    }
    if (Status s = key->set(&cfg, value); !s.ok()) return Status(s.code(), name + ": " + s.message());
  }
  if (cfg.tls_cert_file.empty() != cfg.tls_key_file.empty()) {
    return InvalidArgument("tls.cert_file and tls.key_file must be set together");
  }
  if (!cfg.tls_client_names.empty() && cfg.tls_client_ca_file.empty()) {
    return InvalidArgument("tls.client_names needs tls.client_ca_file (the names are checked on client certificates)");
  }
  if (!cfg.tls_client_ca_file.empty() && cfg.tls_cert_file.empty()) {
    return InvalidArgument("tls.client_ca_file needs tls.cert_file and tls.key_file");
  }
  if (cfg.auth_identities && !cfg.kube_enabled) {
    return InvalidArgument("auth.identities needs Kubernetes (TokenReview); standalone mode uses api_token_file");
  }
  if (cfg.auth_identities && cfg.auth_agent_service_account.empty()) {
    return InvalidArgument("auth.identities needs auth.agent_service_account (NAMESPACE/NAME of the node agents)");
  }
  if (!cfg.api_listen.empty() && cfg.api_listen == cfg.listen && !cfg.listen.ends_with(":0")) {
    return InvalidArgument("api_listen must differ from listen (both are " + cfg.listen + ")");
  }
  if (!cfg.admission_listen.empty()) {
    if (!cfg.admission_enabled) {
      return InvalidArgument("admission.listen needs admission.enabled (the listener serves nothing else)");
    }
    if (cfg.tls_cert_file.empty()) {
      return InvalidArgument("admission.listen needs tls.cert_file and tls.key_file: the API server calls "
                             "webhooks over HTTPS only");
    }
    if (!cfg.admission_listen.ends_with(":0")) {
      for (const auto& [name, other] : {std::pair{"listen", &cfg.listen}, {"api_listen", &cfg.api_listen}}) {
        if (cfg.admission_listen == *other) {
          return InvalidArgument(std::string("admission.listen must differ from ") + name + " (both are " +
                                 *other + ")");
        }
      }
    }
  }
  return cfg;
}

}  // namespace vramd::config
