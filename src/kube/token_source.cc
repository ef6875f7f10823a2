#include "kube/token_source.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace vramd::kube {
namespace {

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

}  // namespace

TokenSource::TokenSource(std::string path, std::chrono::milliseconds check_every)
    : path_(std::move(path)), check_every_(check_every) {}

Status TokenSource::Load() {
  if (path_.empty()) return Status::Ok();
  MutexLock lock(&mu_);
  return RefreshLocked();
}

std::string TokenSource::Get() {
  if (path_.empty()) return "";
  MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  if (!token_.empty() && check_every_.count() > 0 && now - checked_ < check_every_) return token_;
  checked_ = now;
  Status s = RefreshLocked();
  if (!s.ok() && !warned_) {
    spdlog::warn("kube: keeping the previous API token: {}", s.message());
  }
  warned_ = !s.ok();
  return token_;
}

Status TokenSource::RefreshLocked() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return InvalidArgument("token file " + path_ + ": " + std::strerror(errno));
  }
  FileStamp now{st.st_dev, st.st_ino, st.st_size, static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec};
  if (now == stamp_ && !token_.empty()) return Status::Ok();
  std::ifstream in(path_, std::ios::binary);
  if (!in) return InvalidArgument("token file " + path_ + ": cannot be opened");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return InvalidArgument("token file " + path_ + ": read error");
  std::string token = Trim(buf.str());
  if (token.empty()) return InvalidArgument("token file " + path_ + ": empty");
  for (char c : token) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return InvalidArgument("token file " + path_ + ": the token contains whitespace or control characters");
    }
  }
  token_ = std::move(token);
  stamp_ = now;
  return Status::Ok();
}

}  // namespace vramd::kube
