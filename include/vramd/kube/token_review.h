// Who a bearer token belongs to, as the API server says (issue 33):
// TokenReview (authentication.k8s.io/v1) for the identity, SubjectAccessReview
// (authorization.k8s.io/v1) for what that identity may do. The request bodies
// and the decoding of the answers are pure and table-tested; the REST client
// sends them (KubeClient::ReviewToken, KubeClient::MayAccess).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/status.h"

namespace vramd::kube {

// An authenticated identity. For a ServiceAccount token the service account
// comes from the username (system:serviceaccount:NS:NAME); for a token bound
// to a pod (a projected volume's token), the pod from the user's extra
// (authentication.kubernetes.io/pod-name and pod-uid, set since Kubernetes
// 1.11) and, on 1.30+, its node (authentication.kubernetes.io/node-name).
struct TokenUser {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
  std::string sa_namespace;  // empty unless a ServiceAccount
  std::string sa_name;
  std::string pod_name;      // empty unless the token is bound to a pod
  std::string pod_uid;
  std::string node_name;     // empty unless the API server said (1.30+); filled by a pod lookup otherwise
};

inline constexpr std::string_view kExtraPodName = "authentication.kubernetes.io/pod-name";
inline constexpr std::string_view kExtraPodUid = "authentication.kubernetes.io/pod-uid";
inline constexpr std::string_view kExtraNodeName = "authentication.kubernetes.io/node-name";

// The body of POST /apis/authentication.k8s.io/v1/tokenreviews asking about
// `token` for `audience`.
std::string TokenReviewBody(const std::string& token, const std::string& audience);

// Decodes the API server's TokenReview answer. kUnauthenticated when it says
// the token is not authenticated (with its status.error, shortened), or when
// it authenticated the token without confirming `audience` in
// status.audiences (an authenticator that ignores audiences would accept a
// token minted for another service); kInternal when the answer is malformed;
// kInvalidArgument for a ServiceAccount username that is not
// system:serviceaccount:NS:NAME, or a pod name without a pod UID.
Result<TokenUser> DecodeTokenReview(std::string_view body, const std::string& audience);

// The body of POST /apis/authorization.k8s.io/v1/subjectaccessreviews: may
// `user` do `verb` on `resource` (core group) in namespace `ns` (name: one
// object; empty: any).
std::string SubjectAccessReviewBody(const TokenUser& user, const std::string& verb, const std::string& resource,
                                    const std::string& ns, const std::string& name);

// status.allowed of a SubjectAccessReview answer (false when denied or absent);
// kInternal when the answer is not an object.
Result<bool> DecodeSubjectAccessReview(std::string_view body);

}  // namespace vramd::kube
