// GPU locks (DESIGN.md §5): one holder computes on a GPU at a time. A lock
// has a TTL that the holder extends with heartbeats, a FIFO queue of waiters
// and a fencing token that strictly increases per GPU across all grants ever.
// Locks live in Valkey and every operation is one atomic Lua script, so any
// number of vramd replicas may serve them. They never touch filter or bind.
//
// Keys (P = the client's prefix, N = node, G = GPU index):
//   P:lock:gpu:{N}:G            the holder: value = owner, PX = TTL
//   P:lock:gpu:{N}:G:fence      INCR counter: the last token granted (never reset)
//   P:lock:gpu:{N}:G:queue      ZSET owner -> arrival (server ms × 1000 + tiebreak)
//   P:lock:gpu:{N}:G:queue:exp  ZSET owner -> deadline (server ms); a waiter
//                               that does not poll before it loses its place
//   P:lock:gpu:{N}:G:last       HASH owner, token, ttl_ms, granted_ms of the
//                               current grant; deleted on release, so finding it
//                               on a free lock means its holder expired
//
// Grant rule: the lock is granted to a caller iff it is free AND (the queue is
// empty OR the caller is the head of the queue after pruning waiters whose
// deadline passed). Otherwise the caller is queued at the tail (or, if already
// queued, keeps its place and its deadline moves to now + its TTL). Waiters
// poll: a release does not hand the lock over, it only makes it free, and
// only the queue head can take it (on its next poll). A head that stopped
// polling blocks the queue at most until its own TTL passes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/status.h"
#include "vramd/store/lock_store.h"

namespace vramd::gpulock {

// Limits on what callers may ask for.
inline constexpr int64_t kMinTtlMs = 100;
inline constexpr int64_t kMaxTtlMs = 24LL * 3600 * 1000;
inline constexpr int64_t kDefaultTtlMs = 60'000;
inline constexpr int64_t kMaxWaitMs = 30'000;
inline constexpr int kMaxGpuIndex = 1023;
inline constexpr size_t kMaxOwnerPartLength = 128;

// An owner is "POD_UID/INSTANCE": the pod's UID (or any identifier of the
// workload outside Kubernetes: [A-Za-z0-9._-], 1..128 chars) and a holder
// instance id ([A-Za-z0-9._:@+-], 1..128 chars), e.g. "3f1c…-…/trainer-0-1234".
// Returns kInvalidArgument with a message that names the problem.
Status ValidateOwner(std::string_view owner);
// The pod UID part of a valid owner.
std::string_view OwnerPod(std::string_view owner);
// True when `uid` has the shape of a Kubernetes UID (RFC 4122 text form);
// only such owners are ever reaped for a missing pod.
bool LooksLikePodUid(std::string_view uid);
// Node names: 1..253 chars of [A-Za-z0-9._-].
Status ValidateNode(std::string_view node);
// GPU indices: 0..kMaxGpuIndex.
Status ValidateGpu(int gpu);
// Parses a GPU index written as decimal digits ("0", "7").
Result<int> ParseGpu(std::string_view text);

struct LockOptions {
  int64_t poll_interval_ms = 50;   // how often a waiting acquire retries
  int max_waiting_calls = 3;       // acquires allowed to block at once; others answer at once
  int max_queue = 1024;            // waiters per GPU
};

enum class AcquireOutcome { kGranted, kQueued, kQueueFull };

struct AcquireResult {
  AcquireOutcome outcome = AcquireOutcome::kQueued;
  uint64_t token = 0;      // kGranted: the fencing token of this grant
  int64_t ttl_ms = 0;      // kGranted: the TTL now set
  bool refreshed = false;  // kGranted: the caller already held it (same token, TTL reset)
  int position = 0;        // kQueued: 1-based place in the queue
  int64_t waited_ms = 0;   // kGranted: time since the caller joined the queue (0 if it never queued)
};

struct HeartbeatResult {
  uint64_t token = 0;
  int64_t ttl_ms = 0;
};

struct ReleaseResult {
  bool released = false;    // the caller held the lock and freed it
  bool left_queue = false;  // the caller was waiting and left the queue
};

// A waiter (owner, expires_in_ms) and a GPU's lock (node, gpu, holder,
// ttl_ms, token, granted_ms on the store's clock, waiters in queue order
// with expired ones left out), as the store keeps them.
using Waiter = store::LockWaiter;
using LockInfo = store::LockRecord;

// Thread-safe. Every operation except List and Reap is one atomic store
// call; transport failures are kUnavailable. The registry must not render
// after the service is destroyed (a scrape-time collector lists the locks).
class LockService {
 public:
  LockService(std::shared_ptr<store::LockStore> store, metrics::Registry* registry, LockOptions opts = {});
  ~LockService();
  LockService(const LockService&) = delete;
  LockService& operator=(const LockService&) = delete;

  // Grants the lock or queues the caller (see the grant rule above). With
  // wait_ms > 0 (capped at kMaxWaitMs) the call retries every
  // poll_interval_ms, keeping its place, until granted or the wait is over;
  // when max_waiting_calls are already blocked it answers at once instead.
  // Only the first try of a call may join the queue: if the caller leaves it
  // meanwhile (its release, or the reaper), the call ends with kConflict, so
  // a client that gave up and released is neither queued again nor granted
  // by its abandoned call.
  // A re-acquire by the holder is idempotent: same token, TTL reset to ttl_ms.
  Result<AcquireResult> Acquire(const std::string& node, int gpu, const std::string& owner, int64_t ttl_ms,
                                int64_t wait_ms = 0);
  // Resets the TTL (ttl_ms, or the TTL of the grant when 0) only if `owner`
  // holds the lock; otherwise kConflict, whose message says whether the
  // caller's lock expired, the lock is free, or another owner holds it.
  Result<HeartbeatResult> Heartbeat(const std::string& node, int gpu, const std::string& owner, int64_t ttl_ms = 0);
  // Frees the lock if `owner` holds it; a queued owner leaves the queue.
  // Otherwise kConflict, with the same messages as Heartbeat.
  Result<ReleaseResult> Release(const std::string& node, int gpu, const std::string& owner);
  // Every GPU that has or had a lock, sorted by node and GPU.
  Result<std::vector<LockInfo>> List();
  // For the leader: frees locks whose holder's pod is gone, and removes the
  // pod's waiters, and forgets the lock activity of such pods on the nodes
  // that have locks. `exists(pod_uid)` is asked only for owners whose pod part
  // looks like a Kubernetes UID; it must answer true when unsure. Returns the
  // number of locks freed.
  Result<int> ReapLocksOfMissingPods(const std::function<bool(const std::string& pod_uid)>& exists);

  // Makes waiting acquires return now and later ones not wait (shutdown).
  void Stop();

 private:
  Result<AcquireResult> TryAcquire(const std::string& node, int gpu, const std::string& owner, int64_t ttl_ms,
                                   bool may_join);
  void Count(const char* op, const char* result);
  void Wake();

  std::shared_ptr<store::LockStore> store_;
  LockOptions opts_;
  metrics::Family<metrics::Counter>* operations_;
  metrics::Counter* expirations_;
  metrics::Histogram* wait_seconds_;

  std::atomic<int> waiting_calls_{0};
  Mutex mu_;
  CondVar cv_;
  uint64_t wake_seq_ GUARDED_BY(mu_) = 0;  // moves on every release in this process
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace vramd::gpulock
