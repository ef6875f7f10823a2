// Storage of the GPU locks (gpulock/locks.h has the semantics): one holder
// with a TTL, a fencing counter, a FIFO queue of waiters with deadlines and a
// record of the current grant, per GPU. Each call is one atomic step on the
// store's own clock (Valkey: one Lua script reading TIME), so any number of
// vramd replicas may share the locks. Validation, messages, metrics and the
// waiting loop are gpulock's; nothing here checks names or limits.
//
// Grant rule (every implementation): a caller is granted iff the lock is free
// AND (the queue is empty OR the caller is the queue head after waiters whose
// deadline passed were pruned). Otherwise it is queued at the tail (or keeps
// its place, its deadline moving to now + its TTL). The fencing token is
// incremented on every grant and never reset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vramd/status.h"

namespace vramd::store {

class ValkeyClient;

enum class LockAcquireState {
  kGranted,    // newly granted: token is the new fencing token
  kRefreshed,  // the caller already held it: same token, TTL reset
  kQueued,     // position is the caller's 1-based place in the queue
  kQueueFull,  // not queued: the queue already holds max_queue waiters
  kGone,       // may_join was false and the caller is not queued (any more)
};

struct LockAcquireReply {
  LockAcquireState state = LockAcquireState::kQueued;
  uint64_t token = 0;           // kGranted, kRefreshed
  bool previous_expired = false;  // kGranted: the last grant ended by its TTL, not a release
  int64_t waited_ms = 0;        // kGranted: time since the caller joined the queue (0 if it never did)
  int position = 0;             // kQueued
};

// Why a caller that is not the holder is refused. kExpired: its own grant
// lapsed (reported once: the grant record is dropped when this is answered).
enum class LockOwnership { kHolder, kOther, kExpired, kFree };

struct LockHeartbeatReply {
  LockOwnership ownership = LockOwnership::kFree;
  uint64_t token = 0;   // kHolder
  int64_t ttl_ms = 0;   // kHolder: the TTL now set
};

struct LockReleaseReply {
  bool released = false;    // the caller held the lock and freed it
  bool left_queue = false;  // the caller was waiting and left the queue
  LockOwnership ownership = LockOwnership::kFree;  // neither: why (kOther, kExpired or kFree)
};

struct LockWaiter {
  std::string owner;
  int64_t expires_in_ms = 0;  // loses its place unless it polls before this
};

// One GPU's lock as stored.
struct LockRecord {
  std::string node;
  int gpu = 0;
  std::string holder;        // empty when free
  int64_t ttl_ms = 0;        // left, when held
  uint64_t token = 0;        // the last token granted on this GPU
  int64_t granted_ms = 0;    // when the current holder got it (store clock, ms since the epoch)
  std::vector<LockWaiter> waiters;  // in queue order, expired ones left out
};

struct LockReapReply {
  bool freed = false;       // the named holder still held the lock and it was freed
  int waiters_removed = 0;
};

// GPU-lock activity (read by idle eviction): Acquire (granted, refreshed or
// queued), a holder's Heartbeat, and Release (released or left the queue)
// record, per node, the owner's pod part (before the first '/', the whole
// owner when there is none) -> the store's time in ms. Nothing else records.

// Thread-safe. Transport failures are kUnavailable; an answer the
// implementation cannot read is kInternal.
class LockStore {
 public:
  virtual ~LockStore() = default;

  // The grant rule above, for `owner` with `ttl_ms`. A queued caller's
  // deadline becomes now + ttl_ms. With may_join false a caller that is not
  // in the queue is not added (kGone) unless it holds the lock already.
  virtual Result<LockAcquireReply> Acquire(const std::string& node, int gpu, const std::string& owner,
                                           int64_t ttl_ms, int max_queue, bool may_join) = 0;
  // Resets the holder's TTL to ttl_ms (0: the grant's TTL, or default_ttl_ms
  // when the grant has none recorded). Only the holder; else why not.
  virtual Result<LockHeartbeatReply> Heartbeat(const std::string& node, int gpu, const std::string& owner,
                                               int64_t ttl_ms, int64_t default_ttl_ms) = 0;
  // Frees the lock if `owner` holds it, else takes `owner` out of the queue.
  virtual Result<LockReleaseReply> Release(const std::string& node, int gpu, const std::string& owner) = 0;
  // Frees the lock if `holder` (non-empty) still holds it, and removes the
  // named waiters from the queue.
  virtual Result<LockReapReply> Reap(const std::string& node, int gpu, const std::string& holder,
                                     const std::vector<std::string>& waiters) = 0;
  // Every GPU that has or had a lock, sorted by node and GPU. Names are not
  // validated here (the caller skips what it would not accept).
  virtual Result<std::vector<LockRecord>> List() = 0;
  // Pod part -> last lock activity (store ms) on any of `nodes` (the latest
  // where a pod part has some on several). Recorded values that are not
  // plausible times are left out.
  virtual Result<std::map<std::string, int64_t>> ReadActivity(const std::vector<std::string>& nodes) = 0;
  // Forgets the activity of `pods` (pod parts) on each of `nodes`.
  virtual Status ForgetActivity(const std::vector<std::string>& nodes, const std::vector<std::string>& pods) = 0;
};

// Locks under client->prefix() (keys in docs/architecture.md and
// src/store/valkey_lock_store.cc); keeps the client alive.
std::shared_ptr<LockStore> NewValkeyLockStore(std::shared_ptr<ValkeyClient> client);

}  // namespace vramd::store
