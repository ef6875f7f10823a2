// Bind's store work without Kubernetes (issue 6, item 3): Reserve + Release
// of the real Valkey ledger store against a real server, from N concurrent
// clients at a fixed total rate (open loop), or as fast as possible.
//
//   store_bench --valkey redis://127.0.0.1:PORT [--clients 8] [--rate 1000]
//               [--seconds 10] [--nodes 100] [--gpus 8]
//
// --rate 0 runs closed loop (each client back to back) for throughput.
// Latency of a pair is measured from its scheduled start (so a stall delays
// the pairs queued behind it and shows up in their latency: no coordinated
// omission); the service time from its actual start is reported too. Keys go
// under a fresh prefix that is deleted at the end.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "vramd/store/valkey_client.h"

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr int64_t kGi = int64_t{1} << 30;

struct Options {
  std::string valkey = "redis://127.0.0.1:6379";
  int clients = 8;
  double rate = 1000;  // pairs per second over all clients; 0 = closed loop
  double seconds = 10;
  int nodes = 100;
  int gpus = 8;
};

int Usage() {
  std::fprintf(stderr,
               "usage: store_bench --valkey URL [--clients N] [--rate PAIRS_PER_S|0] [--seconds S] "
               "[--nodes N] [--gpus G]\n");
  return 2;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

void Report(const char* what, std::vector<double> v) {
  if (v.empty()) return;
  double sum = 0;
  for (double x : v) sum += x;
  double p50 = Percentile(v, 50), p90 = Percentile(v, 90), p99 = Percentile(v, 99), p999 = Percentile(v, 99.9);
  double mx = *std::max_element(v.begin(), v.end());
  std::printf("%-26s n=%zu mean=%.3f p50=%.3f p90=%.3f p99=%.3f p99.9=%.3f max=%.3f ms\n", what, v.size(),
              sum / static_cast<double>(v.size()), p50, p90, p99, p999, mx);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    std::string v = argv[++i];
    if (a == "--valkey") o.valkey = v;
    else if (a == "--clients") o.clients = std::atoi(v.c_str());
    else if (a == "--rate") o.rate = std::atof(v.c_str());
    else if (a == "--seconds") o.seconds = std::atof(v.c_str());
    else if (a == "--nodes") o.nodes = std::atoi(v.c_str());
    else if (a == "--gpus") o.gpus = std::atoi(v.c_str());
    else return Usage();
  }
  if (o.clients < 1 || o.seconds <= 0 || o.nodes < 1 || o.gpus < 1) return Usage();

  vramd::store::ValkeyOptions vopts;
  vopts.url = o.valkey;
  vopts.key_prefix = "vramd-bench-" + std::to_string(getpid());
  vopts.pool_size = o.clients;  // one connection per client, as vramd's pool would give
  auto client = vramd::store::NewValkeyClient(vopts);
  auto store = vramd::store::NewValkeyLedgerStore(client);

  std::vector<vramd::store::GpuCapacity> gpus;
  for (int g = 0; g < o.gpus; ++g) gpus.push_back({g, 80 * kGi, ""});
  for (int n = 0; n < o.nodes; ++n) {
    vramd::Status s = store->SetCapacity("node-" + std::to_string(n), gpus);
    if (!s.ok()) {
      std::fprintf(stderr, "store_bench: SetCapacity: %s\n", s.ToString().c_str());
      return 1;
    }
  }

  const auto start = SteadyClock::now() + std::chrono::milliseconds(100);
  const auto stop = start + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(o.seconds));
  // Each client sends every clients/rate seconds, the clients staggered evenly.
  const double period_s = o.rate > 0 ? o.clients / o.rate : 0;
  std::vector<std::vector<double>> lat(o.clients), service(o.clients), reserve(o.clients), release(o.clients);
  std::atomic<int64_t> errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      auto next = start + std::chrono::duration_cast<SteadyClock::duration>(
                              std::chrono::duration<double>(period_s * c / o.clients));
      for (int64_t k = 0;; ++k) {
        if (o.rate > 0) {
          if (next >= stop) break;
          std::this_thread::sleep_until(next);
        } else if (SteadyClock::now() >= stop) {
          break;
        }
        const auto scheduled = o.rate > 0 ? next : SteadyClock::now();
        const auto t0 = SteadyClock::now();
        vramd::store::ReserveRequest rr;
        rr.node = "node-" + std::to_string((c * 7919 + k) % o.nodes);
        rr.entry.pod_uid = "pod-" + std::to_string(c) + "-" + std::to_string(k);
        rr.entry.ns = "bench";
        rr.entry.name = rr.entry.pod_uid;
        rr.entry.gpus = {static_cast<int>(k % o.gpus)};
        rr.entry.per_gpu = 16 * kGi;
        rr.entry.peak_per_gpu = 16 * kGi;
        rr.entry.model = "llama";
        auto r = store->Reserve(rr);
        const auto t1 = SteadyClock::now();
        auto rel = store->Release(rr.node, rr.entry.pod_uid);
        const auto t2 = SteadyClock::now();
        if (!r.ok() || !rel.ok() || !*rel) errors.fetch_add(1);
        using ms = std::chrono::duration<double, std::milli>;
        lat[c].push_back(ms(t2 - scheduled).count());
        service[c].push_back(ms(t2 - t0).count());
        reserve[c].push_back(ms(t1 - t0).count());
        release[c].push_back(ms(t2 - t1).count());
        if (o.rate > 0) {
          next += std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(period_s));
        }
      }
    });
  }
  for (auto& t : threads) t.join();

  auto flat = [](const std::vector<std::vector<double>>& per) {
    std::vector<double> all;
    for (const auto& v : per) all.insert(all.end(), v.begin(), v.end());
    return all;
  };
  std::vector<double> all = flat(lat);
  std::printf("store_bench: %d clients, rate %s, %.1f s, %d nodes x %d GPUs, valkey %s\n", o.clients,
              o.rate > 0 ? (std::to_string(static_cast<int>(o.rate)) + "/s").c_str() : "closed-loop", o.seconds,
              o.nodes, o.gpus, vramd::store::RedactValkeyUrl(o.valkey).c_str());
  std::printf("pairs=%zu (%.0f reserve+release pairs/s), errors=%lld\n", all.size(),
              static_cast<double>(all.size()) / o.seconds, static_cast<long long>(errors.load()));
  Report("reserve+release (sched)", all);
  Report("reserve+release (service)", flat(service));
  Report("reserve", flat(reserve));
  Report("release", flat(release));

  // Clean up the prefix's keys.
  for (int n = 0; n < o.nodes; ++n) (void)store->RemoveNode("node-" + std::to_string(n));
  (void)client->Command({"DEL", vopts.key_prefix + ":nodes", vopts.key_prefix + ":pods", vopts.key_prefix + ":epoch"});
  return errors.load() == 0 ? 0 : 1;
}
