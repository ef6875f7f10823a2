// /v1/locks: the GPU-lock endpoints (contract in vramd/http/routes.h).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "http/json_views.h"
#include "vramd/gpulock/locks.h"
#include "vramd/http/routes.h"

namespace vramd::http {
namespace {

using nlohmann::json;
using gpulock::AcquireOutcome;
using gpulock::AcquireResult;
using gpulock::HeartbeatResult;
using gpulock::kDefaultTtlMs;
using gpulock::kMaxTtlMs;
using gpulock::kMinTtlMs;
using gpulock::LockInfo;
using gpulock::LockService;
using gpulock::ParseGpu;
using gpulock::ReleaseResult;
using gpulock::ValidateNode;
using gpulock::ValidateOwner;
using gpulock::Waiter;

http::Reply StatusReply(const Status& s) {
  switch (s.code()) {
    case Code::kInvalidArgument: return http::ErrorReply(400, s.message());
    case Code::kConflict: return http::ErrorReply(409, s.message());
    case Code::kNotFound: return http::ErrorReply(404, s.message());
    case Code::kUnavailable: return http::ErrorReply(503, "GPU locks unavailable: " + s.message());
    default: return http::ErrorReply(500, s.message());
  }
}

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

// A JSON number of seconds within [min, max], as milliseconds.
Result<int64_t> SecondsField(const json& j, const char* name, double min, double max) {
  const json& v = j.at(name);
  if (!v.is_number()) return InvalidArgument(std::string(name) + " must be a number of seconds");
  double d = v.get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s must be from %g to %g seconds", name, min, max);
    return InvalidArgument(buf);
  }
  return static_cast<int64_t>(std::llround(d * 1000.0));
}

// The node and GPU of the path, validated.
Status PathTarget(const http::Request& r, std::string* node, int* gpu) {
  *node = r.params.at("node");
  if (Status s = ValidateNode(*node); !s.ok()) return s;
  Result<int> g = ParseGpu(r.params.at("gpu"));
  if (!g.ok()) return g.status();
  *gpu = *g;
  return Status::Ok();
}

json Target(const std::string& node, int gpu, const std::string& owner) {
  return json{{"node", node}, {"gpu", gpu}, {"owner", owner}};
}

}  // namespace

Result<LockCall> DecodeLockCall(LockOp op, const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("body must be a JSON object with \"owner\"");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    bool known = k == "owner" || (k == "ttl_seconds" && op != LockOp::kRelease) ||
                 (k == "wait_seconds" && op == LockOp::kAcquire);
    if (!known) return InvalidArgument("unknown field \"" + k.substr(0, 64) + "\" in the body");
  }
  LockCall call;
  if (!j.contains("owner")) return InvalidArgument("owner is required (\"POD_UID/INSTANCE\")");
  if (!j["owner"].is_string()) return InvalidArgument("owner must be a string");
  call.owner = j["owner"].get<std::string>();
  if (Status s = ValidateOwner(call.owner); !s.ok()) return s;
  if (j.contains("ttl_seconds")) {
    Result<int64_t> ttl = SecondsField(j, "ttl_seconds", Seconds(kMinTtlMs), Seconds(kMaxTtlMs));
    if (!ttl.ok()) return ttl.status();
    call.ttl_ms = *ttl;
  }
  if (j.contains("wait_seconds")) {
    Result<int64_t> wait = SecondsField(j, "wait_seconds", 0, 3600);
    if (!wait.ok()) return wait.status();
    call.wait_ms = *wait;
  }
  return call;
}

LockTargetCheck LedgerLockTargets(store::LedgerStore* store) {
  return [store](const std::string& node, int gpu) -> Status {
    Result<ledger::SnapshotPtr> snap = store->WatchedSnapshot();
    if (!snap.ok()) return Unavailable("the ledger cannot be read to check the GPU: " + snap.status().message());
    const ledger::Node* n = (*snap)->Find(node);
    if (n == nullptr) {
      return NotFound("node " + node + " is not in the ledger: GPU locks are only for GPUs vramd accounts");
    }
    const bool has = std::any_of(n->gpus.begin(), n->gpus.end(), [&](const ledger::Gpu& g) { return g.index == gpu; });
    if (!has) return NotFound("node " + node + " has no GPU " + std::to_string(gpu) + " in the ledger");
    return Status::Ok();
  };
}

void RegisterLockRoutes(Server& server, gpulock::LockService* locks, const std::string& api_token,
                        LockTargetCheck known) {
  RegisterLockRoutes(server, locks, std::make_shared<Authenticator>(SharedTokenOnly(api_token), nullptr, nullptr),
                     std::move(known));
}

void RegisterLockRoutes(Server& server, gpulock::LockService* locks, std::shared_ptr<Authenticator> auth,
                        LockTargetCheck known) {
  // Authentication comes first: a refused call reads and writes nothing.
  auto mutating = [locks, auth, known](LockOp op) {
    return [locks, auth, known, op](const http::Request& r) -> http::Reply {
      Result<Caller> who = auth->Identify(r.authorization);
      if (!who.ok()) return AuthErrorReply(who.status());
      // A refused caller learns nothing of the lock: the owner is checked
      // from the body before the path is looked at.
      Result<LockCall> call = DecodeLockCall(op, std::string(r.body));
      if (!call.ok()) {
        if (Verdict v = MayCallLock(auth->options(), *who, ""); !v.allowed() && v.status == 401) {
          return http::ErrorReply(v.status, v.message);
        }
        return StatusReply(call.status());
      }
      if (Verdict v = MayCallLock(auth->options(), *who, call->owner); !v.allowed()) {
        return http::ErrorReply(v.status, v.message);
      }
      std::string node;
      int gpu = 0;
      if (Status s = PathTarget(r, &node, &gpu); !s.ok()) return StatusReply(s);
      if (known) {
        if (Status s = known(node, gpu); !s.ok()) return StatusReply(s);
      }
      json out = Target(node, gpu, call->owner);
      switch (op) {
        case LockOp::kAcquire: {
          int64_t ttl = call->ttl_ms > 0 ? call->ttl_ms : kDefaultTtlMs;
          Result<AcquireResult> a = locks->Acquire(node, gpu, call->owner, ttl, call->wait_ms);
          if (!a.ok()) return StatusReply(a.status());
          if (a->outcome == AcquireOutcome::kQueueFull) {
            return http::ErrorReply(429, "the queue of lock " + node + "/" + std::to_string(gpu) +
                                             " is full; retry later");
          }
          out["granted"] = a->outcome == AcquireOutcome::kGranted;
          if (a->outcome == AcquireOutcome::kGranted) {
            out["token"] = a->token;
            out["ttl_seconds"] = Seconds(a->ttl_ms);
            out["refreshed"] = a->refreshed;
          } else {
            out["position"] = a->position;
          }
          return JsonReply(200, out);
        }
        case LockOp::kHeartbeat: {
          Result<HeartbeatResult> h = locks->Heartbeat(node, gpu, call->owner, call->ttl_ms);
          if (!h.ok()) return StatusReply(h.status());
          out["token"] = h->token;
          out["ttl_seconds"] = Seconds(h->ttl_ms);
          return JsonReply(200, out);
        }
        case LockOp::kRelease: {
          Result<ReleaseResult> rel = locks->Release(node, gpu, call->owner);
          if (!rel.ok()) return StatusReply(rel.status());
          out["released"] = rel->released;
          out["left_queue"] = rel->left_queue;
          return JsonReply(200, out);
        }
      }
      return http::ErrorReply(500, "unknown lock operation");
    };
  };
  // A lock call's body is a few fields (an owner of at most 128 + 36 characters).
  const RouteLimits small{.max_body_bytes = 64 << 10};
  server.Route("POST", "/v1/locks/{node}/{gpu}/acquire", "v1_lock_acquire", mutating(LockOp::kAcquire), small);
  server.Route("POST", "/v1/locks/{node}/{gpu}/heartbeat", "v1_lock_heartbeat", mutating(LockOp::kHeartbeat),
               small);
  server.Route("POST", "/v1/locks/{node}/{gpu}/release", "v1_lock_release", mutating(LockOp::kRelease), small);

  server.Route("GET", "/v1/locks", "v1_locks", [locks, auth](const http::Request& r) {
    Result<Caller> who = auth->Identify(r.authorization);
    if (!who.ok()) return AuthErrorReply(who.status());
    if (Verdict v = MayRead(auth->options(), *who); !v.allowed()) return http::ErrorReply(v.status, v.message);
    // Owners (pod UIDs) and fencing tokens only to a caller with a credential
    // when one is required anywhere.
    const bool owners = who->kind != Caller::Kind::kAnonymous ||
                        (auth->options().shared_token.empty() && !auth->options().identities);
    Result<std::vector<LockInfo>> list = locks->List();
    if (!list.ok()) return StatusReply(list.status());
    json arr = json::array();
    for (const LockInfo& l : *list) {
      json waiters = json::array();
      for (const Waiter& w : l.waiters) {
        waiters.push_back(json{{"owner", owners ? json(w.owner) : json(nullptr)},
                               {"expires_in_seconds", Seconds(w.expires_in_ms)}});
      }
      arr.push_back(json{{"node", l.node},
                         {"gpu", l.gpu},
                         {"held", !l.holder.empty()},
                         {"holder", l.holder.empty() || !owners ? json(nullptr) : json(l.holder)},
                         {"ttl_seconds", Seconds(l.ttl_ms)},
                         {"token", owners ? json(l.token) : json(nullptr)},
                         {"granted_ms", l.granted_ms},
                         {"waiters", std::move(waiters)}});
    }
    return JsonReply(200, json{{"locks", std::move(arr)}});
  });
}

}  // namespace vramd::http
