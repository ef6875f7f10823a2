// GET /healthz (the process answers), /readyz (Valkey answers, and with
// Kubernetes a reconcile since start), /metrics (the registry's rendering).
#include "http/json_views.h"
#include "vramd/http/routes.h"

namespace vramd::http {

using nlohmann::json;

void RegisterHealthRoutes(Server& server, const ApiServices& svc) {
  server.Route("GET", "/healthz", "healthz", [](const Request&) {
    Reply r;
    r.content_type = "text/plain";
    r.body = "ok\n";
    return r;
  });

  store::LedgerStore* store = svc.store;
  auto readiness = svc.readiness;
  server.Route("GET", "/readyz", "readyz", [store, readiness](const Request&) {
    json details = json::object();
    bool ready = true;
    Status ping = store->Ping();
    details["valkey"] = ping.ok() ? "ok" : ping.message();
    if (!ping.ok()) ready = false;
    if (std::optional<ReplicaReadiness> rr = readiness ? readiness() : std::nullopt) {
      details["replica"] = rr->replica;
      details["leader"] = rr->leader;
      details["is_leader"] = rr->is_leader;
      details["pod_watch_synced"] = rr->pod_watch_synced;
      details["last_reconcile_ms"] = rr->last_reconcile_ms;
      details["reconciled_since_start"] = rr->reconciled_since_start;
      if (!rr->reconciled_since_start) ready = false;
      if (rr->ledger_sealed) details["ledger_sealed"] = *rr->ledger_sealed;
    }
    details["ready"] = ready;
    return JsonReply(ready ? 200 : 503, details);
  });

  metrics::Registry* registry = svc.registry;
  server.Route("GET", "/metrics", "metrics", [registry](const Request&) {
    Reply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = registry->Render();
    return r;
  });
}

}  // namespace vramd::http
