#include "lock.h"

#include <httplib.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "vramd/parse.h"

extern char** environ;

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

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kExitNotGranted = 3;

int Fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "vramctl: %s\n", msg.c_str());
  return code;
}

std::optional<int64_t> ParseDurationMs(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  std::string num = s.substr(0, i), unit = s.substr(i);
  std::optional<double> parsed = vramd::ParseDouble(num, 0, 1e15);
  if (!parsed) return std::nullopt;
  const double v = *parsed;
  double mult;
  if (unit.empty() || unit == "s") mult = 1000;
  else if (unit == "ms") mult = 1;
  else if (unit == "m") mult = 60'000;
  else if (unit == "h") mult = 3'600'000;
  else return std::nullopt;
  double ms = v * mult;
  if (ms > 1e12) return std::nullopt;
  return static_cast<int64_t>(std::llround(ms));
}

std::string DurationText(int64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

// Keeps the characters an owner part may hold; others become '-'.
std::string OwnerPart(std::string s, const char* punct) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::strchr(punct, c) == nullptr) c = '-';
  }
  if (s.size() > 120) s.resize(120);
  return s.empty() ? "unknown" : s;
}

std::string DefaultOwner(bool with_pid) {
  const char* uid = std::getenv("POD_UID");
  std::string host;
  if (const char* h = std::getenv("HOSTNAME"); h != nullptr && *h != '\0') {
    host = h;
  } else {
    char buf[HOST_NAME_MAX + 1] = {};
    if (gethostname(buf, sizeof buf - 1) == 0) host = buf;
  }
  std::string inst = OwnerPart(host, "._:@+-");
  if (with_pid) inst += "-" + std::to_string(getpid());
  return OwnerPart(uid != nullptr && *uid != '\0' ? uid : "local", "._-") + "/" + inst;
}

struct Options {
  std::string node;
  std::string gpu;
  std::string owner;
  std::optional<int64_t> ttl_ms, wait_ms, heartbeat_ms;
  bool stop_on_loss = false;
  bool json_output = false;
  std::vector<std::string> command;  // after "--"
};

// Parses the flags after the subcommand; returns an error message or "".
std::string ParseOptions(const std::vector<std::string>& args, size_t from, Options* o) {
  for (size_t i = from; i < args.size(); ++i) {
    std::string a = args[i], value;
    if (a == "--") {
      o->command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      return "";
    }
    if (a == "--stop-on-loss") {
      o->stop_on_loss = true;
      continue;
    }
    if (a == "-o") {
      if (i + 1 >= args.size() || args[i + 1] != "json") return "-o takes \"json\"";
      o->json_output = true;
      ++i;
      continue;
    }
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (a.rfind("--", 0) == 0) {
      if (i + 1 >= args.size()) return a + " needs a value";
      value = args[++i];
    } else {
      return "unexpected argument \"" + a + "\"";
    }
    auto duration = [&](std::optional<int64_t>* out) -> std::string {
      std::optional<int64_t> d = ParseDurationMs(value);
      if (!d) return a + ": \"" + value + "\" is not a duration (e.g. 500ms, 30s, 2m)";
      *out = d;
      return "";
    };
    std::string err;
    if (a == "--node") o->node = value;
    else if (a == "--gpu") o->gpu = value;
    else if (a == "--owner") o->owner = value;
    else if (a == "--ttl") err = duration(&o->ttl_ms);
    else if (a == "--wait") err = duration(&o->wait_ms);
    else if (a == "--heartbeat") err = duration(&o->heartbeat_ms);
    else err = "unknown option " + a;
    if (!err.empty()) return err;
  }
  return "";
}

struct Answer {
  bool reached = false;  // false: transport error, see `error`
  int status = 0;
  json body;
  std::string error;  // the server's "error" field, or the transport error
};

void Configure(httplib::Client& cli, const Target& t, int64_t read_timeout_ms) {
  cli.set_connection_timeout(3, 0);
  cli.set_read_timeout(std::chrono::milliseconds(read_timeout_ms));
  cli.set_write_timeout(std::chrono::seconds(5));
  if (!t.token.empty()) cli.set_bearer_token_auth(t.token.c_str());
}

Answer ToAnswer(const Target& t, const httplib::Result& res) {
  Answer a;
  if (!res) {
    a.error = "cannot reach vramd at " + t.scheme_host_port + ": " + httplib::to_string(res.error());
    return a;
  }
  a.reached = true;
  a.status = res->status;
  a.body = json::parse(res->body, nullptr, false);
  if (a.body.is_discarded()) a.body = json::object();
  if (a.status != 200) {
    a.error = a.body.is_object() && a.body.contains("error") && a.body["error"].is_string()
                  ? a.body["error"].get<std::string>()
                  : "HTTP " + std::to_string(a.status);
  }
  return a;
}

Answer Post(httplib::Client& cli, const Target& t, const std::string& path, const json& body) {
  return ToAnswer(t, cli.Post(path.c_str(), body.dump(), "application/json"));
}

std::string LockPath(const Options& o, const char* op) { return "/v1/locks/" + o.node + "/" + o.gpu + "/" + op; }

std::string Describe(const Answer& a) {
  if (!a.reached) return a.error;
  if (a.status == 401) return "vramd refused the token (HTTP 401): " + a.error + " (check --token-file)";
  return "HTTP " + std::to_string(a.status) + ": " + a.error;
}

std::string Check(const Options& o, bool need_target) {
  if (need_target && (o.node.empty() || o.gpu.empty())) return "--node and --gpu are required";
  if (o.ttl_ms && (*o.ttl_ms < 100 || *o.ttl_ms > 86'400'000)) return "--ttl must be from 100ms to 24h";
  return "";
}

int Simple(const Target& t, const std::string& sub, Options o) {
  if (std::string e = Check(o, true); !e.empty()) return Fail(e, 2);
  if (o.owner.empty()) o.owner = DefaultOwner(false);
  int64_t wait = o.wait_ms.value_or(0);
  httplib::Client cli(t.scheme_host_port);
  json body{{"owner", o.owner}};
  if (o.ttl_ms) body["ttl_seconds"] = static_cast<double>(*o.ttl_ms) / 1000.0;
  if (sub == "acquire") {
    auto deadline = Clock::now() + std::chrono::milliseconds(wait);
    for (;;) {
      int64_t left = std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      body["wait_seconds"] = static_cast<double>(std::min<int64_t>(left, 20'000)) / 1000.0;
      Configure(cli, t, std::min<int64_t>(left, 20'000) + 10'000);
      auto started = Clock::now();
      Answer a = Post(cli, t, LockPath(o, "acquire"), body);
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
  Configure(cli, t, 10'000);
  Answer a = Post(cli, t, LockPath(o, sub.c_str()), body);
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
  httplib::Client cli(t.scheme_host_port);
  Configure(cli, t, 10'000);
  Answer a = ToAnswer(t, cli.Get("/v1/locks"));
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

// ---- lock run ----

// Takes SIGTERM/SIGINT/SIGHUP (blocked in every thread) and forwards them to
// the child once there is one; before that, records the signal and aborts
// the in-flight acquire call.
class SignalRelay {
 public:
  explicit SignalRelay(const sigset_t& sigs)
      : sigs_(sigs), thread_([this](std::stop_token st) { Loop(st); }) {}

  // Sets the child; returns a signal that arrived before it (0 if none).
  int SetChild(pid_t pid) {
    std::lock_guard<std::mutex> lock(mu_);
    child_ = pid;
    int s = pending_;
    pending_ = 0;
    return s;
  }
  int pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_;
  }
  // Signals the child if it is still running (never a reaped, reused pid).
  void SendToChild(int sig) {
    std::lock_guard<std::mutex> lock(mu_);
    if (child_ > 0) kill(child_, sig);
  }
  void SetActiveClient(httplib::Client* cli) {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = cli;
  }

 private:
  void Loop(std::stop_token st) {
    timespec tick{0, 50'000'000};
    while (!st.stop_requested()) {
      int s = sigtimedwait(&sigs_, nullptr, &tick);
      if (s <= 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (child_ > 0) {
        kill(child_, s);
      } else if (child_ == 0) {
        pending_ = s;
        if (active_ != nullptr) active_->stop();  // interrupts a waiting acquire
      }
    }
  }

  sigset_t sigs_;
  std::mutex mu_;
  pid_t child_ = 0;  // GUARDED_BY(mu_); -1 once reaped
  int pending_ = 0;  // GUARDED_BY(mu_)
  httplib::Client* active_ = nullptr;  // GUARDED_BY(mu_)
  std::jthread thread_;  // last: starts after the fields it uses
};

// Heartbeats while the child runs. On loss: stderr, and SIGTERM to the child
// with --stop-on-loss.
class Heartbeater {
 public:
  Heartbeater(const Target& t, const Options& o, int64_t ttl_ms, int64_t every_ms, SignalRelay* relay)
      : t_(t), o_(o), ttl_ms_(ttl_ms), every_ms_(every_ms), relay_(relay),
        thread_([this](std::stop_token st) { Loop(st); }) {}

  // Stops and joins; true when the lock was lost.
  bool Finish() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
    return lost_.load();
  }

 private:
  void Loop(std::stop_token st) {
    httplib::Client cli(t_.scheme_host_port);
    Configure(cli, t_, std::min<int64_t>(10'000, std::max<int64_t>(1000, ttl_ms_ / 2)));
    json body{{"owner", o_.owner}, {"ttl_seconds", static_cast<double>(ttl_ms_) / 1000.0}};
    auto last_ok = Clock::now();
    int64_t next_ms = every_ms_;
    std::mutex mu;
    std::condition_variable_any cv;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, st, std::chrono::milliseconds(next_ms), [] { return false; });
        if (st.stop_requested()) return;
      }
      Answer a = Post(cli, t_, LockPath(o_, "heartbeat"), body);
      if (a.reached && a.status == 200) {
        last_ok = Clock::now();
        next_ms = every_ms_;
        continue;
      }
      std::string why;
      if (a.reached && a.status == 409) {
        why = a.error;
      } else if (Clock::now() - last_ok >= std::chrono::milliseconds(ttl_ms_)) {
        why = "no heartbeat succeeded within the TTL (" + DurationText(ttl_ms_) + "); last error: " + Describe(a);
      } else {
        std::fprintf(stderr, "vramctl: heartbeat of GPU lock %s/%s failed, retrying: %s\n", o_.node.c_str(),
                     o_.gpu.c_str(), Describe(a).c_str());
        next_ms = std::min<int64_t>(every_ms_, 1000);
        continue;
      }
      lost_ = true;
      std::fprintf(stderr, "vramctl: lost GPU lock %s/%s: %s%s\n", o_.node.c_str(), o_.gpu.c_str(), why.c_str(),
                   o_.stop_on_loss ? "; sending SIGTERM to the command" : "");
      if (o_.stop_on_loss) relay_->SendToChild(SIGTERM);
      return;
    }
  }

  Target t_;
  Options o_;
  int64_t ttl_ms_, every_ms_;
  SignalRelay* relay_;
  std::atomic<bool> lost_{false};
  std::jthread thread_;  // last
};

void Release(const Target& t, const Options& o) {
  httplib::Client cli(t.scheme_host_port);
  Configure(cli, t, 5'000);
  Answer a = Post(cli, t, LockPath(o, "release"), json{{"owner", o.owner}});
  if (!a.reached || a.status != 200) {
    std::fprintf(stderr, "vramctl: releasing GPU lock %s/%s failed: %s\n", o.node.c_str(), o.gpu.c_str(),
                 Describe(a).c_str());
  }
}

// Sleeps up to `ms`, returning early when a signal is pending.
void Nap(SignalRelay& relay, int64_t ms) {
  auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < until && relay.pending() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

int Run(const Target& t, Options o) {
  if (std::string e = Check(o, true); !e.empty()) return Fail(e, 2);
  if (o.command.empty()) return Fail("lock run needs a command after \"--\"", 2);
  if (o.owner.empty()) o.owner = DefaultOwner(true);
  const int64_t ttl = o.ttl_ms.value_or(60'000);
  const int64_t every = o.heartbeat_ms.value_or(std::min<int64_t>(20'000, ttl / 3));
  if (every < 50 || every >= ttl) return Fail("--heartbeat must be at least 50ms and shorter than --ttl", 2);

  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // before any thread starts
  SignalRelay relay(sigs);

  // 1. Wait for the lock, keeping the queue place by polling.
  const bool bounded = o.wait_ms.has_value();
  const Clock::time_point give_up = Clock::now() + std::chrono::milliseconds(o.wait_ms.value_or(0));
  httplib::Client cli(t.scheme_host_port);
  relay.SetActiveClient(&cli);
  json body{{"owner", o.owner}, {"ttl_seconds", static_cast<double>(ttl) / 1000.0}};
  uint64_t token = 0;
  int last_position = 0;
  bool queued = false;
  auto leave = [&](int code) {
    relay.SetActiveClient(nullptr);
    if (queued) Release(t, o);  // leave the queue (or free a grant we did not use)
    return code;
  };
  for (;;) {
    if (int s = relay.pending(); s != 0) {
      std::fprintf(stderr, "vramctl: signal %d while waiting for GPU lock %s/%s; not running the command\n", s,
                   o.node.c_str(), o.gpu.c_str());
      return leave(128 + s);
    }
    int64_t wait_ms = 20'000;
    if (bounded) {
      wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()).count();
      if (wait_ms <= 0 && queued) {
        std::fprintf(stderr, "vramctl: GPU lock %s/%s not granted within %s (queue position %d)\n", o.node.c_str(),
                     o.gpu.c_str(), DurationText(*o.wait_ms).c_str(), last_position);
        return leave(kExitNotGranted);
      }
      wait_ms = std::clamp<int64_t>(wait_ms, 0, 20'000);
    }
    body["wait_seconds"] = static_cast<double>(wait_ms) / 1000.0;
    Configure(cli, t, wait_ms + 10'000);
    auto started = Clock::now();
    Answer a = Post(cli, t, LockPath(o, "acquire"), body);
    if (relay.pending() != 0) {
      queued = true;  // the call may have been granted or queued before it was cut
      continue;
    }
    if (a.reached && (a.status == 401 || a.status == 400 || a.status == 404)) {
      return leave(Fail(Describe(a) + "; not running the command", a.status == 401 ? 1 : 2));
    }
    if (!a.reached || a.status != 200) {
      std::fprintf(stderr, "vramctl: acquiring GPU lock %s/%s failed, retrying: %s\n", o.node.c_str(), o.gpu.c_str(),
                   Describe(a).c_str());
      Nap(relay, 1000);
      continue;
    }
    queued = true;
    if (a.body.value("granted", false)) {
      token = a.body.value("token", uint64_t{0});
      break;
    }
    int pos = a.body.value("position", 0);
    if (pos != last_position) {
      std::fprintf(stderr, "vramctl: waiting for GPU lock %s/%s (queue position %d)\n", o.node.c_str(),
                   o.gpu.c_str(), pos);
      last_position = pos;
    }
    auto took = Clock::now() - started;
    if (took < std::chrono::milliseconds(200)) {
      Nap(relay, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::milliseconds(200) - took).count());
    }
  }
  relay.SetActiveClient(nullptr);
  std::fprintf(stderr, "vramctl: holding GPU lock %s/%s (owner %s, fencing token %llu)\n", o.node.c_str(),
               o.gpu.c_str(), o.owner.c_str(), static_cast<unsigned long long>(token));

  // 2. Run the command with default signal handling and an empty mask.
  std::vector<char*> argv;
  for (std::string& a : o.command) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  // The command learns its grant: a fencing token to hand to whatever it writes.
  std::vector<std::string> env_strings{"VRAMD_LOCK_TOKEN=" + std::to_string(token), "VRAMD_LOCK_OWNER=" + o.owner,
                                       "VRAMD_LOCK_NODE=" + o.node, "VRAMD_LOCK_GPU=" + o.gpu};
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "VRAMD_LOCK_", 11) != 0) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  pid_t pid = 0;
  int err = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    relay.SetChild(-1);
    Release(t, o);
    return Fail("cannot run " + o.command[0] + ": " + std::strerror(err), 127);
  }
  if (int s = relay.SetChild(pid); s != 0) kill(pid, s);
  Heartbeater heartbeats(t, o, ttl, every, &relay);

  // 3. Wait for it; reap any other child too (vramctl may be PID 1 of a container).
  // The child is marked gone before it is reaped, so its pid is never
  // signalled after it could have been reused.
  int status = 0;
  for (;;) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "vramctl: waitid: %s\n", std::strerror(errno));
      relay.SetChild(-1);
      break;
    }
    if (info.si_pid == pid) relay.SetChild(-1);
    int st = 0;
    while (waitpid(info.si_pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (info.si_pid == pid) {
      status = st;
      break;
    }
  }
  bool lost = heartbeats.Finish();
  if (!lost) Release(t, o);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int LockCommand(const Target& t, const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kLockUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string& sub = args[0];
  Options o;
  if (std::string err = ParseOptions(args, 1, &o); !err.empty()) return Fail(err + " (see vramctl lock --help)", 2);
  if (!o.command.empty() && sub != "run") return Fail("only `lock run` takes a command after \"--\"", 2);
  if (sub == "acquire" || sub == "heartbeat" || sub == "release") return Simple(t, sub, o);
  if (sub == "list") return List(t, o);
  if (sub == "run") return Run(t, std::move(o));
  return Fail("unknown lock command " + sub + " (see vramctl lock --help)", 2);
}

}  // namespace vramctl
