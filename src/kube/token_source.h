// The bearer token vramd presents to the API server, read from a file and
// re-read when the file changes (the kubelet rotates projected service
// account tokens by swapping the file). Private to src/kube.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

#include "vramd/mutex.h"
#include "vramd/status.h"

namespace vramd::kube {

// Thread-safe. The token is never logged.
class TokenSource {
 public:
  // An empty path means no token (Get() returns ""). The file is checked
  // for a rotated token at most every `check_every` (0: before every use).
  explicit TokenSource(std::string path, std::chrono::milliseconds check_every = std::chrono::seconds(1));

  // Reads the file; kInvalidArgument when it cannot be read or holds no token.
  Status Load();

  // The current token. Before a use, unless it was checked within
  // check_every, the file is stat()ed (a stat per API call was 1.5 % of
  // vramd's CPU while scheduling, issue 36; the kubelet writes a rotated
  // token long before the old one expires); when its mtime, size or inode
  // changed it is read again. When that read fails (or the file
  // is empty mid-rotation) the last good token is kept and a warning logged
  // (once per outage).
  std::string Get();

 private:
  struct FileStamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    long long mtime_sec = 0;
    long mtime_nsec = 0;
    bool operator==(const FileStamp&) const = default;
  };

  // Reads the file when its stamp differs from stamp_.
  Status RefreshLocked() EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const std::chrono::milliseconds check_every_;
  Mutex mu_;
  std::chrono::steady_clock::time_point checked_ GUARDED_BY(mu_){};  // last stat
  std::string token_ GUARDED_BY(mu_);
  FileStamp stamp_ GUARDED_BY(mu_);     // of the file token_ came from
  bool warned_ GUARDED_BY(mu_) = false; // a failed refresh was logged (log once per outage)
};

}  // namespace vramd::kube
