// POST /scheduler/{filter,prioritize,bind,preempt}: the extender verbs. The
// extender decodes and encodes its own wire format (extender/wire.h). Also
// which routes each listener serves.
#include "vramd/http/routes.h"

namespace vramd::http {
namespace {

Reply ExtenderReply(const extender::Response& resp) {
  Reply r;
  r.status = resp.status;
  r.body = resp.body;
  return r;
}

}  // namespace

void RegisterExtenderRoutes(Server& server, const ApiServices& svc) {
  extender::Extender* ext = svc.extender;
  server.Route("POST", "/scheduler/filter", "filter",
               [ext](const Request& r) { return ExtenderReply(ext->Filter(r.body)); });
  server.Route("POST", "/scheduler/prioritize", "prioritize",
               [ext](const Request& r) { return ExtenderReply(ext->Prioritize(r.body)); });
  server.Route("POST", "/scheduler/bind", "bind",
               [ext](const Request& r) { return ExtenderReply(ext->Bind(r.body)); });
  server.Route("POST", "/scheduler/preempt", "preempt",
               [ext](const Request& r) { return ExtenderReply(ext->Preempt(r.body)); });
}

void RegisterRoutes(Server& server, const ApiServices& svc) {
  RegisterExtenderRoutes(server, svc);
  RegisterHealthRoutes(server, svc);
  RegisterLedgerRoutes(server, svc);
}

void RegisterApiListenerRoutes(Server& server, const ApiServices& svc) {
  server.Route("POST", "/scheduler/{verb}", "refused", [](const Request& r) {
    return ErrorReply(403, "the extender verbs are not served on this listener (api_listen): POST " + r.path +
                               " is served only on `listen`, where kube-scheduler calls it");
  });
  RegisterHealthRoutes(server, svc);
  RegisterLedgerRoutes(server, svc);
}

}  // namespace vramd::http
