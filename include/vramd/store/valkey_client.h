// A small thread-safe Valkey (Redis protocol) client: a connection pool with
// timeouts and reconnect backoff, commands, pipelines and Lua scripts.
// Used by the ledger store, the GPU locks and leader election.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/status.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_store.h"

namespace vramd::store {

struct Reply {
  enum class Type { kNil, kInteger, kString, kStatus, kArray, kError };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;              // kString, kStatus, kError
  std::vector<Reply> elements;  // kArray

  bool is_nil() const { return type == Type::kNil; }
  bool is_error() const { return type == Type::kError; }
};

// A Lua script, sent with EVALSHA (falling back to EVAL on NOSCRIPT).
class Script {
 public:
  explicit Script(std::string source);
  const std::string& source() const { return source_; }
  const std::string& sha1() const { return sha1_; }

 private:
  std::string source_;
  std::string sha1_;
};

class ValkeyClient {
 public:
  virtual ~ValkeyClient() = default;

  // One command. A server error reply (e.g. WRONGTYPE) is returned as a Reply
  // of type kError; transport failures are kUnavailable.
  virtual Result<Reply> Command(const std::vector<std::string>& argv) = 0;

  // Several commands in one round trip; one Reply per command, in order.
  virtual Result<std::vector<Reply>> Pipeline(const std::vector<std::vector<std::string>>& cmds) = 0;

  // Runs a script; keys and args as EVAL takes them.
  virtual Result<Reply> Eval(const Script& script, const std::vector<std::string>& keys,
                             const std::vector<std::string>& args) = 0;

  // Prefix for every key ("vramd").
  virtual const std::string& prefix() const = 0;
};

std::shared_ptr<ValkeyClient> NewValkeyClient(const ValkeyOptions& opts);

// The ledger store over a shared client.
std::unique_ptr<LedgerStore> NewValkeyLedgerStore(std::shared_ptr<ValkeyClient> client);

}  // namespace vramd::store
