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

const char* const kLockUsage = R"(vramctl lock - GPU locks (one workload computes on a GPU at a time)

Usage:
  vramctl lock acquire   --node N --gpu G [--owner O] [--ttl 60s] [--wait 0s]
  vramctl lock heartbeat --node N --gpu G [--owner O] [--ttl D]
  vramctl lock release   --node N --gpu G [--owner O]
  vramctl lock list [-o json]
  vramctl lock run --node N --gpu G [--owner O] [--ttl 60s] [--heartbeat 20s]
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
)";

namespace lock {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int Simple(const Target& t, const std::string& sub, Options o) {
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
        std::printf("granted token=%llu ttl=%gs owner=%s\n",
                    static_cast<unsigned long long>(a.body.value("token", uint64_t{0})),
                    a.body.value("ttl_seconds", 0.0), o.owner.c_str());
        return 0;
      }
      if (Clock::now() >= deadline) {
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
  if (sub == "heartbeat") {
    std::printf("ok token=%llu ttl=%gs owner=%s\n", static_cast<unsigned long long>(a.body.value("token", uint64_t{0})),
                a.body.value("ttl_seconds", 0.0), o.owner.c_str());
  } else {
    std::printf("%s owner=%s\n", a.body.value("released", false) ? "released" : "left the queue", o.owner.c_str());
  }
  return 0;
}

int List(const Target& t, const Options& o) {
  Client cli(t);
  Answer a = cli.Get("/v1/locks");
  if (!a.reached || a.status != 200) return Fail(Describe(a));
  const json& locks = a.body["locks"];
  if (o.json_output) {
    std::cout << locks.dump(2) << "\n";
    return 0;
  }
  const char* fmt = "%-20s %-4s %-50s %8s %8s %s\n";
  std::printf(fmt, "NODE", "GPU", "HOLDER", "TOKEN", "TTL", "WAITERS");
  for (const json& l : locks) {
    std::string holder = l["holder"].is_string() ? l["holder"].get<std::string>() : "-";
    char ttl[32];
    std::snprintf(ttl, sizeof ttl, "%.1fs", l.value("ttl_seconds", 0.0));
    std::printf(fmt, l.value("node", "").c_str(), std::to_string(l.value("gpu", 0)).c_str(), holder.c_str(),
                std::to_string(l.value("token", uint64_t{0})).c_str(), holder == "-" ? "-" : ttl,
                std::to_string(l["waiters"].size()).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace lock

int LockCommand(const Target& t, const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kLockUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string& sub = args[0];
  using namespace lock;
  Options o;
  if (std::string err = ParseOptions(args, 1, &o); !err.empty()) return Fail(err + " (see vramctl lock --help)", 2);
  if (!o.command.empty() && sub != "run") return Fail("only `lock run` takes a command after \"--\"", 2);
  if (sub == "acquire" || sub == "heartbeat" || sub == "release") return Simple(t, sub, o);
  if (sub == "list") return List(t, o);
  if (sub == "run") return Run(t, std::move(o));
  return Fail("unknown lock command " + sub + " (see vramctl lock --help)", 2);
}

}  // namespace vramctl
