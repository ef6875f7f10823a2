// Who calls the /v1 API, and what each caller may do (issue 33).
//
// Two kinds of credential:
//  - the shared API token (api_token_file): one secret, no identity. It is an
//    administrator's credential: with identities off it is what every
//    mutating call needs (standalone mode); with identities on it still reads
//    everything but no longer reports usage or takes GPU locks, because
//    whoever holds it could speak for any node or pod.
//  - identities (auth.identities): a Kubernetes token with audience
//    auth.audience, checked by a TokenReview. A node agent's projected
//    ServiceAccount token names its pod, and the pod's node is looked up: it
//    reports for that node only. A workload's token names its pod: the GPU
//    locks it takes are owned by that pod. Reads need an identity, and show
//    a pod's namespace, name and UID only to a caller the API server lets
//    `get pods` in that namespace (SubjectAccessReview).
//
// The decisions are pure functions of the caller (MayReportUsage,
// MayCallLock, MayRead); Authenticator is the adapter that finds the caller,
// with a short cache so that a node's reports cost one TokenReview a minute.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "vramd/clock.h"
#include "vramd/kube/kube_client.h"
#include "vramd/kube/token_review.h"
#include "vramd/http/server.h"
#include "vramd/mutex.h"
#include "vramd/status.h"

namespace vramd::http {

struct AuthOptions {
  std::string shared_token;             // the API token; empty: none configured
  bool identities = false;              // accept Kubernetes tokens (TokenReview) and require them where it matters
  std::string audience = "vramd";       // the audience their tokens must be minted for
  std::string agent_namespace;          // the node agent's ServiceAccount (identities on: the only reporter)
  std::string agent_service_account;
  int64_t cache_ms = 60'000;            // how long an accepted identity or an access answer is reused
  int64_t refused_cache_ms = 10'000;    // how long a refused token is refused without asking again
  size_t max_cached = 4096;             // tokens remembered at most (then the expired, then all, are dropped)
  int max_reviews_in_flight = 8;        // beyond this, unknown tokens are answered 503 at once
};

// The shared token alone, identities off (standalone, and tests).
inline AuthOptions SharedTokenOnly(std::string token) {
  AuthOptions o;
  o.shared_token = std::move(token);
  return o;
}

struct Caller {
  enum class Kind {
    kAnonymous,  // no bearer token
    kShared,     // the shared API token
    kIdentity,   // a Kubernetes identity (user filled)
  };
  Kind kind = Kind::kAnonymous;
  kube::TokenUser user;
};

// A decision: allowed, or the HTTP status (401, 403) and why.
struct Verdict {
  int status = 0;
  std::string message;
  bool allowed() const { return status == 0; }
};

// PUT /v1/nodes/{node}/usage. Identities off: the shared token when one is
// configured (anyone otherwise). Identities on: only the node agent's
// ServiceAccount, from a pod bound to `node`; the shared token is refused.
Verdict MayReportUsage(const AuthOptions& opts, const Caller& caller, std::string_view node);

// POST /v1/locks/...: identities off, as MayReportUsage's shared-token rule.
// Identities on: a token bound to a pod, and `owner`'s pod part is that pod's
// UID (a lock is never taken, renewed or released for another pod).
Verdict MayCallLock(const AuthOptions& opts, const Caller& caller, std::string_view owner);

// GET /v1/nodes, /v1/locks, /v1/explain: identities on, a caller with a
// credential (which pods it sees is the caller's own right: PodsVisible).
Verdict MayRead(const AuthOptions& opts, const Caller& caller);

// The reply to a failed Identify: 401, or 503 when the API server cannot answer.
Reply AuthErrorReply(const Status& s);

class Authenticator {
 public:
  // `kube` may be null (standalone): identities then cannot be on.
  Authenticator(AuthOptions opts, kube::KubeClient* kube, const Clock* clock);

  const AuthOptions& options() const { return opts_; }

  // The caller of a request with this Authorization header (anonymous when
  // vramd has neither a shared token nor identities). kUnauthenticated
  // for a bearer token that is neither the shared one nor (identities on) one
  // the API server accepts for the audience, or a pod-bound token whose pod
  // is gone or replaced; kUnavailable when the API server cannot answer.
  Result<Caller> Identify(std::string_view authorization);

  // Whether the caller may see the pods of namespace `ns` (their names and
  // UIDs): identities off or the shared token, yes; an identity, when a
  // SubjectAccessReview lets it get pods there (cached; an API server that
  // cannot answer means no).
  bool PodsVisible(const Caller& caller, const std::string& ns);
  // The same for one pod (a SubjectAccessReview with its name; not cached).
  bool PodVisible(const Caller& caller, const std::string& ns, const std::string& name);

  // Counters for tests and metrics.
  int64_t token_reviews() const { return reviews_.load(); }
  int64_t access_reviews() const { return access_reviews_.load(); }

 private:
  struct CachedCaller {
    Result<Caller> caller = Unauthenticated("");
    int64_t expires_ms = 0;
  };
  struct CachedAccess {
    bool allowed = false;
    int64_t expires_ms = 0;
  };
  Result<Caller> Review(const std::string& token);
  void Remember(const std::string& key, const Result<Caller>& c, int64_t now) EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AuthOptions opts_;
  kube::KubeClient* const kube_;
  const Clock* const clock_;
  Mutex mu_;
  std::map<std::string, CachedCaller> callers_ GUARDED_BY(mu_);   // by the token's SHA-256
  std::map<std::string, CachedAccess> access_ GUARDED_BY(mu_);    // by username + '\n' + namespace
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> reviews_{0};
  std::atomic<int64_t> access_reviews_{0};
};

}  // namespace vramd::http
