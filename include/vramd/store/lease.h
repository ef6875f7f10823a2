// A named lease (leader election): at most one identity holds it at a time,
// for a TTL it renews; when the holder stops renewing it lapses and another
// identity may take it. Time is the store's (Valkey: the server's), so the
// replicas' clocks do not matter.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vramd/status.h"

namespace vramd::store {

class ValkeyClient;

// Thread-safe. Transport failures are kUnavailable; an answer the
// implementation cannot read is kInternal.
class Lease {
 public:
  virtual ~Lease() = default;

  // Takes the lease for `identity` when it is free, or renews it (TTL reset
  // to ttl_ms) when `identity` holds it. True when `identity` holds it now;
  // false when another identity does.
  virtual Result<bool> TryAcquireOrRenew(const std::string& identity, int64_t ttl_ms) = 0;
  // Frees the lease if `identity` holds it (true); otherwise changes nothing (false).
  virtual Result<bool> Release(const std::string& identity) = 0;
  // The identity holding the lease ("" when none).
  virtual Result<std::string> Holder() = 0;
};

// The leader's lease name: its key is prefix + ":leader", which the eviction
// budget's fence reads too (LedgerStore::BudgetTake).
inline constexpr const char* kLeaderLeaseName = "leader";

// The lease in the key client->prefix() + ":" + name (the leader's:
// kLeaderLeaseName), one Lua script per change (src/store/lua/lease_*.lua).
std::shared_ptr<Lease> NewValkeyLease(std::shared_ptr<ValkeyClient> client, const std::string& name);

}  // namespace vramd::store
