// Reading a Secret back (src/kube/secret_reader.cc): the JSON decode and base64.
// The REST GET itself runs against a real kube-apiserver in
// tests/e2e/ensure_secrets_test.py.
#include "vramd/kube/secret_reader.h"

#include <gtest/gtest.h>

namespace vramd::kube {
namespace {

TEST(Unbase64, InvertsBase64AndRefusesWhatIsNot) {
  for (std::string bytes : {std::string(""), std::string("f"), std::string("fo"), std::string("foo"),
                            std::string("foobar"), std::string("\x00\xff\xfe\x01", 4)}) {
    Result<std::string> back = Unbase64(Base64(bytes));
    ASSERT_TRUE(back.ok()) << bytes;
    EXPECT_EQ(*back, bytes);
  }
  for (const char* bad : {"Zg=", "Z===", "Zg=a", "Zm9v!A==", "=Zg=", "Zg==Zg=="}) {
    EXPECT_FALSE(Unbase64(bad).ok()) << bad;
  }
}

TEST(SecretFromJson, ReadsNameTypeLabelsAndData) {
  Result<Secret> s = SecretFromJson(R"({"kind":"Secret","apiVersion":"v1",
    "metadata":{"name":"vramd-valkey","namespace":"vs","labels":{"app.kubernetes.io/managed-by":"vramd-ensure-secrets"}},
    "type":"Opaque","data":{"password":"c2VjcmV0"}})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "vramd-valkey");
  EXPECT_EQ(s->ns, "vs");
  EXPECT_EQ(s->type, "Opaque");
  EXPECT_EQ(s->labels, (std::map<std::string, std::string>{{"app.kubernetes.io/managed-by", "vramd-ensure-secrets"}}));
  EXPECT_EQ(s->data, (std::map<std::string, std::string>{{"password", "secret"}}));

  Result<Secret> bare = SecretFromJson(R"({"kind":"Secret","metadata":{"name":"x"}})");
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->labels.empty());
  EXPECT_TRUE(bare->data.empty());
  EXPECT_EQ(bare->type, "Opaque");

  EXPECT_FALSE(SecretFromJson("not json").ok());
  EXPECT_FALSE(SecretFromJson(R"({"kind":"Status","message":"x"})").ok());
  EXPECT_FALSE(SecretFromJson(R"({"kind":"Secret","data":{"k":"%%%"}})").ok());
  EXPECT_FALSE(SecretFromJson(R"({"kind":"Secret","metadata":{"labels":{"a":1}}})").ok());
}

}  // namespace
}  // namespace vramd::kube
