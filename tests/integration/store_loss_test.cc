// Losing the store in the middle of a burst never double-books a GPU (issue
// 11, DESIGN.md §7). Three replicas (each its own client, store and the real
// extender bind path) bind pods concurrently against a redis-server this test
// starts on loopback; a FLUSHALL lands in the middle of each burst; a leader
// runs the real reconcile pass (node sync, seal, rebuild) against "the
// cluster": an in-memory KubeClient whose Bindings land with their
// annotations and whose watch delivers every change. After each of many
// rounds every GPU's sum from the bound pods' annotations is within its
// capacity, and the sealed ledger equals the annotations.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "unit/fakes/fake_kube_client.h"
#include "integration/test_servers.h"
#include "vramd/clock.h"
#include "vramd/extender/extender.h"
#include "vramd/metrics/registry.h"
#include "vramd/reconcile/node_sync.h"
#include "vramd/reconcile/pod_watch.h"
#include "vramd/reconcile/reconciler.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"
#include "vramd/store/valkey_store.h"

namespace vramd {
namespace {

using namespace vramd::itest;  // NOLINT: Process, FreePort, WaitFor...

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int kNodes = 3;
constexpr int kGpusPerNode = 2;
constexpr int64_t kCapacity = 10 * kGi;  // three 3Gi pods per GPU
constexpr int kPodsPerRound = 24;        // 18 fit
constexpr int kReplicas = 3;
constexpr int kRounds = 30;

// The cluster: pods bound by Bindings (annotations included), and a watch
// that delivers each change as the API server would.
class ClusterKube : public testing::FakeKubeClient {
 public:
  Status Bind(const std::string& ns, const std::string& name, const std::string& uid, const std::string& node,
              const std::map<std::string, std::string>& annotations) override {
    Status s = FakeKubeClient::Bind(ns, name, uid, node, annotations);
    if (s.ok()) {
      for (const kube::PodInfo& p : PodsNow()) {
        if (p.uid == uid) Push(kube::WatchEventType::kModified, p);
      }
    }
    return s;
  }
  Status WatchPods(const std::string&, const std::atomic<bool>& stop,
                   const std::function<void(const kube::WatchEvent<kube::PodInfo>&)>& on_event) override {
    while (!stop.load()) {
      std::deque<kube::WatchEvent<kube::PodInfo>> batch;
      {
        std::lock_guard<std::mutex> l(events_mu_);
        batch.swap(events_);
      }
      for (const auto& ev : batch) on_event(ev);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return Status::Ok();
  }
  void Create(const kube::PodInfo& p) {
    AddPodLocked(p);
    Push(kube::WatchEventType::kAdded, p);
  }
  void Delete(const kube::PodInfo& p) {
    if (DeletePod(p.ns, p.name)) Push(kube::WatchEventType::kDeleted, p);
  }

 private:
  void Push(kube::WatchEventType type, const kube::PodInfo& p) {
    std::lock_guard<std::mutex> l(events_mu_);
    events_.push_back({type, p});
  }
  std::mutex events_mu_;
  std::deque<kube::WatchEvent<kube::PodInfo>> events_;
};

kube::PodInfo PendingPod(int round, int i) {
  kube::PodInfo p;
  p.ns = "default";
  p.name = "r" + std::to_string(round) + "-p" + std::to_string(i);
  p.uid = "uid-" + p.name;
  p.phase = "Pending";
  p.spec.ns = p.ns;
  p.spec.name = p.name;
  p.spec.uid = p.uid;
  p.spec.containers.push_back(ledger::ContainerAmount{"3Gi", "3Gi", false});
  return p;
}

std::string NodeName(int i) { return "gpu-" + std::to_string(i); }

std::vector<int> ParseGpus(const std::string& s) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    out.push_back(std::stoi(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One replica: its own client, store (following the epoch channel, as vramd
// does) and extender.
struct Replica {
  std::shared_ptr<store::ValkeyClient> client;
  std::unique_ptr<store::LedgerStore> store;
  metrics::Registry registry;
  std::unique_ptr<extender::Extender> ext;
};

class StoreLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::err);  // thousands of refused binds and re-adds otherwise
    const std::string redis = FindInPath("redis-server");
    ASSERT_FALSE(redis.empty()) << "redis-server must be installed (scripts/install-deps.sh --test)";
    dir_ = std::filesystem::temp_directory_path() / ("vramd-store-loss-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    port_ = FreePort();
    // No automatic snapshots: the test takes them (SAVE) where it wants.
    argv_ = {redis, "--bind", "127.0.0.1", "--port", std::to_string(port_), "--save", "",
             "--appendonly", "no", "--dir", dir_.string()};
    ASSERT_TRUE(server_.Start(argv_, (dir_ / "redis.log").string()));
    admin_ = DirectClient(port_);
    ASSERT_TRUE(WaitFor([&] { return admin_->Command({"PING"}).ok(); }, milliseconds(10'000)))
        << Tail(server_.log());
  }
  // Kills the server (no save on the way down) and starts it again from its
  // last snapshot (dump.rdb in dir_), as a crash of a Valkey with periodic
  // snapshots leaves it: a new process holding an older copy.
  void RestartFromSnapshot() {
    server_.Stop(SIGKILL);
    ASSERT_TRUE(server_.Start(argv_, (dir_ / "redis.log").string()));
    ASSERT_TRUE(WaitFor(
        [&] {
          auto r = admin_->Command({"PING"});
          return r.ok() && !r->is_error();
        },
        milliseconds(10'000)))
        << Tail(server_.log());
  }
  void TearDown() override {
    spdlog::set_level(spdlog::level::info);
    server_.Stop(SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::shared_ptr<store::ValkeyClient> Client() {
    store::ValkeyOptions o;
    o.url = "redis://127.0.0.1:" + std::to_string(port_);
    o.pool_size = 4;
    o.command_timeout = milliseconds(2000);
    o.backoff_initial = milliseconds(5);
    o.backoff_max = milliseconds(20);
    return store::NewValkeyClient(o);
  }

  std::filesystem::path dir_;
  int port_ = 0;
  std::vector<std::string> argv_;
  Process server_;
  std::shared_ptr<store::ValkeyClient> admin_;
};

store::ReserveRequest SealedReq(const std::string& node, const std::string& uid) {
  store::ReserveRequest r;
  r.node = node;
  r.entry.pod_uid = uid;
  r.entry.ns = "default";
  r.entry.name = uid;
  r.entry.gpus = {0};
  r.entry.per_gpu = kGi;
  r.require_sealed = true;
  return r;
}

TEST_F(StoreLossTest, ReservationsNeedTheSealAndTheSealNeedsEveryRequiredEntry) {
  auto st = store::NewValkeyLedgerStore(Client());
  auto other = store::NewValkeyLedgerStore(Client());
  ASSERT_TRUE(st->SetCapacity("n1", {{0, 8 * kGi, ""}}).ok());
  EXPECT_FALSE(st->ReadSeal()->sealed) << "a new store is not sealed";
  EXPECT_FALSE((*other->Snapshot())->sealed);
  Result<store::ReserveOutcome> r = st->Reserve(SealedReq("n1", "u1"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("being rebuilt"), std::string::npos) << r.status().message();
  store::ReserveRequest unsealed_ok = SealedReq("n1", "u0");
  unsealed_ok.require_sealed = false;  // standalone mode
  ASSERT_TRUE(st->Reserve(unsealed_ok).ok());

  Result<store::SealState> begun = st->BeginRebuild("leader-1");
  ASSERT_TRUE(begun.ok());
  ASSERT_FALSE(begun->rebuild_token.empty());
  EXPECT_GT(begun->rebuild_since_ms, 0);
  EXPECT_EQ(other->BeginRebuild("leader-2")->rebuild_token, begun->rebuild_token) << "one rebuild at a time";
  Status missing = st->Seal(begun->rebuild_token, {{"n1", "u0"}, {"n1", "u-gone"}});
  EXPECT_EQ(missing.code(), Code::kUnavailable);
  EXPECT_NE(missing.message().find("u-gone"), std::string::npos) << missing.message();
  EXPECT_EQ(st->Seal("other-token", {{"n1", "u0"}}).code(), Code::kUnavailable);
  EXPECT_FALSE(st->ReadSeal()->sealed);
  ASSERT_TRUE(st->Seal(begun->rebuild_token, {{"n1", "u0"}}).ok());
  EXPECT_TRUE(st->ReadSeal()->sealed);
  EXPECT_TRUE((*other->Snapshot())->sealed) << "sealing moves the epoch: every cache sees it";
  EXPECT_TRUE(other->Reserve(SealedReq("n1", "u1")).ok());

  // The store is lost again: unsealed, and every cache sees it.
  ASSERT_TRUE(admin_->Command({"FLUSHALL"}).ok());
  ASSERT_TRUE(st->SetCapacity("n1", {{0, 8 * kGi, ""}}).ok());
  EXPECT_FALSE((*other->Snapshot())->sealed);
  EXPECT_EQ(other->Reserve(SealedReq("n1", "u2")).status().code(), Code::kUnavailable);
}

TEST_F(StoreLossTest, ASecondLossDuringTheRebuildVoidsItsToken) {
  auto st = store::NewValkeyLedgerStore(Client());
  Result<store::SealState> begun = st->BeginRebuild("leader-1");
  ASSERT_TRUE(begun.ok());
  ASSERT_TRUE(admin_->Command({"FLUSHALL"}).ok());
  Status s = st->Seal(begun->rebuild_token, {});
  EXPECT_EQ(s.code(), Code::kUnavailable) << "sealed a ledger lost after its rebuild began";
  EXPECT_FALSE(st->ReadSeal()->sealed);
}

// A failover to a replica that missed writes: its epoch is below what the
// replicas have read. The first reservation or seal check that sees it
// unseals the ledger and moves the epoch past every cached value.
TEST_F(StoreLossTest, AnEpochThatWentBackUnsealsTheLedger) {
  auto client = Client();
  auto st = store::NewValkeyLedgerStore(client);
  ASSERT_TRUE(st->SetCapacity("n1", {{0, 8 * kGi, ""}}).ok());
  ASSERT_TRUE(st->Seal(st->BeginRebuild("l")->rebuild_token, {}).ok());
  ASSERT_TRUE(st->Reserve(SealedReq("n1", "u1")).ok());
  Result<ledger::SnapshotPtr> before = st->Snapshot();
  ASSERT_TRUE(before.ok());
  const uint64_t seen = (*before)->epoch;
  // What the promoted replica holds: the seal, an older epoch, no entry.
  const std::string epoch_key = client->prefix() + ":epoch";
  ASSERT_TRUE(admin_->Command({"SET", epoch_key, std::to_string(seen - 3)}).ok());
  ASSERT_TRUE(admin_->Command({"HDEL", client->prefix() + ":{n1}:alloc", "u1"}).ok());
  Result<store::ReserveOutcome> r = st->Reserve(SealedReq("n1", "u2"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("epoch went back"), std::string::npos) << r.status().message();
  EXPECT_FALSE(st->ReadSeal()->sealed);
  Result<ledger::SnapshotPtr> after = st->Snapshot();
  ASSERT_TRUE(after.ok());
  EXPECT_GT((*after)->epoch, seen);
  EXPECT_FALSE((*after)->sealed);
}

// The cluster's GPU nodes: kNodes x kGpusPerNode GPUs of kCapacity.
void AddGpuNodes(ClusterKube* kube) {
  for (int n = 0; n < kNodes; ++n) {
    kube::NodeInfo node;
    node.name = NodeName(n);
    node.uid = "uid-" + node.name;
    node.annotations["vramd.io/capacity"] = "10Gi,10Gi";
    kube->nodes.push_back(node);
  }
}

std::unique_ptr<Replica> NewReplica(std::shared_ptr<store::ValkeyClient> client, kube::KubeClient* kube,
                                    const vramd::Clock* clock) {
  auto r = std::make_unique<Replica>();
  r->client = std::move(client);
  r->store = store::NewValkeyLedgerStore(r->client);
  r->store->StartEpochWatch();
  extender::Options eo;
  eo.bind_in_flight_ttl_ms = 5000;
  r->ext = std::make_unique<extender::Extender>(eo, r->store.get(), kube, clock, &r->registry);
  return r;
}

struct BurstCounts {
  std::atomic<int> bound{0};        // binds that succeeded
  std::atomic<int> refused{0};      // refused while the ledger was being rebuilt
  std::atomic<int> after_event{0};  // bound after `event` was set
  std::atomic<bool> event{false};   // set by the test (a flush, a snapshot...)
  // >= 0: binders wait once this many binds succeeded until `event` is set,
  // so that some binds surely come after it (a slow SAVE under load).
  int hold_at = -1;
};

// Binds `pods` through the replicas concurrently, as kube-scheduler would:
// each pod tries the nodes in turn; an error from the extender (the ledger
// being rebuilt) is retried later, for up to 20 s; a pod every node refuses
// for room is left unschedulable.
void Burst(const std::vector<std::unique_ptr<Replica>>& replicas, const std::vector<kube::PodInfo>& pods,
           BurstCounts* c) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> binders;
  for (size_t b = 0; b < replicas.size(); ++b) {
    binders.emplace_back([&, b] {
      extender::Extender& ext = *replicas[b]->ext;
      for (size_t i = next.fetch_add(1); i < pods.size(); i = next.fetch_add(1)) {
        const kube::PodInfo& p = pods[i];
        if (c->hold_at >= 0) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (c->bound.load() >= c->hold_at && !c->event.load() && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
          }
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        bool done = false;
        while (!done && std::chrono::steady_clock::now() < deadline) {
          bool retry = false;
          for (int k = 0; k < kNodes && !done; ++k) {
            const std::string node = NodeName(static_cast<int>((i + k) % kNodes));
            const std::string body = "{\"PodName\":\"" + p.name + "\",\"PodNamespace\":\"" + p.ns +
                                     "\",\"PodUID\":\"" + p.uid + "\",\"Node\":\"" + node + "\"}";
            extender::Response resp = ext.Bind(body);
            if (resp.body == "{\"Error\":\"\"}") {
              done = true;
              c->bound.fetch_add(1);
              if (c->event.load()) c->after_event.fetch_add(1);
            } else if (resp.body.find("being rebuilt") != std::string::npos ||
                       resp.body.find("not in the ledger") != std::string::npos) {
              c->refused.fetch_add(1);
              retry = true;
              break;
            }
          }
          if (!done && !retry) break;  // every node said it does not fit: unschedulable
          if (!done) std::this_thread::sleep_for(milliseconds(20));
        }
        // kube-scheduler binds a few hundred pods a second at most.
        std::this_thread::sleep_for(milliseconds(4));
      }
    });
  }
  for (auto& t : binders) t.join();
}

// Every GPU's sum from the bound pods' annotations (what a kubelet acts on)
// is within its capacity. Returns the bound pods: uid -> (node, GPUs).
std::map<std::string, std::pair<std::string, std::vector<int>>> ExpectNoGpuOverCommitted(ClusterKube& kube) {
  std::map<std::pair<std::string, int>, int64_t> promised;
  std::map<std::string, std::pair<std::string, std::vector<int>>> by_uid;
  for (const kube::PodInfo& p : kube.PodsNow()) {
    if (p.node_name.empty()) continue;
    const std::vector<int> gpus = ParseGpus(p.annotations.at("vramd.io/gpus"));
    const int64_t per = std::stoll(p.annotations.at("vramd.io/vram-per-gpu"));
    for (int g : gpus) promised[{p.node_name, g}] += per;
    by_uid[p.uid] = {p.node_name, gpus};
  }
  for (const auto& [gpu, sum] : promised) {
    EXPECT_LE(sum, kCapacity) << "GPU " << gpu.second << " of " << gpu.first << " double-booked: " << sum / kGi
                              << "Gi promised";
  }
  return by_uid;
}

// The ledger holds exactly `by_uid`, on their GPUs (the last binds' FinishBind
// may still land: read until it settles).
bool LedgerEquals(store::LedgerStore* st,
                  const std::map<std::string, std::pair<std::string, std::vector<int>>>& by_uid) {
  return WaitFor(
      [&] {
        Result<ledger::SnapshotPtr> snap = st->Snapshot();
        if (!snap.ok()) return false;
        size_t entries = 0;
        for (const auto& [name, node] : (*snap)->nodes) {
          for (const ledger::Entry& e : node.entries) {
            ++entries;
            auto it = by_uid.find(e.pod_uid);
            if (it == by_uid.end() || it->second.first != name || it->second.second != e.gpus) return false;
          }
        }
        return entries == by_uid.size();
      },
      milliseconds(10'000));
}

// The pods end; the ledger empties (the watch reports them deleted).
bool DeleteAndDrain(ClusterKube& kube, const std::vector<kube::PodInfo>& pods, store::LedgerStore* st) {
  for (const kube::PodInfo& p : pods) kube.Delete(p);
  return WaitFor(
      [&] {
        Result<ledger::SnapshotPtr> snap = st->Snapshot();
        if (!snap.ok()) return false;
        for (const auto& [name, node] : (*snap)->nodes) {
          if (!node.entries.empty()) return false;
        }
        return true;
      },
      milliseconds(10'000));
}

// The leader: the real reconcile pass with its own pod watch, run in a loop
// as its thread would, from Start() to its destruction (a restarted leader is
// a new Leader).
struct Leader {
  Leader(const config::Config& cfg, std::shared_ptr<store::ValkeyClient> client, ClusterKube* kube)
      : store(store::NewValkeyLedgerStore(std::move(client))),
        watcher(kube, nullptr, &registry),
        node_sync(cfg, store.get(), kube, &registry),
        rec(cfg, store.get(), kube, nullptr, &watcher, &node_sync, &clock, &registry) {}
  ~Leader() {
    stop.store(true);
    if (thread.joinable()) thread.join();
    watcher.Stop();
  }
  bool Start() {
    watcher.Start();
    if (!WaitFor([&] { return watcher.Synced(); }, milliseconds(10'000))) return false;
    thread = std::thread([this] {
      while (!stop.load()) {
        (void)rec.RunOnce();
        std::this_thread::sleep_for(milliseconds(15));
      }
    });
    return true;
  }
  bool Sealed() {
    Result<store::SealState> s = store->ReadSeal();
    return s.ok() && s->sealed;
  }
  metrics::Registry registry;
  std::unique_ptr<store::LedgerStore> store;
  reconcile::PodWatcher watcher;
  reconcile::NodeSync node_sync;
  SystemClock clock;
  reconcile::Reconciler rec;
  std::atomic<bool> stop{false};
  std::thread thread;
};

TEST_F(StoreLossTest, FlushMidBurstNeverDoubleBooksAGpuOverManyRounds) {
  ClusterKube kube;
  AddGpuNodes(&kube);
  config::Config cfg;  // no reserve: capacity 10Gi per GPU
  cfg.rebuild_quiet_ms = 300;  // binds here take milliseconds; the default covers 3 API timeouts
  cfg.reservation_grace_ms = 1000;
  Leader leader(cfg, Client(), &kube);
  ASSERT_TRUE(leader.Start());
  SystemClock clock;
  std::vector<std::unique_ptr<Replica>> replicas;
  for (int i = 0; i < kReplicas; ++i) replicas.push_back(NewReplica(Client(), &kube, &clock));

  std::mt19937 rng(20261124);
  int total_bound = 0, refused_rebuilding = 0, bound_after_flush = 0;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ASSERT_TRUE(WaitFor([&] { return leader.Sealed(); }, milliseconds(15'000)))
        << "the ledger was never sealed before the burst";
    std::vector<kube::PodInfo> pods;
    for (int i = 0; i < kPodsPerRound; ++i) {
      pods.push_back(PendingPod(round, i));
      kube.Create(pods.back());
    }
    // The flush lands after a random number of successful binds.
    const int flush_after = std::uniform_int_distribution<int>(2, 14)(rng);
    BurstCounts c;
    std::thread flusher([&] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (c.bound.load() < flush_after && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      auto r = admin_->Command({"FLUSHALL"});
      EXPECT_TRUE(r.ok() && !r->is_error()) << "FLUSHALL failed";
      c.event.store(true);
    });
    Burst(replicas, pods, &c);
    flusher.join();
    ASSERT_TRUE(WaitFor([&] { return leader.Sealed(); }, milliseconds(15'000)))
        << "the ledger was never sealed again after the flush";
    const auto by_uid = ExpectNoGpuOverCommitted(kube);
    const int bound_now = static_cast<int>(by_uid.size());
    EXPECT_LE(bound_now, kNodes * kGpusPerNode * 3);
    EXPECT_GE(bound_now, kNodes * kGpusPerNode * 3 - 2) << "the burst must fill the GPUs, not fail";
    EXPECT_TRUE(LedgerEquals(leader.store.get(), by_uid)) << "the ledger does not equal the bound pods' annotations";
    total_bound += bound_now;
    refused_rebuilding += c.refused.load();
    bound_after_flush += c.after_event.load();
    ASSERT_TRUE(DeleteAndDrain(kube, pods, leader.store.get()));
    if (HasFatalFailure() || HasFailure()) break;
  }
  std::printf("store-loss: %d rounds, %d pods bound, %d bound after the flush (on the rebuilt ledger), %d binds "
              "refused while the ledger was unsealed\n",
              kRounds, total_bound, bound_after_flush, refused_rebuilding);
  EXPECT_GT(refused_rebuilding, 0) << "no bind ever met the rebuild: the flush did not land mid-burst";
  EXPECT_GT(bound_after_flush, 0) << "no bind happened after a flush: the rebuilt ledger was never used";
}

// Issue 30: the store comes back from an older snapshot (a crash of a Valkey
// with periodic snapshots, a failover to a lagging replica) and every vramd
// replica restarts with it (a node failure, a rolling upgrade): the seal is
// there, some entries of bound pods are not, the epoch is older, and no
// replica remembers a higher one. The snapshot is taken at a random point of
// a burst that then fills every GPU; after the restart, new replicas face a
// second burst at once, and the leader is elected only up to 1.5 s later (the
// old leader's lease has to run out first). Nothing of the second burst may
// be bound: the cluster is full.
TEST_F(StoreLossTest, RestoreFromAnOlderSnapshotWithReplicasRestartedNeverDoubleBooks) {
  constexpr int kRestoreRounds = 12;
  constexpr int kSecondBurst = 8;
  ClusterKube kube;
  AddGpuNodes(&kube);
  config::Config cfg;
  cfg.rebuild_quiet_ms = 300;
  cfg.reservation_grace_ms = 1000;
  SystemClock clock;
  std::mt19937 rng(20261127);
  int refused_total = 0, bound_onto_total = 0, snapshot_at_min = kPodsPerRound, snapshot_at_max = 0;
  for (int round = 0; round < kRestoreRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto leader = std::make_unique<Leader>(cfg, Client(), &kube);
    ASSERT_TRUE(leader->Start());
    std::vector<std::unique_ptr<Replica>> replicas;
    for (int i = 0; i < kReplicas; ++i) replicas.push_back(NewReplica(Client(), &kube, &clock));
    ASSERT_TRUE(WaitFor([&] { return leader->Sealed(); }, milliseconds(15'000)));
    std::vector<kube::PodInfo> pods;
    for (int i = 0; i < kPodsPerRound; ++i) {
      pods.push_back(PendingPod(round, i));
      kube.Create(pods.back());
    }
    // The snapshot is taken after a random number of successful binds.
    const int snapshot_after = std::uniform_int_distribution<int>(1, 14)(rng);  // + 3 in flight < 18 slots
    BurstCounts c;
    c.hold_at = snapshot_after;  // the binds after the snapshot wait for it
    std::atomic<int> snapshot_at{-1};
    std::thread saver([&] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (c.bound.load() < snapshot_after && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      auto r = admin_->Command({"SAVE"});
      EXPECT_TRUE(r.ok() && !r->is_error()) << "SAVE failed";
      snapshot_at.store(c.bound.load());
      c.event.store(true);
    });
    Burst(replicas, pods, &c);
    saver.join();
    const auto full = ExpectNoGpuOverCommitted(kube);
    ASSERT_GE(static_cast<int>(full.size()), kNodes * kGpusPerNode * 3 - 2) << "the first burst must fill the GPUs";
    ASSERT_GT(c.after_event.load(), 0) << "nothing was bound after the snapshot: it would not be older";
    snapshot_at_min = std::min(snapshot_at_min, snapshot_at.load());
    snapshot_at_max = std::max(snapshot_at_max, snapshot_at.load());

    // Everything restarts: the replicas and the leader (new processes, no
    // memory), and the store from the snapshot.
    replicas.clear();
    leader.reset();
    RestartFromSnapshot();
    for (int i = 0; i < kReplicas; ++i) replicas.push_back(NewReplica(Client(), &kube, &clock));
    std::vector<kube::PodInfo> more;
    for (int i = 0; i < kSecondBurst; ++i) {
      more.push_back(PendingPod(round, 100 + i));
      kube.Create(more.back());
    }
    const int election_ms = std::uniform_int_distribution<int>(0, 1500)(rng);
    std::thread elect([&] {
      std::this_thread::sleep_for(milliseconds(election_ms));
      leader = std::make_unique<Leader>(cfg, Client(), &kube);
      EXPECT_TRUE(leader->Start());
    });
    BurstCounts second;
    Burst(replicas, more, &second);
    elect.join();
    ASSERT_TRUE(WaitFor([&] { return leader->Sealed(); }, milliseconds(15'000)))
        << "the ledger was never sealed again after the restore";
    EXPECT_EQ(second.bound.load(), 0) << "pods bound onto full GPUs from the restored, stale ledger";
    const auto after = ExpectNoGpuOverCommitted(kube);
    EXPECT_EQ(after.size(), full.size());
    EXPECT_TRUE(LedgerEquals(leader->store.get(), after)) << "the rebuilt ledger does not equal the bound pods";
    refused_total += second.refused.load();
    bound_onto_total += second.bound.load();

    pods.insert(pods.end(), more.begin(), more.end());
    ASSERT_TRUE(DeleteAndDrain(kube, pods, leader->store.get()));
    replicas.clear();
    leader.reset();
    ASSERT_TRUE(admin_->Command({"FLUSHALL"}).ok());  // the next round starts from a new store
    if (HasFatalFailure() || HasFailure()) break;
  }
  std::printf("restore: %d rounds, snapshot taken after %d-%d of %d binds, %d binds refused while the restored "
              "ledger was unsealed, %d of the later pods bound onto full GPUs\n",
              kRestoreRounds, snapshot_at_min, snapshot_at_max, kPodsPerRound, refused_total, bound_onto_total);
}

}  // namespace
}  // namespace vramd
