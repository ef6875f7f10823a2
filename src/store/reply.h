// Commands and replies on one hiredis connection (internal to the store
// component): replies are built straight into store::Reply trees by
// hiredis's reader (kReplyFunctions), and commands are encoded in RESP.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

#include "vramd/store/valkey_client.h"

namespace vramd::store {

// hiredis's reader callbacks that build Reply trees; set on every connection
// (c->reader->fn) before its first command.
extern redisReplyObjectFunctions kReplyFunctions;
// Frees a root Reply built by the reader (null is fine).
void FreeReply(void* r);

using ReplyPtr = std::unique_ptr<Reply>;

// Runs one command on a connection; null on a transport error (see c->err).
ReplyPtr Run(redisContext* c, const std::vector<std::string>& argv);

// A READONLY error: the server is a replica (now).
bool IsReadonly(const Reply& r);

// argv in the shape hiredis wants, pointing into the caller's strings.
class ArgvView {
 public:
  explicit ArgvView(const std::vector<std::string>& argv) {
    ptrs_.reserve(argv.size());
    lens_.reserve(argv.size());
    for (const auto& a : argv) {
      ptrs_.push_back(a.data());
      lens_.push_back(a.size());
    }
  }
  int argc() const { return static_cast<int>(ptrs_.size()); }
  const char** argv() { return ptrs_.data(); }
  const size_t* lens() const { return lens_.data(); }

 private:
  std::vector<const char*> ptrs_;
  std::vector<size_t> lens_;
};

// Appends one command in RESP (what redisFormatCommandArgv produces).
void AppendResp(std::string* out, const std::vector<std::string>& argv);

}  // namespace vramd::store
