// Scale (issue 6, item 4): a ledger of 5,000 nodes x 8 GPUs and 50,000
// entries in a real Valkey/Redis; the time of a full snapshot reload, of an
// incremental refresh after 1, 10 and 100 node changes (usage reports
// written through the store, as vramd's writes are), the cost of Snapshot()
// when nothing changed (the per-call epoch check), and the process's memory
// once the snapshot is held.
//
//   scale_bench --valkey redis://127.0.0.1:PORT [--nodes 5000] [--gpus 8]
//               [--entries 50000] [--reloads 10] [--keep]
//
// The ledger is written by a forked child (through the real store, 8 threads)
// so that the measuring process holds nothing but what vramd would hold.
// Keys go under a fresh prefix, deleted at the end unless --keep.
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "vramd/store/valkey_client.h"

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr int64_t kGi = int64_t{1} << 30;

struct Options {
  std::string valkey = "redis://127.0.0.1:6379";
  int nodes = 5000;
  int gpus = 8;
  int entries = 50000;
  int reloads = 10;
  bool keep = false;
};

int Usage() {
  std::fprintf(stderr,
               "usage: scale_bench --valkey URL [--nodes N] [--gpus G] [--entries E] [--reloads R] [--keep]\n");
  return 2;
}

// VmRSS / VmHWM in KiB.
long ProcStatusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string want = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(want, 0) == 0) return std::atol(line.c_str() + want.size());
  }
  return -1;
}

std::string NodeName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gpu-node-%05d", i);
  return buf;
}

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// CPU seconds (user + system) of this process.
double SelfCpuS() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// CPU seconds of the Valkey/Redis server (INFO cpu), or -1.
double ServerCpuS(vramd::store::ValkeyClient& client) {
  auto r = client.Command({"INFO", "cpu"});
  if (!r.ok() || r->type != vramd::store::Reply::Type::kString) return -1;
  double total = 0;
  for (const char* field : {"used_cpu_sys:", "used_cpu_user:"}) {
    size_t p = r->str.find(field);
    if (p == std::string::npos) return -1;
    total += std::atof(r->str.c_str() + p + std::strlen(field));
  }
  return total;
}

vramd::store::ValkeyOptions ClientOptions(const Options& o, const std::string& prefix) {
  vramd::store::ValkeyOptions v;
  v.url = o.valkey;
  v.key_prefix = prefix;
  v.command_timeout = std::chrono::milliseconds(30'000);  // a full reload is one long pipeline
  return v;
}

int Populate(const Options& o, const std::string& prefix) {
  auto client = vramd::store::NewValkeyClient(ClientOptions(o, prefix));
  auto store = vramd::store::NewValkeyLedgerStore(client);
  std::atomic<int> failures{0};
  const int kThreads = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<vramd::store::GpuCapacity> gpus;
      for (int g = 0; g < o.gpus; ++g) {
        gpus.push_back({g, 80 * kGi, "GPU-" + std::to_string(g) + "-0000-0000-0000-000000000000"});
      }
      for (int n = t; n < o.nodes; n += kThreads) {
        if (!store->SetCapacity(NodeName(n), gpus).ok()) failures.fetch_add(1);
      }
      for (int k = t; k < o.entries; k += kThreads) {
        vramd::ledger::Entry e;
        e.pod_uid = "5c1e0b7a-0000-4000-8000-" + std::to_string(100000000000 + k);
        e.ns = "team-" + std::to_string(k % 40);
        e.name = "inference-" + std::to_string(k);
        e.gpus = {k % o.gpus};
        e.per_gpu = 8 * kGi;
        e.peak_per_gpu = 10 * kGi;
        e.model = "model-" + std::to_string(k % 50);
        e.state = vramd::ledger::EntryState::kBound;
        if (!store->PutEntry(NodeName(k % o.nodes), e).ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  return failures.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--keep") {
      o.keep = true;
      continue;
    }
    if (i + 1 >= argc) return Usage();
    std::string v = argv[++i];
    if (a == "--valkey") o.valkey = v;
    else if (a == "--nodes") o.nodes = std::atoi(v.c_str());
    else if (a == "--gpus") o.gpus = std::atoi(v.c_str());
    else if (a == "--entries") o.entries = std::atoi(v.c_str());
    else if (a == "--reloads") o.reloads = std::atoi(v.c_str());
    else return Usage();
  }
  if (o.nodes < 1 || o.gpus < 1 || o.entries < 0 || o.reloads < 1) return Usage();
  const std::string prefix = "vramd-scale-" + std::to_string(getpid());

  // Write the ledger from a child: its threads and buffers never touch this
  // process's heap.
  const auto w0 = SteadyClock::now();
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) _exit(Populate(o, prefix));
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    std::fprintf(stderr, "scale_bench: writing the ledger failed\n");
    return 1;
  }
  const double write_ms = Ms(SteadyClock::now() - w0);

  auto client = vramd::store::NewValkeyClient(ClientOptions(o, prefix));
  auto store = vramd::store::NewValkeyLedgerStore(client);
  const long rss_before = ProcStatusKb("VmRSS");

  // Cold load. The store's cache keeps the snapshot, as in vramd.
  double cold_ms = 0;
  size_t nodes = 0, entries = 0, gpus = 0;
  {
    auto t0 = SteadyClock::now();
    auto first = store->Snapshot();
    cold_ms = Ms(SteadyClock::now() - t0);
    if (!first.ok()) {
      std::fprintf(stderr, "scale_bench: snapshot: %s\n", first.status().ToString().c_str());
      return 1;
    }
    nodes = (*first)->nodes.size();
    for (const auto& [name, n] : (*first)->nodes) {
      entries += n.entries.size();
      gpus += n.gpus.size();
    }
  }
  const long rss_held = ProcStatusKb("VmRSS");

  // Reloads: bump the epoch, then Snapshot() must reload everything.
  std::vector<double> reload_ms;
  const double self0 = SelfCpuS(), server0 = ServerCpuS(*client);
  for (int r = 0; r < o.reloads; ++r) {
    (void)client->Command({"INCR", prefix + ":epoch"});
    auto t = SteadyClock::now();
    auto s = store->Snapshot();
    reload_ms.push_back(Ms(SteadyClock::now() - t));
    if (!s.ok()) return 1;
  }
  const double self_ms = (SelfCpuS() - self0) * 1000 / o.reloads;
  const double server_ms = (ServerCpuS(*client) - server0) * 1000 / o.reloads;
  const long rss_after_reloads = ProcStatusKb("VmRSS");
  const long hwm = ProcStatusKb("VmHWM");

  // Incremental refreshes: k nodes change (a usage report each, through a
  // second store on the same client, which holds no snapshot), then
  // Snapshot() reads only those k nodes again.
  // The last run holds the previous snapshot across each refresh, as a
  // filter call in flight would: the refresh then copies the other nodes
  // instead of changing the cached snapshot in place.
  struct Incremental {
    int changes;
    bool held;
    std::vector<double> ms;
    double self_ms;
  };
  std::vector<Incremental> incremental;
  auto writer = vramd::store::NewValkeyLedgerStore(client);
  const auto counts0 = store->SnapshotReloads();
  int next_node = 0, pushes = 0;
  for (auto [k, held] : {std::pair{1, false}, {10, false}, {100, false}, {1, true}}) {
    if (2 * k > o.nodes) break;  // more than half the nodes: a full reload
    Incremental inc{k, held, {}, 0};
    double cpu = 0;
    for (int r = 0; r < o.reloads; ++r) {
      vramd::ledger::SnapshotPtr holder;
      if (held) {
        auto h = store->Snapshot();
        if (!h.ok()) return 1;
        holder = *h;
      }
      for (int c = 0; c < k; ++c) {
        std::map<int, int64_t> used;
        for (int g = 0; g < o.gpus; ++g) used[g] = (1 + (pushes + g) % 70) * kGi;
        ++pushes;
        if (!writer->PushUsage(NodeName(next_node), used).ok()) return 1;
        next_node = (next_node + 1) % o.nodes;
      }
      const double c0 = SelfCpuS();
      auto t = SteadyClock::now();
      auto s = store->Snapshot();
      inc.ms.push_back(Ms(SteadyClock::now() - t));
      cpu += SelfCpuS() - c0;
      if (!s.ok()) return 1;
    }
    inc.self_ms = cpu * 1000 / o.reloads;
    std::sort(inc.ms.begin(), inc.ms.end());
    incremental.push_back(std::move(inc));
  }
  const auto counts1 = store->SnapshotReloads();
  const long rss_after_incremental = ProcStatusKb("VmRSS");

  // The cost of a call when nothing changed: one GET of the epoch.
  const int kChecks = 5000;
  auto c0 = SteadyClock::now();
  for (int i = 0; i < kChecks; ++i) (void)store->Snapshot();
  const double check_us = Ms(SteadyClock::now() - c0) * 1000.0 / kChecks;

  std::sort(reload_ms.begin(), reload_ms.end());
  std::printf("scale_bench: %zu nodes, %zu GPUs, %zu entries (written in %.1f s), valkey %s\n", nodes, gpus,
              entries, write_ms / 1000, vramd::store::RedactValkeyUrl(o.valkey).c_str());
  std::printf("cold snapshot load: %.1f ms\n", cold_ms);
  std::printf("snapshot reload (%d runs): min %.1f ms, median %.1f ms, max %.1f ms\n", o.reloads, reload_ms.front(),
              reload_ms[reload_ms.size() / 2], reload_ms.back());
  std::printf("CPU per reload: %.1f ms in this process, %.1f ms in the server\n", self_ms, server_ms);
  for (const auto& inc : incremental) {
    std::printf("incremental refresh after %d node change(s)%s (%d runs): min %.2f ms, median %.2f ms, max %.2f ms; CPU %.2f ms\n",
                inc.changes, inc.held ? ", previous snapshot held" : "", o.reloads, inc.ms.front(),
                inc.ms[inc.ms.size() / 2], inc.ms.back(), inc.self_ms);
  }
  std::printf("refreshes above: %llu incremental, %llu full\n",
              static_cast<unsigned long long>(counts1.incremental - counts0.incremental),
              static_cast<unsigned long long>(counts1.full - counts0.full));
  std::printf("Snapshot() with an unchanged epoch: %.1f us per call (mean of %d)\n", check_us, kChecks);
  std::printf("RSS: %.1f MiB before, %.1f MiB with the snapshot held, %.1f MiB after %d reloads; peak (VmHWM) %.1f MiB\n",
              rss_before / 1024.0, rss_held / 1024.0, rss_after_reloads / 1024.0, o.reloads, hwm / 1024.0);
  std::printf("RSS after the incremental refreshes: %.1f MiB; peak (VmHWM) %.1f MiB\n",
              rss_after_incremental / 1024.0, ProcStatusKb("VmHWM") / 1024.0);

  if (!o.keep) {
    for (int n = 0; n < o.nodes; ++n) (void)store->RemoveNode(NodeName(n));
    (void)client->Command({"DEL", prefix + ":nodes", prefix + ":pods", prefix + ":epoch", prefix + ":changes"});
  }
  return 0;
}
