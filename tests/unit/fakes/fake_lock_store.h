// An in-memory store::LockStore with the semantics of src/store/lua/lock_*.lua
// (the grant rule, FIFO queue with deadlines, fencing, grant records, lock
// activity per node), on an
// injected clock standing for the server's. The Valkey store is tested
// against a real server in tests/integration/gpulock_test.cc.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vramd/clock.h"
#include "vramd/mutex.h"
#include "vramd/store/lock_store.h"

namespace vramd::testing {

class FakeLockStore : public store::LockStore {
 public:
  explicit FakeLockStore(const Clock* clock) : clock_(clock) {}

  bool unavailable = false;  // every call fails with kUnavailable
  int calls = 0;             // calls that reached the store

  Result<store::LockAcquireReply> Acquire(const std::string& node, int gpu, const std::string& owner, int64_t ttl_ms,
                                          int max_queue, bool may_join) override {
    MutexLock l(&mu_);
    if (Status s = Enter(); !s.ok()) return s;
    const int64_t now = clock_->NowMs();
    Gpu& g = gpus_[{node, gpu}];
    store::LockAcquireReply out;
    const std::string cur = g.HolderAt(now);
    if (cur == owner) {
      g.expires_ms = now + ttl_ms;
      g.EnsureLast().ttl_ms = ttl_ms;
      Stamp(node, owner, now);
      out.state = store::LockAcquireState::kRefreshed;
      out.token = g.fence;
      return out;
    }
    std::erase_if(g.queue, [&](const Waiter& w) { return w.deadline_ms <= now; });
    auto queued = [&] {
      return std::find_if(g.queue.begin(), g.queue.end(), [&](const Waiter& w) { return w.owner == owner; });
    };
    if (!may_join && queued() == g.queue.end()) {
      out.state = store::LockAcquireState::kGone;
      return out;
    }
    if (cur.empty() && (g.queue.empty() || g.queue.front().owner == owner)) {
      if (!g.queue.empty()) {
        out.waited_ms = std::max<int64_t>(0, now - g.queue.front().arrival / 1000);
        g.queue.erase(g.queue.begin());
      }
      out.previous_expired = g.last.has_value();
      g.holder = owner;
      g.expires_ms = now + ttl_ms;
      out.token = ++g.fence;
      g.last = Grant{owner, out.token, ttl_ms, now};
      Stamp(node, owner, now);
      out.state = store::LockAcquireState::kGranted;
      return out;
    }
    auto it = queued();
    if (it == g.queue.end()) {
      if (static_cast<int>(g.queue.size()) >= max_queue) {
        out.state = store::LockAcquireState::kQueueFull;
        return out;
      }
      int64_t arrival = now * 1000;
      if (!g.queue.empty() && g.queue.back().arrival >= arrival) arrival = g.queue.back().arrival + 1;
      g.queue.push_back(Waiter{owner, arrival, 0});
      it = g.queue.end() - 1;
    }
    it->deadline_ms = now + ttl_ms;
    Stamp(node, owner, now);
    out.state = store::LockAcquireState::kQueued;
    out.position = static_cast<int>(it - g.queue.begin()) + 1;
    return out;
  }

  Result<store::LockHeartbeatReply> Heartbeat(const std::string& node, int gpu, const std::string& owner,
                                              int64_t ttl_ms, int64_t default_ttl_ms) override {
    MutexLock l(&mu_);
    if (Status s = Enter(); !s.ok()) return s;
    const int64_t now = clock_->NowMs();
    auto found = gpus_.find({node, gpu});
    if (found == gpus_.end()) return store::LockHeartbeatReply{store::LockOwnership::kFree, 0, 0};
    Gpu& g = found->second;
    const std::string cur = g.HolderAt(now);
    if (cur != owner) return store::LockHeartbeatReply{NotOwner(g, cur, owner), 0, 0};
    if (ttl_ms <= 0) {
      ttl_ms = g.last && g.last->ttl_ms > 0 ? g.last->ttl_ms : default_ttl_ms;
    } else {
      g.EnsureLast().ttl_ms = ttl_ms;
    }
    g.expires_ms = now + ttl_ms;
    Stamp(node, owner, now);
    return store::LockHeartbeatReply{store::LockOwnership::kHolder, g.fence, ttl_ms};
  }

  Result<store::LockReleaseReply> Release(const std::string& node, int gpu, const std::string& owner) override {
    MutexLock l(&mu_);
    if (Status s = Enter(); !s.ok()) return s;
    store::LockReleaseReply out;
    auto found = gpus_.find({node, gpu});
    if (found == gpus_.end()) return out;  // free
    Gpu& g = found->second;
    const std::string cur = g.HolderAt(clock_->NowMs());
    if (cur == owner) {
      g.holder.clear();
      g.last.reset();
      Stamp(node, owner, clock_->NowMs());
      out.released = true;
      out.ownership = store::LockOwnership::kHolder;
      return out;
    }
    if (std::erase_if(g.queue, [&](const Waiter& w) { return w.owner == owner; }) > 0) {
      Stamp(node, owner, clock_->NowMs());
      out.left_queue = true;
      return out;
    }
    out.ownership = NotOwner(g, cur, owner);
    return out;
  }

  Result<store::LockReapReply> Reap(const std::string& node, int gpu, const std::string& holder,
                                    const std::vector<std::string>& waiters) override {
    MutexLock l(&mu_);
    if (Status s = Enter(); !s.ok()) return s;
    store::LockReapReply out;
    auto found = gpus_.find({node, gpu});
    if (found == gpus_.end()) return out;
    Gpu& g = found->second;
    if (!holder.empty() && g.HolderAt(clock_->NowMs()) == holder) {
      g.holder.clear();
      if (g.last && g.last->owner == holder) g.last.reset();
      out.freed = true;
    }
    for (const std::string& w : waiters) {
      out.waiters_removed += static_cast<int>(std::erase_if(g.queue, [&](const Waiter& q) { return q.owner == w; }));
    }
    return out;
  }

  Result<std::vector<store::LockRecord>> List() override {
    MutexLock l(&mu_);
    if (Status s = Enter(); !s.ok()) return s;
    const int64_t now = clock_->NowMs();
    std::vector<store::LockRecord> out;
    for (const auto& [key, g] : gpus_) {
      store::LockRecord r;
      r.node = key.first;
      r.gpu = key.second;
      r.holder = g.HolderAt(now);
      if (!r.holder.empty()) {
        r.ttl_ms = g.expires_ms - now;
        if (g.last && g.last->owner == r.holder) r.granted_ms = g.last->granted_ms;
      }
      r.token = g.fence;
      for (const Waiter& w : g.queue) {
        if (w.deadline_ms > now) r.waiters.push_back(store::LockWaiter{w.owner, w.deadline_ms - now});
      }
      // A GPU whose keys would all be gone in Valkey is not listed.
      if (r.holder.empty() && r.token == 0 && r.waiters.empty() && !g.last) continue;
      out.push_back(std::move(r));
    }
    return out;
  }

  Result<std::map<std::string, int64_t>> ReadActivity(const std::vector<std::string>& nodes) override {
    MutexLock l(&mu_);
    if (Status s = Enter(); !s.ok()) return s;
    std::map<std::string, int64_t> out;
    for (const std::string& node : nodes) {
      auto it = active_.find(node);
      if (it == active_.end()) continue;
      for (const auto& [pod, ms] : it->second) out[pod] = std::max(out[pod], ms);
    }
    return out;
  }

  Status ForgetActivity(const std::vector<std::string>& nodes, const std::vector<std::string>& pods) override {
    MutexLock l(&mu_);
    if (Status s = Enter(); !s.ok()) return s;
    for (const std::string& node : nodes) {
      auto it = active_.find(node);
      if (it == active_.end()) continue;
      for (const std::string& pod : pods) it->second.erase(pod);
      if (it->second.empty()) active_.erase(it);
    }
    return Status::Ok();
  }

  // Test setup: records activity as the lock calls would.
  void SetActivity(const std::string& node, const std::string& pod, int64_t ms) {
    MutexLock l(&mu_);
    active_[node][pod] = ms;
  }

 private:
  struct Waiter {
    std::string owner;
    int64_t arrival = 0;      // store ms × 1000 + tiebreak, increasing along the queue
    int64_t deadline_ms = 0;  // loses its place at this time
  };
  struct Grant {
    std::string owner;
    uint64_t token = 0;
    int64_t ttl_ms = 0;
    int64_t granted_ms = 0;
  };
  struct Gpu {
    std::string holder;  // valid while now < expires_ms
    int64_t expires_ms = 0;
    uint64_t fence = 0;
    std::vector<Waiter> queue;
    std::optional<Grant> last;

    std::string HolderAt(int64_t now) const { return now < expires_ms ? holder : std::string(); }
    Grant& EnsureLast() {
      if (!last) last = Grant{};
      return *last;
    }
  };

  // lock_not_owner.lua: a lapsed grant of `owner` is reported once.
  static store::LockOwnership NotOwner(Gpu& g, const std::string& cur, const std::string& owner) {
    if (!cur.empty()) return store::LockOwnership::kOther;
    if (g.last && g.last->owner == owner) {
      g.last.reset();
      return store::LockOwnership::kExpired;
    }
    return store::LockOwnership::kFree;
  }

  // lock_now.lua's stamp_active: the owner's pod part -> now, per node.
  void Stamp(const std::string& node, const std::string& owner, int64_t now) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    active_[node][owner.substr(0, owner.find('/'))] = now;
  }

  Status Enter() EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++calls;
    return unavailable ? Unavailable("fake lock store down") : Status::Ok();
  }

  const Clock* clock_;
  Mutex mu_;
  std::map<std::pair<std::string, int>, Gpu> gpus_ GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, int64_t>> active_ GUARDED_BY(mu_);  // node -> pod part -> ms
};

}  // namespace vramd::testing
