// Helpers of the integration tests that start servers of their own
// (redis-server, redis-sentinel) on loopback: a child process with a log, a
// free port, bounded waits and a client with short timeouts.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "vramd/store/valkey_client.h"

extern char** environ;

namespace vramd::itest {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline int64_t Ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

// Polls `done` every 20 ms until it holds or `limit` passes.
inline bool WaitFor(const std::function<bool()>& done, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return done();
}

inline std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string p = (dir.empty() ? "." : dir) + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// A port nothing listens on right now (the kernel's choice for port 0).
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

inline std::string Tail(const std::string& path, size_t bytes = 3000) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > bytes ? "..." + s.substr(s.size() - bytes) : s;
}

// A child process whose output goes to a log file; killed and reaped by Stop().
class Process {
 public:
  Process() = default;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() { Stop(SIGKILL); }

  bool Start(const std::vector<std::string>& argv, const std::string& log) {
    log_ = log;
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    const int err = posix_spawn(&pid_, argv[0].c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) pid_ = -1;
    return err == 0;
  }

  // Sends `sig` and reaps the process; SIGKILL if it has not exited after 5 s.
  void Stop(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    int st = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (waitpid(pid_, &st, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &st, 0);
        break;
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    pid_ = -1;
  }

  const std::string& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

inline std::shared_ptr<store::ValkeyClient> DirectClient(int port, const std::string& password = "") {
  store::ValkeyOptions o;
  o.url = "redis://127.0.0.1:" + std::to_string(port);
  o.password = password;
  o.pool_size = 2;
  o.connect_timeout = milliseconds(300);
  o.command_timeout = milliseconds(2000);
  o.backoff_initial = milliseconds(5);
  o.backoff_max = milliseconds(20);
  return store::NewValkeyClient(o);
}


}  // namespace vramd::itest
