// The pooled client's route to the primary through Sentinel: the address
// the sentinels named, its generation, and checking each new connection with
// ROLE (store/pooled_client.h; the sentinels are asked by SentinelResolver).
#include <spdlog/spdlog.h>

#include "store/pooled_client.h"
#include "store/reply.h"

namespace vramd::store {

uint64_t PooledValkeyClient::CurrentGen() const {
  MutexLock lk(&route_mu_);
  return gen_;
}

void PooledValkeyClient::Forget(uint64_t gen) {
  MutexLock lk(&route_mu_);
  if (gen != gen_) return;
  ++gen_;
  if (primary_known_) sentinel_->Distrust();
  primary_known_ = false;
}

bool PooledValkeyClient::Primary(ValkeyEndpoint* ep, uint64_t* gen, std::string* err) {
  const uint64_t asked_before = resolves_.load();
  MutexLock resolving(&resolve_mu_);
  {
    MutexLock lk(&route_mu_);
    if (primary_known_) {
      ep->host = primary_.host;
      ep->port = primary_.port;
      *gen = gen_;
      return true;
    }
  }
  if (resolves_.load() != asked_before && !resolve_error_.empty()) {
    *err = resolve_error_;
    return false;
  }
  resolves_.fetch_add(1);
  Result<ValkeyEndpoint> r = sentinel_->Resolve();
  if (!r.ok()) {
    resolve_error_ = r.status().message();
    *err = resolve_error_;
    return false;
  }
  resolve_error_.clear();
  MutexLock lk(&route_mu_);
  primary_ = *r;
  primary_known_ = true;
  if (r->host != last_named_.host || r->port != last_named_.port) {
    spdlog::info("valkey: the sentinels name {} as the primary of '{}'{}", r->Display(), display_,
                 last_named_.host.empty() ? "" : " (was " + last_named_.Display() + ")");
    last_named_ = *r;
  }
  ep->host = r->host;
  ep->port = r->port;
  *gen = gen_;
  return true;
}

ContextPtr PooledValkeyClient::Connect(std::string* err) {
  ValkeyEndpoint ep = endpoint_;
  uint64_t gen = 0;
  if (sentinel_ && !Primary(&ep, &gen, err)) return nullptr;
  ContextPtr c = Open(ep, err);
  if (sentinel_) {
    if (!c) {
      *err = "primary " + ep.Display() + " named by the sentinels: " + *err;
      Forget(gen);
      return nullptr;
    }
    ReplyPtr role = Run(c.get(), {"ROLE"});
    if (!role || role->type != Reply::Type::kArray || role->elements.empty() ||
        role->elements[0].str != "master") {
      *err = "server " + ep.Display() + " named by the sentinels is not the primary (ROLE: " +
             (!role                ? std::string(c->err != 0 ? c->errstr : "no reply")
              : role->is_error()   ? role->str
              : role->elements.empty() ? std::string("?")
                                       : role->elements[0].str) +
             "); asking the sentinels again";
      Forget(gen);
      return nullptr;
    }
    c.get_deleter().gen = gen;
  }
  return c;
}

}  // namespace vramd::store
