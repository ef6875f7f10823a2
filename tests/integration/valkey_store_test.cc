// The Valkey client and ledger store against a real Redis-protocol server.
// Needs VRAMD_TEST_VALKEY_URL (e.g. redis://127.0.0.1:16399); fails without it.
// Every test works under its own random key prefix and deletes its keys; a
// test that changes server-wide state (kills clients, flushes the script
// cache) starts a redis-server of its own (UseOwnServer), so the tests that
// run in parallel on the shared server never see it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <set>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <latch>
#include <random>
#include <functional>
#include <thread>

#include "integration/test_servers.h"
#include "integration/shared_server.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/lock_store.h"
#include "vramd/store/valkey_client.h"

namespace vramd::store {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kGi = int64_t{1} << 30;

ledger::Entry MakeEntry(const std::string& uid, std::vector<int> gpus, int64_t per_gpu) {
  ledger::Entry e;
  e.pod_uid = uid;
  e.ns = "default";
  e.name = "pod-" + uid;
  e.gpus = std::move(gpus);
  e.per_gpu = per_gpu;
  return e;
}

ReserveRequest Req(const std::string& node, ledger::Entry e) {
  ReserveRequest r;
  r.node = node;
  r.entry = std::move(e);
  return r;
}

// Sum of per_gpu over the node's entries that list `gpu`.
int64_t Allocated(const ledger::Node& node, int gpu) {
  int64_t sum = 0;
  for (const auto& e : node.entries) {
    for (int g : e.gpus) {
      if (g == gpu) sum += e.per_gpu;
    }
  }
  return sum;
}

class ValkeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::optional<ValkeyOptions> o = itest::SharedServerOptions(8);
    if (!o) GTEST_FAIL() << itest::kNoSharedServer;
    opts_ = *o;
    client_ = NewValkeyClient(opts_);
    store_ = NewValkeyLedgerStore(client_);
    Status ping = store_->Ping();
    ASSERT_TRUE(ping.ok()) << "cannot reach the test server at "
                           << RedactValkeyUrl(opts_.url) << ": " << ping.ToString();
  }

  void TearDown() override {
    if (own_server_) {
      own_server_->Stop(SIGKILL);
      std::error_code ec;
      std::filesystem::remove_all(own_dir_, ec);
      return;
    }
    if (!client_) return;
    itest::DeleteKeys(*client_, opts_.key_prefix);
  }

  // Moves this test (opts_, client_, store_) to a redis-server of its own on
  // a free loopback port, stopped at TearDown: for tests that change state
  // every client of the server shares.
  void UseOwnServer() {
    const std::string redis = itest::FindInPath("redis-server");
    ASSERT_FALSE(redis.empty()) << "redis-server must be installed (scripts/install-deps.sh --test)";
    own_dir_ = std::filesystem::temp_directory_path() / ("vramd-valkey-store-" + itest::RandomHex(12));
    std::filesystem::create_directories(own_dir_);
    const int port = itest::FreePort();
    ASSERT_GT(port, 0);
    own_server_ = std::make_unique<itest::Process>();
    ASSERT_TRUE(own_server_->Start({redis, "--bind", "127.0.0.1", "--port", std::to_string(port), "--save", "",
                                    "--appendonly", "no", "--dir", own_dir_.string()},
                                   (own_dir_ / "redis.log").string()));
    auto probe = itest::DirectClient(port);  // short backoff: polls the new server every few ms
    ASSERT_TRUE(itest::WaitFor([&] { return probe->Command({"PING"}).ok(); }, std::chrono::milliseconds(10'000)))
        << "own redis-server did not answer:\n" << itest::Tail(own_server_->log());
    opts_.url = "redis://127.0.0.1:" + std::to_string(port);
    client_ = NewValkeyClient(opts_);
    store_ = NewValkeyLedgerStore(client_);
    ASSERT_TRUE(store_->Ping().ok());
  }

  std::string Key(const std::string& suffix) const { return opts_.key_prefix + ":" + suffix; }
  std::string NodeKey(const std::string& node, const std::string& part) const {
    return opts_.key_prefix + ":{" + node + "}:" + part;
  }

  Reply Raw(std::vector<std::string> argv) {
    auto r = client_->Command(argv);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Reply{};
  }

  uint64_t Epoch() {
    Reply r = Raw({"GET", Key("epoch")});
    return r.is_nil() ? 0 : std::stoull(r.str);
  }

  void Capacity(const std::string& node, std::vector<GpuCapacity> gpus) {
    Status s = store_->SetCapacity(node, gpus);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // A snapshot read by a store that has no cache yet.
  ledger::SnapshotPtr Fresh() {
    auto store = NewValkeyLedgerStore(client_);
    auto s = store->Snapshot();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : std::make_shared<ledger::Snapshot>();
  }

  ValkeyOptions opts_;
  std::shared_ptr<ValkeyClient> client_;
  std::unique_ptr<LedgerStore> store_;
  std::unique_ptr<itest::Process> own_server_;
  std::filesystem::path own_dir_;
};

// (a)
TEST_F(ValkeyStoreTest, ConcurrentReservationsNeverOverbookAGpu) {
  Capacity("n1", {{0, 10 * kGi, "GPU-aaaa"}});
  constexpr int kThreads = 16;
  std::latch start(kThreads);
  std::atomic<int> reserved{0}, insufficient{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      auto r = store_->Reserve(Req("n1", MakeEntry("uid-" + std::to_string(i), {0}, kGi)));
      if (r.ok() && *r == ReserveOutcome::kReserved) {
        ++reserved;
      } else if (!r.ok() && r.status().code() == Code::kInsufficient) {
        ++insufficient;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(reserved.load(), 10);
  EXPECT_EQ(insufficient.load(), kThreads - 10);
  EXPECT_EQ(other.load(), 0);

  auto snap = Fresh();
  const ledger::Node* n1 = snap->Find("n1");
  ASSERT_NE(n1, nullptr);
  ASSERT_EQ(n1->gpus.size(), 1u);
  EXPECT_EQ(n1->gpus[0].uuid, "GPU-aaaa");
  EXPECT_EQ(n1->entries.size(), 10u);
  EXPECT_EQ(Allocated(*n1, 0), 10 * kGi);
  EXPECT_LE(Allocated(*n1, 0), n1->gpus[0].capacity);
}

// The peak rule (fit.h) is the script's, atomic like the fit rule: 16 pods
// of 1Gi bursting to 3Gi race for a 10Gi GPU with a 2Gi designated victim;
// room is there for all 8, the peaks only for 3 more (P 2 + 3 x 3 = 11Gi,
// overshoot 1Gi covered by 2Gi; a fourth would make 14Gi, 4Gi over).
TEST_F(ValkeyStoreTest, ConcurrentBurstReservationsNeverBreakThePeakRule) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  ledger::Entry victim = MakeEntry("victim", {0}, 2 * kGi);
  victim.victim = true;
  ASSERT_TRUE(store_->Reserve(Req("n1", victim)).ok());
  constexpr int kThreads = 16;
  std::latch start(kThreads);
  std::atomic<int> reserved{0}, insufficient{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      ledger::Entry e = MakeEntry("burst-" + std::to_string(i), {0}, kGi);
      e.peak_per_gpu = 3 * kGi;
      auto r = store_->Reserve(Req("n1", e));
      if (r.ok() && *r == ReserveOutcome::kReserved) {
        ++reserved;
      } else if (!r.ok() && r.status().code() == Code::kInsufficient &&
                 r.status().message().find("peak demand would be 14Gi over capacity 10Gi") != std::string::npos) {
        ++insufficient;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(reserved.load(), 3);
  EXPECT_EQ(insufficient.load(), kThreads - 3);
  EXPECT_EQ(other.load(), 0);
  auto snap = Fresh();
  const ledger::Node* n1 = snap->Find("n1");
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ(n1->entries.size(), 4u);
  const ledger::GpuPeak peak = ledger::GpuPeaks(*n1)[0];
  EXPECT_EQ(peak, (ledger::GpuPeak{11 * kGi, 2 * kGi}));
  EXPECT_TRUE(ledger::BurstSafe(10 * kGi, peak, ledger::kDefaultMaxPeakRatio));
}

TEST_F(ValkeyStoreTest, InsufficientNamesTheGpuAndTheNumbers) {
  Capacity("n1", {{0, 96 * kGi, ""}});
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("a", {0}, 86 * kGi))).ok());
  auto r = store_->Reserve(Req("n1", MakeEntry("b", {0}, 38 * kGi)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInsufficient);
  EXPECT_EQ(r.status().message(),
            "needs 38Gi on 1 GPU; free is 10Gi on GPU 0 (capacity 96Gi, allocated 86Gi)");
}

// (b)
TEST_F(ValkeyStoreTest, ReservingTheSamePodTwiceIsIdempotent) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  auto first = store_->Reserve(Req("n1", MakeEntry("uid-1", {0}, 3 * kGi)));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, ReserveOutcome::kReserved);
  const uint64_t epoch = Epoch();
  auto second = store_->Reserve(Req("n1", MakeEntry("uid-1", {0}, 3 * kGi)));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*second, ReserveOutcome::kAlreadyHeld);
  EXPECT_EQ(Epoch(), epoch);

  auto snap = Fresh();
  ASSERT_NE(snap->Find("n1"), nullptr);
  EXPECT_EQ(snap->Find("n1")->entries.size(), 1u);
  EXPECT_EQ(Allocated(*snap->Find("n1"), 0), 3 * kGi);
}

// (c)
TEST_F(ValkeyStoreTest, ReleaseIsIdempotentAndMovesTheEpochOnce) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("uid-1", {0}, kGi))).ok());
  const uint64_t before = Epoch();
  auto first = store_->Release("n1", "uid-1");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  EXPECT_EQ(Epoch(), before + 1);
  auto second = store_->Release("n1", "uid-1");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(*second);
  EXPECT_EQ(Epoch(), before + 1);
  EXPECT_TRUE(Raw({"HGET", Key("pods"), "uid-1"}).is_nil());
  EXPECT_TRUE(Fresh()->Find("n1")->entries.empty());
}

// (d)
TEST_F(ValkeyStoreTest, SnapshotIsCachedUntilAnotherProcessWrites) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  auto s1 = store_->Snapshot();
  ASSERT_TRUE(s1.ok()) << s1.status().ToString();
  auto s2 = store_->Snapshot();
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s1->get(), s2->get()) << "nothing changed: the cached snapshot must be returned";
  EXPECT_EQ(s1->get()->Find("n2"), nullptr);

  // Another process adds a node with an entry, the way any other replica would.
  const std::string prefix = opts_.key_prefix;
  ValkeyOptions child_opts = opts_;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto c = NewValkeyClient(child_opts);
    auto r = c->Pipeline({
        {"SADD", prefix + ":nodes", "n2"},
        {"HSET", prefix + ":{n2}:cap", "0", "1234"},
        {"HSET", prefix + ":{n2}:alloc", "uid-x",
         R"({"ns":"ml","name":"llm","gpus":[0],"per_gpu":100,"peak_per_gpu":0,)"
         R"("model":"llama","state":"bound","created_ms":5})"},
        {"INCR", prefix + ":epoch"},
    });
    _exit(r.ok() && r->size() == 4 && !(*r)[3].is_error() ? 0 : 1);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "the writer process failed";

  auto s3 = store_->Snapshot();
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_NE(s3->get(), s1->get());
  const ledger::Node* n2 = s3->get()->Find("n2");
  ASSERT_NE(n2, nullptr);
  ASSERT_EQ(n2->gpus.size(), 1u);
  EXPECT_EQ(n2->gpus[0].capacity, 1234);
  ASSERT_EQ(n2->entries.size(), 1u);
  const ledger::Entry& e = n2->entries[0];
  EXPECT_EQ(e.pod_uid, "uid-x");
  EXPECT_EQ(e.ns, "ml");
  EXPECT_EQ(e.name, "llm");
  EXPECT_EQ(e.model, "llama");
  EXPECT_EQ(e.state, ledger::EntryState::kBound);
  EXPECT_EQ(e.per_gpu, 100);
  EXPECT_EQ(e.created_ms, 5);

  auto s4 = store_->Snapshot();
  ASSERT_TRUE(s4.ok());
  EXPECT_EQ(s4->get(), s3->get());
}

TEST_F(ValkeyStoreTest, ConcurrentSnapshotCallersAllSeeTheLatestWrite) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  ASSERT_TRUE(store_->Snapshot().ok());
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("uid-1", {0}, kGi))).ok());
  const uint64_t epoch = Epoch();
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<ledger::SnapshotPtr> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      auto s = store_->Snapshot();
      if (s.ok()) got[i] = *s;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : got) {
    ASSERT_NE(s, nullptr);
    EXPECT_GE(s->epoch, epoch);
    ASSERT_NE(s->Find("n1"), nullptr);
    EXPECT_EQ(s->Find("n1")->entries.size(), 1u);
  }
}

// (e)
TEST_F(ValkeyStoreTest, UnknownNodeOrGpuIsNotFound) {
  Capacity("n1", {{0, 10 * kGi, ""}, {1, 10 * kGi, ""}});
  auto node = store_->Reserve(Req("nope", MakeEntry("uid-1", {0}, kGi)));
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().code(), Code::kNotFound);
  EXPECT_THAT(node.status().message(), HasSubstr("node nope"));

  auto gpu = store_->Reserve(Req("n1", MakeEntry("uid-1", {1, 5}, kGi)));
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), Code::kNotFound);
  EXPECT_THAT(gpu.status().message(), HasSubstr("GPU 5 of node n1"));
  EXPECT_TRUE(Fresh()->Find("n1")->entries.empty());
  EXPECT_TRUE(Raw({"HGET", Key("pods"), "uid-1"}).is_nil());
}

// (f)
TEST_F(ValkeyStoreTest, FreshUsageAboveAllocationBlocksAndStaleUsageDoesNot) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("a", {0}, 4 * kGi))).ok());
  ASSERT_TRUE(store_->PushUsage("n1", {{0, 8 * kGi}}).ok());

  // A = 4Gi alone would allow 4Gi more; U = 8Gi does not.
  auto blocked = store_->Reserve(Req("n1", MakeEntry("b", {0}, 4 * kGi)));
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.status().code(), Code::kInsufficient);
  EXPECT_EQ(blocked.status().message(),
            "needs 4Gi on 1 GPU; free is 2Gi on GPU 0 (capacity 10Gi, allocated 4Gi, used 8Gi)");

  auto snap = Fresh();
  EXPECT_EQ(snap->Find("n1")->gpus[0].used, 8 * kGi);
  EXPECT_GT(snap->Find("n1")->gpus[0].used_ts_ms, 0);

  // The same report, made stale (stamped at the epoch of 1970).
  Raw({"HSET", NodeKey("n1", "used"), "ts", "1000"});
  auto allowed = store_->Reserve(Req("n1", MakeEntry("b", {0}, 4 * kGi)));
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  EXPECT_EQ(*allowed, ReserveOutcome::kReserved);
}

TEST_F(ValkeyStoreTest, UsageIsIgnoredWhenFitOnUsageIsOff) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  ASSERT_TRUE(store_->PushUsage("n1", {{0, 9 * kGi}}).ok());
  ReserveRequest req = Req("n1", MakeEntry("a", {0}, 4 * kGi));
  req.fit_on_usage = false;
  auto r = store_->Reserve(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

TEST_F(ValkeyStoreTest, PushUsageForAnUnknownNodeIsNotFound) {
  Status s = store_->PushUsage("ghost", {{0, kGi}});
  EXPECT_EQ(s.code(), Code::kNotFound);
}

// (g)
TEST_F(ValkeyStoreTest, AnUnboundReservationMovesButABoundOneConflicts) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  Capacity("n2", {{0, 10 * kGi, ""}});
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("uid-1", {0}, 2 * kGi))).ok());
  auto moved = store_->Reserve(Req("n2", MakeEntry("uid-1", {0}, 2 * kGi)));
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, ReserveOutcome::kMoved);
  auto snap = Fresh();
  EXPECT_TRUE(snap->Find("n1")->entries.empty());
  ASSERT_EQ(snap->Find("n2")->entries.size(), 1u);
  EXPECT_EQ(Raw({"HGET", Key("pods"), "uid-1"}).str, "n2");

  ASSERT_TRUE(store_->SetEntryState("n2", "uid-1", ledger::EntryState::kBound).ok());
  auto conflict = store_->Reserve(Req("n1", MakeEntry("uid-1", {0}, 2 * kGi)));
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.status().code(), Code::kConflict);
  EXPECT_THAT(conflict.status().message(), HasSubstr("already holds VRAM on node n2"));
  EXPECT_TRUE(Fresh()->Find("n1")->entries.empty());
}

TEST_F(ValkeyStoreTest, AMoveThatDoesNotFitKeepsTheOldReservation) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  Capacity("n2", {{0, 1 * kGi, ""}});
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("uid-1", {0}, 2 * kGi))).ok());
  auto r = store_->Reserve(Req("n2", MakeEntry("uid-1", {0}, 2 * kGi)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInsufficient);
  EXPECT_EQ(Fresh()->Find("n1")->entries.size(), 1u);
  EXPECT_EQ(Raw({"HGET", Key("pods"), "uid-1"}).str, "n1");
}

// (h)
TEST(ValkeyClientTest, AClosedPortIsUnavailableAndThenFailsFast) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  close(fd);

  ValkeyOptions opts;
  opts.url = "redis://127.0.0.1:" + std::to_string(port);
  opts.connect_timeout = std::chrono::milliseconds(500);
  opts.backoff_initial = std::chrono::milliseconds(400);
  auto store = NewValkeyLedgerStore(NewValkeyClient(opts));

  const auto t0 = std::chrono::steady_clock::now();
  Status first = store->Ping();
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(first.code(), Code::kUnavailable);
  EXPECT_THAT(first.message(), HasSubstr("127.0.0.1:" + std::to_string(port) + " unreachable"));

  // Within the backoff: no connect attempt, the same diagnosis.
  auto snap = store->Snapshot();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), Code::kUnavailable);
  EXPECT_THAT(snap.status().message(), HasSubstr("retrying in"));
  auto reserve = store->Reserve(Req("n1", MakeEntry("uid-1", {0}, kGi)));
  EXPECT_EQ(reserve.status().code(), Code::kUnavailable);
  const auto t2 = std::chrono::steady_clock::now();
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  std::printf("[ info ] closed port: first call %lld us, next two %lld us; \"%s\"\n",
              static_cast<long long>(duration_cast<microseconds>(t1 - t0).count()),
              static_cast<long long>(duration_cast<microseconds>(t2 - t1).count()),
              snap.status().message().c_str());
}

TEST_F(ValkeyStoreTest, ASlowReplyTimesOutAndTheNextCallUsesAFreshConnection) {
  ValkeyOptions opts = opts_;
  opts.command_timeout = std::chrono::milliseconds(100);
  auto impatient = NewValkeyClient(opts);
  ASSERT_TRUE(impatient->Command({"PING"}).ok());
  // Keeps the server busy for 400ms (server time), well past the 100ms timeout.
  Script busy(
      "local t = redis.call('TIME') local start = t[1] * 1000000 + t[2] "
      "repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start > 400000 return 1");
  auto r = impatient->Eval(busy, {}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("no reply within 100ms"));
  // The timed-out connection was dropped: the next call does not read the
  // stale reply of the script. (client_ waits out the script: 5s timeout.)
  ASSERT_TRUE(client_->Command({"PING"}).ok());
  auto pong = impatient->Command({"ECHO", "after"});
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(pong->str, "after");
}

TEST_F(ValkeyStoreTest, AConnectionClosedByTheServerIsReplaced) {
  ValkeyOptions opts = opts_;
  opts.pool_size = 1;
  auto single = NewValkeyClient(opts);
  auto id = single->Command({"CLIENT", "ID"});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EQ(id->type, Reply::Type::kInteger);
  ASSERT_EQ(Raw({"CLIENT", "KILL", "ID", std::to_string(id->integer)}).integer, 1);

  // The pooled connection is dead: the call on it fails (it cannot know
  // whether the server ran the command, so it does not retry)...
  auto failed = single->Command({"ECHO", "x"});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Code::kUnavailable);
  // ...and the connection is not reused: the next call reconnects.
  auto again = single->Command({"CLIENT", "ID"});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_NE(again->integer, id->integer);
}

TEST(ValkeyClientTest, ABadUrlIsInvalidArgumentAndThePasswordIsRedacted) {
  ValkeyOptions opts;
  opts.url = "redis://admin:hunter2@host:notaport";
  auto client = NewValkeyClient(opts);
  auto r = client->Command({"PING"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("notaport"));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("hunter2")));
}

TEST(ValkeyClientTest, ParsesUrls) {
  auto a = ParseValkeyUrl("redis://user:p%40ss@valkey.svc:6380/2");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "valkey.svc");
  EXPECT_EQ(a->port, 6380);
  EXPECT_EQ(a->username, "user");
  EXPECT_EQ(a->password, "p@ss");
  EXPECT_EQ(a->db, 2);
  EXPECT_EQ(a->Display(), "valkey.svc:6380");

  auto b = ParseValkeyUrl("redis://secret@[::1]");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 6379);
  EXPECT_EQ(b->password, "secret");
  EXPECT_EQ(b->Display(), "[::1]:6379");

  auto c = ParseValkeyUrl("127.0.0.1:7000");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->port, 7000);

  EXPECT_FALSE(ParseValkeyUrl("redis://:6379").ok());
  EXPECT_FALSE(ParseValkeyUrl("redis://h:70000").ok());
  EXPECT_FALSE(ParseValkeyUrl("redis://h:1/x").ok());
  EXPECT_FALSE(ParseValkeyUrl("http://h:1").ok());
  EXPECT_EQ(RedactValkeyUrl("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
  EXPECT_EQ(RedactValkeyUrl("redis://pw@h:1"), "redis://***@h:1");
  EXPECT_EQ(RedactValkeyUrl("redis://h:1"), "redis://h:1");
}

TEST(ValkeyClientTest, ScriptHashIsTheSha1OfTheSource) {
  EXPECT_EQ(Script("return 1").sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

// (i)
TEST_F(ValkeyStoreTest, MalformedDataIsSkippedNotFatal) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("good", {0}, kGi))).ok());
  Raw({"HSET", NodeKey("n1", "alloc"), "bad-json", "{not json"});
  Raw({"HSET", NodeKey("n1", "alloc"), "bad-shape", R"({"gpus":"zero","per_gpu":1})"});
  Raw({"HSET", NodeKey("n1", "cap"), "1", "lots"});
  Raw({"INCR", Key("epoch")});

  auto snap = store_->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  const ledger::Node* n1 = snap->get()->Find("n1");
  ASSERT_NE(n1, nullptr);
  ASSERT_EQ(n1->entries.size(), 1u);
  EXPECT_EQ(n1->entries[0].pod_uid, "good");
  ASSERT_EQ(n1->gpus.size(), 1u);
  EXPECT_EQ(store_->MalformedFieldsSkipped(), 3u);

  // The reservation script skips the same entries and keeps working.
  auto r = store_->Reserve(Req("n1", MakeEntry("next", {0}, kGi)));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto bad_gpu = store_->Reserve(Req("n1", MakeEntry("other", {1}, kGi)));
  EXPECT_EQ(bad_gpu.status().code(), Code::kInternal);
  EXPECT_THAT(bad_gpu.status().message(), HasSubstr("'lots'"));
}

// (j)
TEST_F(ValkeyStoreTest, AMultiGpuReservationConsumesEveryChosenGpu) {
  Capacity("n1", {{0, 10 * kGi, ""}, {1, 10 * kGi, ""}, {2, 10 * kGi, ""}});
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("tp", {0, 1}, 6 * kGi))).ok());
  auto snap = Fresh();
  const ledger::Node* n1 = snap->Find("n1");
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ(Allocated(*n1, 0), 6 * kGi);
  EXPECT_EQ(Allocated(*n1, 1), 6 * kGi);
  EXPECT_EQ(Allocated(*n1, 2), 0);
  EXPECT_EQ(n1->entries[0].gpus, (std::vector<int>{0, 1}));

  auto r = store_->Reserve(Req("n1", MakeEntry("x", {1, 2}, 6 * kGi)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInsufficient);
  EXPECT_THAT(r.status().message(), HasSubstr("free is 4Gi on GPU 1 "));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("GPU 2")));
  EXPECT_TRUE(store_->Reserve(Req("n1", MakeEntry("y", {0, 1}, 4 * kGi))).ok());
}

TEST_F(ValkeyStoreTest, SetCapacityBumpsTheEpochOnlyOnChange) {
  Capacity("n1", {{0, 10 * kGi, "GPU-a"}, {1, 10 * kGi, ""}});
  const uint64_t e1 = Epoch();
  Capacity("n1", {{1, 10 * kGi, ""}, {0, 10 * kGi, "GPU-a"}});
  EXPECT_EQ(Epoch(), e1);
  Capacity("n1", {{0, 12 * kGi, "GPU-a"}});
  EXPECT_EQ(Epoch(), e1 + 1);
  auto snap = Fresh();
  ASSERT_EQ(snap->Find("n1")->gpus.size(), 1u);
  EXPECT_EQ(snap->Find("n1")->gpus[0].capacity, 12 * kGi);
  EXPECT_EQ(store_->SetCapacity("n1", {{0, kGi, ""}, {0, kGi, ""}}).code(),
            Code::kInvalidArgument);
}

// The bind path's two ledger calls: the reserve script marks the bind in
// flight with the reservation, FinishBind marks the entry bound and clears it.
TEST_F(ValkeyStoreTest, ReserveMarksTheBindInFlightAndFinishBindClearsIt) {
  Capacity("n1", {{0, 80 * kGi, ""}});
  auto in_flight = [&] { return *store_->BindsInFlight(); };
  ReserveRequest r = Req("n1", MakeEntry("uid-1", {0}, 8 * kGi));
  r.in_flight_ttl_ms = 60'000;
  ASSERT_EQ(*store_->Reserve(r), ReserveOutcome::kReserved);
  EXPECT_EQ(in_flight(), std::set<std::string>{"uid-1"});

  // A retried bind finds its entry held and is marked again.
  ASSERT_TRUE(store_->EndBind("uid-1").ok());
  ASSERT_EQ(*store_->Reserve(r), ReserveOutcome::kAlreadyHeld);
  EXPECT_EQ(in_flight(), std::set<std::string>{"uid-1"});

  // No mark without a reservation, and none when not asked for.
  ReserveRequest big = Req("n1", MakeEntry("uid-2", {0}, 79 * kGi));
  big.in_flight_ttl_ms = 60'000;
  EXPECT_EQ(store_->Reserve(big).status().code(), Code::kInsufficient);
  ASSERT_EQ(*store_->Reserve(Req("n1", MakeEntry("uid-3", {0}, 8 * kGi))), ReserveOutcome::kReserved);
  EXPECT_EQ(in_flight(), std::set<std::string>{"uid-1"});

  // FinishBind: bound, replicated like SetEntryState, mark gone.
  ASSERT_TRUE(store_->FinishBind("n1", "uid-1").ok());
  EXPECT_TRUE(in_flight().empty());
  auto snap = Fresh();
  for (const ledger::Entry& e : snap->Find("n1")->entries) {
    EXPECT_EQ(e.state, e.pod_uid == "uid-1" ? ledger::EntryState::kBound : ledger::EntryState::kReserved)
        << e.pod_uid;
  }
  // Without an entry it is kNotFound, and the mark is cleared all the same.
  ASSERT_TRUE(store_->BeginBind("gone", 60'000).ok());
  EXPECT_EQ(store_->FinishBind("n1", "gone").code(), Code::kNotFound);
  EXPECT_TRUE(in_flight().empty());

  // The mark set by the reserve script expires like BeginBind's.
  ReserveRequest brief = Req("n1", MakeEntry("uid-4", {0}, 8 * kGi));
  brief.in_flight_ttl_ms = 1;
  ASSERT_EQ(*store_->Reserve(brief), ReserveOutcome::kReserved);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(in_flight().empty());
}

// Issue 36: the bound marker's batch. One call marks several pods on
// several nodes; each in-flight mark is cleared; a reserved entry and the
// hold a pod was bound into become bound; one reconcile made terminating
// meanwhile is left as it is; a missing one is kNotFound, and invalid marks
// fail alone.
TEST_F(ValkeyStoreTest, FinishBindsMarksReservedEntriesAndHoldsButNeverATerminatingOne) {
  Capacity("n1", {{0, 80 * kGi, ""}});
  Capacity("n2", {{0, 80 * kGi, ""}});
  for (const auto& [node, uid] : std::vector<std::pair<std::string, std::string>>{
           {"n1", "a"}, {"n2", "b"}, {"n1", "late"}, {"n2", "done"}}) {
    ReserveRequest r = Req(node, MakeEntry(uid, {0}, kGi));
    r.in_flight_ttl_ms = 60'000;
    ASSERT_EQ(*store_->Reserve(r), ReserveOutcome::kReserved) << uid;
  }
  ASSERT_TRUE(store_->SetEntryState("n1", "late", ledger::EntryState::kTerminating).ok());
  ASSERT_TRUE(store_->SetEntryState("n2", "done", ledger::EntryState::kBound).ok());
  ASSERT_TRUE(store_->BeginBind("gone", 60'000).ok());
  // Room held for pod "holder" (no victims: written at once); its bind binds
  // into it without a reserve (the extender's held-entry path).
  ledger::Entry hold = MakeEntry("holder", {0}, kGi);
  hold.state = ledger::EntryState::kHold;
  ASSERT_EQ(*store_->HoldRoom("n2", {}, hold, 60'000), LedgerStore::HoldOutcome::kHeld);
  ASSERT_TRUE(store_->BeginBind("holder", 60'000).ok());
  const uint64_t epoch = Fresh()->epoch;

  std::vector<Status> results;
  ASSERT_TRUE(store_
                  ->FinishBinds({{"n1", "a"}, {"n2", "b"}, {"n1", "late"}, {"n2", "done"}, {"n2", "holder"},
                                 {"n1", "gone"}, {"bad{node}", "x"}, {"n1", ""}},
                                &results)
                  .ok());
  ASSERT_EQ(results.size(), 8u);
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].ToString();
  EXPECT_EQ(results[5].code(), Code::kNotFound);
  EXPECT_EQ(results[6].code(), Code::kInvalidArgument);
  EXPECT_EQ(results[7].code(), Code::kInvalidArgument);
  EXPECT_TRUE(store_->BindsInFlight()->empty());

  auto snap = Fresh();
  EXPECT_EQ(snap->epoch, epoch + 3) << "one epoch per entry changed (a, b and holder)";
  std::map<std::string, ledger::EntryState> states;
  for (const char* n : {"n1", "n2"}) {
    for (const ledger::Entry& e : snap->Find(n)->entries) states[e.pod_uid] = e.state;
  }
  EXPECT_EQ(states, (std::map<std::string, ledger::EntryState>{{"a", ledger::EntryState::kBound},
                                                                {"b", ledger::EntryState::kBound},
                                                                {"late", ledger::EntryState::kTerminating},
                                                                {"done", ledger::EntryState::kBound},
                                                                {"holder", ledger::EntryState::kBound}}));
  // Nothing to send: no call, every result known.
  EXPECT_TRUE(store_->FinishBinds({{"", "x"}}, &results).ok());
  EXPECT_EQ(results.size(), 1u);
  EXPECT_EQ(Fresh()->epoch, epoch + 3);
}

TEST_F(ValkeyStoreTest, PutEntryAndSetEntryStateRoundTrip) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  ledger::Entry e = MakeEntry("uid-1", {0}, 20 * kGi);  // over capacity: no check
  e.ns = "team \"a\"";
  e.model = "llama-3 70B \xc3\xa9";
  e.peak_per_gpu = 24 * kGi;
  e.state = ledger::EntryState::kBound;
  ASSERT_TRUE(store_->PutEntry("n1", e).ok());
  ASSERT_TRUE(store_->SetEntryState("n1", "uid-1", ledger::EntryState::kTerminating).ok());
  EXPECT_EQ(store_->SetEntryState("n1", "missing", ledger::EntryState::kBound).code(),
            Code::kNotFound);

  auto snap = Fresh();
  ASSERT_EQ(snap->Find("n1")->entries.size(), 1u);
  const ledger::Entry& got = snap->Find("n1")->entries[0];
  EXPECT_EQ(got.ns, e.ns);
  EXPECT_EQ(got.model, e.model);
  EXPECT_EQ(got.per_gpu, 20 * kGi);
  EXPECT_EQ(got.peak_per_gpu, 24 * kGi);
  EXPECT_EQ(got.state, ledger::EntryState::kTerminating);
  EXPECT_GT(got.created_ms, 0);
  EXPECT_EQ(snap->Find("n1")->models.count(e.model), 1u);
}

// Issue 32: reconcile's refresh of an entry's eviction facts writes only
// while the entry still holds what reconcile read; a release, a state change
// or a move made meanwhile is never undone.
TEST_F(ValkeyStoreTest, RefreshEntryWritesOnlyWhileTheEntryIsWhatReconcileRead) {
  Capacity("n1", {{0, 10 * kGi, ""}, {1, 10 * kGi, ""}});
  ledger::Entry e = MakeEntry("uid-1", {1}, 4 * kGi);
  e.state = ledger::EntryState::kBound;
  e.created_ms = 1'700'000'000'123;  // a server time: beyond a double's exact %g, exact in %d
  ASSERT_TRUE(store_->PutEntry("n1", e).ok());
  const ledger::Entry read = Fresh()->Find("n1")->entries.at(0);  // what a pass read
  ledger::Entry facts = read;
  facts.priority = 2'000'000'000;
  facts.priority_class = "system-cluster-critical";
  facts.owner_kind = "ReplicaSet";
  facts.owner_uid = "rs-1";
  facts.gang = "pod-group/g";
  const uint64_t epoch = Fresh()->epoch;
  Result<bool> r = store_->RefreshEntry("n1", facts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(*r);
  auto snap = Fresh();
  EXPECT_GT(snap->epoch, epoch);
  const ledger::Entry& got = snap->Find("n1")->entries.at(0);
  EXPECT_EQ(got.priority, 2'000'000'000);
  EXPECT_EQ(got.priority_class, "system-cluster-critical");
  EXPECT_EQ(got.owner_kind, "ReplicaSet");
  EXPECT_EQ(got.gang, "pod-group/g");
  EXPECT_EQ(got.created_ms, e.created_ms);
  EXPECT_EQ(got.gpus, e.gpus);
  EXPECT_EQ(got.state, ledger::EntryState::kBound);

  // Marked terminating since the pass read it: the refresh writes nothing.
  ASSERT_TRUE(store_->SetEntryState("n1", "uid-1", ledger::EntryState::kTerminating).ok());
  ledger::Entry stale = facts;
  stale.priority_class = "another";
  r = store_->RefreshEntry("n1", stale);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(Fresh()->Find("n1")->entries.at(0).state, ledger::EntryState::kTerminating);
  EXPECT_EQ(Fresh()->Find("n1")->entries.at(0).priority_class, "system-cluster-critical");
  // Placed on other GPUs or at other bytes meanwhile: nothing.
  stale.state = ledger::EntryState::kTerminating;
  stale.gpus = {0};
  EXPECT_FALSE(*store_->RefreshEntry("n1", stale));
  stale.gpus = {1};
  stale.per_gpu = 5 * kGi;
  EXPECT_FALSE(*store_->RefreshEntry("n1", stale));
  // Released meanwhile: never re-created.
  ASSERT_TRUE(*store_->Release("n1", "uid-1"));
  stale.per_gpu = 4 * kGi;
  EXPECT_FALSE(*store_->RefreshEntry("n1", stale));
  EXPECT_TRUE(Fresh()->Find("n1")->entries.empty());
  EXPECT_TRUE(Raw({"HGET", NodeKey("n1", "alloc"), "uid-1"}).is_nil());
}

// Issue 32: the eviction budget every replica shares, on the server's clock.
// An action is claimed before it is made; a claim whose action did nothing is
// given back.
TEST_F(ValkeyStoreTest, TheEvictionBudgetKeepsCooldownsAndTheMinuteForEveryReplica) {
  auto other = NewValkeyLedgerStore(client_);  // another replica (a new leader) on the same server
  const int64_t ignored_now = 0;               // the server's clock decides
  auto take = [&](store::LedgerStore* s, const std::string& key, int max_per_minute, int64_t cooldown_ms) {
    Result<std::string> r = s->BudgetTake(key, max_per_minute, cooldown_ms, ignored_now);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::string("error");
  };
  const std::string recent = Key("budget:recent");
  const std::string first = take(store_.get(), "gpu:n1/0", 3, 60'000);
  ASSERT_FALSE(first.empty());
  // The key's cooldown holds for every replica; another key is free.
  EXPECT_EQ(take(other.get(), "gpu:n1/0", 3, 60'000), "");
  const std::string unused = take(other.get(), "gpu:n1/1", 3, 60'000);
  ASSERT_FALSE(unused.empty());
  EXPECT_EQ(Raw({"ZCARD", recent}).integer, 2);
  // A claim whose action did nothing goes back: out of the minute, the key free.
  ASSERT_TRUE(other->BudgetGiveBack("gpu:n1/1", unused).ok());
  EXPECT_EQ(Raw({"ZCARD", recent}).integer, 1);
  const std::string later = take(store_.get(), "gpu:n1/1", 3, 60'000);
  ASSERT_FALSE(later.empty());
  // An old claim given back again leaves the newer claim's cooldown alone.
  ASSERT_TRUE(other->BudgetGiveBack("gpu:n1/1", unused).ok());
  EXPECT_EQ(take(other.get(), "gpu:n1/1", 3, 60'000), "");
  // The minute over the cluster: 3 actions fill a budget of 3, whoever made them.
  ASSERT_TRUE(other->BudgetRecord("gpu:n1/0", 60'000, ignored_now).ok());  // a second pod of the first action
  EXPECT_EQ(take(store_.get(), "idle:b", 3, 0), "");
  EXPECT_FALSE(take(store_.get(), "idle:b", 4, 0).empty());
  EXPECT_EQ(take(store_.get(), "idle:c", 0, 0), "");  // no budget at all
  // A cooldown ends on the server's clock.
  EXPECT_FALSE(take(store_.get(), "gpu:n2/0", 100, 150).empty());
  EXPECT_EQ(take(store_.get(), "gpu:n2/0", 100, 150), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(take(store_.get(), "gpu:n2/0", 100, 150).empty());
  // Actions leave the minute after 60 s: the zset is pruned (stamped an hour ago here).
  ASSERT_EQ(Raw({"ZCARD", recent}).integer, 6);
  Raw({"ZADD", recent, "1000", "ancient"});
  EXPECT_FALSE(take(store_.get(), "idle:d", 10, 0).empty());
  EXPECT_TRUE(Raw({"ZSCORE", recent, "ancient"}).is_nil());
}

// Issue 32: the fence, atomic with the claim: a replica that does not hold
// the leader lease in the store claims nothing, whatever it believes; the
// claim records who made it.
TEST_F(ValkeyStoreTest, AReplicaThatDoesNotHoldTheLeaderLeaseInTheStoreClaimsNothing) {
  const std::string lease = Key("leader");
  Raw({"SET", lease, "replica-b"});
  Result<std::string> r = store_->BudgetTake("gpu:n1/0", 10, 60'000, 0, "replica-a");
  EXPECT_EQ(r.status().code(), Code::kConflict) << r.status().ToString();
  EXPECT_EQ(Raw({"EXISTS", Key("budget:k:gpu:n1/0")}).integer, 0);
  EXPECT_EQ(Raw({"ZCARD", Key("budget:recent")}).integer, 0);
  r = store_->BudgetTake("gpu:n1/0", 10, 60'000, 0, "replica-b");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rfind("replica-b/", 0), 0u) << *r;
  EXPECT_EQ(Raw({"GET", Key("budget:k:gpu:n1/0")}).str, *r);
  Raw({"DEL", lease});  // nobody holds it: nobody claims
  EXPECT_EQ(store_->BudgetTake("gpu:n1/1", 10, 60'000, 0, "replica-b").status().code(), Code::kConflict);
  EXPECT_TRUE(store_->BudgetTake("gpu:n1/1", 10, 60'000, 0).ok());  // no identity: no fence (standalone)
}

// Issue 32: room an eviction made is held for the pod it was made for, from
// the moment it is free (the release of the last victim turns it into the
// hold in the same step): spent for every other pod, the holder's own.
TEST_F(ValkeyStoreTest, RoomAnEvictionMadeIsHeldForItsPodFromTheMomentItIsFree) {
  Capacity("n1", {{0, 16 * kGi, ""}});
  ledger::Entry victim = MakeEntry("victim", {0}, 12 * kGi);
  victim.state = ledger::EntryState::kBound;
  ledger::Entry other = MakeEntry("other", {0}, 2 * kGi);
  other.state = ledger::EntryState::kBound;
  ASSERT_TRUE(store_->PutEntry("n1", victim).ok());
  ASSERT_TRUE(store_->PutEntry("n1", other).ok());
  ledger::Entry hold = MakeEntry("waiting", {0}, 12 * kGi);
  hold.state = ledger::EntryState::kHold;
  auto held = [&](const std::string& node, const std::string& uid) -> std::optional<ledger::Entry> {
    const ledger::SnapshotPtr snap = Fresh();
    const ledger::Node* n = snap->Find(node);
    if (n == nullptr) return std::nullopt;
    for (const ledger::Entry& e : n->entries) {
      if (e.pod_uid == uid) return e;
    }
    return std::nullopt;
  };
  // The victim still terminates (its VRAM kept): the hold waits for it.
  Result<LedgerStore::HoldOutcome> r = store_->HoldRoom("n1", {"victim"}, hold, 60'000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, LedgerStore::HoldOutcome::kPending);
  EXPECT_FALSE(held("n1", "waiting").has_value());
  EXPECT_TRUE(*store_->HoldPending("waiting"));  // the preempt verb's question
  EXPECT_FALSE(*store_->HoldPending("other"));
  ASSERT_TRUE(store_->SetEntryState("n1", "victim", ledger::EntryState::kTerminating).ok());
  // The victim goes: its room becomes the hold at once.
  ASSERT_TRUE(*store_->Release("n1", "victim"));
  std::optional<ledger::Entry> h = held("n1", "waiting");
  ASSERT_TRUE(h.has_value());
  EXPECT_FALSE(*store_->HoldPending("waiting")) << "held now, no longer being made";
  EXPECT_EQ(h->state, ledger::EntryState::kHold);
  EXPECT_EQ(h->per_gpu, 12 * kGi);
  EXPECT_EQ(h->hold_until_ms - h->created_ms, 60'000);
  EXPECT_EQ(Raw({"EXISTS", NodeKey("n1", "roomfor")}).integer, 0);
  // Spent for any other pod: 3Gi would fit the 14Gi the victim left free.
  Result<ReserveOutcome> x = store_->Reserve(Req("n1", MakeEntry("replacement", {0}, 3 * kGi)));
  EXPECT_EQ(x.status().code(), Code::kInsufficient) << x.status().ToString();
  // Only a hold is released as one: a reservation or bound entry stays.
  EXPECT_FALSE(*store_->ReleaseHold("n1", "other"));
  // The holder's own: reserved in its place.
  x = store_->Reserve(Req("n1", MakeEntry("waiting", {0}, 12 * kGi)));
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(*x, ReserveOutcome::kReserved);
  EXPECT_EQ(held("n1", "waiting")->state, ledger::EntryState::kReserved);
  // A pod placed already gets no hold.
  EXPECT_EQ(*store_->HoldRoom("n1", {}, hold, 60'000), LedgerStore::HoldOutcome::kHolderPlaced);
  EXPECT_FALSE(*store_->ReleaseHold("n1", "waiting"));
  EXPECT_EQ(held("n1", "waiting")->state, ledger::EntryState::kReserved);

  // Two victims: the hold waits for both; a hold elsewhere is replaced, and
  // the holder's bind on another node takes its hold along (moved).
  Capacity("n2", {{0, 16 * kGi, ""}});
  for (const char* uid : {"a", "b"}) {
    ledger::Entry e = MakeEntry(uid, {0}, 8 * kGi);
    e.state = ledger::EntryState::kTerminating;
    ASSERT_TRUE(store_->PutEntry("n2", e).ok());
  }
  ledger::Entry q = MakeEntry("q", {0}, 1 * kGi);
  q.state = ledger::EntryState::kHold;
  EXPECT_EQ(*store_->HoldRoom("n2", {"a", "b"}, q, 60'000), LedgerStore::HoldOutcome::kPending);
  ASSERT_TRUE(*store_->Release("n2", "a"));
  EXPECT_FALSE(held("n2", "q").has_value());
  ASSERT_TRUE(*store_->Release("n2", "b"));
  ASSERT_TRUE(held("n2", "q").has_value());
  EXPECT_EQ(*store_->HoldRoom("n1", {}, q, 60'000), LedgerStore::HoldOutcome::kHeld);
  EXPECT_FALSE(held("n2", "q").has_value());
  ASSERT_TRUE(held("n1", "q").has_value());
  x = store_->Reserve(Req("n2", MakeEntry("q", {0}, 1 * kGi)));
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(*x, ReserveOutcome::kMoved);
  EXPECT_FALSE(held("n1", "q").has_value());
  EXPECT_EQ(held("n2", "q")->state, ledger::EntryState::kReserved);
  // A hold ends as reconcile ends it; a pending record leaves with its node.
  ASSERT_TRUE(store_->HoldRoom("n1", {}, q, 60'000).ok());
  ledger::Entry c = MakeEntry("c", {0}, kGi);
  ASSERT_TRUE(store_->PutEntry("n2", c).ok());
  ledger::Entry z = MakeEntry("z", {0}, kGi);
  z.state = ledger::EntryState::kHold;
  EXPECT_EQ(*store_->HoldRoom("n2", {"c"}, z, 60'000), LedgerStore::HoldOutcome::kPending);
  EXPECT_EQ(Raw({"EXISTS", NodeKey("n2", "roomfor")}).integer, 1);
  ASSERT_TRUE(store_->RemoveNode("n2").ok());
  EXPECT_EQ(Raw({"EXISTS", NodeKey("n2", "roomfor")}).integer, 0);
  EXPECT_EQ(store_->HoldRoom("n2", {}, z, 60'000).status().code(), Code::kNotFound);
  // A pending hold whose victim never goes counts as "being made" for its ttl at most.
  Capacity("n3", {{0, 16 * kGi, ""}});
  ledger::Entry stuck = MakeEntry("stuck", {0}, kGi);
  ASSERT_TRUE(store_->PutEntry("n3", stuck).ok());
  ledger::Entry w = MakeEntry("w", {0}, kGi);
  w.state = ledger::EntryState::kHold;
  EXPECT_EQ(*store_->HoldRoom("n3", {"stuck"}, w, 50), LedgerStore::HoldOutcome::kPending);
  EXPECT_TRUE(*store_->HoldPending("w"));
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_FALSE(*store_->HoldPending("w"));
  EXPECT_EQ(Raw({"HEXISTS", Key("holdwait"), "w"}).integer, 0) << "the expired record is gone";
}

// Issue 32: a pod of higher priority than the holder takes held room in
// the reserve script: the hold ends in the same step (its pod waits again);
// a pod of equal priority is refused and the hold stays; a hold on another
// GPU of the node is not taken.
TEST_F(ValkeyStoreTest, APodOfHigherPriorityTakesRoomHeldForALesserOne) {
  Capacity("n1", {{0, 16 * kGi, ""}, {1, 16 * kGi, ""}});
  auto hold_for = [&](const std::string& uid, int gpu, int32_t priority) {
    ledger::Entry h = MakeEntry(uid, {gpu}, 12 * kGi);
    h.state = ledger::EntryState::kHold;
    h.priority = priority;
    ASSERT_EQ(*store_->HoldRoom("n1", {}, h, 60'000), LedgerStore::HoldOutcome::kHeld);
  };
  hold_for("low", 0, 0);
  hold_for("low-elsewhere", 1, 0);
  auto entries = [&] {
    std::map<std::string, ledger::EntryState> out;
    const ledger::SnapshotPtr snap = Fresh();
    for (const ledger::Entry& e : snap->Find("n1")->entries) out[e.pod_uid] = e.state;
    return out;
  };
  ledger::Entry peer = MakeEntry("peer", {0}, 8 * kGi);
  Result<ReserveOutcome> x = store_->Reserve(Req("n1", peer));
  EXPECT_EQ(x.status().code(), Code::kInsufficient) << x.status().ToString();
  EXPECT_EQ(entries(), (std::map<std::string, ledger::EntryState>{{"low", ledger::EntryState::kHold},
                                                                   {"low-elsewhere", ledger::EntryState::kHold}}));
  ledger::Entry urgent = MakeEntry("urgent", {0}, 8 * kGi);
  urgent.priority = 1000;
  x = store_->Reserve(Req("n1", urgent));
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(*x, ReserveOutcome::kReserved);
  EXPECT_EQ(entries(), (std::map<std::string, ledger::EntryState>{{"urgent", ledger::EntryState::kReserved},
                                                                   {"low-elsewhere", ledger::EntryState::kHold}}));
  EXPECT_EQ(Raw({"HEXISTS", Key("pods"), "low"}).integer, 0);
  // Room that fits without taking: no hold is taken.
  ledger::Entry small = MakeEntry("small", {1}, 2 * kGi);
  small.priority = 1000;
  ASSERT_TRUE(store_->Reserve(Req("n1", small)).ok());
  EXPECT_EQ(entries().at("low-elsewhere"), ledger::EntryState::kHold);
}

TEST_F(ValkeyStoreTest, RemoveNodeDropsItsKeysAndIndex) {
  Capacity("n1", {{0, 10 * kGi, ""}});
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("uid-1", {0}, kGi))).ok());
  ASSERT_TRUE(store_->RemoveNode("n1").ok());
  EXPECT_EQ(Fresh()->Find("n1"), nullptr);
  EXPECT_TRUE(Raw({"HGET", Key("pods"), "uid-1"}).is_nil());
  EXPECT_EQ(Raw({"EXISTS", NodeKey("n1", "alloc"), NodeKey("n1", "cap")}).integer, 0);
  const uint64_t e = Epoch();
  ASSERT_TRUE(store_->RemoveNode("n1").ok());
  EXPECT_EQ(Epoch(), e);
}

// Issue 33: the GPU locks of a departed node leave with it (its fence
// counters expire after a week), through the lock store's own key names.
TEST_F(ValkeyStoreTest, RemoveNodeTakesItsGpuLocksAlong) {
  Capacity("n1", {{0, 10 * kGi, ""}, {1, 10 * kGi, ""}});
  Capacity("n2", {{0, 10 * kGi, ""}});
  std::shared_ptr<LockStore> locks = NewValkeyLockStore(client_);
  ASSERT_TRUE(locks->Acquire("n1", 0, "pod-a/x", 60'000, 8, true).ok());
  ASSERT_TRUE(locks->Acquire("n1", 1, "pod-b/x", 60'000, 8, true).ok());
  ASSERT_TRUE(locks->Acquire("n1", 1, "pod-c/x", 60'000, 8, true).ok());  // queued
  ASSERT_TRUE(locks->Acquire("n2", 0, "pod-d/x", 60'000, 8, true).ok());
  auto lock_keys = [&](const std::string& node) {
    return Raw({"KEYS", Key("lock:gpu:{" + node + "}:*")}).elements.size() +
           Raw({"KEYS", Key("{" + node + "}:active")}).elements.size();
  };
  ASSERT_GT(lock_keys("n1"), 4u);
  const size_t n2_before = lock_keys("n2");
  ASSERT_TRUE(store_->RemoveNode("n1").ok());
  EXPECT_EQ(lock_keys("n1"), 2u) << "only the two fence counters stay";
  for (int gpu : {0, 1}) {
    const std::string fence = Key("lock:gpu:{n1}:" + std::to_string(gpu) + ":fence");
    const int64_t ttl = Raw({"PTTL", fence}).integer;
    EXPECT_GT(ttl, 6 * 86'400'000LL) << fence;
    EXPECT_LE(ttl, 7 * 86'400'000LL) << fence;
  }
  EXPECT_EQ(lock_keys("n2"), n2_before) << "another node's locks are untouched";
  Result<std::vector<LockRecord>> listed = locks->List();
  ASSERT_TRUE(listed.ok());
  for (const LockRecord& r : *listed) {
    if (r.node != "n1") continue;
    EXPECT_TRUE(r.holder.empty()) << "GPU " << r.gpu;  // only its last token is left, until the fence expires
    EXPECT_TRUE(r.waiters.empty()) << "GPU " << r.gpu;
  }
}

TEST_F(ValkeyStoreTest, EvalFallsBackToEvalWhenTheScriptIsNotCached) {
  ASSERT_NO_FATAL_FAILURE(UseOwnServer());  // SCRIPT FLUSH empties the cache of every client
  Script script("return {KEYS[1], ARGV[1]}");
  ASSERT_TRUE(client_->Eval(script, {"k"}, {"cached"}).ok());
  Raw({"SCRIPT", "FLUSH"});
  auto r = client_->Eval(script, {"k"}, {std::string("a\0b", 3)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->elements.size(), 2u);
  EXPECT_EQ(r->elements[1].str, std::string("a\0b", 3));
  auto again = client_->Eval(script, {"k"}, {"x"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->elements[1].str, "x");
}

TEST_F(ValkeyStoreTest, AServerErrorIsAReplyNotATransportFailure) {
  Raw({"SET", Key("s"), "x"});
  auto r = client_->Command({"HGET", Key("s"), "f"});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->is_error());
  EXPECT_THAT(r->str, HasSubstr("WRONGTYPE"));
  EXPECT_TRUE(store_->Ping().ok());
}

// 5,000 nodes x 8 GPUs with 50,000 entries: correctness at scale, and the
// reload time, printed (not asserted).
TEST_F(ValkeyStoreTest, ReloadsAFullClusterLedger) {
  constexpr int kNodes = 5000, kGpus = 8, kEntriesPerNode = 10;
  std::vector<std::vector<std::string>> cmds;
  cmds.reserve(kNodes * 5);
  std::vector<std::string> sadd{"SADD", Key("nodes")};
  for (int n = 0; n < kNodes; ++n) {
    const std::string node = "node-" + std::to_string(n);
    sadd.push_back(node);
    std::vector<std::string> cap{"HSET", NodeKey(node, "cap")};
    std::vector<std::string> used{"HSET", NodeKey(node, "used"), "ts", "1700000000000"};
    for (int g = 0; g < kGpus; ++g) {
      cap.push_back(std::to_string(g));
      cap.push_back(std::to_string(80 * kGi));
      cap.push_back("uuid:" + std::to_string(g));
      cap.push_back("GPU-" + std::to_string(n) + "-" + std::to_string(g));
      used.push_back(std::to_string(g));
      used.push_back(std::to_string(kGi));
    }
    std::vector<std::string> alloc{"HSET", NodeKey(node, "alloc")};
    for (int e = 0; e < kEntriesPerNode; ++e) {
      const std::string uid = "0b3c6f1e-" + std::to_string(n) + "-" + std::to_string(e);
      alloc.push_back(uid);
      alloc.push_back(R"({"ns":"inference","name":"vllm-llama-)" + std::to_string(n) + "-" +
                      std::to_string(e) + R"(","gpus":[)" + std::to_string(e % kGpus) +
                      R"(],"per_gpu":25769803776,"peak_per_gpu":0,"model":"llama-3-8b",)"
                      R"("state":"bound","created_ms":1700000000000})");
    }
    cmds.push_back(std::move(cap));
    cmds.push_back(std::move(used));
    cmds.push_back(std::move(alloc));
    cmds.push_back({"HSET", NodeKey(node, "models"), "llama-3-8b", "1700000000000"});
  }
  cmds.push_back(std::move(sadd));
  cmds.push_back({"INCR", Key("epoch")});
  auto w = client_->Pipeline(cmds);
  ASSERT_TRUE(w.ok()) << w.status().ToString();

  const auto thread_cpu_ms = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  };
  double best_ms = 1e9, best_cpu_ms = 1e9;
  ledger::SnapshotPtr snap;
  for (int i = 0; i < 5; ++i) {
    auto store = NewValkeyLedgerStore(client_);
    const double c0 = thread_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    auto s = store->Snapshot();
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = thread_cpu_ms();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    snap = *s;
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
    best_cpu_ms = std::min(best_cpu_ms, c1 - c0);
  }
  std::printf("[ info ] reload of %d nodes x %d GPUs, %d entries: best of 5 = %.1f ms wall, "
              "%.1f ms client CPU\n",
              kNodes, kGpus, kNodes * kEntriesPerNode, best_ms, best_cpu_ms);
  ASSERT_EQ(snap->nodes.size(), static_cast<size_t>(kNodes));
  size_t entries = 0;
  for (const auto& [name, node] : snap->nodes) {
    entries += node.entries.size();
    ASSERT_EQ(node.gpus.size(), static_cast<size_t>(kGpus));
  }
  EXPECT_EQ(entries, static_cast<size_t>(kNodes * kEntriesPerNode));
  const ledger::Node* n7 = snap->Find("node-7");
  ASSERT_NE(n7, nullptr);
  EXPECT_EQ(n7->gpus[3].uuid, "GPU-7-3");
  EXPECT_EQ(n7->gpus[3].used, kGi);
  EXPECT_EQ(Allocated(*n7, 0), 2 * 25769803776);
}


// ---------------------------------------------------------------------------
// Incremental snapshot refresh: the change log P:changes.

// Everything a snapshot holds but its index, compared field by field.
void ExpectSameLedger(const ledger::Snapshot& got, const ledger::Snapshot& want) {
  EXPECT_EQ(got.epoch, want.epoch);
  std::vector<std::string> got_names, want_names;
  for (const auto& [name, n] : got.nodes) got_names.push_back(name);
  for (const auto& [name, n] : want.nodes) want_names.push_back(name);
  std::sort(got_names.begin(), got_names.end());
  std::sort(want_names.begin(), want_names.end());
  ASSERT_EQ(got_names, want_names);
  ASSERT_NE(got.index, nullptr) << "a published snapshot is indexed";
  for (const auto& [name, w] : want.nodes) {
    const ledger::Node& g = got.nodes.at(name);
    SCOPED_TRACE("node " + name);
    EXPECT_EQ(g.name, w.name);
    ASSERT_EQ(g.gpus.size(), w.gpus.size());
    for (size_t i = 0; i < w.gpus.size(); ++i) {
      EXPECT_EQ(g.gpus[i].index, w.gpus[i].index);
      EXPECT_EQ(g.gpus[i].uuid, w.gpus[i].uuid);
      EXPECT_EQ(g.gpus[i].capacity, w.gpus[i].capacity);
      EXPECT_EQ(g.gpus[i].used, w.gpus[i].used);
      EXPECT_EQ(g.gpus[i].used_ts_ms, w.gpus[i].used_ts_ms);
      EXPECT_EQ(g.gpus[i].total, w.gpus[i].total);
      EXPECT_EQ(g.gpus[i].outside_pods, w.gpus[i].outside_pods);
      EXPECT_EQ(g.gpus[i].untracked, w.gpus[i].untracked);
      EXPECT_EQ(g.gpus[i].pods, w.gpus[i].pods);
    }
    ASSERT_EQ(g.entries.size(), w.entries.size());
    for (size_t i = 0; i < w.entries.size(); ++i) {
      const ledger::Entry& a = g.entries[i];
      const ledger::Entry& b = w.entries[i];
      EXPECT_EQ(a.pod_uid, b.pod_uid);
      EXPECT_EQ(a.ns, b.ns);
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.gpus, b.gpus);
      EXPECT_EQ(a.per_gpu, b.per_gpu);
      EXPECT_EQ(a.peak_per_gpu, b.peak_per_gpu);
      EXPECT_EQ(a.model, b.model);
      EXPECT_EQ(a.state, b.state);
      EXPECT_EQ(a.created_ms, b.created_ms);
      EXPECT_EQ(a, b) << "another field of entry " << b.pod_uid;
    }
    EXPECT_EQ(g.models, w.models);
  }
}

// HGETALL calls the server executed so far (INFO commandstats; scripts' calls
// count too, so measure only around reads).
int64_t HgetallCalls(ValkeyClient& c) {
  auto r = c.Command({"INFO", "commandstats"});
  if (!r.ok() || r->type != Reply::Type::kString) return -1;
  const std::string key = "cmdstat_hgetall:calls=";
  const size_t p = r->str.find(key);
  if (p == std::string::npos) return 0;
  return std::atoll(r->str.c_str() + p + key.size());
}

// Refreshes of a cache by the writes of another process: store_ writes,
// reader_ (another store, as another replica) reads. A store's own writes
// are mostly taken from their scripts' answers instead (OwnWriteTest).
class ValkeyRefreshTest : public ValkeyStoreTest {
 protected:
  void SetUp() override {
    ValkeyStoreTest::SetUp();
    reader_ = NewValkeyLedgerStore(client_);
  }

  // `store`'s Snapshot(), checked against a full load by a new store (no
  // write may run in between), and how it refreshed: 'i' incrementally, 'f'
  // fully, '-' not at all (cached).
  char RefreshAndCompare(LedgerStore& store) {
    const auto before = store.SnapshotReloads();
    auto got = store.Snapshot();
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) return '?';
    const auto after = store.SnapshotReloads();
    ledger::SnapshotPtr want = Fresh();
    ExpectSameLedger(**got, *want);
    if (after.incremental == before.incremental + 1 && after.full == before.full) return 'i';
    if (after.full == before.full + 1 && after.incremental == before.incremental) return 'f';
    if (after.full == before.full && after.incremental == before.incremental) return '-';
    return '?';
  }

  std::unique_ptr<LedgerStore> reader_;

  void Nodes(int n) {
    for (int i = 1; i <= n; ++i) {
      Capacity("n" + std::to_string(i), {{0, 10 * kGi, "GPU-" + std::to_string(i)}, {1, 10 * kGi, ""}});
    }
  }
};

TEST_F(ValkeyRefreshTest, EachKindOfWriteRefreshesIncrementallyToWhatAFullLoadReads) {
  Nodes(8);
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f');
  EXPECT_EQ(RefreshAndCompare(*reader_), '-');

  ASSERT_EQ(*store_->Reserve(Req("n1", MakeEntry("a", {0}, kGi))), ReserveOutcome::kReserved);
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "reserve";
  ASSERT_EQ(*store_->Reserve(Req("n2", MakeEntry("a", {1}, 2 * kGi))), ReserveOutcome::kMoved);
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "reserve that moves";
  EXPECT_TRUE(store_->Snapshot().value()->Find("n1")->entries.empty());
  ASSERT_TRUE(*store_->Release("n2", "a"));
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "release";

  ASSERT_TRUE(store_->Reserve(Req("n3", MakeEntry("b", {0, 1}, kGi))).ok());
  ASSERT_TRUE(store_->SetEntryState("n3", "b", ledger::EntryState::kBound).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "set state";
  EXPECT_EQ(store_->Snapshot().value()->Find("n3")->entries.at(0).state, ledger::EntryState::kBound);

  ledger::Entry c = MakeEntry("c", {0}, 3 * kGi);
  c.model = "llama";
  ASSERT_TRUE(store_->PutEntry("n4", c).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "put entry";
  c.state = ledger::EntryState::kBound;
  ASSERT_TRUE(store_->PutEntry("n5", c).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "put entry that moves";
  EXPECT_TRUE(store_->Snapshot().value()->Find("n4")->entries.empty());
  EXPECT_EQ(store_->Snapshot().value()->Find("n5")->entries.size(), 1u);

  Capacity("n6", {{0, 20 * kGi, "GPU-x"}});
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "set capacity";
  Capacity("n9", {{0, 30 * kGi, ""}});
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "set capacity of a new node";
  ASSERT_NE(store_->Snapshot().value()->Find("n9"), nullptr);

  ASSERT_TRUE(store_->PushUsage("n5", {{0, 5 * kGi}, {1, kGi}}).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "push usage";
  EXPECT_EQ(store_->Snapshot().value()->Find("n5")->gpus[0].used, 5 * kGi);

  ASSERT_TRUE(store_->RemoveNode("n6").ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "remove node";
  EXPECT_EQ(store_->Snapshot().value()->Find("n6"), nullptr);

  // Several writes on several nodes between two reads.
  ASSERT_TRUE(store_->Reserve(Req("n7", MakeEntry("d", {0}, kGi))).ok());
  ASSERT_TRUE(store_->Reserve(Req("n8", MakeEntry("e", {1}, kGi))).ok());
  ASSERT_TRUE(store_->Release("n3", "b").ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "three writes";

  // The refresh reads the changed node's four hashes, nothing else.
  ASSERT_TRUE(store_->Reserve(Req("n7", MakeEntry("f", {1}, kGi))).ok());
  const int64_t h0 = HgetallCalls(*client_);
  ASSERT_TRUE(reader_->Snapshot().ok());
  EXPECT_EQ(HgetallCalls(*client_) - h0, 4);
  EXPECT_EQ(reader_->SnapshotReloads().full, 1u);
}

TEST_F(ValkeyRefreshTest, MoreThanHalfTheNodesChangedReloadsEverything) {
  Nodes(4);
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f');
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(store_->Reserve(Req("n" + std::to_string(i), MakeEntry("u" + std::to_string(i), {0}, kGi))).ok());
  }
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f');
  ASSERT_TRUE(store_->Reserve(Req("n4", MakeEntry("u4", {0}, kGi))).ok());
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("u5", {1}, kGi))).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i');
}

TEST_F(ValkeyRefreshTest, ALostOrUntrustworthyChangeLogForcesAFullReload) {
  Nodes(6);
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f');

  // The log is deleted between two writes: the first write's node is no
  // longer named, and the log restarts after it.
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("a", {0}, kGi))).ok());
  Raw({"DEL", Key("changes")});
  ASSERT_TRUE(store_->Reserve(Req("n2", MakeEntry("b", {0}, kGi))).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f') << "deleted log";
  EXPECT_EQ(store_->Snapshot().value()->Find("n1")->entries.size(), 1u);
  // A log deleted with no write after it: the next write restarts it at the
  // epoch this reader has, so nothing is missed and the refresh stays small.
  Raw({"DEL", Key("changes")});
  ASSERT_TRUE(store_->Reserve(Req("n3", MakeEntry("c", {0}, kGi))).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "log restarted at the cached epoch";

  // The epoch key is deleted: the next write starts it at the server's time.
  Raw({"DEL", Key("epoch")});
  ASSERT_TRUE(store_->Release("n3", "c").ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f') << "deleted epoch";
  ASSERT_TRUE(store_->Release("n2", "b").ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "after the restart";

  // Something moves the epoch without logging (an older vramd, by hand).
  Raw({"HSET", NodeKey("n4", "cap"), "0", std::to_string(4 * kGi)});
  Raw({"INCR", Key("epoch")});
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f') << "unlogged change";
  EXPECT_EQ(store_->Snapshot().value()->Find("n4")->gpus[0].capacity, 4 * kGi);
  // ... and a logged write follows it before the reader looks: the writer
  // sees the gap and restarts the log.
  Raw({"HSET", NodeKey("n4", "cap"), "0", std::to_string(5 * kGi)});
  Raw({"INCR", Key("epoch")});
  ASSERT_TRUE(store_->Reserve(Req("n5", MakeEntry("d", {0}, kGi))).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f') << "unlogged change, then a logged one";
  EXPECT_EQ(store_->Snapshot().value()->Find("n4")->gpus[0].capacity, 5 * kGi);

  // The whole ledger is gone (a flush), then written anew.
  TearDown();
  Capacity("m1", {{0, kGi, ""}});
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f') << "flushed ledger";
  EXPECT_EQ(store_->Snapshot().value()->nodes.size(), 1u);
}

TEST_F(ValkeyRefreshTest, TheChangeLogIsBoundedAndOldReadersReloadEverything) {
  Nodes(6);
  auto old_reader = NewValkeyLedgerStore(client_);
  EXPECT_EQ(RefreshAndCompare(*old_reader), 'f');
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("a", {0}, kGi))).ok());
  const uint64_t e1 = Epoch();
  ASSERT_TRUE(store_->Reserve(Req("n2", MakeEntry("b", {0}, kGi))).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f');  // reader_ is at e1 + 1 now

  // 100,000 more members, all logged at e1 (as if that many nodes had
  // changed then). The next write finds the log over its bound.
  for (int batch = 0; batch < 10; ++batch) {
    std::vector<std::string> zadd{"ZADD", Key("changes")};
    for (int i = 0; i < 10000; ++i) {
      zadd.push_back(std::to_string(e1));
      zadd.push_back("ghost-" + std::to_string(batch * 10000 + i));
    }
    Raw(zadd);
  }
  ASSERT_TRUE(store_->Reserve(Req("n3", MakeEntry("c", {0}, kGi))).ok());
  const int64_t left = Raw({"ZCARD", Key("changes")}).integer;
  EXPECT_LE(left, 50001);
  Reply marker = Raw({"ZSCORE", Key("changes"), ""});
  ASSERT_FALSE(marker.is_nil());
  EXPECT_EQ(static_cast<uint64_t>(std::stod(marker.str)), e1);  // exact below 2^53
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i') << "newer than the marker";
  EXPECT_EQ(RefreshAndCompare(*old_reader), 'f') << "older than the marker";
}

TEST_F(ValkeyRefreshTest, MalformedFieldsAreCountedAcrossIncrementalRefreshes) {
  Nodes(6);
  Raw({"HSET", NodeKey("n1", "alloc"), "bad", "{not json"});
  Raw({"HSET", NodeKey("n2", "cap"), "7", "lots"});
  Raw({"INCR", Key("epoch")});
  EXPECT_EQ(RefreshAndCompare(*reader_), 'f');
  EXPECT_EQ(reader_->MalformedFieldsSkipped(), 2u);
  ASSERT_TRUE(store_->Reserve(Req("n3", MakeEntry("a", {0}, kGi))).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i');
  EXPECT_EQ(reader_->MalformedFieldsSkipped(), 2u);
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("b", {0}, kGi))).ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i');
  EXPECT_EQ(reader_->MalformedFieldsSkipped(), 2u);
  ASSERT_TRUE(store_->RemoveNode("n2").ok());
  EXPECT_EQ(RefreshAndCompare(*reader_), 'i');
  EXPECT_EQ(reader_->MalformedFieldsSkipped(), 1u);
}

// A store's own reserve comes back with the new epoch and the node's hashes,
// its bound mark (FinishBind) with the new epoch alone (the entry's state is
// all it changed): its cache takes them from the answer, with no read at
// all, and equals a full load. Other writes, and own writes on a
// cache that missed another process's write, are refreshed as before.
TEST_F(ValkeyRefreshTest, OwnReservesAndBoundMarksAreTakenFromTheScriptsAnswer) {
  Nodes(6);
  EXPECT_EQ(RefreshAndCompare(*store_), 'f');
  const auto own = [&] { return store_->SnapshotReloads().own_writes; };
  const uint64_t epochs = store_->EpochChecks();

  ledger::Entry a = MakeEntry("a", {0}, kGi);
  a.model = "llama";
  ASSERT_EQ(*store_->Reserve(Req("n1", a)), ReserveOutcome::kReserved);
  EXPECT_EQ(own(), 1u);
  const int64_t h0 = HgetallCalls(*client_);
  ASSERT_TRUE(store_->Snapshot().ok());
  EXPECT_EQ(HgetallCalls(*client_) - h0, 0) << "the reserve's node was read again";
  EXPECT_EQ(RefreshAndCompare(*store_), '-') << "reserve";
  {
    auto s = store_->Snapshot();
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)->epoch, Epoch());
    ASSERT_EQ((*s)->Find("n1")->entries.size(), 1u);
    EXPECT_EQ((*s)->Find("n1")->entries[0].state, ledger::EntryState::kReserved);
    EXPECT_EQ((*s)->Find("n1")->models.count("llama"), 1u);
  }

  ASSERT_TRUE(store_->FinishBind("n1", "a").ok());
  EXPECT_EQ(own(), 2u);
  EXPECT_EQ(RefreshAndCompare(*store_), '-') << "bound mark";
  EXPECT_EQ(store_->Snapshot().value()->Find("n1")->entries[0].state, ledger::EntryState::kBound);
  // A bound mark that changes nothing moves no epoch and applies nothing.
  ASSERT_TRUE(store_->FinishBind("n1", "a").ok());
  EXPECT_EQ(own(), 2u);
  EXPECT_EQ(RefreshAndCompare(*store_), '-') << "bound mark again";

  // Neither script answers the node's hashes: the cache lays the write on
  // its own copy of the node (the reserve's entry, the bound mark's state).
  // Not when that copy lacks a field it could not read (it cannot know what
  // the store holds there): refreshed.
  Raw({"HSET", NodeKey("n6", "alloc"), "bad", "{not json"});
  Raw({"INCR", Key("epoch")});
  EXPECT_EQ(RefreshAndCompare(*store_), 'f');
  {
    auto z = store_->Reserve(Req("n6", MakeEntry("z", {1}, kGi)));
    ASSERT_TRUE(z.ok()) << z.status().ToString();
    ASSERT_EQ(*z, ReserveOutcome::kReserved);
  }
  EXPECT_EQ(own(), 2u) << "a reserve on a node with an unreadable field was taken from the answer";
  EXPECT_EQ(RefreshAndCompare(*store_), 'i') << "reserve on a node with an unreadable field";
  ASSERT_TRUE(store_->FinishBind("n6", "z").ok());
  EXPECT_EQ(own(), 2u) << "a bound mark on a node with an unreadable field was taken from the answer";
  EXPECT_EQ(RefreshAndCompare(*store_), 'i') << "bound mark on a node with an unreadable field";
  EXPECT_EQ(store_->MalformedFieldsSkipped(), 1u) << "the unreadable field is no longer counted";
  Raw({"HDEL", NodeKey("n6", "alloc"), "bad", "z"});
  Raw({"INCR", Key("epoch")});
  EXPECT_EQ(RefreshAndCompare(*store_), 'f');
  const uint64_t own_before = own();

  // A reserve on two GPUs, its node's usage known: the same as a load.
  ASSERT_TRUE(store_->PushUsage("n2", {{0, 3 * kGi}, {1, kGi}}).ok());
  EXPECT_EQ(RefreshAndCompare(*store_), 'i') << "push usage";
  ASSERT_EQ(*store_->Reserve(Req("n2", MakeEntry("b", {0, 1}, 2 * kGi))), ReserveOutcome::kReserved);
  EXPECT_EQ(RefreshAndCompare(*store_), '-') << "reserve on two GPUs";
  ASSERT_EQ(*store_->Reserve(Req("n2", MakeEntry("e", {0}, kGi))), ReserveOutcome::kReserved);
  ASSERT_TRUE(store_->FinishBind("n2", "e").ok());
  EXPECT_EQ(RefreshAndCompare(*store_), '-') << "bound mark on a node with a usage report";
  EXPECT_EQ(own(), own_before + 3);

  // A call holds the cached snapshot (a filter call in progress): the write
  // is not taken at the price of a copy of every node, and the held snapshot
  // never changes; it is kept, and laid on once the call has let go (the
  // next call reads nothing).
  {
    auto held = store_->Snapshot();
    ASSERT_TRUE(held.ok());
    const ledger::Snapshot copy = (*held)->Clone();
    ASSERT_EQ(*store_->Reserve(Req("n6", MakeEntry("h", {0}, kGi))), ReserveOutcome::kReserved);
    EXPECT_EQ(own(), own_before + 3);
    ExpectSameLedger(**held, copy);
  }
  EXPECT_EQ(RefreshAndCompare(*store_), '-') << "own write while the snapshot was held";
  EXPECT_EQ(own(), own_before + 4);

  // Not taken from the answer: a reserve that moves (two nodes change), a
  // release, reconcile's state change. The next call refreshes.
  ASSERT_EQ(*store_->Reserve(Req("n3", MakeEntry("b", {1}, kGi))), ReserveOutcome::kMoved);
  EXPECT_EQ(RefreshAndCompare(*store_), 'i') << "reserve that moves";
  ASSERT_TRUE(*store_->Release("n3", "b"));
  EXPECT_EQ(RefreshAndCompare(*store_), 'i') << "release";
  ASSERT_TRUE(store_->SetEntryState("n1", "a", ledger::EntryState::kTerminating).ok());
  EXPECT_EQ(RefreshAndCompare(*store_), 'i') << "set state";
  EXPECT_EQ(own(), own_before + 4);

  // Another process wrote since the cache was read: the cache is two epochs
  // behind the own write, which it does not take; the next call refreshes
  // both changes.
  ASSERT_EQ(*reader_->Reserve(Req("n4", MakeEntry("c", {0}, kGi))), ReserveOutcome::kReserved);
  ASSERT_EQ(*store_->Reserve(Req("n5", MakeEntry("d", {0}, kGi))), ReserveOutcome::kReserved);
  EXPECT_EQ(own(), own_before + 4);
  EXPECT_EQ(RefreshAndCompare(*store_), 'i') << "own write after another's";
  EXPECT_EQ(store_->Snapshot().value()->Find("n4")->entries.size(), 1u);
  EXPECT_EQ(store_->Snapshot().value()->Find("n5")->entries.size(), 1u);
  // Snapshot() still reads the epoch on every call (another process may
  // have written); only its own writes need no refresh.
  EXPECT_GT(store_->EpochChecks(), epochs);
  EXPECT_EQ(store_->SnapshotReloads().full, 3u);
}

// The reserve answers no hash (issue 36): the cache lays the entry it sent on
// its own copy of the node. Where that is most delicate, the result must
// still be exactly what a load reads: a version-2 usage report whose per-pod
// figures name the pod reserved (its bytes, untracked until then, become its
// entry's), the pod's own hold replaced, lower-priority holds taken, a model
// placed, the new entry among older ones.
TEST_F(ValkeyRefreshTest, AnOwnReserveLaysItsEntryOnTheCachedNodeExactlyAsALoadReadsIt) {
  Nodes(3);
  const auto own = [&] { return store_->SnapshotReloads().own_writes; };
  const std::string pod = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ab";
  const std::string other = "0f1c2d3e-aaaa-bbbb-cccc-0123456789ac";
  ledger::UsageReport report;
  report.agent = "vramd-agent/test";
  report.gpus = {{.index = 0, .uuid = "GPU-1", .total = 10 * kGi, .used = 5 * kGi, .outside_pods = kGi,
                  .pods = {{pod, 3 * kGi}, {other, kGi}}},
                 {.index = 1, .total = 10 * kGi, .used = 0}};
  ASSERT_TRUE(store_->PushReport("n1", report, false).ok());
  RefreshAndCompare(*store_);
  {
    const ledger::Node* n = store_->Snapshot().value()->Find("n1");
    ASSERT_NE(n, nullptr);
    ASSERT_EQ(n->gpus[0].untracked, 4 * kGi) << "both pods' bytes are untracked before the reserve";
  }
  uint64_t before = own();
  ledger::Entry e = MakeEntry(pod, {0}, 4 * kGi);
  e.model = "llama";
  ASSERT_EQ(*store_->Reserve(Req("n1", e)), ReserveOutcome::kReserved);
  EXPECT_EQ(own(), before + 1) << "the reserve was not taken from its answer";
  EXPECT_EQ(RefreshAndCompare(*store_), '-') << "reserve under a per-pod usage report";
  {
    const ledger::Node* n = store_->Snapshot().value()->Find("n1");
    ASSERT_EQ(n->entries.size(), 1u);
    EXPECT_EQ(n->entries[0].used, 3 * kGi) << "the report's figure is the new entry's";
    EXPECT_EQ(n->gpus[0].untracked, kGi) << "the reserved pod's bytes are no longer untracked";
    EXPECT_EQ(n->models.count("llama"), 1u);
  }

  // The pod's own hold (the room an eviction made for it) is replaced by its
  // reservation, one entry for the pod.
  ledger::Entry hold = MakeEntry("held", {1}, 6 * kGi);
  hold.state = ledger::EntryState::kHold;
  ASSERT_EQ(*store_->HoldRoom("n2", {}, hold, 60'000), LedgerStore::HoldOutcome::kHeld);
  RefreshAndCompare(*store_);
  before = own();
  ASSERT_EQ(*store_->Reserve(Req("n2", MakeEntry("held", {1}, 6 * kGi))), ReserveOutcome::kReserved);
  EXPECT_EQ(own(), before + 1);
  EXPECT_EQ(RefreshAndCompare(*store_), '-') << "reserve in place of the pod's own hold";
  {
    const ledger::Node* n = store_->Snapshot().value()->Find("n2");
    ASSERT_EQ(n->entries.size(), 1u);
    EXPECT_EQ(n->entries[0].state, ledger::EntryState::kReserved);
  }

  // A pod of higher priority takes the room of a lower-priority hold: the
  // hold goes from the cache in the same step.
  ledger::Entry low = MakeEntry("low", {0}, 8 * kGi);
  low.state = ledger::EntryState::kHold;
  ASSERT_EQ(*store_->HoldRoom("n3", {}, low, 60'000), LedgerStore::HoldOutcome::kHeld);
  ledger::Entry older = MakeEntry("z-older", {1}, kGi);  // after "high" by UID, before it by age
  older.created_ms = 1'000;
  ASSERT_TRUE(store_->PutEntry("n3", older).ok());
  RefreshAndCompare(*store_);
  before = own();
  ledger::Entry high = MakeEntry("high", {0}, 5 * kGi);
  high.priority = 100;
  ASSERT_EQ(*store_->Reserve(Req("n3", high)), ReserveOutcome::kReserved);
  EXPECT_EQ(own(), before + 1);
  EXPECT_EQ(RefreshAndCompare(*store_), '-') << "reserve that took a hold";
  {
    const ledger::Node* n = store_->Snapshot().value()->Find("n3");
    ASSERT_EQ(n->entries.size(), 2u);
    EXPECT_EQ(n->entries[0].pod_uid, "z-older") << "oldest first";
    EXPECT_EQ(n->entries[1].pod_uid, "high");
  }
}

// Many threads of one process reserve and mark bound at once while another
// process writes on the same nodes, round after round: each thread sees its
// own write in the watched snapshot as soon as the write returns (whether
// the cache took it from the answer or refreshed), no watched snapshot ever
// goes back in epoch, and once the writes stop the cache equals a full load.
// Both ways must have happened (the test would otherwise not test them).
TEST_F(ValkeyRefreshTest, ConcurrentOwnWritesAreSeenAtOnceAndConvergeToAFullLoad) {
  constexpr int kNodes = 4, kThreads = 4, kRounds = 8, kPerRound = 15;
  for (int i = 1; i <= kNodes; ++i) {
    Capacity("n" + std::to_string(i), {{0, 1000 * kGi, ""}, {1, 1000 * kGi, "GPU-b"}});
  }
  auto watching = NewValkeyLedgerStore(NewValkeyClient(opts_));
  watching->StartEpochWatch();
  for (int i = 0; i < 500 && !watching->EpochWatchLive(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(watching->EpochWatchLive());
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  std::atomic<int> unseen{0}, errors{0}, regressions{0};
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::atomic<bool> stop{false};
    std::thread other([&] {  // another replica's writes on the same nodes
      std::mt19937 rng(99 + round);
      while (!stop.load()) {
        const std::string n = "n" + std::to_string(1 + rng() % kNodes);
        const std::string uid = "other-" + std::to_string(rng() % 20);
        if (rng() % 2) {
          (void)store_->Reserve(Req(n, MakeEntry(uid, {static_cast<int>(rng() % 2)}, kGi)));
        } else {
          (void)store_->Release(n, uid);
        }
        // Now and then a pause, in which the threads' writes meet a cache
        // no other write moved.
        if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        uint64_t last = 0;
        const auto check = [&](const std::string& node, const std::string& uid, ledger::EntryState want) {
          auto s = watching->WatchedSnapshot();
          if (!s.ok()) {
            ++errors;
            return;
          }
          if ((*s)->epoch < last) ++regressions;
          last = (*s)->epoch;
          const ledger::Node* n = (*s)->Find(node);
          bool seen = false;
          for (const auto& e : n != nullptr ? n->entries : std::vector<ledger::Entry>{}) {
            if (e.pod_uid == uid && e.state == want) seen = true;
          }
          if (!seen) ++unseen;
        };
        for (int i = 0; i < kPerRound; ++i) {
          const std::string node = "n" + std::to_string(1 + (t + i) % kNodes);
          const std::string uid = "r" + std::to_string(round) + "-t" + std::to_string(t) + "-" + std::to_string(i);
          auto r = watching->Reserve(Req(node, MakeEntry(uid, {i % 2}, kGi)));
          if (!r.ok() || *r != ReserveOutcome::kReserved) {
            ++errors;
            continue;
          }
          check(node, uid, ledger::EntryState::kReserved);
          if (!watching->FinishBind(node, uid).ok()) {
            ++errors;
            continue;
          }
          check(node, uid, ledger::EntryState::kBound);
        }
      });
    }
    for (auto& t : threads) t.join();
    stop = true;
    other.join();
    // The last notification may still be on its way: wait for the epoch.
    const uint64_t want = Epoch();
    ledger::SnapshotPtr got;
    for (int i = 0; i < 1000 && got == nullptr; ++i) {
      auto s = watching->WatchedSnapshot();
      if (s.ok() && (*s)->epoch == want) got = *s;
      if (got == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_NE(got, nullptr) << "the watched snapshot never reached epoch " << want;
    ExpectSameLedger(*got, *Fresh());
    ASSERT_FALSE(HasFailure());
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(unseen.load(), 0) << "a thread did not see its own write right after it returned";
  EXPECT_EQ(regressions.load(), 0);
  const auto counts = watching->SnapshotReloads();
  std::printf("[ info ] %d own writes: %llu taken from the answer; %llu incremental refreshes\n",
              kRounds * kThreads * kPerRound * 2, static_cast<unsigned long long>(counts.own_writes),
              static_cast<unsigned long long>(counts.incremental));
  EXPECT_GT(counts.own_writes, 0u) << "no write was taken from its answer: that path went untested";
  EXPECT_GT(counts.incremental, 0u) << "no own write needed a refresh: that path went untested";
}

// Random writes of every kind from two stores (two clients, as two replicas
// would), each store's refreshed snapshot checked against a full load every
// few writes.
TEST_F(ValkeyRefreshTest, RandomWritesFromTwoStoresKeepIncrementalSnapshotsExact) {
  constexpr int kNodes = 20, kWrites = 300;
  // A fixed seed by default; VRAMD_TEST_SEED explores others.
  const char* seed_env = std::getenv("VRAMD_TEST_SEED");
  const unsigned seed = seed_env != nullptr ? static_cast<unsigned>(std::atoll(seed_env)) : 12345u;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const auto node = [&] { return "n" + std::to_string(1 + pick(kNodes)); };
  const auto uid = [&] { return "pod-" + std::to_string(pick(60)); };
  for (int i = 1; i <= kNodes; ++i) {
    Capacity("n" + std::to_string(i), {{0, 16 * kGi, ""}, {1, 16 * kGi, "GPU-b"}});
  }
  auto other_client = NewValkeyClient(opts_);
  std::unique_ptr<LedgerStore> stores[2] = {NewValkeyLedgerStore(client_),
                                            NewValkeyLedgerStore(other_client)};
  for (auto& s : stores) ASSERT_TRUE(s->Snapshot().ok());
  int refreshes[2] = {0, 0};  // checks that found the epoch moved, per store
  for (int w = 1; w <= kWrites; ++w) {
    LedgerStore& s = *stores[pick(2)];
    const int kind = pick(100);
    const std::string n = node();
    if (kind < 35) {
      std::vector<int> gpus = pick(4) == 0 ? std::vector<int>{0, 1} : std::vector<int>{pick(2)};
      (void)s.Reserve(Req(n, MakeEntry(uid(), gpus, (1 + pick(6)) * kGi)));
    } else if (kind < 55) {
      (void)s.Release(n, uid());
    } else if (kind < 65) {
      (void)s.SetEntryState(n, uid(), pick(2) ? ledger::EntryState::kBound
                                              : ledger::EntryState::kTerminating);
    } else if (kind < 75) {
      ledger::Entry e = MakeEntry(uid(), {pick(2)}, (1 + pick(4)) * kGi);
      e.model = "model-" + std::to_string(pick(3));
      e.state = ledger::EntryState::kBound;
      (void)s.PutEntry(n, e);
    } else if (kind < 83) {
      std::vector<GpuCapacity> gpus{{0, (12 + pick(8)) * kGi, ""}};
      if (pick(2)) gpus.push_back({1, 16 * kGi, "GPU-b"});
      ASSERT_TRUE(s.SetCapacity(n, gpus).ok());
    } else if (kind < 93) {
      (void)s.PushUsage(n, {{0, pick(10) * kGi}, {1, pick(10) * kGi}});
    } else {
      ASSERT_TRUE(s.RemoveNode(n).ok());
    }
    if (w % 3 == 0) {
      for (int i = 0; i < 2; ++i) {
        const char how = RefreshAndCompare(*stores[i]);
        ASSERT_FALSE(HasFailure()) << "after write " << w;
        EXPECT_NE(how, '?');
        if (how != '-') ++refreshes[i];  // '-': the writes all failed (no such pod...)
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    const int checks = refreshes[i];
    const auto counts = stores[i]->SnapshotReloads();
    // One full load at the start; 3 writes between checks change at most 6
    // nodes, rarely more than half of those left after removals.
    EXPECT_LE(counts.full, 1u + checks / 10);
    EXPECT_GE(counts.incremental, static_cast<uint64_t>(checks * 9 / 10));
    std::printf("[ info ] %d refreshes: %llu full, %llu incremental\n", checks,
                static_cast<unsigned long long>(counts.full),
                static_cast<unsigned long long>(counts.incremental));
  }
}

// Writers race the refreshes (two stores reading in a loop while two
// threads write): once the writes stop, one more refresh must equal a full
// load, whatever the refreshes in between saw.
TEST_F(ValkeyRefreshTest, RefreshesRacingWritesConvergeToAFullLoad) {
  constexpr int kNodes = 12;
  for (int i = 1; i <= kNodes; ++i) Capacity("n" + std::to_string(i), {{0, 64 * kGi, ""}});
  auto other_client = NewValkeyClient(opts_);
  std::unique_ptr<LedgerStore> readers[2] = {NewValkeyLedgerStore(client_),
                                             NewValkeyLedgerStore(other_client)};
  for (auto& r : readers) ASSERT_TRUE(r->Snapshot().ok());
  std::atomic<bool> stop{false};
  std::atomic<int> read_errors{0}, epoch_regressions{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      uint64_t last = 0;
      while (!stop.load()) {
        auto s = readers[t]->Snapshot();
        if (!s.ok()) {
          ++read_errors;
          continue;
        }
        if ((*s)->epoch < last) ++epoch_regressions;
        last = (*s)->epoch;
      }
    });
  }
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      auto store = NewValkeyLedgerStore(t == 0 ? client_ : other_client);
      std::mt19937 rng(777 + t);
      for (int w = 0; w < 200; ++w) {
        const std::string n = "n" + std::to_string(1 + rng() % kNodes);
        const std::string uid = "p" + std::to_string(rng() % 40);
        switch (rng() % 4) {
          case 0: (void)store->Reserve(Req(n, MakeEntry(uid, {0}, kGi))); break;
          case 1: (void)store->Release(n, uid); break;
          case 2: (void)store->PushUsage(n, {{0, static_cast<int64_t>(rng() % 8) * kGi}}); break;
          default: (void)store->SetEntryState(n, uid, ledger::EntryState::kBound); break;
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(read_errors.load(), 0);
  EXPECT_EQ(epoch_regressions.load(), 0);
  for (auto& r : readers) {
    RefreshAndCompare(*r);
    EXPECT_GT(r->SnapshotReloads().incremental, 0u);
  }
}

// A snapshot a caller holds never changes: the refresh that follows a write
// then works on a copy (without holders it may change the cached one).
TEST_F(ValkeyRefreshTest, ASnapshotHeldByACallerNeverChanges) {
  Nodes(6);
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("a", {0}, kGi))).ok());
  auto held = store_->Snapshot();
  ASSERT_TRUE(held.ok());
  const ledger::Snapshot before = (*held)->Clone();  // a deep copy (without the index)
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("b", {1}, kGi))).ok());
  ASSERT_TRUE(store_->RemoveNode("n2").ok());
  Capacity("n7", {{0, kGi, ""}});
  EXPECT_EQ(RefreshAndCompare(*store_), 'i');
  ExpectSameLedger(**held, before);
  EXPECT_EQ((*held)->Find("n1")->entries.size(), 1u);
  ASSERT_NE((*held)->Find("n2"), nullptr);
  EXPECT_EQ((*held)->Find("n7"), nullptr);
  // Not held any more: the next refreshes may reuse the cached snapshot.
  held = Result<ledger::SnapshotPtr>(ledger::SnapshotPtr());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->PushUsage("n3", {{0, i * kGi}}).ok());
    EXPECT_EQ(RefreshAndCompare(*store_), 'i');
  }
}

}  // namespace
}  // namespace vramd::store

namespace vramd::store {
namespace {

// The epoch watch (StartEpochWatch / WatchedSnapshot): filter and prioritize
// skip the epoch read while subscribed, yet see this process's writes at
// once and other processes' writes as soon as their notification arrives.
class EpochWatchTest : public ValkeyStoreTest {
 protected:
  // Waits (bounded) until `done` holds.
  static bool Eventually(const std::function<bool()>& done, int ms = 5000) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  }
  static size_t EntriesOn(const ledger::SnapshotPtr& s, const std::string& node) {
    const ledger::Node* n = s->Find(node);
    return n == nullptr ? 0 : n->entries.size();
  }
  std::unique_ptr<LedgerStore> Watching() {
    auto store = NewValkeyLedgerStore(NewValkeyClient(opts_));
    store->StartEpochWatch();
    EXPECT_TRUE(Eventually([&] { return store->EpochWatchLive(); })) << "never subscribed";
    return store;
  }
};

TEST_F(EpochWatchTest, AnUnchangedLedgerIsServedWithoutEpochReads) {
  Capacity("n1", {{0, 80 * kGi, ""}});
  auto watching = Watching();
  ASSERT_TRUE(watching->WatchedSnapshot().ok());  // the first one confirms the cache
  const uint64_t before = watching->EpochChecks();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(watching->WatchedSnapshot().ok());
  EXPECT_EQ(watching->EpochChecks(), before) << "a call read the epoch although nothing changed";
  // Snapshot() (bind, the /v1 API) always reads it.
  ASSERT_TRUE(watching->Snapshot().ok());
  EXPECT_EQ(watching->EpochChecks(), before + 1);
}

// Issue 14: under agent reports the usage refresher brings its spare (the
// snapshot its previous refresh replaced) up to date instead of copying
// every node. Many rounds of reports mixed with every other kind of write,
// snapshots held across some of them (the spare is then not free, and a
// held snapshot must never change): after each round the watched snapshot
// equals a full load, and a held one equals its copy taken when it was
// received.
TEST_F(EpochWatchTest, TheUsageRefreshersSpareBroughtUpToDateEqualsAFullLoad) {
  constexpr int kNodes = 12, kRounds = 14;
  const char* seed_env = std::getenv("VRAMD_TEST_SEED");
  const unsigned seed = seed_env != nullptr ? static_cast<unsigned>(std::atoll(seed_env)) : 4242u;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const auto node = [&] { return "n" + std::to_string(1 + pick(kNodes)); };
  // Canonical UIDs (reports carry only those), the same in entries and reports.
  const auto canon = [](int k) {
    char b[40];
    std::snprintf(b, sizeof b, "0000%04d-0000-0000-0000-000000000000", k);
    return std::string(b);
  };
  const auto uid = [&] { return canon(pick(30)); };
  for (int i = 1; i <= kNodes; ++i) Capacity("n" + std::to_string(i), {{0, 40 * kGi, ""}, {1, 40 * kGi, ""}});
  for (int k = 0; k < 30; ++k) {
    ledger::Entry e = MakeEntry(canon(k), {k % 2}, (1 + k % 3) * kGi);
    e.state = ledger::EntryState::kBound;
    ASSERT_TRUE(store_->PutEntry("n" + std::to_string(1 + k % kNodes), e).ok());
  }
  auto watching = Watching();
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  const auto report = [&](int round) {
    ledger::UsageReport r;
    r.agent = "vramd-agent/0.2.0";
    for (int g = 0; g < 2; ++g) {
      ledger::GpuUsage gu{.index = g, .uuid = "GPU-" + std::to_string(g), .total = 40 * kGi, .used = 0, .outside_pods = 0, .pods = {}};
      for (int p = pick(3); p > 0; --p) gu.pods.push_back({uid(), (1 + pick(4)) * kGi});
      std::sort(gu.pods.begin(), gu.pods.end(), [](const auto& a, const auto& b) { return a.uid < b.uid; });
      gu.pods.erase(std::unique(gu.pods.begin(), gu.pods.end(),
                                [](const auto& a, const auto& b) { return a.uid == b.uid; }),
                    gu.pods.end());
      gu.outside_pods = round * (int64_t{1} << 20);
      gu.used = gu.outside_pods;
      for (const auto& p : gu.pods) gu.used += p.used;
      r.gpus.push_back(gu);
    }
    return r;
  };
  std::vector<std::pair<ledger::SnapshotPtr, ledger::Snapshot>> held;  // each with its copy
  for (int round = 1; round <= kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Mostly reports (usage-only changes: the refresher's), on a few nodes.
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(store_->PushReport(node(), report(round), false).ok());
    // Every third round another kind of write too (picked up by the next
    // watched call itself, in place when nothing holds the cache).
    if (round % 3 == 0) {
      const int kind = pick(4);
      if (kind == 0) {
        (void)store_->Reserve(Req(node(), MakeEntry(uid(), {pick(2)}, kGi)));
      } else if (kind == 1) {
        (void)store_->Release(node(), uid());
      } else if (kind == 2) {
        Capacity(node(), {{0, (30 + pick(10)) * kGi, ""}, {1, 40 * kGi, ""}});
      } else {
        (void)store_->SetEntryState(node(), uid(), ledger::EntryState::kTerminating);
      }
    }
    const uint64_t want_epoch = Epoch();
    ledger::SnapshotPtr got;
    ASSERT_TRUE(Eventually([&] {
      auto s = watching->WatchedSnapshot();
      if (s.ok() && (*s)->epoch == want_epoch) got = *s;
      return got != nullptr;
    })) << "the watched snapshot never reached epoch " << want_epoch;
    ExpectSameLedger(*got, *Fresh());
    ASSERT_FALSE(HasFailure());
    if (round % 4 == 1) held.emplace_back(got, got->Clone());
  }
  for (const auto& [snap, copy] : held) ExpectSameLedger(*snap, copy);
  const auto counts = watching->SnapshotReloads();
  std::printf("[ info ] %llu incremental refreshes: %llu on a copy, %llu on the spare brought up to date; "
              "%llu nodes re-read as usage only\n",
              static_cast<unsigned long long>(counts.incremental), static_cast<unsigned long long>(counts.copied),
              static_cast<unsigned long long>(counts.caught_up), static_cast<unsigned long long>(counts.usage_nodes));
  EXPECT_GT(counts.caught_up, 0u) << "the spare was never used: this test did not test it";
  EXPECT_GT(counts.usage_nodes, 0u) << "no node was re-read as usage only: that path went untested";
  EXPECT_GT(counts.copied, 0u) << "no refresh copied (the spare held or stale): that path went untested";
}

// Its own reserves and bound marks are seen at once, and cost no read at
// all: the cache takes them from the scripts' answers (the bind path's two
// writes; issue 17).
TEST_F(EpochWatchTest, ItsOwnWritesAreSeenAtOnceWithoutAnyRead) {
  Capacity("n1", {{0, 80 * kGi, ""}});
  auto watching = Watching();
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  const uint64_t epochs = watching->EpochChecks();
  const auto reloads = watching->SnapshotReloads();
  for (int i = 0; i < 20; ++i) {
    const std::string uid = "own-" + std::to_string(i);
    auto r = watching->Reserve(Req("n1", MakeEntry(uid, {0}, kGi)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    {
      auto s = watching->WatchedSnapshot();  // no waiting for the notification
      ASSERT_TRUE(s.ok());
      EXPECT_EQ(EntriesOn(*s, "n1"), static_cast<size_t>(i + 1));
    }  // let go, as a filter call does before the next bind's write
    ASSERT_TRUE(watching->FinishBind("n1", uid).ok());
    auto s = watching->WatchedSnapshot();
    ASSERT_TRUE(s.ok());
    for (const auto& e : (*s)->Find("n1")->entries) {
      if (e.pod_uid == uid) EXPECT_EQ(e.state, ledger::EntryState::kBound);
    }
  }
  EXPECT_EQ(watching->EpochChecks(), epochs);
  EXPECT_EQ(watching->SnapshotReloads().incremental, reloads.incremental);
  EXPECT_EQ(watching->SnapshotReloads().full, reloads.full);
  EXPECT_EQ(watching->SnapshotReloads().own_writes, reloads.own_writes + 40);
  ExpectSameLedger(*watching->WatchedSnapshot().value(), *Fresh());
}

// Issue 36: a batch of bound marks is laid on the watching replica's cache
// as the batch's own writes, one per entry, without any read.
TEST_F(EpochWatchTest, ABatchOfBoundMarksIsSeenAtOnceWithoutAnyRead) {
  for (const char* n : {"n1", "n2"}) Capacity(n, {{0, 80 * kGi, ""}});
  auto watching = Watching();
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  std::vector<LedgerStore::BoundMark> marks;
  for (int i = 0; i < 6; ++i) {
    const std::string uid = "batch-" + std::to_string(i), node = i % 2 ? "n2" : "n1";
    ASSERT_TRUE(watching->Reserve(Req(node, MakeEntry(uid, {0}, kGi))).ok());
    marks.push_back({node, uid});
  }
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  const uint64_t epochs = watching->EpochChecks();
  const auto reloads = watching->SnapshotReloads();
  std::vector<Status> results;
  ASSERT_TRUE(watching->FinishBinds(marks, &results).ok());
  for (const Status& r : results) EXPECT_TRUE(r.ok()) << r.ToString();
  auto s = watching->WatchedSnapshot();
  ASSERT_TRUE(s.ok());
  size_t bound = 0;
  for (const char* n : {"n1", "n2"}) {
    for (const ledger::Entry& e : (*s)->Find(n)->entries) bound += e.state == ledger::EntryState::kBound;
  }
  EXPECT_EQ(bound, 6u);
  EXPECT_EQ(watching->EpochChecks(), epochs) << "a call read the epoch";
  EXPECT_EQ(watching->SnapshotReloads().incremental, reloads.incremental) << "a call refreshed";
  EXPECT_EQ(watching->SnapshotReloads().own_writes, reloads.own_writes + 6);
  ExpectSameLedger(**s, *Fresh());
}

// Issue 36: a bind's reserve or bound mark that returns while a filter call
// holds the cached snapshot (laying it on would copy every node), or while
// the cache is behind another write of this process still being laid on, is
// kept and laid on in epoch order as soon as it can be: the next call reads
// nothing, a held snapshot never changes, and the result is what a load reads.
TEST_F(EpochWatchTest, OwnWritesMadeWhileACallHeldTheSnapshotAreLaidOnOnceItLetsGo) {
  for (const char* n : {"n1", "n2", "n3"}) Capacity(n, {{0, 80 * kGi, ""}, {1, 80 * kGi, ""}});
  auto watching = Watching();
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  const uint64_t epochs = watching->EpochChecks();
  const auto reloads = watching->SnapshotReloads();
  for (int i = 0; i < 10; ++i) {
    const std::string uid = "held-" + std::to_string(i), node = "n" + std::to_string(1 + i % 3);
    {
      auto held = watching->WatchedSnapshot();  // a filter call in progress
      ASSERT_TRUE(held.ok());
      const ledger::Snapshot copy = (*held)->Clone();
      auto r = watching->Reserve(Req(node, MakeEntry(uid, {i % 2}, kGi)));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(*r, ReserveOutcome::kReserved);
      // The bound mark follows a reserve that is not laid on yet.
      ASSERT_TRUE(watching->FinishBind(node, uid).ok());
      ExpectSameLedger(**held, copy);
    }
    auto s = watching->WatchedSnapshot();  // no waiting for the notification
    ASSERT_TRUE(s.ok());
    ExpectSameLedger(**s, *Fresh());
  }
  EXPECT_EQ(watching->EpochChecks(), epochs) << "a call read the epoch";
  EXPECT_EQ(watching->SnapshotReloads().incremental, reloads.incremental) << "a call refreshed";
  EXPECT_EQ(watching->SnapshotReloads().full, reloads.full);
  EXPECT_EQ(watching->SnapshotReloads().own_writes, reloads.own_writes + 20);
  // Another process's write between two of this one's: the kept write
  // cannot follow it, and the next call refreshes both.
  {
    auto held = watching->WatchedSnapshot();
    ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("other", {0}, kGi))).ok());
    ASSERT_TRUE(watching->Reserve(Req("n2", MakeEntry("mine", {0}, kGi))).ok());
  }
  EXPECT_TRUE(Eventually([&] {
    auto s = watching->WatchedSnapshot();
    return s.ok() && EntriesOn(*s, "n1") == 5;
  })) << "the other process's write never arrived";
  ExpectSameLedger(*watching->WatchedSnapshot().value(), *Fresh());
  EXPECT_EQ(watching->SnapshotReloads().own_writes, reloads.own_writes + 20);
}

// A cache known to be behind (this process wrote since it was confirmed)
// is refreshed at once: the refresh reads the epoch with the change log, so
// no lone epoch read comes first.
TEST_F(EpochWatchTest, ACacheBehindItsOwnWritesIsRefreshedWithoutALoneEpochRead) {
  // Four nodes: a change of one is a small refresh, not a reload of "more than half".
  for (const char* n : {"n1", "n2", "n3", "n4"}) Capacity(n, {{0, 80 * kGi, ""}});
  auto watching = Watching();
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  const uint64_t before = watching->EpochChecks();
  const uint64_t incremental = watching->SnapshotReloads().incremental;
  const uint64_t full = watching->SnapshotReloads().full;
  for (int i = 0; i < 10; ++i) {
    // PutEntry, as reconcile writes: a reserve or a bound mark would be
    // taken from its answer, with no refresh (OwnReservesAndBoundMarks...).
    ledger::Entry e = MakeEntry("own-" + std::to_string(i), {0}, kGi);
    e.state = ledger::EntryState::kBound;
    ASSERT_TRUE(watching->PutEntry("n1", e).ok());
    auto s = (i % 2 ? watching->Snapshot() : watching->WatchedSnapshot());
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(EntriesOn(*s, "n1"), static_cast<size_t>(i + 1));
  }
  EXPECT_EQ(watching->EpochChecks(), before);
  EXPECT_EQ(watching->SnapshotReloads().incremental, incremental + 10);
  // A write that changed nothing (a release of no entry) leaves the epoch:
  // the refresh finds it unchanged and keeps the cache as it is.
  auto cached = watching->WatchedSnapshot();
  ASSERT_TRUE(cached.ok());
  ASSERT_FALSE(*watching->Release("n1", "no-such-pod"));
  auto after = watching->Snapshot();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->get(), cached->get());
  EXPECT_EQ(watching->SnapshotReloads().incremental, incremental + 10);
  EXPECT_EQ(watching->SnapshotReloads().full, full);
}

TEST_F(EpochWatchTest, AnotherProcesssWritesArriveByNotification) {
  Capacity("n1", {{0, 80 * kGi, ""}});
  auto watching = Watching();
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  // store_ stands for another replica: its own client, no shared state.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("other-" + std::to_string(i), {0}, kGi))).ok());
    EXPECT_TRUE(Eventually([&] {
      auto s = watching->WatchedSnapshot();
      return s.ok() && EntriesOn(*s, "n1") == static_cast<size_t>(i + 1);
    })) << "write " << i << " of the other store never became visible";
  }
  // Once caught up, it is served from the cache again.
  const uint64_t before = watching->EpochChecks();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(watching->WatchedSnapshot().ok());
  EXPECT_EQ(watching->EpochChecks(), before);
}

TEST_F(EpochWatchTest, ALostSubscriptionFallsBackToEpochReadsAndRecovers) {
  // On a server of its own: killing the pub/sub connections of the shared
  // server would cut the watch of whichever test runs beside this one.
  ASSERT_NO_FATAL_FAILURE(UseOwnServer());
  Capacity("n1", {{0, 80 * kGi, ""}});
  auto watching = Watching();
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  // Kill every pub/sub connection on the server: this test's watch, the only one.
  Reply killed = Raw({"CLIENT", "KILL", "TYPE", "pubsub"});
  ASSERT_FALSE(killed.is_error()) << killed.str;
  ASSERT_EQ(killed.integer, 1) << "a pub/sub client other than this test's watch was killed";
  // Until it is subscribed again (and confirmed by one epoch read) every
  // call reads the epoch, so a write made meanwhile is never missed.
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("during", {0}, kGi))).ok());
  EXPECT_TRUE(Eventually([&] {
    auto s = watching->WatchedSnapshot();
    return s.ok() && EntriesOn(*s, "n1") == 1;
  }));
  ASSERT_TRUE(Eventually([&] { return watching->EpochWatchLive(); })) << "never subscribed again";
  ASSERT_TRUE(watching->WatchedSnapshot().ok());
  ASSERT_TRUE(store_->Reserve(Req("n1", MakeEntry("after", {0}, kGi))).ok());
  EXPECT_TRUE(Eventually([&] {
    auto s = watching->WatchedSnapshot();
    return s.ok() && EntriesOn(*s, "n1") == 2;
  }));
  const uint64_t before = watching->EpochChecks();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(watching->WatchedSnapshot().ok());
  EXPECT_EQ(watching->EpochChecks(), before) << "the new subscription is not used";
}

TEST_F(EpochWatchTest, WithoutAWatchEveryCallReadsTheEpoch) {
  Capacity("n1", {{0, 80 * kGi, ""}});
  EXPECT_FALSE(store_->EpochWatchLive());
  const uint64_t before = store_->EpochChecks();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(store_->WatchedSnapshot().ok());
  EXPECT_EQ(store_->EpochChecks(), before + 10);
}

}  // namespace
}  // namespace vramd::store
