// Creating Secrets: what `vramd ensure-secrets` asks of the API server. Apart
// from KubeClient because the daemon itself never writes a Secret (and its
// fake need not know about them). The REST implementation shares the
// KubeClient's connection set-up (Options: explicit URL, token and CA, or
// in-cluster).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "vramd/kube/kube_client.h"
#include "vramd/status.h"

namespace vramd::kube {

struct Secret {
  std::string ns;
  std::string name;
  std::string type = "Opaque";              // e.g. kubernetes.io/tls
  std::map<std::string, std::string> data;  // key -> bytes (base64-encoded on the wire)
  std::map<std::string, std::string> labels;
};

// The JSON body of POST /api/v1/namespaces/{ns}/secrets for `s`: apiVersion
// v1, kind Secret, metadata {name, namespace, labels (when any)}, type, and
// `data` with each value base64-encoded (RFC 4648, padded). Pure.
std::string SecretJson(const Secret& s);

// RFC 4648 base64 with padding. Pure.
std::string Base64(const std::string& bytes);

class SecretClient {
 public:
  virtual ~SecretClient() = default;

  // POST /api/v1/namespaces/{ns}/secrets. Creation is atomic on the API
  // server: when a Secret of that name already exists the call changes
  // nothing and returns kConflict (409 AlreadyExists). Other errors map as
  // KubeClient's (403 kInternal naming RBAC, 404 kNotFound: no such namespace).
  virtual Status CreateSecret(const Secret& secret) = 0;
};

// The REST client, as NewRestClient's (the same options and errors).
Result<std::unique_ptr<SecretClient>> NewSecretClient(const Options& opts);

}  // namespace vramd::kube
