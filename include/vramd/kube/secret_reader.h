// Reading one Secret back: what `vramd ensure-secrets` does when its create
// answers 409 (a Secret of that name exists), to trust it only when it is the
// one ensure-secrets made (its labels and keys; src/daemon/ensure_secrets.h).
// Apart from SecretClient (secrets.h): used by nothing but ensure-secrets. The
// REST client implements it (same connection set-up: Options, explicit URL,
// token and CA, or in-cluster).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "vramd/kube/kube_client.h"
#include "vramd/kube/secrets.h"
#include "vramd/status.h"

namespace vramd::kube {

class SecretReader {
 public:
  virtual ~SecretReader() = default;

  // GET /api/v1/namespaces/{ns}/secrets/{name}: its name, namespace, type,
  // labels and data (each value base64-decoded). Errors map as KubeClient's
  // (404 kNotFound, 403 kInternal naming RBAC, 5xx and transport kUnavailable).
  virtual Result<Secret> GetSecret(const std::string& ns, const std::string& name) = 0;
};

// The REST reader (NewRestClient's options and errors).
Result<std::unique_ptr<SecretReader>> NewSecretReader(const Options& opts);

// A Secret from the API server's JSON: metadata.name/namespace/labels, type
// (Opaque when absent), data (base64, RFC 4648 with padding). kInvalidArgument
// when the body is not a Secret object or a data value is not base64. Pure.
Result<Secret> SecretFromJson(std::string_view body);

// RFC 4648 base64 (padded) to bytes; nullopt-like failure as kInvalidArgument. Pure.
Result<std::string> Unbase64(std::string_view text);

}  // namespace vramd::kube
