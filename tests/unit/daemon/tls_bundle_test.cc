// The certificates of `vramd ensure-secrets` (src/daemon/tls_bundle.cc),
// read back with OpenSSL: names, key usages, lifetimes, and that each leaf
// verifies against the CA for its own purpose only.
#include "daemon/tls_bundle.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <memory>
#include <set>
#include <string>

namespace vramd::daemon {
namespace {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PKeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Cert = std::unique_ptr<X509, X509Free>;
using PKey = std::unique_ptr<EVP_PKEY, PKeyFree>;

// The one certificate in `pem` (null when it holds none, or more than one).
Cert ParseCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  Cert c(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  X509* extra = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  if (extra != nullptr) {
    X509_free(extra);
    c.reset();
  }
  BIO_free(bio);
  return c;
}

PKey ParseKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  PKey k(PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return k;
}

// The X509_V_* result of verifying `leaf` against `ca` for `purpose`
// (X509_PURPOSE_SSL_SERVER or _CLIENT).
int Verify(X509* ca, X509* leaf, int purpose) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx, purpose);
  int rc = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return rc;
}

std::set<std::string> SubjectAltNames(X509* cert) {
  std::set<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type == GEN_DNS) {
      out.insert("DNS:" + std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName)),
                                      ASN1_STRING_length(n->d.dNSName)));
    } else if (n->type == GEN_IPADD) {
      out.insert("IP:" + std::to_string(ASN1_STRING_length(n->d.iPAddress)) + "bytes");
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::string CommonName(X509* cert) {
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof(buf));
  return buf;
}

// Days between notBefore and notAfter (rounded down).
int LifetimeDays(X509* cert) {
  int days = 0, secs = 0;
  ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(cert), X509_get0_notAfter(cert));
  return days;
}

class TlsBundleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TlsBundleOptions o;
    o.dns_names = {"vramd.gpu.svc", "vramd.gpu.svc.cluster.local", "127.0.0.1", "::1"};
    Result<TlsBundle> b = GenerateTlsBundle(o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    bundle_ = new TlsBundle(std::move(b).value());
  }
  static void TearDownTestSuite() { delete bundle_; }
  static TlsBundle* bundle_;
};
TlsBundle* TlsBundleTest::bundle_ = nullptr;

TEST_F(TlsBundleTest, EachFieldIsOnePemObjectAndNoCertificateFileHoldsAKey) {
  ASSERT_NE(bundle_, nullptr);
  for (const std::string* crt : {&bundle_->ca_crt, &bundle_->tls_crt, &bundle_->client_crt}) {
    EXPECT_NE(ParseCert(*crt), nullptr) << *crt;
    EXPECT_EQ(crt->find("PRIVATE KEY"), std::string::npos) << "a key in a certificate field";
  }
  for (const std::string* key : {&bundle_->tls_key, &bundle_->client_key}) {
    PKey k = ParseKey(*key);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(EVP_PKEY_get_base_id(k.get()), EVP_PKEY_EC);
    EXPECT_EQ(EVP_PKEY_get_bits(k.get()), 256);
  }
}

TEST_F(TlsBundleTest, TheCaIsACaAndTheLeavesAreNot) {
  Cert ca = ParseCert(bundle_->ca_crt), server = ParseCert(bundle_->tls_crt), client = ParseCert(bundle_->client_crt);
  ASSERT_TRUE(ca && server && client);
  EXPECT_EQ(X509_check_ca(ca.get()), 1);
  EXPECT_EQ(X509_check_ca(server.get()), 0);
  EXPECT_EQ(X509_check_ca(client.get()), 0);
  EXPECT_TRUE(X509_get_key_usage(ca.get()) & KU_KEY_CERT_SIGN);
  for (X509* leaf : {server.get(), client.get()}) {
    EXPECT_EQ(X509_get_key_usage(leaf), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
    EXPECT_EQ(X509_check_issued(ca.get(), leaf), X509_V_OK);
    EXPECT_EQ(X509_NAME_cmp(X509_get_issuer_name(leaf), X509_get_subject_name(ca.get())), 0);
  }
  EXPECT_EQ(X509_get_extended_key_usage(server.get()), static_cast<uint32_t>(XKU_SSL_SERVER));
  EXPECT_EQ(X509_get_extended_key_usage(client.get()), static_cast<uint32_t>(XKU_SSL_CLIENT));
  EXPECT_EQ(CommonName(client.get()), "vramd-scheduler");
  EXPECT_EQ(CommonName(ca.get()), "vramd-ca");
}

TEST_F(TlsBundleTest, TheServerCertificateNamesEveryDnsNameAndAddress) {
  Cert server = ParseCert(bundle_->tls_crt);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(SubjectAltNames(server.get()),
            (std::set<std::string>{"DNS:vramd.gpu.svc", "DNS:vramd.gpu.svc.cluster.local", "IP:4bytes", "IP:16bytes"}));
  for (const char* host : {"vramd.gpu.svc", "vramd.gpu.svc.cluster.local"}) {
    EXPECT_EQ(X509_check_host(server.get(), host, 0, 0, nullptr), 1) << host;
  }
  EXPECT_EQ(X509_check_host(server.get(), "vramd.other.svc", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_check_ip_asc(server.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(server.get(), "::1", 0), 1);
  Cert client = ParseCert(bundle_->client_crt);
  EXPECT_TRUE(SubjectAltNames(client.get()).empty()) << "the client certificate names no host";
}

TEST_F(TlsBundleTest, EachLeafVerifiesAgainstTheCaForItsOwnPurposeOnly) {
  Cert ca = ParseCert(bundle_->ca_crt), server = ParseCert(bundle_->tls_crt), client = ParseCert(bundle_->client_crt);
  ASSERT_TRUE(ca && server && client);
  EXPECT_EQ(Verify(ca.get(), server.get(), X509_PURPOSE_SSL_SERVER), X509_V_OK);
  EXPECT_EQ(Verify(ca.get(), client.get(), X509_PURPOSE_SSL_CLIENT), X509_V_OK);
  EXPECT_EQ(Verify(ca.get(), client.get(), X509_PURPOSE_SSL_SERVER), X509_V_ERR_INVALID_PURPOSE)
      << "the scheduler's certificate cannot serve";
  EXPECT_EQ(Verify(ca.get(), server.get(), X509_PURPOSE_SSL_CLIENT), X509_V_ERR_INVALID_PURPOSE)
      << "vramd's certificate cannot be a client";
  // Another bundle's CA does not vouch for these.
  TlsBundleOptions o;
  o.dns_names = {"x"};
  Result<TlsBundle> other = GenerateTlsBundle(o);
  ASSERT_TRUE(other.ok());
  Cert other_ca = ParseCert(other->ca_crt);
  EXPECT_NE(Verify(other_ca.get(), server.get(), X509_PURPOSE_SSL_SERVER), X509_V_OK);
  EXPECT_NE(Verify(other_ca.get(), client.get(), X509_PURPOSE_SSL_CLIENT), X509_V_OK);
}

TEST_F(TlsBundleTest, EachKeyBelongsToItsCertificate) {
  Cert server = ParseCert(bundle_->tls_crt), client = ParseCert(bundle_->client_crt);
  PKey server_key = ParseKey(bundle_->tls_key), client_key = ParseKey(bundle_->client_key);
  ASSERT_TRUE(server && client && server_key && client_key);
  EXPECT_EQ(X509_check_private_key(server.get(), server_key.get()), 1);
  EXPECT_EQ(X509_check_private_key(client.get(), client_key.get()), 1);
  EXPECT_EQ(X509_check_private_key(server.get(), client_key.get()), 0);
}

TEST_F(TlsBundleTest, LifetimesAndSerials) {
  Cert ca = ParseCert(bundle_->ca_crt), server = ParseCert(bundle_->tls_crt), client = ParseCert(bundle_->client_crt);
  ASSERT_TRUE(ca && server && client);
  EXPECT_EQ(LifetimeDays(ca.get()), 3650);  // 10 years and the hour of skew allowance
  EXPECT_EQ(LifetimeDays(server.get()), 1826);
  EXPECT_EQ(LifetimeDays(client.get()), 1826);
  time_t now = time(nullptr);
  for (X509* c : {ca.get(), server.get(), client.get()}) {
    EXPECT_LT(X509_cmp_time(X509_get0_notBefore(c), &now), 0) << "valid from before now";
    EXPECT_GT(X509_cmp_time(X509_get0_notAfter(c), &now), 0);
  }
  std::set<std::string> serials;
  for (X509* c : {ca.get(), server.get(), client.get()}) {
    const ASN1_INTEGER* s = X509_get0_serialNumber(c);
    EXPECT_EQ(s->type, V_ASN1_INTEGER) << "positive";
    EXPECT_EQ(s->length, 16);
    serials.insert(std::string(reinterpret_cast<const char*>(s->data), s->length));
  }
  EXPECT_EQ(serials.size(), 3u);
}

TEST(TlsBundle, RefusesNamesThatAreNeitherDnsNamesNorAddresses) {
  for (std::vector<std::string> names : std::vector<std::vector<std::string>>{
           {}, {""}, {"a,DNS:evil"}, {"under_score.svc"}, {"-lead.svc"}, {"a..b"}, {"a b"}, {std::string(64, 'a')},
           {"vramd.svc", "bad/slash"}}) {
    TlsBundleOptions o;
    o.dns_names = names;
    Result<TlsBundle> b = GenerateTlsBundle(o);
    EXPECT_EQ(b.status().code(), Code::kInvalidArgument) << (names.empty() ? "(none)" : names.back());
  }
  TlsBundleOptions ok;
  ok.dns_names = {"*.vramd.svc", "Vramd.Example.COM", "fe80::1"};
  EXPECT_TRUE(GenerateTlsBundle(ok).ok());
}

TEST(RandomHex, IsLowerCaseHexOfTwiceTheLengthAndDiffersEachTime) {
  Result<std::string> a = RandomHex(32), b = RandomHex(32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos) << *a;
  EXPECT_NE(*a, *b);
  EXPECT_FALSE(RandomHex(0).ok());
}

}  // namespace
}  // namespace vramd::daemon
