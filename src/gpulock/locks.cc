#include "vramd/gpulock/locks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <utility>

#include "vramd/parse.h"

namespace vramd::gpulock {
namespace {

using store::Reply;

bool AllOf(std::string_view s, std::string_view allowed_punct) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           allowed_punct.find(c) != std::string_view::npos;
  });
}

// Every script reads the server's clock, so deadlines do not depend on the
// clocks of the vramd replicas.
constexpr const char* kNowLua = R"(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
)";

// KEYS: holder, fence, queue, queue_exp, last. ARGV: owner, ttl_ms, max_queue,
// may_join ('0' on the retries of a waiting call: a caller no longer queued,
// because it released or was reaped meanwhile, is not queued again).
// -> {'held'|'granted', token, expired, waited_ms} | {'queued', position} | {'full'} | {'gone'}
const store::Script& AcquireScript() {
  static const store::Script s(std::string(kNowLua) + R"(
local owner, ttl = ARGV[1], tonumber(ARGV[2])
local cur = redis.call('GET', KEYS[1])
if cur == owner then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('HSET', KEYS[5], 'ttl_ms', ttl)
  return {'held', tonumber(redis.call('GET', KEYS[2]) or '0'), 0, 0}
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
if #dead > 0 then
  redis.call('ZREM', KEYS[3], unpack(dead))
  redis.call('ZREM', KEYS[4], unpack(dead))
end
if ARGV[4] == '0' and not redis.call('ZSCORE', KEYS[3], owner) then return {'gone'} end
if not cur then
  local head = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if #head == 0 or head[1] == owner then
    local waited = 0
    if #head > 0 then
      waited = math.max(0, now - math.floor(tonumber(head[2]) / 1000))
      redis.call('ZREM', KEYS[3], owner)
      redis.call('ZREM', KEYS[4], owner)
    end
    local expired = redis.call('EXISTS', KEYS[5])
    redis.call('SET', KEYS[1], owner, 'PX', ttl)
    local token = redis.call('INCR', KEYS[2])
    redis.call('DEL', KEYS[5])
    redis.call('HSET', KEYS[5], 'owner', owner, 'token', token, 'ttl_ms', ttl, 'granted_ms', now)
    return {'granted', token, expired, waited}
  end
end
if not redis.call('ZSCORE', KEYS[3], owner) then
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[3]) then return {'full'} end
  local arrival = now * 1000
  local tail = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if #tail > 0 and tonumber(tail[2]) >= arrival then arrival = tonumber(tail[2]) + 1 end
  redis.call('ZADD', KEYS[3], arrival, owner)
end
redis.call('ZADD', KEYS[4], now + ttl, owner)
local last = tonumber(redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIREAT', KEYS[3], last + 1000)
redis.call('PEXPIREAT', KEYS[4], last + 1000)
return {'queued', redis.call('ZRANK', KEYS[3], owner) + 1}
)");
  return s;
}

// A caller that does not hold the lock: why. Deletes `last` when it names the
// caller on a free lock (its lock expired; counted once, here or at the next grant).
constexpr const char* kNotOwnerLua = R"(
if cur then return {'other', 0, 0} end
if redis.call('HGET', KEYS[last_key], 'owner') == ARGV[1] then
  redis.call('DEL', KEYS[last_key])
  return {'expired', 0, 0}
end
return {'free', 0, 0}
)";

std::string NotOwnerLua(int last_key) {
  std::string s = kNotOwnerLua;
  for (size_t p; (p = s.find("last_key")) != std::string::npos;) s.replace(p, 8, std::to_string(last_key));
  return s;
}

// KEYS: holder, fence, last. ARGV: owner, ttl_ms (0: the grant's TTL), default ttl.
// -> {'ok', token, ttl_ms} | {'other'|'expired'|'free', 0, 0}
const store::Script& HeartbeatScript() {
  static const store::Script s(R"(
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  local ttl = tonumber(ARGV[2])
  if ttl <= 0 then
    ttl = tonumber(redis.call('HGET', KEYS[3], 'ttl_ms') or ARGV[3])
  else
    redis.call('HSET', KEYS[3], 'ttl_ms', ttl)
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {'ok', tonumber(redis.call('GET', KEYS[2]) or '0'), ttl}
end
)" + NotOwnerLua(3));
  return s;
}

// KEYS: holder, last, queue, queue_exp. ARGV: owner.
// -> {'released'|'left_queue'|'other'|'expired'|'free', 0, 0}
const store::Script& ReleaseScript() {
  static const store::Script s(R"(
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {'released', 0, 0}
end
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('ZREM', KEYS[3], ARGV[1]) == 1 then return {'left_queue', 0, 0} end
)" + NotOwnerLua(2));
  return s;
}

// KEYS: holder, last, queue, queue_exp. ARGV: holder owner to free ('' for
// none), then waiters to remove. -> {freed (0/1), waiters removed}
const store::Script& ReapScript() {
  static const store::Script s(R"(
local freed = 0
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if redis.call('HGET', KEYS[2], 'owner') == ARGV[1] then redis.call('DEL', KEYS[2]) end
  freed = 1
end
local removed = 0
for i = 2, #ARGV do
  removed = removed + redis.call('ZREM', KEYS[3], ARGV[i])
  redis.call('ZREM', KEYS[4], ARGV[i])
end
return {freed, removed}
)");
  return s;
}

int64_t Int(const Reply& r) {
  if (r.type == Reply::Type::kInteger) return r.integer;
  if (r.type == Reply::Type::kString) return ParseInt64(r.str).value_or(0);
  return 0;
}

// A script answer of the shape {label, n...}; kInternal when it is not one.
Result<std::vector<Reply>> ScriptArray(Result<Reply> r, const char* what) {
  if (!r.ok()) return r.status();
  if (r->is_error()) return Internal(std::string(what) + " script failed: " + r->str);
  if (r->type != Reply::Type::kArray || r->elements.empty()) {
    return Internal(std::string(what) + " script returned an unexpected reply");
  }
  return std::move(r->elements);
}

Status NotOwner(const std::string& label, const std::string& node, int gpu, const std::string& owner) {
  std::string lock = "lock " + node + "/" + std::to_string(gpu);
  if (label == "expired") {
    return Conflict("not the owner: the lock of " + owner + " on " + lock +
                    " expired (no heartbeat within its TTL); it is free now");
  }
  if (label == "other") {
    return Conflict("not the owner: " + lock + " is held by another owner (the lock of " + owner +
                    ", if it had one, expired or was freed)");
  }
  return Conflict("not the owner: " + lock + " is free (expired or released); " + owner + " does not hold it");
}

std::string GlobEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::map<std::string, std::string> HashOf(const Reply& r) {
  std::map<std::string, std::string> m;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) m[r.elements[i].str] = r.elements[i + 1].str;
  return m;
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

struct LockService::Keys {
  std::string node;
  int gpu = 0;
  std::string holder, fence, queue, queue_exp, last;
};

LockService::LockService(std::shared_ptr<store::ValkeyClient> client, metrics::Registry* registry, LockOptions opts)
    : client_(std::move(client)), opts_(opts) {
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
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void LockService::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++wake_seq_;
  }
  cv_.notify_all();
}

void LockService::Count(const char* op, const char* result) { operations_->With({op, result}).Inc(); }

LockService::Keys LockService::KeysFor(const std::string& node, int gpu) const {
  Keys k;
  k.node = node;
  k.gpu = gpu;
  k.holder = client_->prefix() + ":lock:gpu:{" + node + "}:" + std::to_string(gpu);
  k.fence = k.holder + ":fence";
  k.queue = k.holder + ":queue";
  k.queue_exp = k.holder + ":queue:exp";
  k.last = k.holder + ":last";
  return k;
}

Result<AcquireResult> LockService::TryAcquire(const Keys& k, const std::string& owner, int64_t ttl_ms,
                                              bool may_join) {
  Result<std::vector<Reply>> r = ScriptArray(
      client_->Eval(AcquireScript(), {k.holder, k.fence, k.queue, k.queue_exp, k.last},
                    {owner, std::to_string(ttl_ms), std::to_string(opts_.max_queue), may_join ? "1" : "0"}),
      "acquire");
  if (!r.ok()) return r.status();
  const std::vector<Reply>& e = *r;
  const std::string& label = e[0].str;
  AcquireResult out;
  if (label == "granted" || label == "held") {
    if (e.size() < 4) return Internal("acquire script returned a short reply");
    out.outcome = AcquireOutcome::kGranted;
    out.token = static_cast<uint64_t>(Int(e[1]));
    out.ttl_ms = ttl_ms;
    out.refreshed = label == "held";
    out.waited_ms = Int(e[3]);
    if (Int(e[2]) == 1) {
      expirations_->Inc();
      spdlog::info("GPU lock {}/{}: the previous holder expired; granted to {} (token {})", k.node, k.gpu, owner,
                   out.token);
    }
  } else if (label == "queued") {
    if (e.size() < 2) return Internal("acquire script returned a short reply");
    out.outcome = AcquireOutcome::kQueued;
    out.position = static_cast<int>(Int(e[1]));
  } else if (label == "full") {
    out.outcome = AcquireOutcome::kQueueFull;
  } else if (label == "gone") {
    return Conflict("left the queue of lock " + k.node + "/" + std::to_string(k.gpu) +
                    " while waiting (released or reaped meanwhile)");
  } else {
    return Internal("acquire script returned " + label);
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
  const Keys k = KeysFor(node, gpu);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waiting ? wait_ms : 0);
  Result<AcquireResult> r = Internal("unreachable");
  for (bool first = true;; first = false) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = wake_seq_;
    }
    r = TryAcquire(k, owner, ttl_ms, /*may_join=*/first);
    if (!r.ok() || r->outcome != AcquireOutcome::kQueued) break;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) break;
    cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(opts_.poll_interval_ms)),
                   [&] { return stopping_ || wake_seq_ != seen; });
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
  const Keys k = KeysFor(node, gpu);
  Result<std::vector<Reply>> r = ScriptArray(
      client_->Eval(HeartbeatScript(), {k.holder, k.fence, k.last},
                    {owner, std::to_string(ttl_ms), std::to_string(kDefaultTtlMs)}),
      "heartbeat");
  if (!r.ok()) {
    Count("heartbeat", "error");
    return r.status();
  }
  const std::string& label = (*r)[0].str;
  if (label == "ok" && r->size() >= 3) {
    Count("heartbeat", "ok");
    return HeartbeatResult{static_cast<uint64_t>(Int((*r)[1])), Int((*r)[2])};
  }
  if (label == "expired") expirations_->Inc();
  Count("heartbeat", "not_owner");
  return NotOwner(label, node, gpu, owner);
}

Result<ReleaseResult> LockService::Release(const std::string& node, int gpu, const std::string& owner) {
  Status valid = ValidateNode(node);
  if (valid.ok()) valid = ValidateGpu(gpu);
  if (valid.ok()) valid = ValidateOwner(owner);
  if (!valid.ok()) {
    Count("release", "invalid");
    return valid;
  }
  const Keys k = KeysFor(node, gpu);
  Result<std::vector<Reply>> r =
      ScriptArray(client_->Eval(ReleaseScript(), {k.holder, k.last, k.queue, k.queue_exp}, {owner}), "release");
  if (!r.ok()) {
    Count("release", "error");
    return r.status();
  }
  const std::string& label = (*r)[0].str;
  if (label == "released") {
    Count("release", "released");
    Wake();
    return ReleaseResult{true, false};
  }
  if (label == "left_queue") {
    Count("release", "left_queue");
    Wake();  // the head may have changed
    return ReleaseResult{false, true};
  }
  if (label == "expired") expirations_->Inc();
  Count("release", "not_owner");
  return NotOwner(label, node, gpu, owner);
}

Result<std::vector<LockInfo>> LockService::List() {
  // Find the GPUs: every key under P:lock:gpu:{N}:G[...].
  const std::string base = client_->prefix() + ":lock:gpu:{";
  std::set<std::pair<std::string, int>> gpus;
  std::string cursor = "0";
  do {
    Result<Reply> r = client_->Command({"SCAN", cursor, "MATCH", GlobEscape(base) + "*", "COUNT", "1000"});
    if (!r.ok()) {
      Count("list", "error");
      return r.status();
    }
    if (r->type != Reply::Type::kArray || r->elements.size() != 2) {
      Count("list", "error");
      return Internal("SCAN returned an unexpected reply");
    }
    cursor = r->elements[0].str;
    for (const Reply& key : r->elements[1].elements) {
      std::string_view s = key.str;
      if (!s.starts_with(base)) continue;
      s.remove_prefix(base.size());
      size_t close = s.find("}:");
      if (close == std::string_view::npos) continue;
      std::string_view node = s.substr(0, close), rest = s.substr(close + 2);
      rest = rest.substr(0, rest.find(':'));
      Result<int> gpu = ParseGpu(rest);
      if (!gpu.ok() || !ValidateNode(node).ok()) continue;
      gpus.emplace(std::string(node), *gpu);
    }
  } while (cursor != "0");

  std::vector<std::vector<std::string>> cmds;
  cmds.push_back({"TIME"});
  std::vector<Keys> keys;
  for (const auto& [node, gpu] : gpus) {
    Keys k = KeysFor(node, gpu);
    cmds.push_back({"GET", k.holder});
    cmds.push_back({"PTTL", k.holder});
    cmds.push_back({"GET", k.fence});
    cmds.push_back({"ZRANGE", k.queue, "0", "-1"});
    cmds.push_back({"ZRANGE", k.queue_exp, "0", "-1", "WITHSCORES"});
    cmds.push_back({"HGETALL", k.last});
    keys.push_back(std::move(k));
  }
  Result<std::vector<Reply>> replies = client_->Pipeline(cmds);
  if (!replies.ok()) {
    Count("list", "error");
    return replies.status();
  }
  const std::vector<Reply>& rs = *replies;
  if (rs.size() != cmds.size() || rs[0].elements.size() != 2) {
    Count("list", "error");
    return Internal("list: unexpected replies");
  }
  // TIME: seconds and microseconds.
  std::optional<int64_t> secs = ParseInt64(rs[0].elements[0].str, 0, int64_t{1} << 40);
  std::optional<int64_t> micros = ParseInt64(rs[0].elements[1].str, 0, 999'999);
  if (!secs || !micros) {
    Count("list", "error");
    return Internal("list: TIME answered something that is not a time");
  }
  const int64_t now = *secs * 1000 + *micros / 1000;
  std::vector<LockInfo> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    const Reply* r = &rs[1 + i * 6];
    LockInfo l;
    l.node = keys[i].node;
    l.gpu = keys[i].gpu;
    if (r[0].type == Reply::Type::kString) {
      l.holder = r[0].str;
      l.ttl_ms = std::max<int64_t>(0, Int(r[1]));
    }
    l.token = static_cast<uint64_t>(Int(r[2]));
    std::map<std::string, int64_t> deadline;
    for (size_t j = 0; j + 1 < r[4].elements.size(); j += 2) {
      // Scores are deadlines in ms; one that is not a plausible time is skipped.
      std::optional<double> d = ParseDouble(r[4].elements[j + 1].str, 0, 9.0e15);
      if (d) deadline[r[4].elements[j].str] = static_cast<int64_t>(*d);
    }
    for (const Reply& w : r[3].elements) {
      auto it = deadline.find(w.str);
      if (it == deadline.end() || it->second <= now) continue;  // pruned at the next acquire
      l.waiters.push_back(Waiter{w.str, it->second - now});
    }
    std::map<std::string, std::string> last = HashOf(r[5]);
    if (!l.holder.empty() && last["owner"] == l.holder) {
      l.granted_ms = ParseInt64(last["granted_ms"]).value_or(0);
    }
    out.push_back(std::move(l));
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
    std::vector<std::string> args{""};
    if (!l.holder.empty() && gone(l.holder)) args[0] = l.holder;
    for (const Waiter& w : l.waiters) {
      if (gone(w.owner)) args.push_back(w.owner);
    }
    if (args[0].empty() && args.size() == 1) continue;
    const Keys k = KeysFor(l.node, l.gpu);
    Result<std::vector<Reply>> r =
        ScriptArray(client_->Eval(ReapScript(), {k.holder, k.last, k.queue, k.queue_exp}, args), "reap");
    if (!r.ok()) {
      Count("reap", "error");
      return r.status();
    }
    if (Int((*r)[0]) == 1) {
      ++freed;
      Count("reap", "freed");
      spdlog::info("GPU lock {}/{}: freed; its holder {} belongs to a pod that no longer exists", l.node, l.gpu,
                   l.holder);
    }
    if (r->size() > 1 && Int((*r)[1]) > 0) Count("reap", "waiters_removed");
  }
  if (freed > 0) Wake();
  return freed;
}

}  // namespace vramd::gpulock
