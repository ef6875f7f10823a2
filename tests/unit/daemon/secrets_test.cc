// The daemon's secrets (src/daemon/secrets.cc): files named in the config,
// else the environment for the Valkey passwords.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "daemon/secrets.h"

namespace vramd::daemon {
namespace {

using ::testing::StartsWith;

std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/vramd-secret-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  return path;
}

// Sets (or, with nullopt, clears) a variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DaemonSecrets, FilesAreReadWithoutTheirTrailingNewline) {
  config::Config cfg;
  cfg.valkey_password_file = WriteTemp("pw one\n");
  cfg.valkey_sentinel_password_file = WriteTemp("spw\r\n");
  cfg.api_token_file = WriteTemp("token \n");
  ScopedEnv env("VRAMD_VALKEY_PASSWORD", "from-env");
  Result<Secrets> s = ReadSecrets(cfg);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->valkey_password, "pw one") << "the file wins over the variable";
  EXPECT_EQ(s->valkey_sentinel_password, "spw");
  EXPECT_EQ(s->api_token, "token");
  unlink(cfg.valkey_password_file.c_str());
  unlink(cfg.valkey_sentinel_password_file.c_str());
  unlink(cfg.api_token_file.c_str());
}

TEST(DaemonSecrets, ValkeyPasswordsComeFromTheEnvironmentWithoutAFile) {
  ScopedEnv pw("VRAMD_VALKEY_PASSWORD", "env-pw");
  ScopedEnv spw("VRAMD_VALKEY_SENTINEL_PASSWORD", "env-spw");
  Result<Secrets> s = ReadSecrets(config::Config{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->valkey_password, "env-pw");
  EXPECT_EQ(s->valkey_sentinel_password, "env-spw");
  EXPECT_EQ(s->api_token, "") << "no api_token_file: the API needs no token";
}

TEST(DaemonSecrets, AnUnreadableFileOrAnEmptyTokenIsAnErrorNamingTheKey) {
  struct Case {
    const char* name;
    std::string config::Config::*field;
    std::string path;
    const char* says;
  };
  const std::string empty = WriteTemp("\n");
  const Case cases[] = {
      {"password", &config::Config::valkey_password_file, "/nonexistent/pw", "valkey.password_file: cannot read"},
      {"sentinel", &config::Config::valkey_sentinel_password_file, "/nonexistent/spw",
       "valkey.sentinel_password_file: cannot read"},
      {"token", &config::Config::api_token_file, "/nonexistent/token", "api_token_file: cannot read"},
      {"empty token", &config::Config::api_token_file, empty, "api_token_file: the file is empty"},
  };
  for (const Case& c : cases) {
    config::Config cfg;
    cfg.*c.field = c.path;
    Result<Secrets> s = ReadSecrets(cfg);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_THAT(s.status().message(), StartsWith(c.says)) << c.name;
  }
  unlink(empty.c_str());
}

}  // namespace
}  // namespace vramd::daemon
