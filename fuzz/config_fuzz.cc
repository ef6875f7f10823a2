// Fuzzes the config file parser (config::ApplyJson) and the per-GPU reserve.
// Properties: no crash and no exception for any text; an accepted file
// yields values inside each key's documented range, named static nodes with
// distinct names and non-negative capacities, and a reserve that leaves each
// GPU between 0 and its physical capacity.
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_check.h"
#include "vramd/config/config.h"

using namespace vramd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  config::Config cfg;
  Status s = config::ApplyJson(text, &cfg);
  if (!s.ok()) {
    FUZZ_CHECK(!s.message().empty());
    return 0;
  }
  FUZZ_CHECK(cfg.http_threads >= 1 && cfg.http_threads <= 256);
  FUZZ_CHECK(cfg.max_body_bytes >= 0);
  FUZZ_CHECK(cfg.read_timeout_ms >= 10);
  FUZZ_CHECK(cfg.reserve_percent >= 0 && cfg.reserve_percent < 100);
  FUZZ_CHECK(cfg.reserve_min_bytes >= 0);
  FUZZ_CHECK(!cfg.key_prefix.empty() && !cfg.resource_name.empty());
  std::set<std::string> names;
  for (const config::StaticNode& n : cfg.nodes) {
    FUZZ_CHECK(!n.name.empty());
    FUZZ_CHECK_MSG(names.insert(n.name).second, "duplicate static node " + n.name);
    for (const config::StaticGpu& g : n.gpus) {
      FUZZ_CHECK(g.capacity >= 0);
      int64_t after = config::ApplyReserve(cfg, g.capacity);
      FUZZ_CHECK_MSG(after >= 0 && after <= g.capacity, std::to_string(g.capacity) + " -> " + std::to_string(after));
    }
  }
  return 0;
}
