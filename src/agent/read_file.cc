#include "agent/read_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vramd::agent {

bool ReadSmallFile(const std::string& path, std::string* out, size_t max, int* error) {
  out->clear();
  if (error) *error = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (error) *error = errno;
    return false;
  }
  char buf[4096];
  bool ok = true;
  while (out->size() < max) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (error) *error = errno;
      ok = false;
      break;
    }
    if (n == 0) break;
    out->append(buf, std::min(static_cast<size_t>(n), max - out->size()));
    // A short read is the end: regular files and the kernel's seq_files
    // (/proc, /sys) fill the buffer while there is more. Spares a syscall
    // per file, 500 per pass.
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  ::close(fd);
  return ok;
}

std::vector<std::string> ListDir(const std::string& path, int* error) {
  std::vector<std::string> names;
  if (error) *error = 0;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) {
    if (error) *error = errno;
    return names;
  }
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  return names;
}

}  // namespace vramd::agent
