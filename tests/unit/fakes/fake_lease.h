// An in-memory store::Lease with the semantics of src/store/lua/lease_*.lua,
// on an injected clock (the store's clock: the lease lapses ttl_ms after its
// last acquire or renewal).
#pragma once

#include <string>

#include "vramd/clock.h"
#include "vramd/mutex.h"
#include "vramd/store/lease.h"

namespace vramd::testing {

class FakeLease : public store::Lease {
 public:
  explicit FakeLease(const Clock* clock) : clock_(clock) {}

  bool unavailable = false;  // every call fails with kUnavailable

  Result<bool> TryAcquireOrRenew(const std::string& identity, int64_t ttl_ms) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake lease store down");
    const std::string cur = HolderLocked();
    if (!cur.empty() && cur != identity) return false;
    holder_ = identity;
    expires_ms_ = clock_->NowMs() + ttl_ms;
    return true;
  }

  Result<bool> Release(const std::string& identity) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake lease store down");
    if (HolderLocked() != identity) return false;
    holder_.clear();
    return true;
  }

  Result<std::string> Holder() override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake lease store down");
    return HolderLocked();
  }

 private:
  std::string HolderLocked() const EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return clock_->NowMs() < expires_ms_ ? holder_ : std::string();
  }

  const Clock* clock_;
  Mutex mu_;
  std::string holder_ GUARDED_BY(mu_);      // valid while now < expires_ms_
  int64_t expires_ms_ GUARDED_BY(mu_) = 0;
};

}  // namespace vramd::testing
