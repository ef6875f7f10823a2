// Issue 14: filter's latency while node agents report. A ledger of 5,000
// nodes x 8 GPUs and 50,000 entries in a real Valkey/Redis; one "replica"
// (a store with the epoch watch, as vramd runs) answers filter calls over
// every node at a steady rate, and in alternate phases also takes agent
// reports at --rate per second (decoded from their JSON with
// http::DecodeUsageReport and written with PushReport through the same
// store, as the route does: the worst case, one replica taking every report).
// Prints p50 / p99 / max of filter per phase.
//
//   usage_bench --valkey redis://127.0.0.1:PORT [--nodes 5000] [--gpus 8]
//               [--entries 50000] [--rate 1000] [--filter-rate 200]
//               [--seconds 10] [--rounds 2] [--writers 4] [--remote 0|1]
//
// --remote 1: the reports go through another process (another replica
// takes them); the measuring one only follows their notifications.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "vramd/http/routes.h"
#include "vramd/ledger/placement.h"
#include "vramd/store/valkey_client.h"
#include "vramd/store/valkey_store.h"

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr int64_t kGi = int64_t{1} << 30;

struct Options {
  std::string valkey = "redis://127.0.0.1:6379";
  int nodes = 5000, gpus = 8, entries = 50000;
  int rate = 1000, filter_rate = 200, seconds = 10, rounds = 2, writers = 4, remote = 0;
};

std::string NodeName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gpu-node-%05d", i);
  return buf;
}
std::string Uid(long k) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "5c1e0b7a-0000-4000-8000-%012ld", k);
  return buf;
}

vramd::store::ValkeyOptions ClientOptions(const Options& o, const std::string& prefix) {
  vramd::store::ValkeyOptions v;
  v.url = o.valkey;
  v.key_prefix = prefix;
  v.command_timeout = std::chrono::milliseconds(30'000);
  return v;
}

int Populate(const Options& o, const std::string& prefix) {
  auto store = vramd::store::NewValkeyLedgerStore(vramd::store::NewValkeyClient(ClientOptions(o, prefix)));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<vramd::store::GpuCapacity> gpus;
      for (int g = 0; g < o.gpus; ++g) gpus.push_back({g, 80 * kGi, ""});
      for (int n = t; n < o.nodes; n += 8) {
        if (!store->SetCapacity(NodeName(n), gpus).ok()) failures.fetch_add(1);
      }
      for (int k = t; k < o.entries; k += 8) {
        vramd::ledger::Entry e;
        e.pod_uid = Uid(k);
        e.ns = "team-" + std::to_string(k % 40);
        e.name = "inference-" + std::to_string(k);
        e.gpus = {k % o.gpus};
        e.per_gpu = 8 * kGi;
        e.state = vramd::ledger::EntryState::kBound;
        if (!store->PutEntry(NodeName(k % o.nodes), e).ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  return failures.load() == 0 ? 0 : 1;
}

// The agent's report of node n: every GPU with its total, used, UUID and
// outside-pods bytes; each entry's pod on its GPU, and one zombie on GPU 0.
std::string ReportBody(const Options& o, int n, int round) {
  std::string body = R"({"version":2,"agent":"vramd-agent/0.2.0","source":"nvml","gpus":[)";
  for (int g = 0; g < o.gpus; ++g) {
    std::string pods;
    int64_t used = 100 << 20;
    for (long k = n; k < o.entries; k += o.nodes) {
      if (k % o.gpus != g) continue;
      const int64_t b = (6 + (k + round) % 3) * kGi;
      used += b;
      pods += (pods.empty() ? "" : ",") + std::string(R"({"uid":")") + Uid(k) + R"(","used_bytes":)" +
              std::to_string(b) + "}";
    }
    if (g == 0) {
      pods += (pods.empty() ? "" : ",") + std::string(R"({"uid":")") + Uid(900000000000L + n) +
              R"(","used_bytes":)" + std::to_string(kGi) + "}";
      used += kGi;
    }
    char head[256];
    std::snprintf(head, sizeof head,
                  R"({"index":%d,"uuid":"GPU-%08d-%04d","name":"NVIDIA H100 80GB HBM3","total_bytes":%lld,)"
                  R"("used_bytes":%lld,"outside_pods_bytes":%d,"mig":false,"pods":[)",
                  g, n, g, static_cast<long long>(80 * kGi), static_cast<long long>(used), 100 << 20);
    body += (g ? "," : "") + std::string(head) + pods + "]}";
  }
  return body + "]}";
}

struct Phase {
  int rate = 0;
  std::vector<double> us;
  long reports = 0, refused = 0;
  double seconds = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    int* num = a == "--nodes" ? &o.nodes : a == "--gpus" ? &o.gpus : a == "--entries" ? &o.entries
             : a == "--rate" ? &o.rate : a == "--filter-rate" ? &o.filter_rate : a == "--seconds" ? &o.seconds
             : a == "--rounds" ? &o.rounds : a == "--writers" ? &o.writers : a == "--remote" ? &o.remote : nullptr;
    if (a == "--valkey") o.valkey = v;
    else if (num != nullptr) *num = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "usage: usage_bench --valkey URL [--nodes N] [--gpus G] [--entries E] [--rate R] "
                           "[--filter-rate F] [--seconds S] [--rounds K] [--writers W]\n");
      return 2;
    }
  }
  const std::string prefix = "vramd-usage-" + std::to_string(getpid());
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) _exit(Populate(o, prefix));
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    std::fprintf(stderr, "usage_bench: writing the ledger failed\n");
    return 1;
  }
  std::vector<std::string> bodies[2];
  for (int r = 0; r < 2; ++r) {
    for (int n = 0; n < o.nodes; ++n) bodies[r].push_back(ReportBody(o, n, r));
  }
  double decode_us = 0;
  {
    const auto d0 = SteadyClock::now();
    for (const std::string& b : bodies[0]) {
      if (!vramd::http::DecodeUsageReport(b).ok()) return 1;
    }
    decode_us = std::chrono::duration<double, std::micro>(SteadyClock::now() - d0).count() / o.nodes;
  }
  auto client = vramd::store::NewValkeyClient(ClientOptions(o, prefix));
  auto store = vramd::store::NewValkeyLedgerStore(client);
  store->StartEpochWatch();
  if (!store->Snapshot().ok()) return 1;
  std::vector<std::string> names;
  for (int n = 0; n < o.nodes; ++n) names.push_back(NodeName(n));
  std::vector<std::string_view> views(names.begin(), names.end());
  vramd::ledger::VramRequest req;
  req.total = req.per_gpu = req.peak_per_gpu = 16 * kGi;
  vramd::ledger::Policy policy;

  std::vector<Phase> phases;
  for (int r = 0; r < o.rounds; ++r) {
    for (int rate : {0, o.rate}) {
      Phase ph;
      ph.rate = rate;
      std::atomic<bool> stop{false};
      std::atomic<long> reports{0}, refused{0};
      std::vector<std::thread> writers;
      pid_t remote = -1;
      if (rate > 0 && o.remote) {
        // Another replica: a child process with its own store takes the reports.
        remote = fork();
        if (remote < 0) return 1;
        if (remote == 0) {
          auto own = vramd::store::NewValkeyLedgerStore(vramd::store::NewValkeyClient(ClientOptions(o, prefix)));
          std::vector<std::thread> ws;
          const auto stop_at = SteadyClock::now() + std::chrono::seconds(o.seconds);
          std::atomic<long> bad{0};
          for (int w = 0; w < o.writers; ++w) {
            ws.emplace_back([&, w] {
              const auto period = std::chrono::nanoseconds(1'000'000'000LL * o.writers / rate);
              auto next = SteadyClock::now();
              for (long i = w; SteadyClock::now() < stop_at; i += o.writers) {
                const int n = static_cast<int>(i % o.nodes);
                auto rep = vramd::http::DecodeUsageReport(bodies[(i / o.nodes) % 2][n]);
                if (!rep.ok() || !own->PushReport(names[n], *rep, false).ok()) bad.fetch_add(1);
                next += period;
                std::this_thread::sleep_until(next);
              }
            });
          }
          for (auto& t : ws) t.join();
          _exit(bad.load() == 0 ? 0 : 1);
        }
      }
      if (rate > 0 && !o.remote) {
        for (int w = 0; w < o.writers; ++w) {
          writers.emplace_back([&, w] {
            const auto period = std::chrono::nanoseconds(1'000'000'000LL * o.writers / rate);
            auto next = SteadyClock::now();
            long i = w;
            while (!stop.load()) {
              const int n = static_cast<int>(i % o.nodes);
              const std::string& body = bodies[(i / o.nodes) % 2][n];
              auto rep = vramd::http::DecodeUsageReport(body);
              if (!rep.ok() || !store->PushReport(names[n], *rep, false).ok()) refused.fetch_add(1);
              reports.fetch_add(1);
              i += o.writers;
              next += period;
              std::this_thread::sleep_until(next);
            }
          });
        }
      }
      const auto t0 = SteadyClock::now();
      const auto end = t0 + std::chrono::seconds(o.seconds);
      const auto fperiod = std::chrono::nanoseconds(1'000'000'000LL / o.filter_rate);
      auto next = t0;
      while (SteadyClock::now() < end) {
        const auto c0 = SteadyClock::now();
        auto snap = store->WatchedSnapshot();
        if (!snap.ok()) return 1;
        const int64_t now_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        auto fr = vramd::ledger::Filter(**snap, views, req, policy, now_ms);
        ph.us.push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - c0).count());
        next += fperiod;
        std::this_thread::sleep_until(next);
      }
      stop = true;
      for (auto& t : writers) t.join();
      if (remote > 0) {
        int st = 0;
        waitpid(remote, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ph.refused = -1;
        reports.store(static_cast<long>(rate) * o.seconds);
      }
      ph.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
      ph.reports = reports.load();
      if (ph.refused == 0) ph.refused = refused.load();
      std::sort(ph.us.begin(), ph.us.end());
      phases.push_back(std::move(ph));
    }
  }
  std::printf("usage_bench: %d nodes x %d GPUs, %d entries; filter over every node at %d/s; report body %zu bytes, "
              "decoded in %.1f us; reports taken by %s\n",
              o.nodes, o.gpus, o.entries, o.filter_rate, bodies[0][0].size(), decode_us,
              o.remote ? "another process" : "the measuring process");
  for (const Phase& p : phases) {
    auto pct = [&](double q) { return p.us[std::min(p.us.size() - 1, static_cast<size_t>(q * p.us.size()))]; };
    std::printf("reports %4d/s (done %.0f/s, refused %ld): filter calls %zu, p50 %.0f us, p99 %.0f us, max %.0f us\n",
                p.rate, p.reports / p.seconds, p.refused, p.us.size(), pct(0.5), pct(0.99), p.us.back());
  }
  const auto counts = store->SnapshotReloads();
  std::printf("snapshot refreshes: %llu incremental, %llu full\n", static_cast<unsigned long long>(counts.incremental),
              static_cast<unsigned long long>(counts.full));
  for (int n = 0; n < o.nodes; ++n) (void)store->RemoveNode(names[n]);
  (void)client->Command({"DEL", prefix + ":nodes", prefix + ":pods", prefix + ":epoch", prefix + ":changes",
                         prefix + ":reported"});
  return 0;
}
