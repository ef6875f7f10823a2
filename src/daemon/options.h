// The config mapped onto each component's options: the one place that knows
// which config key feeds which component. Pure (no I/O).
#pragma once

#include <optional>

#include "daemon/secrets.h"
#include "vramd/config/config.h"
#include "vramd/extender/extender.h"
#include "vramd/gpulock/locks.h"
#include "vramd/http/routes.h"
#include "vramd/http/server.h"
#include "vramd/kube/kube_client.h"
#include "vramd/status.h"
#include "vramd/store/valkey_client.h"

namespace vramd::daemon {

store::ValkeyOptions ValkeyOptionsFrom(const config::Config& cfg, const Secrets& secrets);
kube::Options KubeOptionsFrom(const config::Config& cfg);
extender::Options ExtenderOptionsFrom(const config::Config& cfg);
// kInvalidArgument when `listen` is not HOST:PORT.
Result<http::ServerOptions> ServerOptionsFrom(const config::Config& cfg);
// The listener of `api_listen` (nullopt when it is empty): the same as
// ServerOptionsFrom's but on that address and never asking for a client
// certificate (it serves no extender verb). kInvalidArgument when
// `api_listen` is not HOST:PORT.
Result<std::optional<http::ServerOptions>> ApiServerOptionsFrom(const config::Config& cfg);
// The admission webhook's own listener, `admission.listen` (nullopt when it
// is empty): ServerOptionsFrom's on that address, never asking for a client
// certificate (the API server presents none). kInvalidArgument when it is not
// HOST:PORT.
Result<std::optional<http::ServerOptions>> AdmissionServerOptionsFrom(const config::Config& cfg);
gpulock::LockOptions LockOptionsFrom(const config::Config& cfg);
// The settings of the routes; the caller adds the components they serve.
http::ApiServices ApiSettingsFrom(const config::Config& cfg, const Secrets& secrets);
// The admission webhook's rules (admission.*).
http::AdmissionServices AdmissionOptionsFrom(const config::Config& cfg);
// Who may call the /v1 API (auth.*, the API token).
http::AuthOptions AuthOptionsFrom(const config::Config& cfg, const Secrets& secrets);

}  // namespace vramd::daemon
