// Finding the Valkey primary through Sentinel (DESIGN.md §3: a standalone
// primary with replicas, Sentinel for HA). Internal to the store component:
// the pooled client (sentinel_route.cc) asks a SentinelResolver where the
// primary is whenever it has no working connection to it, and checks every
// new connection with ROLE before using it. docs/valkey-ha.md tells the story.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "vramd/mutex.h"
#include "vramd/status.h"
#include "vramd/store/valkey_client.h"

namespace vramd::store {

constexpr int kDefaultSentinelPort = 26379;

// redis+sentinel://[user:password@]host1[:port1][,host2[:port2]...]/master[/db]
// (valkey+sentinel:// too). Hosts may be bracketed IPv6 ("[::1]:26379"); a
// port defaults to 26379. The userinfo is the data nodes' credentials (as in
// redis://), never the sentinels'. A query string ("?...") is ignored.
struct SentinelUrl {
  std::vector<ValkeyEndpoint> sentinels;  // host and port only; at least one
  std::string master_name;
  std::string username;                   // of the primary (percent-decoded)
  std::string password;                   // of the primary (percent-decoded)
  int db = 0;
};

// Whether `url` has a sentinel scheme (then ParseSentinelUrl applies).
bool IsSentinelUrl(std::string_view url);

// kInvalidArgument, with the password redacted, when malformed.
Result<SentinelUrl> ParseSentinelUrl(std::string_view url);

struct SentinelOptions {
  std::vector<ValkeyEndpoint> sentinels;
  std::string master_name;
  std::string username;  // the sentinels' own ACL user (optional)
  std::string password;  // the sentinels' requirepass; empty: no AUTH
  std::chrono::milliseconds timeout{500};  // connect, and each reply, per sentinel
};

// Asks the sentinels, one at a time, for the master's address
// (SENTINEL get-master-addr-by-name). Thread-safe; never logs a password.
class SentinelResolver {
 public:
  explicit SentinelResolver(SentinelOptions opts);

  // The address named by the first sentinel that answers. A sentinel that
  // is unreachable, refuses AUTH, errs or does not know the master is
  // skipped; the one that answered is asked first next time. Costs at most
  // about 2 × timeout per sentinel tried. kUnavailable, listing each
  // sentinel's failure, when none answered.
  Result<ValkeyEndpoint> Resolve();

  // The last answer turned out wrong (the named server was unreachable or
  // not a primary): the sentinel that gave it is asked last next time, so a
  // sentinel with a stale view does not pin the client to a dead address.
  void Distrust();

  const std::string& master_name() const { return opts_.master_name; }

 private:
  Result<ValkeyEndpoint> Ask(const ValkeyEndpoint& sentinel) const;

  const SentinelOptions opts_;
  Mutex mu_;
  std::vector<ValkeyEndpoint> order_ GUARDED_BY(mu_);  // asked front to back
  size_t answered_ GUARDED_BY(mu_) = SIZE_MAX;         // index in order_ of the last answer
};

}  // namespace vramd::store
