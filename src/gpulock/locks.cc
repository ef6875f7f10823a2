#include "vramd/gpulock/locks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "vramd/parse.h"

namespace vramd::gpulock {
namespace {

bool AllOf(std::string_view s, std::string_view allowed_punct) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           allowed_punct.find(c) != std::string_view::npos;
  });
}

Status NotOwner(store::LockOwnership why, const std::string& node, int gpu, const std::string& owner) {
  std::string lock = "lock " + node + "/" + std::to_string(gpu);
  if (why == store::LockOwnership::kExpired) {
    return Conflict("not the owner: the lock of " + owner + " on " + lock +
                    " expired (no heartbeat within its TTL); it is free now");
  }
  if (why == store::LockOwnership::kOther) {
    return Conflict("not the owner: " + lock + " is held by another owner (the lock of " + owner +
                    ", if it had one, expired or was freed)");
  }
  return Conflict("not the owner: " + lock + " is free (expired or released); " + owner + " does not hold it");
}

}  // namespace

Status ValidateOwner(std::string_view owner) {
  size_t slash = owner.find('/');
  if (owner.empty()) return InvalidArgument("owner is required (\"POD_UID/INSTANCE\")");
  if (slash == std::string_view::npos) {
    return InvalidArgument("owner must be \"POD_UID/INSTANCE\" (a pod UID, a slash, a holder instance id)");
  }
  std::string_view pod = owner.substr(0, slash), inst = owner.substr(slash + 1);
  if (pod.empty() || pod.size() > kMaxOwnerPartLength || !AllOf(pod, "._-")) {
    return InvalidArgument("owner's pod UID part must be 1 to 128 characters of [A-Za-z0-9._-]");
  }
  if (inst.empty() || inst.size() > kMaxOwnerPartLength || !AllOf(inst, "._:@+-")) {
    return InvalidArgument("owner's instance part must be 1 to 128 characters of [A-Za-z0-9._:@+-]");
  }
  return Status::Ok();
}

std::string_view OwnerPod(std::string_view owner) { return owner.substr(0, owner.find('/')); }

bool LooksLikePodUid(std::string_view uid) {
  if (uid.size() != 36) return false;
  for (size_t i = 0; i < uid.size(); ++i) {
    char c = uid[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

Status ValidateNode(std::string_view node) {
  if (node.empty() || node.size() > 253 || !AllOf(node, "._-")) {
    return InvalidArgument("node name must be 1 to 253 characters of [A-Za-z0-9._-]");
  }
  return Status::Ok();
}

Status ValidateGpu(int gpu) {
  if (gpu < 0 || gpu > kMaxGpuIndex) {
    return InvalidArgument("GPU index must be from 0 to " + std::to_string(kMaxGpuIndex));
  }
  return Status::Ok();
}

Result<int> ParseGpu(std::string_view text) {
  std::optional<int> gpu = text.size() > 4 ? std::nullopt : ParseSmallInt(text, 9999);
  if (!gpu) return InvalidArgument("GPU index \"" + std::string(text.substr(0, 16)) + "\" is not a whole number");
  if (Status s = ValidateGpu(*gpu); !s.ok()) return s;
  return *gpu;
}

LockService::LockService(std::shared_ptr<store::LockStore> store, metrics::Registry* registry, LockOptions opts)
    : store_(std::move(store)), opts_(opts) {
  operations_ = &registry->AddCounter("vramd_lock_operations_total", "GPU lock operations by operation and result.",
                                      {"op", "result"});
  expirations_ = &registry->AddCounter("vramd_lock_expirations_total",
                                       "GPU locks whose holder let the TTL pass without releasing (detected at the "
                                       "next grant, or at the late holder's heartbeat or release).")
                      .With({});
  wait_seconds_ = &registry->AddHistogram("vramd_lock_wait_seconds",
                                          "Time from joining a GPU lock's queue to the grant (0 when it was free).",
                                          {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600})
                      .With({});
  registry->AddCollector([this](metrics::TextWriter& w) {
    Result<std::vector<LockInfo>> locks = List();
    if (!locks.ok()) return;
    auto labels = [](const LockInfo& l) {
      return std::vector<std::pair<std::string, std::string>>{{"node", l.node}, {"gpu", std::to_string(l.gpu)}};
    };
    w.Header("vramd_lock_held", "1 when the GPU lock is held.", "gauge");
    for (const LockInfo& l : *locks) w.Sample("vramd_lock_held", labels(l), l.holder.empty() ? 0 : 1);
    w.Header("vramd_lock_waiters", "Waiters queued for the GPU lock.", "gauge");
    for (const LockInfo& l : *locks) w.Sample("vramd_lock_waiters", labels(l), static_cast<double>(l.waiters.size()));
    w.Header("vramd_lock_fencing_token", "The last fencing token granted on the GPU.", "gauge");
    for (const LockInfo& l : *locks) w.Sample("vramd_lock_fencing_token", labels(l), static_cast<double>(l.token));
  });
}

LockService::~LockService() { Stop(); }

void LockService::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
}

void LockService::Wake() {
  {
    MutexLock lock(&mu_);
    ++wake_seq_;
  }
  cv_.NotifyAll();
}

void LockService::Count(const char* op, const char* result) { operations_->With({op, result}).Inc(); }

Result<AcquireResult> LockService::TryAcquire(const std::string& node, int gpu, const std::string& owner,
                                              int64_t ttl_ms, bool may_join) {
  Result<store::LockAcquireReply> r = store_->Acquire(node, gpu, owner, ttl_ms, opts_.max_queue, may_join);
  if (!r.ok()) return r.status();
  AcquireResult out;
  switch (r->state) {
    case store::LockAcquireState::kGranted:
    case store::LockAcquireState::kRefreshed:
      out.outcome = AcquireOutcome::kGranted;
      out.token = r->token;
      out.ttl_ms = ttl_ms;
      out.refreshed = r->state == store::LockAcquireState::kRefreshed;
      out.waited_ms = r->waited_ms;
      if (r->previous_expired) {
        expirations_->Inc();
        spdlog::info("GPU lock {}/{}: the previous holder expired; granted to {} (token {})", node, gpu, owner,
                     out.token);
      }
      break;
    case store::LockAcquireState::kQueued:
      out.outcome = AcquireOutcome::kQueued;
      out.position = r->position;
      break;
    case store::LockAcquireState::kQueueFull: out.outcome = AcquireOutcome::kQueueFull; break;
    case store::LockAcquireState::kGone:
      return Conflict("left the queue of lock " + node + "/" + std::to_string(gpu) +
                      " while waiting (released or reaped meanwhile)");
  }
  return out;
}

Result<AcquireResult> LockService::Acquire(const std::string& node, int gpu, const std::string& owner,
                                           int64_t ttl_ms, int64_t wait_ms) {
  Status valid = ValidateNode(node);
  if (valid.ok()) valid = ValidateGpu(gpu);
  if (valid.ok()) valid = ValidateOwner(owner);
  if (valid.ok() && (ttl_ms < kMinTtlMs || ttl_ms > kMaxTtlMs)) {
    valid = InvalidArgument("TTL must be from " + std::to_string(kMinTtlMs) + " ms to 24 h");
  }
  if (valid.ok() && wait_ms < 0) valid = InvalidArgument("wait must not be negative");
  if (!valid.ok()) {
    Count("acquire", "invalid");
    return valid;
  }
  wait_ms = std::min(wait_ms, kMaxWaitMs);
  // Blocking calls hold an HTTP worker: only a few may, so filter and bind
  // always find a free one. The others answer at once and the client polls.
  bool waiting = false;
  if (wait_ms > 0) {
    if (waiting_calls_.fetch_add(1) < opts_.max_waiting_calls) {
      waiting = true;
    } else {
      waiting_calls_.fetch_sub(1);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waiting ? wait_ms : 0);
  Result<AcquireResult> r = Internal("unreachable");
  for (bool first = true;; first = false) {
    uint64_t seen;
    {
      MutexLock lock(&mu_);
      seen = wake_seq_;
    }
    r = TryAcquire(node, gpu, owner, ttl_ms, /*may_join=*/first);
    if (!r.ok() || r->outcome != AcquireOutcome::kQueued) break;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    MutexLock lock(&mu_);
    if (stopping_) break;
    const auto until = std::min(deadline, now + std::chrono::milliseconds(opts_.poll_interval_ms));
    // Until a release in this process, Stop(), or the next poll.
    while (!stopping_ && wake_seq_ == seen) {
      if (!cv_.WaitUntil(&lock, until)) break;
    }
  }
  if (waiting) waiting_calls_.fetch_sub(1);
  if (!r.ok()) {
    Count("acquire", r.status().code() == Code::kConflict ? "left_queue" : "error");
    return r;
  }
  switch (r->outcome) {
    case AcquireOutcome::kGranted:
      if (r->refreshed) {
        Count("acquire", "refreshed");
      } else {
        Count("acquire", "granted");
        wait_seconds_->Observe(static_cast<double>(r->waited_ms) / 1000.0);
      }
      break;
    case AcquireOutcome::kQueued: Count("acquire", "queued"); break;
    case AcquireOutcome::kQueueFull: Count("acquire", "queue_full"); break;
  }
  return r;
}

Result<HeartbeatResult> LockService::Heartbeat(const std::string& node, int gpu, const std::string& owner,
                                               int64_t ttl_ms) {
  Status valid = ValidateNode(node);
  if (valid.ok()) valid = ValidateGpu(gpu);
  if (valid.ok()) valid = ValidateOwner(owner);
  if (valid.ok() && ttl_ms != 0 && (ttl_ms < kMinTtlMs || ttl_ms > kMaxTtlMs)) {
    valid = InvalidArgument("TTL must be from " + std::to_string(kMinTtlMs) + " ms to 24 h");
  }
  if (!valid.ok()) {
    Count("heartbeat", "invalid");
    return valid;
  }
  Result<store::LockHeartbeatReply> r = store_->Heartbeat(node, gpu, owner, ttl_ms, kDefaultTtlMs);
  if (!r.ok()) {
    Count("heartbeat", "error");
    return r.status();
  }
  if (r->ownership == store::LockOwnership::kHolder) {
    Count("heartbeat", "ok");
    return HeartbeatResult{r->token, r->ttl_ms};
  }
  if (r->ownership == store::LockOwnership::kExpired) expirations_->Inc();
  Count("heartbeat", "not_owner");
  return NotOwner(r->ownership, node, gpu, owner);
}

Result<ReleaseResult> LockService::Release(const std::string& node, int gpu, const std::string& owner) {
  Status valid = ValidateNode(node);
  if (valid.ok()) valid = ValidateGpu(gpu);
  if (valid.ok()) valid = ValidateOwner(owner);
  if (!valid.ok()) {
    Count("release", "invalid");
    return valid;
  }
  Result<store::LockReleaseReply> r = store_->Release(node, gpu, owner);
  if (!r.ok()) {
    Count("release", "error");
    return r.status();
  }
  if (r->released) {
    Count("release", "released");
    Wake();
    return ReleaseResult{true, false};
  }
  if (r->left_queue) {
    Count("release", "left_queue");
    Wake();  // the head may have changed
    return ReleaseResult{false, true};
  }
  if (r->ownership == store::LockOwnership::kExpired) expirations_->Inc();
  Count("release", "not_owner");
  return NotOwner(r->ownership, node, gpu, owner);
}

Result<std::vector<LockInfo>> LockService::List() {
  Result<std::vector<store::LockRecord>> r = store_->List();
  if (!r.ok()) {
    Count("list", "error");
    return r.status();
  }
  // Keys this service would never have written (names it does not accept)
  // are not locks.
  std::vector<LockInfo> out;
  out.reserve(r->size());
  for (store::LockRecord& l : *r) {
    if (ValidateNode(l.node).ok() && ValidateGpu(l.gpu).ok()) out.push_back(std::move(l));
  }
  Count("list", "ok");
  return out;
}

Result<int> LockService::ReapLocksOfMissingPods(const std::function<bool(const std::string&)>& exists) {
  Result<std::vector<LockInfo>> locks = List();
  if (!locks.ok()) {
    Count("reap", "error");
    return locks.status();
  }
  std::map<std::string, bool> known;  // pod UID -> exists, asked once per pass
  auto gone = [&](const std::string& owner) {
    std::string pod(OwnerPod(owner));
    if (!LooksLikePodUid(pod)) return false;
    auto it = known.find(pod);
    if (it == known.end()) it = known.emplace(pod, exists(pod)).first;
    return !it->second;
  };
  int freed = 0;
  for (const LockInfo& l : *locks) {
    std::string holder;
    if (!l.holder.empty() && gone(l.holder)) holder = l.holder;
    std::vector<std::string> waiters;
    for (const Waiter& w : l.waiters) {
      if (gone(w.owner)) waiters.push_back(w.owner);
    }
    if (holder.empty() && waiters.empty()) continue;
    Result<store::LockReapReply> r = store_->Reap(l.node, l.gpu, holder, waiters);
    if (!r.ok()) {
      Count("reap", "error");
      return r.status();
    }
    if (r->freed) {
      ++freed;
      Count("reap", "freed");
      spdlog::info("GPU lock {}/{}: freed; its holder {} belongs to a pod that no longer exists", l.node, l.gpu,
                   l.holder);
    }
    if (r->waiters_removed > 0) Count("reap", "waiters_removed");
  }
  if (freed > 0) Wake();
  // The lock activity of gone pods, on every node that has locks.
  std::vector<std::string> nodes;
  for (const LockInfo& l : *locks) {
    if (nodes.empty() || nodes.back() != l.node) nodes.push_back(l.node);  // List is sorted by node
  }
  Result<std::map<std::string, int64_t>> active = store_->ReadActivity(nodes);
  if (!active.ok()) {
    Count("reap", "error");
    return active.status();
  }
  std::vector<std::string> gone_pods;
  for (const auto& [pod, ms] : *active) {
    if (gone(pod)) gone_pods.push_back(pod);
  }
  if (Status s = store_->ForgetActivity(nodes, gone_pods); !s.ok()) {
    Count("reap", "error");
    return s;
  }
  return freed;
}

}  // namespace vramd::gpulock
