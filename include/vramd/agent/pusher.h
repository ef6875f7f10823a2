// Sending reports to vramd, and how long to wait after each outcome.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vramd/status.h"

namespace vramd::agent {

enum class PushKind {
  kOk,        // 2xx
  kRejected,  // 4xx: vramd refused this report (unknown node, bad token, …); sending it again is useless
  kFailed,    // no answer, or 5xx: worth another try
};

struct PushOutcome {
  PushKind kind = PushKind::kOk;
  int status = 0;       // HTTP status, 0 when none came
  std::string message;  // vramd's error text, or why nothing came back
  std::string body;     // kOk: vramd's answer (its enforcement orders: agent/enforce.h)
};

// The wait before the next pass after `last`, where `failures` counts the
// consecutive passes that did not end in kOk (this one included):
//   kOk        interval
//   kFailed    interval × 2^(failures−1), at most max(interval, 60 s)
//   kRejected  max(interval, 60 s): the next report is probably refused
//              too (a node vramd does not know yet, a token being rotated)
// A fresh report is built every pass, so a retry never sends stale figures.
int64_t NextDelayMs(int64_t interval_ms, PushKind last, int failures);

// Sends one report body. Called from the agent's loop only.
class Pusher {
 public:
  virtual ~Pusher() = default;
  virtual PushOutcome Push(const std::string& body) = 0;
};

// PUT <server>/v1/nodes/<node>/usage with "Authorization: Bearer <token>"
// (the token file is read before every push, so a rotated token is picked
// up; an empty path sends no token). https servers are verified against
// `cacert` when given, the system's CAs otherwise.
Result<std::unique_ptr<Pusher>> MakeHttpPusher(const std::string& server, const std::string& node,
                                               const std::string& token_file, const std::string& cacert,
                                               int64_t timeout_ms);

}  // namespace vramd::agent
