// `vramctl lock ...` end to end: a real vramd (standalone, --no-kube) on a
// free loopback port over the test Valkey, driven by the real vramctl.
// Needs VRAMD_TEST_VALKEY_URL and the vramd and vramctl binaries in
// VRAMD_BIN_DIR (build them first); fails without them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "integration/clean_env.h"
#include "vramd/store/valkey_client.h"
#include "test_paths.h"  // VRAMD_TEST_DATA, VRAMD_BIN_DIR, VRAMD_FAKE_NVML

extern char** environ;

namespace vramd {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;

constexpr const char* kToken = "cli-test-token";

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

void WriteFile(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Starts argv with stdout and stderr appended to `log`.
pid_t Spawn(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  itest::CleanEnv env;  // never the caller's VRAMD_* (issue 18)
  int err = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), env.envp());
  posix_spawn_file_actions_destroy(&fa);
  return err == 0 ? pid : -1;
}

// The exit status (128+N when killed by signal N); -1 after a timeout (the
// process is then killed).
int WaitExit(pid_t pid, int timeout_ms) {
  auto until = Steady::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (r < 0) return -2;
    if (Steady::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool WaitFor(const std::function<bool()>& cond, int timeout_ms) {
  auto until = Steady::now() + std::chrono::milliseconds(timeout_ms);
  while (Steady::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

class LockCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("VRAMD_TEST_VALKEY_URL");
    if (url == nullptr || *url == '\0') GTEST_FAIL() << "VRAMD_TEST_VALKEY_URL is not set (see scripts/test.sh)";
    vramd_ = fs::path(VRAMD_BIN_DIR) / "vramd";
    vramctl_ = fs::path(VRAMD_BIN_DIR) / "vramctl";
    ASSERT_TRUE(fs::exists(vramd_) && fs::exists(vramctl_))
        << "build vramd and vramctl first (cmake --build build --target vramd vramctl)";
    char tmpl[] = "/tmp/vramd-lockcli.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::mt19937_64 rng(std::random_device{}());
    prefix_ = "vramdtest-cli-" + std::to_string(rng() % 1'000'000'000'000ULL);
    store::ValkeyOptions opts;
    opts.url = url;
    opts.key_prefix = prefix_;
    client_ = store::NewValkeyClient(opts);

    WriteFile(dir_ / "token", std::string(kToken) + "\n");
    WriteFile(dir_ / "wrong-token", "not-the-token\n");
    WriteFile(dir_ / "vramd.json",
              nlohmann::json{{"valkey", {{"url", url}, {"key_prefix", prefix_}}},
                             {"log", {{"level", "warn"}}},
                             // Locks are only for GPUs the ledger has (issue 33).
                             {"nodes", {{{"name", "n1"}, {"gpus", {"16Gi", "16Gi", "16Gi", "16Gi", "16Gi"}}}}}}
                  .dump());
    port_ = FreePort();
    ASSERT_GT(port_, 0);
    vramd_pid_ = Spawn({vramd_.string(), "--config", (dir_ / "vramd.json").string(), "--no-kube", "--listen",
                        "127.0.0.1:" + std::to_string(port_), "--api-token-file", (dir_ / "token").string()},
                       dir_ / "vramd.log");
    ASSERT_GT(vramd_pid_, 0);
    httplib::Client c("127.0.0.1", port_);
    bool up = WaitFor(
        [&] {
          auto r = c.Get("/healthz");
          return r && r->status == 200;
        },
        10'000);
    ASSERT_TRUE(up) << "vramd did not come up: " << ReadFile(dir_ / "vramd.log");
  }

  void TearDown() override {
    if (vramd_pid_ > 0) {
      kill(vramd_pid_, SIGTERM);
      EXPECT_EQ(WaitExit(vramd_pid_, 10'000), 0) << "vramd did not stop cleanly";
    }
    if (client_) {
      auto r = client_->Command({"KEYS", prefix_ + ":*"});
      if (r.ok()) {
        std::vector<std::string> del{"DEL"};
        for (const auto& k : r->elements) del.push_back(k.str);
        if (del.size() > 1) (void)client_->Command(del);
      }
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // vramctl with the server and a token file, then `args`.
  std::vector<std::string> Ctl(std::vector<std::string> args, const char* token_file = "token") {
    std::vector<std::string> v{vramctl_.string(), "--server", "http://127.0.0.1:" + std::to_string(port_),
                               "--token-file", (dir_ / token_file).string()};
    v.insert(v.end(), args.begin(), args.end());
    return v;
  }

  int RunCtl(std::vector<std::string> args, const char* token_file = "token", int timeout_ms = 20'000) {
    pid_t pid = Spawn(Ctl(std::move(args), token_file), dir_ / "ctl.log");
    return WaitExit(pid, timeout_ms);
  }

  std::string Holder(const std::string& node, int gpu) {
    auto r = client_->Command({"GET", prefix_ + ":lock:gpu:{" + node + "}:" + std::to_string(gpu)});
    EXPECT_TRUE(r.ok());
    return r.ok() && !r->is_nil() ? r->str : "";
  }
  int64_t Fence(const std::string& node, int gpu) {
    auto r = client_->Command({"GET", prefix_ + ":lock:gpu:{" + node + "}:" + std::to_string(gpu) + ":fence"});
    return r.ok() && !r->is_nil() ? std::stoll(r->str) : 0;
  }

  // The lock as GET /v1/locks shows it (null when it has never been taken).
  nlohmann::json Lock(const std::string& node, int gpu) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/v1/locks", httplib::Headers{{"Authorization", std::string("Bearer ") + kToken}});
    if (!r || r->status != 200) return nullptr;
    const nlohmann::json body = nlohmann::json::parse(r->body);
    for (const auto& l : body["locks"]) {
      if (l["node"] == node && l["gpu"] == gpu) return l;
    }
    return nullptr;
  }
  // The owners waiting for the lock, in queue order (the API's view).
  std::vector<std::string> Waiters(const std::string& node, int gpu) {
    std::vector<std::string> out;
    nlohmann::json l = Lock(node, gpu);
    if (l.is_object()) {
      for (const auto& w : l["waiters"]) out.push_back(w["owner"]);
    }
    return out;
  }
  // One sample of vramd's /metrics (0 when absent).
  double Metric(const std::string& series) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/metrics");
    if (!r || r->status != 200) return -1;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return 0;
  }

  fs::path vramd_, vramctl_, dir_;
  std::string prefix_;
  int port_ = 0;
  pid_t vramd_pid_ = -1;
  std::shared_ptr<store::ValkeyClient> client_;
};

TEST_F(LockCliTest, RunPassesTheExitStatusThroughAndFreesTheLock) {
  EXPECT_EQ(RunCtl({"lock", "run", "--node", "n1", "--gpu", "0", "--ttl", "5s", "--", "sh", "-c",
                    "test \"$VRAMD_LOCK_TOKEN\" = 1 && test \"$VRAMD_LOCK_GPU\" = 0 || exit 1; exit 7"}),
            7)
      << "the exit status passes through and the command sees its fencing token\n"
      << ReadFile(dir_ / "ctl.log");
  EXPECT_EQ(Holder("n1", 0), "");
  EXPECT_EQ(Fence("n1", 0), 1) << "the command ran under a grant";
  // Killed by a signal: 128 + N.
  EXPECT_EQ(RunCtl({"lock", "run", "--node", "n1", "--gpu", "0", "--", "sh", "-c", "kill -KILL $$"}), 128 + 9);
  EXPECT_EQ(Holder("n1", 0), "");
  EXPECT_EQ(Fence("n1", 0), 2);
}

TEST_F(LockCliTest, SigtermIsForwardedToTheCommandAndTheLockReleased) {
  fs::path ready = dir_ / "ready", got = dir_ / "got-term";
  std::string script = "trap 'touch " + got.string() + "; exit 42' TERM; touch " + ready.string() +
                       "; while :; do sleep 0.05; done";
  pid_t pid = Spawn(Ctl({"lock", "run", "--node", "n1", "--gpu", "1", "--owner", "pod-cli/term", "--", "sh", "-c",
                         script}),
                    dir_ / "ctl.log");
  ASSERT_TRUE(WaitFor([&] { return fs::exists(ready); }, 10'000)) << ReadFile(dir_ / "ctl.log");
  EXPECT_EQ(Holder("n1", 1), "pod-cli/term") << "the command runs while holding the lock";
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid, 10'000), 42) << ReadFile(dir_ / "ctl.log");
  EXPECT_TRUE(fs::exists(got)) << "the command got SIGTERM";
  EXPECT_EQ(Holder("n1", 1), "");
}

TEST_F(LockCliTest, AWrongTokenIsRefusedWithoutRunningTheCommand) {
  fs::path marker = dir_ / "ran";
  int rc = RunCtl({"lock", "run", "--node", "n1", "--gpu", "0", "--", "touch", marker.string()}, "wrong-token");
  EXPECT_NE(rc, 0);
  EXPECT_GT(rc, 0) << "vramctl answered, it did not hang";
  EXPECT_FALSE(fs::exists(marker)) << "the command must not run";
  EXPECT_THAT(ReadFile(dir_ / "ctl.log"), HasSubstr("401"));
  EXPECT_EQ(Fence("n1", 0), 0) << "nothing was granted";
  EXPECT_EQ(Holder("n1", 0), "");
}

TEST_F(LockCliTest, RunWaitsForTheHolderAndGivesUpAfterWait) {
  ASSERT_EQ(RunCtl({"lock", "acquire", "--node", "n1", "--gpu", "2", "--owner", "pod-h/holder"}), 0);
  fs::path marker = dir_ / "ran";
  EXPECT_EQ(RunCtl({"lock", "run", "--node", "n1", "--gpu", "2", "--wait", "500ms", "--", "touch", marker.string()}),
            3);
  EXPECT_FALSE(fs::exists(marker));
  // The command itself records when it ran: the test creates `released`
  // just before releasing, so a command run while the holder still held the
  // lock leaves `early` behind, however late that happens; otherwise it
  // writes the fencing token it was given into `marker`.
  fs::path released = dir_ / "released", early = dir_ / "early";
  pid_t pid = Spawn(Ctl({"lock", "run", "--node", "n1", "--gpu", "2", "--owner", "pod-w/waiter", "--", "sh", "-c",
                         "if test -e " + released.string() + "; then echo \"$VRAMD_LOCK_TOKEN\" > " +
                             marker.string() + "; else touch " + early.string() + "; fi"}),
                    dir_ / "ctl.log");
  // It waits in the lock's queue (the lock API's view), behind the holder.
  ASSERT_TRUE(WaitFor([&] { return Waiters("n1", 2) == std::vector<std::string>{"pod-w/waiter"}; }, 10'000))
      << Lock("n1", 2).dump() << "\n" << ReadFile(dir_ / "ctl.log");
  EXPECT_EQ(Holder("n1", 2), "pod-h/holder");
  EXPECT_FALSE(fs::exists(marker) || fs::exists(early)) << "ran while another owner held the lock";
  WriteFile(released, "");
  ASSERT_EQ(RunCtl({"lock", "release", "--node", "n1", "--gpu", "2", "--owner", "pod-h/holder"}), 0);
  EXPECT_EQ(WaitExit(pid, 10'000), 0) << ReadFile(dir_ / "ctl.log");
  EXPECT_FALSE(fs::exists(early)) << "ran while another owner held the lock";
  EXPECT_EQ(ReadFile(marker), "2\n") << "ran under the second grant (the holder had token 1)";
  EXPECT_EQ(Holder("n1", 2), "");
  EXPECT_EQ(Fence("n1", 2), 2) << "two grants: the holder's, then the waiter's";
}

TEST_F(LockCliTest, ASignalWhileWaitingLeavesTheQueueWithoutRunningTheCommand) {
  ASSERT_EQ(RunCtl({"lock", "acquire", "--node", "n1", "--gpu", "4", "--owner", "pod-h/holder"}), 0);
  fs::path marker = dir_ / "ran";
  pid_t pid = Spawn(Ctl({"lock", "run", "--node", "n1", "--gpu", "4", "--owner", "pod-w/waiter", "--", "touch",
                         marker.string()}),
                    dir_ / "ctl.log");
  auto queue_len = [&] {
    auto r = client_->Command({"ZCARD", prefix_ + ":lock:gpu:{n1}:4:queue"});
    return r.ok() ? r->integer : -1;
  };
  ASSERT_TRUE(WaitFor([&] { return queue_len() == 1; }, 10'000)) << ReadFile(dir_ / "ctl.log");
  // vramctl's acquire is a blocking call on the server; it answers when the
  // wait ends, counted in vramd_lock_operations_total by its result.
  const std::string acquires = "vramd_lock_operations_total{op=\"acquire\",result=";
  auto ended = [&] {
    double n = 0;
    for (const char* r : {"granted", "refreshed", "queued", "left_queue", "queue_full", "error"}) {
      n += Metric(acquires + "\"" + r + "\"}");
    }
    return n;
  };
  const double ended_before = ended();  // the holder's grant
  kill(pid, SIGINT);
  EXPECT_EQ(WaitExit(pid, 10'000), 128 + SIGINT) << ReadFile(dir_ / "ctl.log");
  EXPECT_TRUE(WaitFor([&] { return queue_len() == 0; }, 3'000)) << "the waiter left the queue";
  ASSERT_EQ(RunCtl({"lock", "release", "--node", "n1", "--gpu", "4", "--owner", "pod-h/holder"}), 0);
  // The abandoned call on the server has ended (it could grant the free lock
  // until then): how it ended is the proof, not a pause.
  ASSERT_TRUE(WaitFor([&] { return ended() > ended_before; }, 10'000)) << "the abandoned acquire never ended";
  EXPECT_EQ(Metric(acquires + "\"left_queue\"}"), 1) << "the abandoned acquire did not end as having left the queue";
  EXPECT_EQ(Metric(acquires + "\"granted\"}"), 1) << "only the holder was granted";
  EXPECT_EQ(Holder("n1", 4), "") << "the abandoned wait was not granted";
  EXPECT_EQ(Fence("n1", 4), 1) << "the abandoned wait was not granted";
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(LockCliTest, LosingTheLockStopsTheCommandWithStopOnLoss) {
  fs::path ready = dir_ / "ready";
  std::string script = "trap 'exit 9' TERM; touch " + ready.string() + "; while :; do sleep 0.05; done";
  pid_t pid = Spawn(Ctl({"lock", "run", "--node", "n1", "--gpu", "3", "--owner", "pod-cli/loss", "--ttl", "5s",
                         "--heartbeat", "200ms", "--stop-on-loss", "--", "sh", "-c", script}),
                    dir_ / "ctl.log");
  ASSERT_TRUE(WaitFor([&] { return fs::exists(ready); }, 10'000)) << ReadFile(dir_ / "ctl.log");
  // Someone else takes the GPU (as after an expiry).
  ASSERT_TRUE(client_->Command({"SET", prefix_ + ":lock:gpu:{n1}:3", "pod-other/x", "PX", "60000"}).ok());
  EXPECT_EQ(WaitExit(pid, 10'000), 9) << ReadFile(dir_ / "ctl.log");
  EXPECT_THAT(ReadFile(dir_ / "ctl.log"), HasSubstr("lost GPU lock n1/3"));
  EXPECT_EQ(Holder("n1", 3), "pod-other/x") << "the lost lock is not released by its former holder";
}

}  // namespace
}  // namespace vramd
