// `vramctl lock acquire|heartbeat|release|list` (lock_run.cc: `lock run`).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "client.h"
#include "commands.h"
#include "lock_options.h"
#include "output.h"

namespace vramctl {

namespace {

const char* const kLockUsage = R"(PROGRAM lock - GPU locks (one workload computes on a GPU at a time)

Usage:
  PROGRAM lock acquire   --node N --gpu G [--owner O] [--ttl 60s] [--wait 0s]
  PROGRAM lock heartbeat --node N --gpu G [--owner O] [--ttl D]
  PROGRAM lock release   --node N --gpu G [--owner O]
  PROGRAM lock list [-o table|wide|json]
  PROGRAM lock run --node N --gpu G [--owner O] [--ttl 60s] [--heartbeat 20s]
                   [--wait D] [--stop-on-loss] -- CMD [ARGS...]

acquire    asks for the lock; with --wait, waits up to D keeping its queue place.
           Prints "granted token=T ttl=S owner=O" (exit 0) or "queued position=K" (exit 3).
heartbeat  extends the TTL (to --ttl, or the TTL of the grant); exit 1 when not the owner.
release    frees the lock (or leaves the queue); exit 1 when not the owner.
run        waits for the lock (forever, or up to --wait: exit 3), runs CMD, heartbeats
           while it runs, forwards SIGTERM/SIGINT/SIGHUP to it, releases when it exits
           and exits with its status (128+N when killed by signal N). When the lock is
           lost (a heartbeat is refused, or none succeeded for a TTL) it says so on
           stderr; with --stop-on-loss it also sends SIGTERM to CMD. CMD sees
           VRAMD_LOCK_TOKEN (the fencing token), VRAMD_LOCK_OWNER, _NODE and _GPU.

Durations: 500ms, 30s, 2m, 1h (a bare number is seconds).
Owner: POD_UID/INSTANCE; default $POD_UID/$HOSTNAME for acquire/heartbeat/release and
$POD_UID/$HOSTNAME-PID for run (POD_UID from the downward API; "local" when unset).
Output: acquire, heartbeat and release print one line, or with -o json the API's answer;
list prints a table (-o wide adds how long each lock is held and the queue's owners)
or the API's locks (-o json); run prints nothing of its own on stdout.
)";

}  // namespace

std::string LockUsage(const std::string& program) {
  std::string u = kLockUsage;
  for (size_t at = u.find("PROGRAM"); at != std::string::npos; at = u.find("PROGRAM", at + program.size())) {
    u.replace(at, 7, program);
  }
  return u;
}

namespace lock {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// With -o json, prints the API's answer; returns `code`.
int PrintJson(const Answer& a, int code) {
  std::cout << a.body.dump(2) << "\n";
  return code;
}

int Simple(const Context& c, const std::string& sub, Options o) {
  const Target& t = c.target;
  const bool as_json = c.output == Format::kJson;
  if (std::string e = Check(o, true); !e.empty()) return Fail(e, 2);
  if (o.owner.empty()) o.owner = DefaultOwner(false);
  int64_t wait = o.wait_ms.value_or(0);
  Client cli(t);
  json body{{"owner", o.owner}};
  if (o.ttl_ms) body["ttl_seconds"] = static_cast<double>(*o.ttl_ms) / 1000.0;
  if (sub == "acquire") {
    auto deadline = Clock::now() + std::chrono::milliseconds(wait);
    for (;;) {
      int64_t left = std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      body["wait_seconds"] = static_cast<double>(std::min<int64_t>(left, 20'000)) / 1000.0;
      cli.SetReadTimeoutMs(std::min<int64_t>(left, 20'000) + 10'000);
      auto started = Clock::now();
      Answer a = cli.Post(LockPath(o, "acquire"), body);
      if (!a.reached || a.status != 200) return Fail(Describe(a));
      if (a.body.value("granted", false)) {
        if (as_json) return PrintJson(a, 0);
        std::printf("granted token=%llu ttl=%gs owner=%s\n",
                    static_cast<unsigned long long>(a.body.value("token", uint64_t{0})),
                    a.body.value("ttl_seconds", 0.0), o.owner.c_str());
        return 0;
      }
      if (Clock::now() >= deadline) {
        if (as_json) return PrintJson(a, kExitNotGranted);
        std::printf("queued position=%d owner=%s\n", a.body.value("position", 0), o.owner.c_str());
        return kExitNotGranted;
      }
      auto took = Clock::now() - started;
      if (took < std::chrono::milliseconds(200)) std::this_thread::sleep_for(std::chrono::milliseconds(200) - took);
    }
  }
  cli.SetReadTimeoutMs(10'000);
  Answer a = cli.Post(LockPath(o, sub.c_str()), body);
  if (!a.reached || a.status != 200) return Fail(Describe(a));
  if (as_json) return PrintJson(a, 0);
  if (sub == "heartbeat") {
    std::printf("ok token=%llu ttl=%gs owner=%s\n", static_cast<unsigned long long>(a.body.value("token", uint64_t{0})),
                a.body.value("ttl_seconds", 0.0), o.owner.c_str());
  } else {
    std::printf("%s owner=%s\n", a.body.value("released", false) ? "released" : "left the queue", o.owner.c_str());
  }
  return 0;
}

// A line of `lock list`.
struct LockRow {
  const json* lock;
  int64_t now_ms;
};

const std::vector<Column<LockRow>>& LockColumns() {
  static const std::vector<Column<LockRow>> columns = {
      {"NODE", false, [](const LockRow& r) { return r.lock->value("node", ""); }},
      {"GPU", false, [](const LockRow& r) { return std::to_string(r.lock->value("gpu", 0)); }},
      {"HOLDER", false,
       [](const LockRow& r) {
         const json& h = At(*r.lock, "holder");
         return h.is_string() ? h.get<std::string>() : "-";
       }},
      {"TOKEN", false, [](const LockRow& r) { return std::to_string(r.lock->value("token", uint64_t{0})); }},
      {"TTL", false,
       [](const LockRow& r) {
         if (!At(*r.lock, "holder").is_string()) return std::string("-");
         char ttl[32];
         std::snprintf(ttl, sizeof ttl, "%.1fs", r.lock->value("ttl_seconds", 0.0));
         return std::string(ttl);
       }},
      {"WAITERS", false, [](const LockRow& r) { return std::to_string(At(*r.lock, "waiters").size()); }},
      {"HELD", true,
       [](const LockRow& r) {
         return At(*r.lock, "holder").is_string() ? AgeText(At(*r.lock, "granted_ms"), r.now_ms) : "-";
       }},
      {"QUEUE", true,
       [](const LockRow& r) {
         std::string q;
         for (const json& w : At(*r.lock, "waiters")) {
           // The owner is null for a caller vramd shows no owners to.
           const json& owner = At(w, "owner");
           q += (q.empty() ? "" : ",") + (owner.is_string() ? owner.get<std::string>() : std::string("?"));
         }
         return q.empty() ? "-" : q;
       }},
  };
  return columns;
}

int List(const Context& c) {
  Client cli(c.target);
  Answer a = cli.Get("/v1/locks");
  if (!a.reached || a.status != 200) return Fail(Describe(a));
  const json& locks = a.body["locks"];
  if (c.output == Format::kJson) {
    std::cout << locks.dump(2) << "\n";
    return 0;
  }
  std::vector<LockRow> rows;
  for (const json& l : locks) rows.push_back({&l, NowMs()});
  PrintColumns(LockColumns(), rows, c.output);
  return 0;
}

}  // namespace
}  // namespace lock

int LockCommand(const Context& c, const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? std::cerr : std::cout) << LockUsage(c.program);
    return args.empty() ? 2 : 0;
  }
  const std::string& sub = args[0];
  using namespace lock;
  Options o;
  if (std::string err = ParseOptions(args, 1, &o); !err.empty()) return Fail(err + " (see " + c.program + " lock --help)", 2);
  if (!o.command.empty() && sub != "run") return Fail("only `lock run` takes a command after \"--\"", 2);
  if (sub == "acquire" || sub == "heartbeat" || sub == "release") return Simple(c, sub, o);
  if (sub == "list") return List(c);
  if (sub == "run") return Run(c.target, std::move(o));
  return Fail("unknown lock command " + sub + " (see " + c.program + " lock --help)", 2);
}

}  // namespace vramctl
