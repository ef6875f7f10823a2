// The routes of vramd's HTTP port: extender verbs, /v1 API, health, metrics.
// Thin adapters: decode, call a component, encode.
#pragma once

#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "vramd/clock.h"
#include "vramd/extender/extender.h"
#include "vramd/http/server.h"
#include "vramd/kube/kube_client.h"
#include "vramd/ledger/model.h"
#include "vramd/metrics/registry.h"
#include "vramd/store/ledger_store.h"

namespace vramd::app {

struct ApiServices {
  extender::Extender* extender = nullptr;
  store::LedgerStore* store = nullptr;
  metrics::Registry* registry = nullptr;
  const Clock* clock = nullptr;
  int64_t usage_max_age_ms = 60'000;
  std::string api_token;  // required on mutating /v1 calls when non-empty
  kube::KubeClient* kube = nullptr;  // for GET /v1/explain?namespace=&pod= (null: standalone)
  std::string resource_name = "vramd.io/vram";
  ledger::Policy policy;
  // Adds readiness conditions beyond Valkey (leader, first reconcile); sets
  // *ready=false when one is not met and explains it in `details`.
  std::function<void(nlohmann::json& details, bool* ready)> readiness;
};

void RegisterRoutes(http::Server& server, const ApiServices& services);

// The JSON view of a node: vectors, the six metrics, per GPU and per pod.
// Ratios that are infinite are rendered as the string "+Inf".
nlohmann::json NodeView(const ledger::Node& node, int64_t now_ms, int64_t usage_max_age_ms);

// Decodes the body of PUT /v1/nodes/{node}/usage: {"gpus": {"<index>": bytes
// or quantity string, ...}}, at least one GPU, indices 0..9999, amounts 0..2^63-1.
// kInvalidArgument with a message that names the offending part.
Result<std::map<int, int64_t>> DecodeUsage(const std::string& body);

}  // namespace vramd::app
