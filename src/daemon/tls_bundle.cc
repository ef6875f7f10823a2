#include "daemon/tls_bundle.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace vramd::daemon {
namespace {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using PKey = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using Bignum = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using Extension = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;

constexpr const char* kServerCommonName = "vramd";

// `what` and the oldest queued OpenSSL error; the queue is cleared.
Status OpenSslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown OpenSSL error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return Internal("OpenSSL: " + what + ": " + buf);
}

bool IsIpLiteral(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// A DNS name: dot-separated labels of letters, digits and '-' (not at a
// label's ends), at most 63 bytes each and 253 in all; the first label may
// be "*".
bool IsDnsName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  for (bool first = true;; first = false) {
    size_t dot = s.find('.', start);
    std::string label = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.size() > 63) return false;
    if (!(first && label == "*")) {
      if (label.front() == '-' || label.back() == '-') return false;
      for (char c : label) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
        if (!ok) return false;
      }
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

struct CertSpec {
  std::string common_name;
  int days = 0;
  bool ca = false;
  std::string extended_key_usage;  // "serverAuth", "clientAuth" or "" (the CA)
  std::string subject_alt_names;   // "DNS:a,IP:1.2.3.4" or ""
};

Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  Extension ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return OpenSslError(std::string("extension ") + OBJ_nid2sn(nid) + " = " + value);
  }
  return Status::Ok();
}

// A certificate for `key`, signed by `issuer_key`; `issuer` null: self-signed.
Result<Cert> MakeCert(const CertSpec& spec, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key) {
  Cert cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return OpenSslError("new certificate");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return OpenSslError("serial number");
  serial[0] = (serial[0] & 0x7f) | 0x01;  // positive and 16 bytes long
  Bignum bn(BN_bin2bn(serial, sizeof(serial), nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return OpenSslError("serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), spec.days, 0, nullptr) == nullptr) {
    return OpenSslError("validity");
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0) != 1 ||
      X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : subject) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return OpenSslError("subject " + spec.common_name);
  }
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer ? issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  std::vector<std::pair<int, std::string>> exts;
  if (spec.ca) {
    exts = {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
            {NID_key_usage, "critical,keyCertSign,cRLSign"},
            {NID_subject_key_identifier, "hash"}};
  } else {
    exts = {{NID_basic_constraints, "critical,CA:FALSE"},
            {NID_key_usage, "critical,digitalSignature"},
            {NID_ext_key_usage, spec.extended_key_usage},
            {NID_subject_key_identifier, "hash"},
            {NID_authority_key_identifier, "keyid:always"}};
    if (!spec.subject_alt_names.empty()) exts.emplace_back(NID_subject_alt_name, spec.subject_alt_names);
  }
  for (const auto& [nid, value] : exts) {
    if (Status s = AddExtension(cert.get(), &ctx, nid, value); !s.ok()) return s;
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return OpenSslError("signing " + spec.common_name);
  return cert;
}

Result<PKey> NewKey() {
  PKey key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("EC P-256 key");
  return key;
}

Result<std::string> Pem(X509* cert, EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio) return OpenSslError("memory BIO");
  int ok = cert ? PEM_write_bio_X509(bio.get(), cert)
                : PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  if (ok != 1) return OpenSslError("PEM");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

Result<TlsBundle> GenerateTlsBundle(const TlsBundleOptions& opts) {
  if (opts.dns_names.empty()) return InvalidArgument("the server certificate needs at least one DNS name");
  std::string sans;
  for (const std::string& n : opts.dns_names) {
    const bool ip = IsIpLiteral(n);
    if (!ip && !IsDnsName(n)) {
      return InvalidArgument("\"" + n + "\" is neither a DNS name nor an IP address");
    }
    sans += (sans.empty() ? "" : ",") + std::string(ip ? "IP:" : "DNS:") + n;
  }
  if (opts.ca_days <= 0 || opts.leaf_days <= 0 || opts.leaf_days > opts.ca_days) {
    return InvalidArgument("certificate lifetimes: 0 < leaf_days <= ca_days");
  }
  Result<PKey> ca_key = NewKey(), server_key = NewKey(), client_key = NewKey();
  for (const Result<PKey>* k : {&ca_key, &server_key, &client_key}) {
    if (!k->ok()) return k->status();
  }
  Result<Cert> ca = MakeCert({opts.ca_common_name, opts.ca_days, true, "", ""}, ca_key->get(), nullptr, ca_key->get());
  if (!ca.ok()) return ca.status();
  Result<Cert> server = MakeCert({kServerCommonName, opts.leaf_days, false, "serverAuth", sans}, server_key->get(),
                                 ca->get(), ca_key->get());
  if (!server.ok()) return server.status();
  Result<Cert> client = MakeCert({opts.client_common_name, opts.leaf_days, false, "clientAuth", ""},
                                 client_key->get(), ca->get(), ca_key->get());
  if (!client.ok()) return client.status();

  TlsBundle b;
  for (auto [out, cert, key] : {std::tuple{&b.ca_crt, ca->get(), static_cast<EVP_PKEY*>(nullptr)},
                                {&b.tls_crt, server->get(), nullptr},
                                {&b.tls_key, nullptr, server_key->get()},
                                {&b.client_crt, client->get(), nullptr},
                                {&b.client_key, nullptr, client_key->get()}}) {
    Result<std::string> pem = Pem(cert, key);
    if (!pem.ok()) return pem.status();
    *out = std::move(pem).value();
  }
  return b;  // the CA key is freed here, never written
}

Result<std::string> RandomHex(int bytes) {
  if (bytes <= 0) return InvalidArgument("RandomHex: bytes must be > 0");
  std::vector<unsigned char> buf(static_cast<size_t>(bytes));
  if (RAND_bytes(buf.data(), bytes) != 1) return OpenSslError("random bytes");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(buf.size() * 2);
  for (unsigned char c : buf) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace vramd::daemon
