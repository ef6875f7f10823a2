#include "daemon/secrets.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace vramd::daemon {
namespace {

std::string ReadSecretFile(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read " + path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// The file's content when `file` is set, else the variable's value (or "").
Status FileOrEnv(const char* key, const std::string& file, const char* env, std::string* out) {
  if (!file.empty()) {
    std::string err;
    *out = ReadSecretFile(file, &err);
    if (!err.empty()) return InvalidArgument(std::string(key) + ": " + err);
  } else if (const char* v = std::getenv(env)) {
    *out = v;
  }
  return Status::Ok();
}

}  // namespace

Result<Secrets> ReadSecrets(const config::Config& cfg) {
  Secrets s;
  if (Status st = FileOrEnv("valkey.password_file", cfg.valkey_password_file, "VRAMD_VALKEY_PASSWORD",
                            &s.valkey_password);
      !st.ok()) {
    return st;
  }
  if (Status st = FileOrEnv("valkey.sentinel_password_file", cfg.valkey_sentinel_password_file,
                            "VRAMD_VALKEY_SENTINEL_PASSWORD", &s.valkey_sentinel_password);
      !st.ok()) {
    return st;
  }
  if (!cfg.api_token_file.empty()) {
    std::string err;
    s.api_token = ReadSecretFile(cfg.api_token_file, &err);
    if (!err.empty() || s.api_token.empty()) {
      return InvalidArgument("api_token_file: " + (err.empty() ? std::string("the file is empty") : err));
    }
  }
  return s;
}

}  // namespace vramd::daemon
