// The GPU locks in Valkey: every change is one Lua script (src/store/lua/lock_*.lua)
// reading the server's clock; List scans the lock keys and reads them in one
// pipeline.
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
//   P:{N}:active                HASH pod part of an owner -> server ms of its
//                               last lock activity on node N (lock_now.lua)
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "store/lua_scripts.h"  // generated from src/store/lua/*.lua
#include "vramd/parse.h"
#include "vramd/store/lock_store.h"
#include "vramd/store/valkey_client.h"

namespace vramd::store {
namespace {

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

LockOwnership NotHolder(const std::string& label) {
  if (label == "other") return LockOwnership::kOther;
  if (label == "expired") return LockOwnership::kExpired;
  return LockOwnership::kFree;
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

struct Keys {
  std::string holder, fence, queue, queue_exp, last, active;
};

// Times before 2001 or after 2255 are not a server's clock.
constexpr int64_t kMinPlausibleMs = 1'000'000'000'000;
constexpr int64_t kMaxPlausibleMs = 9'000'000'000'000;

class ValkeyLockStore final : public LockStore {
 public:
  explicit ValkeyLockStore(std::shared_ptr<ValkeyClient> client) : client_(std::move(client)) {}

  Result<LockAcquireReply> Acquire(const std::string& node, int gpu, const std::string& owner, int64_t ttl_ms,
                                   int max_queue, bool may_join) override {
    const Keys k = KeysFor(node, gpu);
    Result<std::vector<Reply>> r = ScriptArray(
        client_->Eval(acquire_, {k.holder, k.fence, k.queue, k.queue_exp, k.last, k.active},
                      {owner, std::to_string(ttl_ms), std::to_string(max_queue), may_join ? "1" : "0"}),
        "acquire");
    if (!r.ok()) return r.status();
    const std::vector<Reply>& e = *r;
    const std::string& label = e[0].str;
    LockAcquireReply out;
    if (label == "granted" || label == "held") {
      if (e.size() < 4) return Internal("acquire script returned a short reply");
      out.state = label == "held" ? LockAcquireState::kRefreshed : LockAcquireState::kGranted;
      out.token = static_cast<uint64_t>(Int(e[1]));
      out.previous_expired = Int(e[2]) == 1;
      out.waited_ms = Int(e[3]);
    } else if (label == "queued") {
      if (e.size() < 2) return Internal("acquire script returned a short reply");
      out.state = LockAcquireState::kQueued;
      out.position = static_cast<int>(Int(e[1]));
    } else if (label == "full") {
      out.state = LockAcquireState::kQueueFull;
    } else if (label == "gone") {
      out.state = LockAcquireState::kGone;
    } else {
      return Internal("acquire script returned " + label);
    }
    return out;
  }

  Result<LockHeartbeatReply> Heartbeat(const std::string& node, int gpu, const std::string& owner, int64_t ttl_ms,
                                       int64_t default_ttl_ms) override {
    const Keys k = KeysFor(node, gpu);
    Result<std::vector<Reply>> r =
        ScriptArray(client_->Eval(heartbeat_, {k.holder, k.fence, k.last, k.active},
                                  {owner, std::to_string(ttl_ms), std::to_string(default_ttl_ms)}),
                    "heartbeat");
    if (!r.ok()) return r.status();
    const std::string& label = (*r)[0].str;
    if (label == "ok" && r->size() >= 3) {
      return LockHeartbeatReply{LockOwnership::kHolder, static_cast<uint64_t>(Int((*r)[1])), Int((*r)[2])};
    }
    return LockHeartbeatReply{NotHolder(label), 0, 0};
  }

  Result<LockReleaseReply> Release(const std::string& node, int gpu, const std::string& owner) override {
    const Keys k = KeysFor(node, gpu);
    Result<std::vector<Reply>> r =
        ScriptArray(client_->Eval(release_, {k.holder, k.last, k.queue, k.queue_exp, k.active}, {owner}), "release");
    if (!r.ok()) return r.status();
    const std::string& label = (*r)[0].str;
    LockReleaseReply out;
    if (label == "released") {
      out.released = true;
      out.ownership = LockOwnership::kHolder;
    } else if (label == "left_queue") {
      out.left_queue = true;
    } else {
      out.ownership = NotHolder(label);
    }
    return out;
  }

  Result<LockReapReply> Reap(const std::string& node, int gpu, const std::string& holder,
                             const std::vector<std::string>& waiters) override {
    const Keys k = KeysFor(node, gpu);
    std::vector<std::string> args{holder};
    args.insert(args.end(), waiters.begin(), waiters.end());
    Result<std::vector<Reply>> r =
        ScriptArray(client_->Eval(reap_, {k.holder, k.last, k.queue, k.queue_exp}, args), "reap");
    if (!r.ok()) return r.status();
    LockReapReply out;
    out.freed = Int((*r)[0]) == 1;
    if (r->size() > 1) out.waiters_removed = static_cast<int>(Int((*r)[1]));
    return out;
  }

  Result<std::vector<LockRecord>> List() override {
    // Find the GPUs: every key under P:lock:gpu:{N}:G[...].
    const std::string base = client_->prefix() + ":lock:gpu:{";
    std::set<std::pair<std::string, int>> gpus;
    std::string cursor = "0";
    do {
      Result<Reply> r = client_->Command({"SCAN", cursor, "MATCH", GlobEscape(base) + "*", "COUNT", "1000"});
      if (!r.ok()) return r.status();
      if (r->type != Reply::Type::kArray || r->elements.size() != 2) {
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
        // GPU parts that are not small whole numbers are not locks' keys.
        std::optional<int> gpu = rest.size() > 4 ? std::nullopt : ParseSmallInt(rest, 9999);
        if (!gpu || node.empty()) continue;
        gpus.emplace(std::string(node), *gpu);
      }
    } while (cursor != "0");

    std::vector<std::vector<std::string>> cmds;
    cmds.push_back({"TIME"});
    for (const auto& [node, gpu] : gpus) {
      Keys k = KeysFor(node, gpu);
      cmds.push_back({"GET", k.holder});
      cmds.push_back({"PTTL", k.holder});
      cmds.push_back({"GET", k.fence});
      cmds.push_back({"ZRANGE", k.queue, "0", "-1"});
      cmds.push_back({"ZRANGE", k.queue_exp, "0", "-1", "WITHSCORES"});
      cmds.push_back({"HGETALL", k.last});
    }
    Result<std::vector<Reply>> replies = client_->Pipeline(cmds);
    if (!replies.ok()) return replies.status();
    const std::vector<Reply>& rs = *replies;
    if (rs.size() != cmds.size() || rs[0].elements.size() != 2) return Internal("list: unexpected replies");
    // TIME: seconds and microseconds.
    std::optional<int64_t> secs = ParseInt64(rs[0].elements[0].str, 0, int64_t{1} << 40);
    std::optional<int64_t> micros = ParseInt64(rs[0].elements[1].str, 0, 999'999);
    if (!secs || !micros) return Internal("list: TIME answered something that is not a time");
    const int64_t now = *secs * 1000 + *micros / 1000;
    std::vector<LockRecord> out;
    size_t i = 0;
    for (const auto& [node, gpu] : gpus) {
      const Reply* r = &rs[1 + i++ * 6];
      LockRecord l;
      l.node = node;
      l.gpu = gpu;
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
        l.waiters.push_back(LockWaiter{w.str, it->second - now});
      }
      std::map<std::string, std::string> last = HashOf(r[5]);
      if (!l.holder.empty() && last["owner"] == l.holder) {
        l.granted_ms = ParseInt64(last["granted_ms"]).value_or(0);
      }
      out.push_back(std::move(l));
    }
    return out;
  }

  Result<std::map<std::string, int64_t>> ReadActivity(const std::vector<std::string>& nodes) override {
    std::map<std::string, int64_t> out;
    if (nodes.empty()) return out;
    std::vector<std::vector<std::string>> cmds;
    cmds.reserve(nodes.size());
    for (const std::string& node : nodes) cmds.push_back({"HGETALL", ActiveKey(node)});
    Result<std::vector<Reply>> replies = client_->Pipeline(cmds);
    if (!replies.ok()) return replies.status();
    if (replies->size() != cmds.size()) return Internal("read activity: unexpected replies");
    for (const Reply& r : *replies) {
      if (r.is_error()) return Internal("read activity: " + r.str);
      for (size_t j = 0; j + 1 < r.elements.size(); j += 2) {
        std::optional<int64_t> ms = ParseInt64(r.elements[j + 1].str, kMinPlausibleMs, kMaxPlausibleMs);
        if (!ms || r.elements[j].str.empty()) continue;
        int64_t& slot = out[r.elements[j].str];
        slot = std::max(slot, *ms);
      }
    }
    return out;
  }

  Status ForgetActivity(const std::vector<std::string>& nodes, const std::vector<std::string>& pods) override {
    if (nodes.empty() || pods.empty()) return Status::Ok();
    std::vector<std::vector<std::string>> cmds;
    cmds.reserve(nodes.size());
    for (const std::string& node : nodes) {
      std::vector<std::string> cmd{"HDEL", ActiveKey(node)};
      cmd.insert(cmd.end(), pods.begin(), pods.end());
      cmds.push_back(std::move(cmd));
    }
    Result<std::vector<Reply>> replies = client_->Pipeline(cmds);
    if (!replies.ok()) return replies.status();
    for (const Reply& r : *replies) {
      if (r.is_error()) return Internal("forget activity: " + r.str);
    }
    return Status::Ok();
  }

 private:
  std::string ActiveKey(const std::string& node) const { return client_->prefix() + ":{" + node + "}:active"; }

  Keys KeysFor(const std::string& node, int gpu) const {
    Keys k;
    k.holder = client_->prefix() + ":lock:gpu:{" + node + "}:" + std::to_string(gpu);
    k.fence = k.holder + ":fence";
    k.queue = k.holder + ":queue";
    k.queue_exp = k.holder + ":queue:exp";
    k.last = k.holder + ":last";
    k.active = ActiveKey(node);
    return k;
  }

  const std::shared_ptr<ValkeyClient> client_;
  const Script acquire_{std::string(lua::kLockNow).append(lua::kLockAcquire)};
  const Script heartbeat_{std::string(lua::kLockNow).append(lua::kLockNotOwner).append(lua::kLockHeartbeat)};
  const Script release_{std::string(lua::kLockNow).append(lua::kLockNotOwner).append(lua::kLockRelease)};
  const Script reap_{std::string(lua::kLockReap)};
};

}  // namespace

std::shared_ptr<LockStore> NewValkeyLockStore(std::shared_ptr<ValkeyClient> client) {
  return std::make_shared<ValkeyLockStore>(std::move(client));
}

}  // namespace vramd::store
