// `vramctl lock run`: waits for a GPU lock, runs a command, heartbeats while
// it runs, forwards signals to it and releases the lock when it exits.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "client.h"
#include "lock_options.h"
#include "output.h"
#include "vramd/mutex.h"

extern char** environ;

namespace vramctl::lock {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Takes SIGTERM/SIGINT/SIGHUP (blocked in every thread) and forwards them to
// the child once there is one; before that, records the signal and aborts
// the in-flight acquire call.
class SignalRelay {
 public:
  explicit SignalRelay(const sigset_t& sigs)
      : sigs_(sigs), thread_([this](std::stop_token st) { Loop(st); }) {}

  // Sets the child; returns a signal that arrived before it (0 if none).
  int SetChild(pid_t pid) {
    vramd::MutexLock lock(&mu_);
    child_ = pid;
    int s = pending_;
    pending_ = 0;
    return s;
  }
  int pending() {
    vramd::MutexLock lock(&mu_);
    return pending_;
  }
  // Signals the child if it is still running (never a reaped, reused pid).
  void SendToChild(int sig) {
    vramd::MutexLock lock(&mu_);
    if (child_ > 0) kill(child_, sig);
  }
  void SetActiveClient(Client* cli) {
    vramd::MutexLock lock(&mu_);
    active_ = cli;
  }

 private:
  void Loop(std::stop_token st) {
    timespec tick{0, 50'000'000};
    while (!st.stop_requested()) {
      int s = sigtimedwait(&sigs_, nullptr, &tick);
      if (s <= 0) continue;
      vramd::MutexLock lock(&mu_);
      if (child_ > 0) {
        kill(child_, s);
      } else if (child_ == 0) {
        pending_ = s;
        if (active_ != nullptr) active_->Stop();  // interrupts a waiting acquire
      }
    }
  }

  sigset_t sigs_;
  vramd::Mutex mu_;
  pid_t child_ GUARDED_BY(mu_) = 0;  // -1 once reaped
  int pending_ GUARDED_BY(mu_) = 0;
  Client* active_ GUARDED_BY(mu_) = nullptr;
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
    Client cli(t_, std::min<int64_t>(10'000, std::max<int64_t>(1000, ttl_ms_ / 2)));
    json body{{"owner", o_.owner}, {"ttl_seconds", static_cast<double>(ttl_ms_) / 1000.0}};
    auto last_ok = Clock::now();
    int64_t next_ms = every_ms_;
    vramd::Mutex mu;
    vramd::CondVar cv;
    for (;;) {
      {
        vramd::MutexLock lock(&mu);
        cv.WaitFor(&lock, st, std::chrono::milliseconds(next_ms));
        if (st.stop_requested()) return;
      }
      Answer a = cli.Post(LockPath(o_, "heartbeat"), body);
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
  Client cli(t, 5'000);
  Answer a = cli.Post(LockPath(o, "release"), json{{"owner", o.owner}});
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

}  // namespace

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
  Client cli(t);
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
    cli.SetReadTimeoutMs(wait_ms + 10'000);
    auto started = Clock::now();
    Answer a = cli.Post(LockPath(o, "acquire"), body);
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

}  // namespace vramctl::lock
