// The certificates `vramd ensure-secrets` puts in the TLS Secret, made in
// process with OpenSSL: one CA signs a server certificate (for vramd's
// listeners) and a client certificate (for kube-scheduler); the CA's private
// key is never written anywhere and is gone when the call returns, so no
// further certificate can be signed by it (rotation: delete the Secret and
// let ensure-secrets make a new set).
//
// Keys are ECDSA P-256 (accepted by Go's crypto/tls, i.e. kube-scheduler, by
// OpenSSL and by Python's ssl; small and fast to make); signatures
// ECDSA-SHA256. Serial numbers are 128 random bits. Validity starts an hour
// back (clock skew between nodes): the CA for 10 years, the two leaf
// certificates for 5.
#pragma once

#include <string>
#include <vector>

#include "vramd/status.h"

namespace vramd::daemon {

struct TlsBundleOptions {
  // Names the server certificate is valid for (subjectAltName): DNS names
  // (e.g. vramd.ns.svc, vramd.ns.svc.cluster.local) or IP addresses
  // (IPv4/IPv6 literals become IP SANs). At least one. The subject is CN=vramd
  // (verifiers read the SANs only).
  std::vector<std::string> dns_names;
  std::string client_common_name = "vramd-scheduler";
  std::string ca_common_name = "vramd-ca";
  int ca_days = 3650;
  int leaf_days = 1826;
};

// PEM texts, under the keys of the TLS Secret.
struct TlsBundle {
  std::string ca_crt;      // ca.crt: the CA certificate (basicConstraints CA:TRUE, pathlen 0)
  std::string tls_crt;     // tls.crt: server certificate (SANs, extendedKeyUsage serverAuth)
  std::string tls_key;     // tls.key: its private key (PKCS#8)
  std::string client_crt;  // client.crt: client certificate (CN client_common_name, clientAuth)
  std::string client_key;  // client.key
};

// kInvalidArgument when dns_names is empty or holds an empty name or one
// with characters a DNS name or IP literal cannot have; kInternal when
// OpenSSL fails (with its error text).
Result<TlsBundle> GenerateTlsBundle(const TlsBundleOptions& opts);

// `bytes` random bytes from OpenSSL's CSPRNG as lower-case hex (2 × bytes
// characters). kInternal when the generator fails.
Result<std::string> RandomHex(int bytes);

}  // namespace vramd::daemon
