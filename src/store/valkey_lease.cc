// A Lease in one Valkey key: value = the holder's identity, PX = the TTL.
#include <utility>

#include "store/lua_scripts.h"  // generated from src/store/lua/*.lua
#include "vramd/store/lease.h"
#include "vramd/store/valkey_client.h"

namespace vramd::store {
namespace {

// A script's 0/1 answer.
Result<bool> Flag(Result<Reply> r, const char* what) {
  if (!r.ok()) return r.status();
  if (r->is_error()) return Internal(std::string("lease ") + what + " script failed: " + r->str);
  if (r->type != Reply::Type::kInteger) {
    return Internal(std::string("lease ") + what + " script returned an unexpected reply");
  }
  return r->integer == 1;
}

class ValkeyLease final : public Lease {
 public:
  ValkeyLease(std::shared_ptr<ValkeyClient> client, const std::string& name)
      : client_(std::move(client)), key_(client_->prefix() + ":" + name) {}

  Result<bool> TryAcquireOrRenew(const std::string& identity, int64_t ttl_ms) override {
    return Flag(client_->Eval(acquire_, {key_}, {identity, std::to_string(ttl_ms)}), "acquire");
  }

  Result<bool> Release(const std::string& identity) override {
    return Flag(client_->Eval(release_, {key_}, {identity}), "release");
  }

  Result<std::string> Holder() override {
    Result<Reply> r = client_->Command({"GET", key_});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("lease: GET failed: " + r->str);
    if (r->type != Reply::Type::kString) return std::string();
    return std::move(r->str);
  }

 private:
  const std::shared_ptr<ValkeyClient> client_;
  const std::string key_;
  const Script acquire_{std::string(lua::kLeaseAcquire)};
  const Script release_{std::string(lua::kLeaseRelease)};
};

}  // namespace

std::shared_ptr<Lease> NewValkeyLease(std::shared_ptr<ValkeyClient> client, const std::string& name) {
  return std::make_shared<ValkeyLease>(std::move(client), name);
}

}  // namespace vramd::store
