// The bearer token vramd presents to the API server, read from a file and
// re-read when the file changes (the kubelet rotates projected service
// account tokens by swapping the file). Private to src/kube.
#pragma once

#include <sys/types.h>

#include <string>

#include "vramd/mutex.h"
#include "vramd/status.h"

namespace vramd::kube {

// Thread-safe. The token is never logged.
class TokenSource {
 public:
  // An empty path means no token (Get() returns "").
  explicit TokenSource(std::string path);

  // Reads the file; kInvalidArgument when it cannot be read or holds no token.
  Status Load();

  // The current token. Before each use the file is stat()ed; when its mtime,
  // size or inode changed it is read again. When that read fails (or the file
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
  Mutex mu_;
  std::string token_ GUARDED_BY(mu_);
  FileStamp stamp_ GUARDED_BY(mu_);     // of the file token_ came from
  bool warned_ GUARDED_BY(mu_) = false; // a failed refresh was logged (log once per outage)
};

}  // namespace vramd::kube
