#include "vramd/http/auth.h"

#include <openssl/sha.h>

#include <string>

#include "vramd/gpulock/locks.h"
#include "vramd/http/server.h"

namespace vramd::http {
namespace {

constexpr std::string_view kBearer = "Bearer ";

std::string Sha256(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

Verdict Allow() { return {}; }
Verdict Refuse(int status, std::string message) { return {status, std::move(message)}; }

// Identities off: the shared token, when one is configured, is the key.
Verdict SharedTokenRule(const AuthOptions& opts, const Caller& caller) {
  if (opts.shared_token.empty() || caller.kind == Caller::Kind::kShared) return Allow();
  return Refuse(401, "a valid bearer token is required");
}

std::string Describe(const kube::TokenUser& u) {
  std::string s = u.username;
  if (!u.pod_name.empty()) s += " (pod " + u.sa_namespace + "/" + u.pod_name + ")";
  return s;
}

}  // namespace

Verdict MayReportUsage(const AuthOptions& opts, const Caller& caller, std::string_view node) {
  if (!opts.identities) return SharedTokenRule(opts, caller);
  switch (caller.kind) {
    case Caller::Kind::kAnonymous:
      return Refuse(401, "a usage report needs the node agent's ServiceAccount token (audience " + opts.audience + ")");
    case Caller::Kind::kShared:
      return Refuse(403, "the shared API token does not report usage when identities are on: the node agent "
                         "presents its own ServiceAccount token (audience " + opts.audience + ")");
    case Caller::Kind::kIdentity: break;
  }
  const kube::TokenUser& u = caller.user;
  if (u.sa_namespace != opts.agent_namespace || u.sa_name != opts.agent_service_account) {
    return Refuse(403, Describe(u) + " is not the node agent (" + opts.agent_namespace + "/" +
                           opts.agent_service_account + "): only the agent reports usage");
  }
  if (u.pod_name.empty()) {
    return Refuse(403, "the agent's token is not bound to a pod: use the projected token of the agent's pod");
  }
  if (u.node_name != node) {
    return Refuse(403, "the agent pod " + u.sa_namespace + "/" + u.pod_name + " runs on node " +
                           (u.node_name.empty() ? std::string("(none)") : u.node_name) +
                           ": it reports for that node only, not for " + std::string(node));
  }
  return Allow();
}

Verdict MayCallLock(const AuthOptions& opts, const Caller& caller, std::string_view owner) {
  if (!opts.identities) return SharedTokenRule(opts, caller);
  switch (caller.kind) {
    case Caller::Kind::kAnonymous:
      return Refuse(401, "a GPU lock call needs the calling pod's ServiceAccount token (audience " + opts.audience +
                             ")");
    case Caller::Kind::kShared:
      return Refuse(403, "the shared API token does not take GPU locks when identities are on: the owner is the "
                         "calling pod, shown by its own ServiceAccount token (audience " + opts.audience + ")");
    case Caller::Kind::kIdentity: break;
  }
  const kube::TokenUser& u = caller.user;
  if (u.pod_uid.empty()) {
    return Refuse(403, Describe(u) + " is not bound to a pod: a GPU lock belongs to a pod, so use a pod's projected "
                                     "token");
  }
  if (gpulock::OwnerPod(owner) != u.pod_uid) {
    return Refuse(403, "the lock owner's pod UID must be the caller's own pod (" + u.sa_namespace + "/" + u.pod_name +
                           ", UID " + u.pod_uid + ")");
  }
  return Allow();
}

Verdict MayRead(const AuthOptions& opts, const Caller& caller) {
  if (!opts.identities || caller.kind != Caller::Kind::kAnonymous) return Allow();
  return Refuse(401, "reading the ledger needs a bearer token: a Kubernetes token with audience " + opts.audience +
                         " (the pods shown are those you may get), or the API token");
}

Reply AuthErrorReply(const Status& s) {
  if (s.code() == Code::kUnavailable) return ErrorReply(503, "cannot check the caller's token now: " + s.message());
  if (s.code() == Code::kUnauthenticated) return ErrorReply(401, s.message());
  return ErrorReply(500, s.message());
}

Authenticator::Authenticator(AuthOptions opts, kube::KubeClient* kube, const Clock* clock)
    : opts_(std::move(opts)), kube_(kube), clock_(clock) {}

Result<Caller> Authenticator::Identify(std::string_view authorization) {
  // Nothing to check a credential against: every caller is anonymous.
  if (authorization.empty() || (opts_.shared_token.empty() && !opts_.identities)) return Caller{};
  if (authorization.compare(0, kBearer.size(), kBearer) != 0) {
    return Unauthenticated("a valid bearer token is required (the Authorization header must be \"Bearer <token>\")");
  }
  if (!opts_.shared_token.empty() && BearerMatches(std::string(authorization), opts_.shared_token)) {
    return Caller{Caller::Kind::kShared, {}};
  }
  std::string token(authorization.substr(kBearer.size()));
  if (!opts_.identities || kube_ == nullptr || token.empty() || token.size() > 16 * 1024) {
    return Unauthenticated("a valid bearer token is required");
  }
  // Remembered by the token's SHA-256, never the token itself: 4,096 entries
  // stay under a megabyte however long the tokens are.
  const std::string key = Sha256(token);
  const int64_t now = clock_->NowMs();
  {
    MutexLock l(&mu_);
    auto it = callers_.find(key);
    if (it != callers_.end() && it->second.expires_ms > now) return it->second.caller;
  }
  if (in_flight_.fetch_add(1) >= opts_.max_reviews_in_flight) {
    in_flight_.fetch_sub(1);
    return Unavailable("too many tokens are being checked with the API server; try again");
  }
  Result<Caller> c = Review(token);
  in_flight_.fetch_sub(1);
  if (c.ok() || c.status().code() == Code::kUnauthenticated) {
    MutexLock l(&mu_);
    Remember(key, c, clock_->NowMs());
  }
  return c;
}

Result<Caller> Authenticator::Review(const std::string& token) {
  reviews_.fetch_add(1);
  Result<kube::TokenUser> u = kube_->ReviewToken(token, opts_.audience);
  if (!u.ok()) {
    // The token's fault: 401 (remembered briefly). vramd's or the API
    // server's (no RBAC for TokenReview, an unreadable answer, no answer):
    // 503, asked again next time.
    const Code code = u.status().code();
    if (code == Code::kUnauthenticated || code == Code::kInvalidArgument) return Unauthenticated(u.status().message());
    return Unavailable("checking the token with the API server: " + u.status().message());
  }
  if (!u->pod_name.empty() && u->node_name.empty()) {
    // Before 1.30 the token does not name the node: the pod does.
    Result<kube::PodInfo> pod = kube_->GetPod(u->sa_namespace, u->pod_name);
    if (!pod.ok()) {
      if (pod.status().code() == Code::kNotFound) return Unauthenticated("the token's pod is gone");
      return Unavailable("looking up the token's pod: " + pod.status().message());
    }
    if (pod->uid != u->pod_uid) return Unauthenticated("the token's pod was replaced (another UID)");
    u->node_name = pod->node_name;
  }
  return Caller{Caller::Kind::kIdentity, std::move(*u)};
}

void Authenticator::Remember(const std::string& key, const Result<Caller>& c, int64_t now) {
  if (callers_.size() >= opts_.max_cached) {
    std::erase_if(callers_, [now](const auto& kv) { return kv.second.expires_ms <= now; });
    if (callers_.size() >= opts_.max_cached) callers_.clear();
  }
  callers_[key] = CachedCaller{c, now + (c.ok() ? opts_.cache_ms : opts_.refused_cache_ms)};
}

bool Authenticator::PodVisible(const Caller& caller, const std::string& ns, const std::string& name) {
  if (!opts_.identities || caller.kind == Caller::Kind::kShared) return true;
  if (caller.kind != Caller::Kind::kIdentity || kube_ == nullptr) return false;
  access_reviews_.fetch_add(1);
  Result<bool> allowed = kube_->MayAccess(caller.user, "get", "pods", ns, name);
  return allowed.ok() && *allowed;
}

bool Authenticator::PodsVisible(const Caller& caller, const std::string& ns) {
  if (!opts_.identities || caller.kind == Caller::Kind::kShared) return true;
  if (caller.kind != Caller::Kind::kIdentity || kube_ == nullptr) return false;
  const std::string key = caller.user.username + "\n" + ns;
  const int64_t now = clock_->NowMs();
  {
    MutexLock l(&mu_);
    auto it = access_.find(key);
    if (it != access_.end() && it->second.expires_ms > now) return it->second.allowed;
  }
  access_reviews_.fetch_add(1);
  Result<bool> allowed = kube_->MayAccess(caller.user, "get", "pods", ns, "");
  if (!allowed.ok()) return false;  // not remembered: asked again next time
  MutexLock l(&mu_);
  if (access_.size() >= opts_.max_cached) {
    std::erase_if(access_, [now](const auto& kv) { return kv.second.expires_ms <= now; });
    if (access_.size() >= opts_.max_cached) access_.clear();
  }
  access_[key] = CachedAccess{*allowed, now + opts_.cache_ms};
  return *allowed;
}

}  // namespace vramd::http
