// Valkey high availability (docs/valkey-ha.md): the Sentinel-aware client
// against real servers this test starts itself on loopback (Debian's
// redis-server and redis-sentinel; it fails, not skips, without them), plus
// small fake sentinels for the cases real ones cannot be made to produce
// on demand (a sentinel naming a replica, refusing AUTH, not knowing the
// master). Every wait is bounded; every process started here is killed and
// reaped at the end of its test.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "integration/test_servers.h"
#include "store/sentinel.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"

extern char** environ;

namespace vramd::store {
namespace {

using ::testing::HasSubstr;
using namespace vramd::itest;  // NOLINT: Process, FreePort, WaitFor...

constexpr int64_t kMi = int64_t{1} << 20;
constexpr int64_t kTi = int64_t{1} << 40;
constexpr char kMaster[] = "vramdmaster";

// A field of INFO's "key:value" lines ("" when absent or unreachable).
std::string InfoField(ValkeyClient& c, const std::string& section, const std::string& field) {
  auto r = c.Command({"INFO", section});
  if (!r.ok() || r->type != Reply::Type::kString) return "";
  std::stringstream ss(r->str);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  }
  return "";
}

// Whether `replica` has applied everything `primary` wrote (offsets equal).
// Not WAIT: WAIT counts only the writes of the connection it is sent on.
bool InSync(ValkeyClient& primary, ValkeyClient& replica) {
  const std::string off = InfoField(primary, "replication", "master_repl_offset");
  return !off.empty() && InfoField(replica, "replication", "master_link_status") == "up" &&
         off == InfoField(replica, "replication", "slave_repl_offset");
}

std::string Role(ValkeyClient& c) {
  auto r = c.Command({"ROLE"});
  if (!r.ok() || r->type != Reply::Type::kArray || r->elements.empty()) return "";
  return r->elements[0].str;
}

// The servers of one test, in a temporary directory that goes with them.
class Servers {
 public:
  Servers() {
    char tmpl[] = "/tmp/vramd-sentinel-test.XXXXXX";
    const char* d = mkdtemp(tmpl);
    dir_ = d != nullptr ? d : "";
    redis_server_ = FindInPath("redis-server");
    redis_sentinel_ = FindInPath("redis-sentinel");
  }
  ~Servers() {
    for (auto& p : procs_) p->Stop(SIGKILL);
    if (!dir_.empty() && !::testing::Test::HasFailure()) std::filesystem::remove_all(dir_);
    if (!dir_.empty() && ::testing::Test::HasFailure()) {
      std::cerr << "server logs kept in " << dir_ << "\n";
    }
  }

  // Fails the test (not a skip) when a binary is missing.
  static void RequireBinaries() {
    if (FindInPath("redis-server").empty() || FindInPath("redis-sentinel").empty()) {
      GTEST_FAIL() << "redis-server and redis-sentinel must be installed for the Valkey HA tests "
                      "(Debian packages redis-server and redis-sentinel; scripts/install-deps.sh --test)";
    }
  }

  const std::string& dir() const { return dir_; }

  // A data node; `replica_of` > 0 makes it a replica of that port.
  Process* DataNode(int port, const std::string& password, int replica_of = 0,
                    std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{redis_server_, "--port", std::to_string(port), "--bind", "127.0.0.1",
                                  "--protected-mode", "no", "--save", "", "--appendonly", "no",
                                  "--dir", dir_, "--dbfilename", "dump-" + std::to_string(port) + ".rdb",
                                  // A new replica syncs at once (the default waits 5 s for others).
                                  "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"};
    if (!password.empty()) {
      argv.insert(argv.end(), {"--requirepass", password, "--masterauth", password});
    }
    if (replica_of > 0) argv.insert(argv.end(), {"--replicaof", "127.0.0.1", std::to_string(replica_of)});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return Spawn(argv, "node-" + std::to_string(port) + ".log");
  }

  Process* Sentinel(int port, int master_port, const std::string& password) {
    const std::string conf = dir_ + "/sentinel-" + std::to_string(port) + ".conf";
    std::ofstream out(conf);
    out << "port " << port << "\nbind 127.0.0.1\nprotected-mode no\ndir " << dir_ << "\n"
        << "sentinel monitor " << kMaster << " 127.0.0.1 " << master_port << " 2\n"
        << "sentinel down-after-milliseconds " << kMaster << " 1000\n"
        << "sentinel failover-timeout " << kMaster << " 5000\n"
        << "sentinel parallel-syncs " << kMaster << " 1\n";
    if (!password.empty()) out << "sentinel auth-pass " << kMaster << " " << password << "\n";
    out.close();
    return Spawn({redis_sentinel_, conf}, "sentinel-" + std::to_string(port) + ".log");
  }

  std::string Logs() const {
    std::string out;
    for (const auto& p : procs_) out += "==== " + p->log() + "\n" + Tail(p->log()) + "\n";
    return out;
  }

 private:
  Process* Spawn(const std::vector<std::string>& argv, const std::string& log) {
    procs_.push_back(std::make_unique<Process>());
    Process* p = procs_.back().get();
    if (!p->Start(argv, dir_ + "/" + log)) ADD_FAILURE() << "cannot start " << argv[0];
    return p;
  }

  std::string dir_;
  std::string redis_server_;
  std::string redis_sentinel_;
  std::vector<std::unique_ptr<Process>> procs_;
};

bool Pings(ValkeyClient& c) {
  auto r = c.Command({"PING"});
  return r.ok() && !r->is_error();
}

// Captures what the client logs, to prove no password is ever in it.
class LogCapture {
 public:
  // Debug lines too, into the capture only: the console keeps its level.
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    auto& sinks = spdlog::default_logger()->sinks();
    for (auto& s : sinks) {
      levels_.push_back(s->level());
      s->set_level(std::max(s->level(), spdlog::level::info));
    }
    sinks.push_back(sink_);
    level_ = spdlog::default_logger()->level();
    spdlog::default_logger()->set_level(spdlog::level::debug);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    for (size_t i = 0; i < sinks.size() && i < levels_.size(); ++i) sinks[i]->set_level(levels_[i]);
    spdlog::default_logger()->set_level(level_);
  }
  std::string Text() {
    spdlog::default_logger()->flush();
    return out_.str();
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum level_;
  std::vector<spdlog::level::level_enum> levels_;
};

// A stand-in sentinel: answers SENTINEL get-master-addr-by-name with
// whatever the test set (an address or nil), optionally after AUTH.
class FakeSentinel {
 public:
  FakeSentinel() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "fake sentinel: cannot listen";
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::jthread([this](std::stop_token st) { Serve(st); });
  }
  ~FakeSentinel() {
    thread_.request_stop();
    thread_.join();
    close(fd_);
  }

  int port() const { return port_; }
  void Answer(std::optional<int> master_port) {
    std::lock_guard lk(mu_);
    answer_ = master_port;
  }
  void RequirePassword(std::string pw) {
    std::lock_guard lk(mu_);
    password_ = std::move(pw);
  }
  int queries() const { return queries_.load(); }

 private:
  struct Conn {
    int fd;
    std::string buf;
    bool authed = false;
  };

  void Serve(const std::stop_token& st) {
    std::vector<Conn> conns;
    while (!st.stop_requested()) {
      std::vector<pollfd> fds{{fd_, POLLIN, 0}};
      for (const auto& c : conns) fds.push_back({c.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int c = accept(fd_, nullptr, nullptr);
        if (c >= 0) conns.push_back({c, "", false});
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Conn& c = conns[i - 1];
        char b[4096];
        ssize_t n = recv(c.fd, b, sizeof(b), 0);
        if (n <= 0) {
          close(c.fd);
          c.fd = -1;
          continue;
        }
        c.buf.append(b, static_cast<size_t>(n));
        std::vector<std::string> cmd;
        while (Parse(&c.buf, &cmd)) {
          const std::string out = Reply(c, cmd);
          (void)!send(c.fd, out.data(), out.size(), MSG_NOSIGNAL);
        }
      }
      std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
    }
    for (auto& c : conns) close(c.fd);
  }

  // One RESP array of bulk strings off the front of *buf.
  static bool Parse(std::string* buf, std::vector<std::string>* cmd) {
    cmd->clear();
    size_t pos = 0;
    auto line = [&](char tag, long* v) {
      if (pos >= buf->size() || (*buf)[pos] != tag) return false;
      size_t end = buf->find("\r\n", pos);
      if (end == std::string::npos) return false;
      *v = std::strtol(buf->c_str() + pos + 1, nullptr, 10);
      pos = end + 2;
      return true;
    };
    long n = 0;
    if (!line('*', &n)) return false;
    for (long i = 0; i < n; ++i) {
      long len = 0;
      if (!line('$', &len) || pos + static_cast<size_t>(len) + 2 > buf->size()) return false;
      cmd->push_back(buf->substr(pos, static_cast<size_t>(len)));
      pos += static_cast<size_t>(len) + 2;
    }
    buf->erase(0, pos);
    return true;
  }

  std::string Reply(Conn& c, const std::vector<std::string>& cmd) {
    std::lock_guard lk(mu_);
    std::string name = cmd.empty() ? "" : cmd[0];
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);
    if (name == "AUTH") {
      if (password_.empty()) return "-ERR AUTH <password> called without any password configured\r\n";
      if (cmd.back() != password_) return "-WRONGPASS invalid username-password pair\r\n";
      c.authed = true;
      return "+OK\r\n";
    }
    if (name == "SENTINEL" && cmd.size() == 3) {
      if (!password_.empty() && !c.authed) return "-NOAUTH Authentication required.\r\n";
      ++queries_;
      if (!answer_) return "*-1\r\n";
      const std::string port = std::to_string(*answer_);
      return "*2\r\n$9\r\n127.0.0.1\r\n$" + std::to_string(port.size()) + "\r\n" + port + "\r\n";
    }
    return "-ERR unknown command\r\n";
  }

  int fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::optional<int> answer_;  // guarded by mu_
  std::string password_;       // guarded by mu_
  std::atomic<int> queries_{0};
  std::jthread thread_;
};

ValkeyEndpoint Loopback(int port) {
  ValkeyEndpoint e;
  e.host = "127.0.0.1";
  e.port = port;
  return e;
}

ReserveRequest Pod(const std::string& uid, int gpu, int64_t bytes) {
  ReserveRequest r;
  r.node = "n1";
  r.entry.pod_uid = uid;
  r.entry.ns = "ha";
  r.entry.name = "pod-" + uid;
  r.entry.gpus = {gpu};
  r.entry.per_gpu = bytes;
  return r;
}

// uid -> entry JSON of the node's alloc hash, read from one server.
std::map<std::string, std::string> AllocOn(ValkeyClient& c, const std::string& prefix) {
  std::map<std::string, std::string> out;
  auto r = c.Command({"HGETALL", prefix + ":{n1}:alloc"});
  if (!r.ok() || r->type != Reply::Type::kArray) {
    ADD_FAILURE() << "HGETALL failed: " << (r.ok() ? r->str : r.status().ToString());
    return out;
  }
  for (size_t i = 0; i + 1 < r->elements.size(); i += 2) out[r->elements[i].str] = r->elements[i + 1].str;
  return out;
}

// ---------------------------------------------------------------------------
// The URL form.

TEST(SentinelUrl, ParsesSentinelsMasterDatabaseAndCredentials) {
  auto u = ParseSentinelUrl("redis+sentinel://app:p%40ss@s1.svc:26380,[::1],10.0.0.3:5000/mymaster/2");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->sentinels.size(), 3u);
  EXPECT_EQ(u->sentinels[0].host, "s1.svc");
  EXPECT_EQ(u->sentinels[0].port, 26380);
  EXPECT_EQ(u->sentinels[1].host, "::1");
  EXPECT_EQ(u->sentinels[1].port, 26379);
  EXPECT_EQ(u->sentinels[2].Display(), "10.0.0.3:5000");
  EXPECT_EQ(u->master_name, "mymaster");
  EXPECT_EQ(u->username, "app");
  EXPECT_EQ(u->password, "p@ss");
  EXPECT_EQ(u->db, 2);

  auto lone = ParseSentinelUrl("valkey+sentinel://secret@h/m");
  ASSERT_TRUE(lone.ok()) << lone.status().ToString();
  EXPECT_EQ(lone->password, "secret");
  EXPECT_EQ(lone->username, "");
  EXPECT_EQ(lone->db, 0);
  EXPECT_EQ(lone->sentinels[0].port, 26379);
  EXPECT_TRUE(ValidateValkeyUrl("redis+sentinel://h1:1,h2:2/m").ok());
  EXPECT_TRUE(ValidateValkeyUrl("redis://h:1/3").ok());
}

TEST(SentinelUrl, RejectsMalformedUrlsWithoutEchoingThePassword) {
  for (const char* bad : {"redis+sentinel://h1:1,h2:2", "redis+sentinel://h1:1/", "redis+sentinel://:hunter2@/m",
                          "redis+sentinel://h1:1,,h2/m", "redis+sentinel://h1:99999/m", "redis+sentinel://h1:/m",
                          "redis+sentinel://:hunter2@h1:x/m", "redis+sentinel://h1/m/x"}) {
    auto u = ParseSentinelUrl(bad);
    EXPECT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_THAT(u.status().message(), ::testing::Not(HasSubstr("hunter2"))) << bad;
    EXPECT_FALSE(ValidateValkeyUrl(bad).ok()) << bad;
  }
  EXPECT_EQ(RedactValkeyUrl("redis+sentinel://u:hunter2@h1:1,h2:2/m"), "redis+sentinel://u:***@h1:1,h2:2/m");
  // A client over a bad URL fails every call, clearly.
  ValkeyOptions o;
  o.url = "redis+sentinel://h1:1";
  auto r = NewValkeyClient(o)->Command({"PING"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("no master name"));
}

// ---------------------------------------------------------------------------
// Asking the sentinels.

TEST(SentinelResolver, SkipsUnreachableAndUnknowingSentinels) {
  FakeSentinel ignorant, knowing;  // ignorant answers nil: no such master
  knowing.Answer(4242);
  SentinelOptions so;
  so.master_name = kMaster;
  so.timeout = milliseconds(300);
  so.sentinels = {Loopback(FreePort()), Loopback(ignorant.port()), Loopback(knowing.port())};
  SentinelResolver r(so);
  auto first = r.Resolve();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->Display(), "127.0.0.1:4242");
  EXPECT_EQ(ignorant.queries(), 1);
  // The sentinel that answered is asked first next time.
  ASSERT_TRUE(r.Resolve().ok());
  EXPECT_EQ(ignorant.queries(), 1);
  EXPECT_EQ(knowing.queries(), 2);
  // Distrusted, it goes last: the others are asked before it.
  r.Distrust();
  ASSERT_TRUE(r.Resolve().ok());
  EXPECT_EQ(ignorant.queries(), 2);

  knowing.Answer(std::nullopt);
  auto none = r.Resolve();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("does not monitor a master named 'vramdmaster'"));
  EXPECT_THAT(none.status().message(), HasSubstr("Connection refused"));
}

TEST(SentinelResolver, AuthenticatesWithTheSentinelPasswordOnly) {
  FakeSentinel s;
  s.Answer(4242);
  s.RequirePassword("sentinel-secret");
  SentinelOptions so;
  so.master_name = kMaster;
  so.sentinels = {Loopback(s.port())};
  auto without = SentinelResolver(so).Resolve();
  ASSERT_FALSE(without.ok());
  EXPECT_THAT(without.status().message(), HasSubstr("NOAUTH"));
  so.password = "wrong-secret";
  auto wrong = SentinelResolver(so).Resolve();
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("AUTH failed"));
  EXPECT_THAT(wrong.status().message(), ::testing::Not(HasSubstr("wrong-secret")));
  so.password = "sentinel-secret";
  auto right = SentinelResolver(so).Resolve();
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  EXPECT_EQ(right->port, 4242);
}

// ---------------------------------------------------------------------------
// The client through Sentinel, against real data nodes.

class SentinelClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Servers::RequireBinaries();
    primary_port_ = FreePort();
    replica_port_ = FreePort();
  }

  ValkeyOptions SentinelOptionsFor(const std::vector<int>& sentinel_ports) {
    ValkeyOptions o;
    o.url = "redis+sentinel://:" + std::string(kPassword) + "@";
    for (size_t i = 0; i < sentinel_ports.size(); ++i) {
      o.url += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(sentinel_ports[i]);
    }
    o.url += "/" + std::string(kMaster);
    o.key_prefix = "vramdha";
    o.pool_size = 8;
    o.connect_timeout = milliseconds(500);
    o.command_timeout = milliseconds(1000);
    return o;
  }

  static constexpr char kPassword[] = "s3cret-ha-7f1c";
  Servers servers_;
  int primary_port_ = 0;
  int replica_port_ = 0;
};

// The ROLE check is all that stands between the client and a writable
// replica (replica-read-only no) that a sentinel wrongly names.
TEST_F(SentinelClientTest, NeverUsesAReplicaTheSentinelsName) {
  servers_.DataNode(primary_port_, kPassword);
  servers_.DataNode(replica_port_, kPassword, primary_port_, {"--replica-read-only", "no"});
  auto primary = DirectClient(primary_port_, kPassword);
  auto replica = DirectClient(replica_port_, kPassword);
  ASSERT_TRUE(WaitFor([&] { return Pings(*primary) && Pings(*replica); }, milliseconds(10'000)))
      << servers_.Logs();

  FakeSentinel s;
  s.Answer(replica_port_);
  ValkeyOptions o = SentinelOptionsFor({s.port()});
  o.backoff_initial = milliseconds(10);
  o.backoff_max = milliseconds(50);
  auto client = NewValkeyClient(o);
  auto store = NewValkeyLedgerStore(client);
  Status s1 = store->SetCapacity("n1", {{0, kTi, ""}});
  ASSERT_FALSE(s1.ok());
  EXPECT_EQ(s1.code(), Code::kUnavailable);
  EXPECT_THAT(s1.message(), HasSubstr("is not the primary (ROLE: slave)"));
  EXPECT_THAT(s1.message(), ::testing::Not(HasSubstr(kPassword)));
  // Asked again after each refusal, never written to.
  std::this_thread::sleep_for(milliseconds(60));
  EXPECT_FALSE(store->SetCapacity("n1", {{0, kTi, ""}}).ok());
  EXPECT_GE(s.queries(), 2);
  auto keys = replica->Command({"DBSIZE"});
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->integer, 0) << "the client wrote to a replica";

  s.Answer(primary_port_);
  Status s2;
  ASSERT_TRUE(WaitFor([&] { return (s2 = store->SetCapacity("n1", {{0, kTi, ""}})).ok(); }, milliseconds(5000)))
      << s2.ToString();
  auto cap = primary->Command({"HGET", "vramdha:{n1}:cap", "0"});
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(cap->str, std::to_string(kTi));
}

// A primary demoted under the client (what a failover does to a primary
// that is still up) answers READONLY: the client drops its connections and
// follows the sentinels to the new primary.
TEST_F(SentinelClientTest, FollowsTheSentinelsWhenThePrimaryIsDemoted) {
  servers_.DataNode(primary_port_, kPassword);
  servers_.DataNode(replica_port_, kPassword, primary_port_);
  auto a = DirectClient(primary_port_, kPassword);
  auto b = DirectClient(replica_port_, kPassword);
  ASSERT_TRUE(WaitFor([&] { return Pings(*a) && Pings(*b); }, milliseconds(10'000))) << servers_.Logs();

  FakeSentinel s;
  s.Answer(primary_port_);
  ValkeyOptions o = SentinelOptionsFor({s.port()});
  o.backoff_initial = milliseconds(10);
  o.backoff_max = milliseconds(50);
  auto store = NewValkeyLedgerStore(NewValkeyClient(o));
  ASSERT_TRUE(store->SetCapacity("n1", {{0, kTi, ""}}).ok());
  ASSERT_TRUE(WaitFor([&] { return InfoField(*b, "replication", "master_link_status") == "up"; },
                      milliseconds(10'000)));
  ASSERT_TRUE(WaitFor([&] { return InSync(*a, *b); }, milliseconds(10'000))) << servers_.Logs();
  ASSERT_EQ(b->Command({"HGET", "vramdha:{n1}:cap", "0"})->str, std::to_string(kTi));

  // Swap the roles by hand, as Sentinel would.
  ASSERT_TRUE(b->Command({"REPLICAOF", "NO", "ONE"}).ok());
  ASSERT_TRUE(a->Command({"REPLICAOF", "127.0.0.1", std::to_string(replica_port_)}).ok());
  s.Answer(replica_port_);
  ASSERT_TRUE(WaitFor(
      [&] {
        return Role(*b) == "master" && Role(*a) == "slave" &&
               InfoField(*a, "replication", "master_link_status") == "up";
      },
      milliseconds(10'000)));

  // The pooled connection still points at the demoted server.
  auto refused = store->Reserve(Pod("p1", 0, kMi));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("READONLY"));
  Result<ReserveOutcome> ok = Internal("not tried");
  ASSERT_TRUE(WaitFor([&] { return (ok = store->Reserve(Pod("p1", 0, kMi))).ok(); }, milliseconds(5000)))
      << ok.status().ToString();
  EXPECT_EQ(*ok, ReserveOutcome::kReserved);
  EXPECT_EQ(AllocOn(*b, "vramdha").count("p1"), 1u);
}

// min_replicas_ack: without a replica to acknowledge it, a reservation
// fails, and is not left behind; with one, it succeeds.
TEST_F(SentinelClientTest, ReservationNotAcknowledgedByAReplicaFailsAndIsReleased) {
  servers_.DataNode(primary_port_, kPassword);
  auto primary = DirectClient(primary_port_, kPassword);
  ASSERT_TRUE(WaitFor([&] { return Pings(*primary); }, milliseconds(10'000))) << servers_.Logs();
  FakeSentinel s;
  s.Answer(primary_port_);
  ValkeyOptions o = SentinelOptionsFor({s.port()});
  o.min_replicas_ack = 1;
  o.wait_timeout = milliseconds(200);
  auto store = NewValkeyLedgerStore(NewValkeyClient(o));
  ASSERT_TRUE(store->SetCapacity("n1", {{0, kTi, ""}}).ok());

  const auto start = Clock::now();
  auto r = store->Reserve(Pod("p1", 0, kMi));
  const auto took = Clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("reached 0 of the 1 replica(s)"));
  EXPECT_THAT(r.status().message(), HasSubstr("(released it)"));
  EXPECT_GE(Ms(took), 150);
  EXPECT_LT(Ms(took), 2000);
  EXPECT_TRUE(AllocOn(*primary, "vramdha").empty());
  EXPECT_TRUE(primary->Command({"HGET", "vramdha:pods", "p1"})->is_nil());

  servers_.DataNode(replica_port_, kPassword, primary_port_);
  ASSERT_TRUE(WaitFor([&] { return InfoField(*primary, "replication", "connected_slaves") == "1"; },
                      milliseconds(10'000)))
      << servers_.Logs();
  Result<ReserveOutcome> ok = Internal("not tried");
  ASSERT_TRUE(WaitFor([&] { return (ok = store->Reserve(Pod("p1", 0, kMi))).ok(); }, milliseconds(10'000)))
      << ok.status().ToString();
  auto replica = DirectClient(replica_port_, kPassword);
  EXPECT_EQ(AllocOn(*replica, "vramdha").count("p1"), 1u) << "acknowledged but not on the replica";
  // Bound, and a reconcile re-add, wait for the replica too.
  EXPECT_TRUE(store->SetEntryState("n1", "p1", ledger::EntryState::kBound).ok());
  ledger::Entry e = Pod("p2", 0, kMi).entry;
  EXPECT_TRUE(store->PutEntry("n1", e).ok());
  EXPECT_EQ(AllocOn(*replica, "vramdha").count("p2"), 1u);
}

// ---------------------------------------------------------------------------
// The failover: one primary, one replica, three sentinels (quorum 2,
// down-after-milliseconds 1000, failover-timeout 5000). The primary is
// SIGKILLed during a stream of reservations made with min_replicas_ack=1.

class SentinelFailoverTest : public SentinelClientTest {};

TEST_F(SentinelFailoverTest, KilledPrimaryLosesNoAcknowledgedReservationAndNoneTwice) {
  const int s1 = FreePort(), s2 = FreePort(), s3 = FreePort(), dead = FreePort();
  Process* old_primary = servers_.DataNode(primary_port_, kPassword);
  servers_.DataNode(replica_port_, kPassword, primary_port_);
  auto primary = DirectClient(primary_port_, kPassword);
  auto replica = DirectClient(replica_port_, kPassword);
  // The replica in sync before the sentinels start: they learn of replicas
  // from the primary's INFO, which they ask for only every 10 s.
  ASSERT_TRUE(WaitFor([&] { return InfoField(*replica, "replication", "master_link_status") == "up"; },
                      milliseconds(10'000)))
      << servers_.Logs();
  for (int port : {s1, s2, s3}) servers_.Sentinel(port, primary_port_, kPassword);
  std::vector<std::shared_ptr<ValkeyClient>> sentinels;
  for (int port : {s1, s2, s3}) sentinels.push_back(DirectClient(port));
  // Ready when the replica is in sync and every sentinel knows the replica
  // and the two other sentinels (they find each other through the primary).
  const bool ready = WaitFor(
      [&] {
        if (InfoField(*replica, "replication", "master_link_status") != "up") return false;
        for (auto& s : sentinels) {
          auto m = s->Command({"SENTINEL", "master", kMaster});
          if (!m.ok() || m->type != Reply::Type::kArray) return false;
          std::map<std::string, std::string> f;
          for (size_t i = 0; i + 1 < m->elements.size(); i += 2) f[m->elements[i].str] = m->elements[i + 1].str;
          if (f["num-slaves"] != "1" || f["num-other-sentinels"] != "2" || f["flags"] != "master") return false;
        }
        return true;
      },
      milliseconds(30'000));
  ASSERT_TRUE(ready) << "the sentinels did not get ready in 30 s\n" << servers_.Logs();

  LogCapture logs;
  // A dead sentinel first in the list: it is skipped.
  ValkeyOptions o = SentinelOptionsFor({dead, s1, s2, s3});
  o.min_replicas_ack = 1;
  o.wait_timeout = milliseconds(500);
  auto client = NewValkeyClient(o);
  auto store = NewValkeyLedgerStore(client);
  constexpr int kGpus = 4;
  std::vector<GpuCapacity> gpus;
  for (int g = 0; g < kGpus; ++g) gpus.push_back({g, kTi, ""});
  ASSERT_TRUE(store->SetCapacity("n1", gpus).ok());

  struct Done {
    std::string uid;
    int gpu;
    int64_t bytes;
    ReserveOutcome outcome;
    Clock::time_point attempt_start, at;
    int failures;
  };
  std::mutex mu;
  std::vector<Done> done;                           // guarded by mu
  std::map<std::string, int> errors;                // guarded by mu; by kind
  std::vector<std::string> stuck;                   // guarded by mu; pods that never succeeded
  std::atomic<bool> stop{false};
  std::atomic<int64_t> kill_ns{0};                  // steady clock, 0 until the kill
  std::atomic<int> ok_after_kill{0};
  auto after_kill = [&](Clock::time_point t) {
    const int64_t k = kill_ns.load();
    return k != 0 && t.time_since_epoch().count() >= k;
  };

  // Writers: each pod is retried until it succeeds, as kube-scheduler
  // retries a failed bind; a retry after an ambiguous failure finds the
  // entry already held (idempotent by UID).
  constexpr int kWriters = 4;
  std::vector<std::jthread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; !stop.load(); ++i) {
        const std::string uid = "w" + std::to_string(w) + "-" + std::to_string(i);
        const int gpu = (w + i) % kGpus;
        const int64_t bytes = (1 + i % 3) * kMi;
        const auto first = Clock::now();
        int failures = 0;
        for (;;) {
          const auto start = Clock::now();
          auto r = store->Reserve(Pod(uid, gpu, bytes));
          if (r.ok()) {
            std::lock_guard lk(mu);
            done.push_back({uid, gpu, bytes, *r, start, Clock::now(), failures});
            if (after_kill(start)) ++ok_after_kill;
            break;
          }
          ++failures;
          {
            const std::string& m = r.status().message();
            std::lock_guard lk(mu);
            ++errors[m.find("replica(s)") != std::string::npos ? "not acknowledged by a replica"
                     : m.find("READONLY") != std::string::npos  ? "READONLY"
                     : m.find("not the primary") != std::string::npos ? "named server not primary"
                                                                       : "unreachable or timed out"];
          }
          if (Clock::now() - first > std::chrono::seconds(30)) {
            std::lock_guard lk(mu);
            stuck.push_back(uid + ": " + r.status().ToString());
            return;
          }
          std::this_thread::sleep_for(milliseconds(20));
        }
        std::this_thread::sleep_for(milliseconds(2));
      }
    });
  }
  // A reader, as filter reads: when do snapshots come back?
  std::atomic<int64_t> read_back_ns{0};
  std::jthread reader([&] {
    auto readers_store = NewValkeyLedgerStore(client);
    while (!stop.load()) {
      const auto start = Clock::now();
      if (readers_store->Snapshot().ok() && after_kill(start) && read_back_ns.load() == 0) {
        read_back_ns = Clock::now().time_since_epoch().count();
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  });

  std::this_thread::sleep_for(milliseconds(1500));
  size_t before_kill = 0;
  {
    std::lock_guard lk(mu);
    before_kill = done.size();
  }
  const auto kill_at = Clock::now();
  kill_ns = kill_at.time_since_epoch().count();
  old_primary->Stop(SIGKILL);

  // The sentinels' switch, then the old primary comes back as a replica of
  // the new one (what a StatefulSet's start script does: ask the sentinels
  // whom to follow), so that writes can be acknowledged again.
  Clock::time_point switched{};
  const bool switch_seen = WaitFor(
      [&] {
        auto r = sentinels[0]->Command({"SENTINEL", "get-master-addr-by-name", kMaster});
        if (r.ok() && r->elements.size() == 2 && r->elements[1].str == std::to_string(replica_port_)) {
          switched = Clock::now();
          return true;
        }
        return false;
      },
      milliseconds(30'000));
  Process* rejoined = nullptr;
  Clock::time_point rejoined_at{};
  if (switch_seen) {
    rejoined = servers_.DataNode(primary_port_, kPassword, replica_port_);
    rejoined_at = Clock::now();
  }
  const bool served = WaitFor([&] { return ok_after_kill.load() >= 20; }, milliseconds(30'000));
  stop = true;
  writers.clear();  // joins; each writer finishes its pod (bounded: 30 s)
  reader.join();

  ASSERT_TRUE(switch_seen) << "the sentinels named no new primary within 30 s\n" << servers_.Logs();
  ASSERT_TRUE(served) << "no reservation succeeded within 30 s of the kill\n" << servers_.Logs();
  {
    std::lock_guard lk(mu);
    ASSERT_TRUE(stuck.empty()) << stuck.size() << " pod(s) never reserved, e.g. " << stuck.front();
  }

  // The outage, measured from the kill.
  Clock::time_point first_ok_after{};
  int held = 0, retried = 0;
  for (const Done& d : done) {
    if (d.attempt_start >= kill_at && (first_ok_after == Clock::time_point{} || d.at < first_ok_after)) {
      first_ok_after = d.at;
    }
    held += d.outcome == ReserveOutcome::kAlreadyHeld;
    retried += d.failures > 0;
  }
  const int64_t switch_ms = Ms(switched - kill_at);
  const int64_t read_ms = read_back_ns.load() == 0 ? -1 : (read_back_ns.load() - kill_ns.load()) / 1'000'000;
  const int64_t rejoin_ms = Ms(rejoined_at - kill_at);
  const int64_t write_ms = Ms(first_ok_after - kill_at);
  std::cout << "[ failover ] SIGKILL of the primary at t=0 ms; sentinels named the new primary at +" << switch_ms
            << " ms; snapshots (filter) served again at +" << read_ms
            << " ms; old primary restarted as a replica at +" << rejoin_ms
            << " ms; reservations acknowledged by a replica (bind) again at +" << write_ms << " ms\n"
            << "[ failover ] " << done.size() << " pods reserved (" << before_kill << " before the kill), "
            << retried << " after failed attempts, " << held << " of them found already held\n";
  for (const auto& [kind, n] : errors) std::cout << "[ failover ] failed attempts, " << kind << ": " << n << "\n";
  EXPECT_GT(before_kill, 0u);
  EXPECT_GE(read_ms, 0);
  EXPECT_LT(read_ms, 30'000);
  EXPECT_LT(write_ms, 30'000);

  // Every reservation that succeeded is on the new primary, once; nothing
  // else is (the allocation per GPU is the sum of the successes).
  auto now_primary = DirectClient(replica_port_, kPassword);
  ASSERT_EQ(Role(*now_primary), "master");
  std::map<std::string, std::string> alloc = AllocOn(*now_primary, "vramdha");
  std::set<std::string> uids;
  std::map<int, int64_t> want;
  for (const Done& d : done) {
    EXPECT_TRUE(uids.insert(d.uid).second) << d.uid << " succeeded twice";
    want[d.gpu] += d.bytes;
    EXPECT_EQ(alloc.count(d.uid), 1u) << "reservation " << d.uid << " succeeded but is lost";
  }
  EXPECT_EQ(alloc.size(), uids.size()) << "the ledger holds entries no success accounts for";
  std::map<int, int64_t> have;
  for (const auto& [uid, json] : alloc) {
    auto j = nlohmann::json::parse(json);
    for (int g : j["gpus"]) have[g] += j["per_gpu"].get<int64_t>();
  }
  EXPECT_EQ(have, want);
  auto pods = now_primary->Command({"HLEN", "vramdha:pods"});
  ASSERT_TRUE(pods.ok());
  EXPECT_EQ(static_cast<size_t>(pods->integer), uids.size());
  // The client's own view agrees.
  auto snap = NewValkeyLedgerStore(client)->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_NE((*snap)->Find("n1"), nullptr);
  EXPECT_EQ((*snap)->Find("n1")->entries.size(), uids.size());

  // The old primary, now a replica, holds exactly the new primary's data:
  // nothing was written to it behind the primary's back.
  ASSERT_NE(rejoined, nullptr);
  auto old_node = DirectClient(primary_port_, kPassword);
  ASSERT_TRUE(WaitFor([&] { return InfoField(*old_node, "replication", "master_link_status") == "up"; },
                      milliseconds(10'000)));
  ASSERT_TRUE(WaitFor([&] { return InSync(*now_primary, *old_node); }, milliseconds(10'000)));
  EXPECT_EQ(Role(*old_node), "slave");
  EXPECT_EQ(AllocOn(*old_node, "vramdha"), alloc);

  EXPECT_THAT(logs.Text(), ::testing::Not(HasSubstr(kPassword))) << "a password reached the log";
}

}  // namespace
}  // namespace vramd::store
