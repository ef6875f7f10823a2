// Issue 14: filter's latency while node agents report. A ledger of 5,000
// nodes x 8 GPUs and 50,000 entries in a real Valkey/Redis; one "replica"
// (a store with the epoch watch, as vramd runs) answers filter calls over
// every node at a steady rate, and in alternate phases also takes agent
// reports at --rate per second (decoded from their JSON with
// http::DecodeUsageReport and written with PushReport through the same
// store, as the route does: the worst case, one replica taking every report).
// Prints p50 / p99 / max of filter per phase, and per kind of phase the
// calls of every round pooled (p50, p99, p99.9) beside the median of the
// rounds' p99s.
//
// Issue 17 (Valkey's headroom): pod binds at --bind-rate per second, open
// loop from --binders threads on the same replica, each making the store
// calls of vramd's bind path with Kubernetes (Extender::ReserveVram and
// CreateBinding, the API server's Binding left out): the watched snapshot
// and DecideNode, Reserve with the bind marked in flight
// (config::BindInFlightMs of the default config) on the sealed ledger
// (require_sealed: the bench seals it as the leader does after a rebuild),
// FinishBind, and the refusal forget through extender::RefusalRecorder.
// Each bind then releases the pod bound --entries binds earlier (the
// ledger's first entries first), as reconcile does when a pod is gone, so
// the ledger stays at --entries entries. Around every phase the server's
// INFO stats / cpu / commandstats are read (INFO's own call and bytes taken
// out): per phase its CPU, commands (those run inside scripts included) and
// bytes, and per agent report and per bound pod the same less the idle
// phases' background. Each phase starts after 1.5 s of filter calls alone,
// unmeasured, for the last phase's work to settle. Not in the figures: the
// API server, reconcile passes, queue admission (tenancy off, the default),
// and further replicas, each of which re-reads the nodes a write changed
// (the figures hold one replica's refreshes).
//
//   usage_bench --valkey redis://127.0.0.1:PORT [--nodes 5000] [--gpus 8]
//               [--entries 50000] [--rate 1000] [--filter-rate 200]
//               [--bind-rate 0] [--binders 4] [--phases idle,reports]
//               [--seconds 10] [--rounds 2] [--writers 4] [--remote 0|1] [--old 0|1]
//
// --phases: the phases of one round, in order, each --seconds long (the
// list runs --rounds times): idle (filter calls only), reports (--rate
// reports/s), binds (--bind-rate binds/s), both (reports and binds).
// Default: idle,reports; with --bind-rate > 0: idle,reports,binds,both.
//
// --old 1: the old report instead (used bytes per GPU only).
//
// --remote 1: the reports go through another process (another replica
// takes them); the measuring one only follows their notifications. Binds
// always go through the measuring replica.
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
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "vramd/clock.h"
#include "vramd/config/config.h"
#include "vramd/extender/extender.h"
#include "vramd/extender/refusal_recorder.h"
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
  int rate = 1000, filter_rate = 200, seconds = 10, rounds = 2, writers = 4, remote = 0, old = 0;
  int bind_rate = 0, binders = 4;
  std::string phases;  // empty: the default (see the header)
};

// One phase of a round: what runs besides the filter calls.
struct PhaseKind {
  std::string name;
  bool reports = false, binds = false;
};

bool ParsePhases(const std::string& list, std::vector<PhaseKind>* out) {
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name == "idle") out->push_back({name, false, false});
    else if (name == "reports") out->push_back({name, true, false});
    else if (name == "binds") out->push_back({name, false, true});
    else if (name == "both") out->push_back({name, true, true});
    else return false;
  }
  return !out->empty();
}

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

// VmRSS in KiB.
long RssKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// The server's own counters at one moment (INFO stats, cpu, commandstats).
struct ServerCounters {
  bool ok = false;
  SteadyClock::time_point at;
  std::map<std::string, std::pair<long long, long long>> cmds;  // command -> calls, usec
  long long commands = 0, in_bytes = 0, out_bytes = 0;
  double cpu = 0, cpu_main = -1;  // seconds, user + sys; -1: the server does not say
  long long request_bytes = 0, reply_bytes = 0;  // this INFO's own request and reply (RESP2)
};

long long RespArgvBytes(const std::vector<std::string>& argv) {
  long long n = 3 + static_cast<long long>(std::to_string(argv.size()).size());
  for (const std::string& a : argv) n += 5 + static_cast<long long>(std::to_string(a.size()).size() + a.size());
  return n;
}

ServerCounters ParseInfo(const std::string& text) {
  ServerCounters c;
  std::map<std::string, std::string> kv;
  bool have_cmdstats = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "# Commandstats") have_cmdstats = true;
    const size_t colon = line.find(':');
    if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon), value = line.substr(colon + 1);
    if (key.rfind("cmdstat_", 0) == 0) {
      auto num = [&](const char* field) {
        const size_t at = value.find(field);
        return at == std::string::npos ? 0LL : std::atoll(value.c_str() + at + std::strlen(field));
      };
      c.cmds[key.substr(8)] = {num("calls="), num("usec=")};
    } else {
      kv[key] = value;
    }
  }
  if (!have_cmdstats || !kv.count("total_net_input_bytes") || !kv.count("total_net_output_bytes") ||
      !kv.count("total_commands_processed") || !kv.count("used_cpu_sys") || !kv.count("used_cpu_user")) {
    return c;
  }
  c.commands = std::atoll(kv["total_commands_processed"].c_str());
  c.in_bytes = std::atoll(kv["total_net_input_bytes"].c_str());
  c.out_bytes = std::atoll(kv["total_net_output_bytes"].c_str());
  c.cpu = std::atof(kv["used_cpu_sys"].c_str()) + std::atof(kv["used_cpu_user"].c_str());
  if (kv.count("used_cpu_sys_main_thread") && kv.count("used_cpu_user_main_thread")) {
    c.cpu_main = std::atof(kv["used_cpu_sys_main_thread"].c_str()) + std::atof(kv["used_cpu_user_main_thread"].c_str());
  }
  c.ok = true;
  return c;
}

// One INFO with the three sections (Redis 7 / Valkey take several), else
// INFO all (older servers).
ServerCounters ReadCounters(vramd::store::ValkeyClient& admin) {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"INFO", "stats", "cpu", "commandstats"}, std::vector<std::string>{"INFO", "all"}}) {
    auto r = admin.Command(argv);
    if (!r.ok() || r->type != vramd::store::Reply::Type::kString) continue;
    ServerCounters c = ParseInfo(r->str);
    if (!c.ok) continue;
    c.at = SteadyClock::now();
    c.request_bytes = RespArgvBytes(argv);
    c.reply_bytes = 5 + static_cast<long long>(std::to_string(r->str.size()).size() + r->str.size());
    return c;
  }
  return {};
}

// What the server did between two reads, less the INFO calls themselves: a
// command is counted once it ran and input bytes when read, so the window
// holds the first INFO's call and reply and the second one's request.
struct ServerDelta {
  bool ok = false;
  double wall = 0, cpu = 0, cpu_main = -1;
  long long commands = 0, script_calls = 0, in_bytes = 0, out_bytes = 0;
  std::map<std::string, long long> calls, usec;  // per command, INFO left out
};

ServerDelta Diff(const ServerCounters& a, const ServerCounters& b) {
  ServerDelta d;
  if (!a.ok || !b.ok) return d;
  d.ok = true;
  d.wall = std::chrono::duration<double>(b.at - a.at).count();
  d.cpu = b.cpu - a.cpu;
  if (a.cpu_main >= 0 && b.cpu_main >= 0) d.cpu_main = b.cpu_main - a.cpu_main;
  long long info = 0;
  for (const auto& [name, cu] : b.cmds) {
    auto it = a.cmds.find(name);
    const long long calls = cu.first - (it == a.cmds.end() ? 0 : it->second.first);
    if (name == "info") {
      info = calls;
    } else if (calls > 0) {
      d.calls[name] = calls;
      d.usec[name] = cu.second - (it == a.cmds.end() ? 0 : it->second.second);
    }
    if (name == "eval" || name == "evalsha" || name == "evalsha_ro" || name == "eval_ro" || name == "fcall") {
      d.script_calls += calls;
    }
  }
  d.commands = b.commands - a.commands - info;
  d.in_bytes = b.in_bytes - a.in_bytes - b.request_bytes;
  d.out_bytes = b.out_bytes - a.out_bytes - a.reply_bytes;
  return d;
}

// Adds `d` into `sum` (several phases of one kind).
void Accumulate(const ServerDelta& d, ServerDelta* sum) {
  if (!d.ok) return;
  sum->cpu_main = !sum->ok ? d.cpu_main : sum->cpu_main < 0 || d.cpu_main < 0 ? -1 : sum->cpu_main + d.cpu_main;
  sum->ok = true;
  sum->wall += d.wall;
  sum->cpu += d.cpu;
  sum->commands += d.commands;
  sum->script_calls += d.script_calls;
  sum->in_bytes += d.in_bytes;
  sum->out_bytes += d.out_bytes;
  for (const auto& [name, calls] : d.calls) sum->calls[name] += calls;
  for (const auto& [name, usec] : d.usec) sum->usec[name] += usec;
}

// The store calls of one pod's bind as vramd's extender makes them with
// Kubernetes (Extender::ReserveVram, then CreateBinding once the Binding
// was created; the Binding itself goes to the API server, not Valkey).
enum class BindEnd { kBound, kRejected, kFailed };

struct BindTarget {
  std::string node, uid, ns, name;
};

BindEnd BindOnePod(vramd::store::LedgerStore& store, vramd::extender::RefusalRecorder& refusals, const BindTarget& t,
                   const vramd::ledger::VramRequest& req, const vramd::ledger::Policy& policy,
                   const vramd::Clock& clock, int64_t in_flight_ttl_ms) {
  constexpr int kAttempts = 3;  // extender::Options::bind_attempts
  // Extender::InFlightMark: an active mark left behind is cleared.
  struct Mark {
    vramd::store::LedgerStore& store;
    const std::string& uid;
    bool active = false;
    ~Mark() {
      if (active) (void)store.EndBind(uid);
    }
  } mark{store, t.uid};
  bool reserved = false;
  for (int attempt = 0; attempt < kAttempts && !reserved; ++attempt) {
    const bool watched = attempt == 0;
    const bool last = attempt + 1 == kAttempts;
    auto snap = watched ? store.WatchedSnapshot() : store.Snapshot();
    if (!snap.ok()) return BindEnd::kFailed;
    if (!(*snap)->sealed) {
      if (watched && !last) continue;
      return BindEnd::kFailed;
    }
    const vramd::ledger::Node* n = (*snap)->Find(t.node);
    bool held = false;
    if (n != nullptr) {
      for (const vramd::ledger::Entry& e : n->entries) held = held || e.pod_uid == t.uid;
    }
    if (held && watched && !last) continue;
    if (held) {
      if (!store.BeginBind(t.uid, in_flight_ttl_ms).ok()) return BindEnd::kFailed;
      mark.active = true;
      reserved = true;
      break;
    }
    vramd::ledger::NodeDecision d = vramd::ledger::DecideNode(n, t.node, req, policy, clock.NowMs());
    if (d.verdict != vramd::ledger::Verdict::kFits) {
      if (watched && !last) continue;
      return BindEnd::kRejected;
    }
    const vramd::store::ReserveRequest rr = vramd::extender::BindReserveRequest(
        t.node, t.ns, t.name, t.uid, d.choice, req, policy, in_flight_ttl_ms, /*require_sealed=*/true);
    mark.active = true;
    // As Extender::ReserveVram: let go of the snapshot before writing, so
    // that the store can take the write into its cache in place.
    n = nullptr;
    snap->reset();
    auto r = store.Reserve(rr);
    if (!r.ok()) {
      const bool no_room = r.status().code() == vramd::Code::kInsufficient;
      if (no_room && !last) continue;
      return no_room ? BindEnd::kRejected : BindEnd::kFailed;
    }
    if (*r == vramd::store::ReserveOutcome::kAlreadyHeld) continue;
    reserved = true;
  }
  if (!reserved) return BindEnd::kRejected;
  // (Here the extender creates the Binding.)
  if (!store.FinishBind(t.node, t.uid).ok()) return BindEnd::kFailed;  // the mark clears it
  mark.active = false;
  (void)refusals.Forget(t.uid);  // Extender::Bind: a bound pod's refusal is forgotten
  return BindEnd::kBound;
}

struct Phase {
  std::string name;
  int rate = 0, bind_rate = 0;
  std::vector<double> us;
  long reports = 0, refused = 0;
  long binds = 0, bind_rejected = 0, bind_failed = 0, release_failed = 0;
  std::vector<double> bind_us;  // the store calls of one bind (not its release)
  double seconds = 0;
  ServerDelta valkey;
};

double Pct(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
}

// Valkey's side: per phase, then per agent report and per bound pod (their
// phases less the idle phases' background for as long), and the CPU of the
// phases with both.
void PrintValkey(const std::vector<Phase>& phases) {
  std::printf("Valkey per phase (INFO stats/cpu/commandstats before and after; INFO's own call and bytes taken out; "
              "commands include those run inside scripts):\n");
  auto by_calls = [](const std::map<std::string, long long>& calls) {
    std::vector<std::pair<std::string, long long>> v(calls.begin(), calls.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    return v;
  };
  ServerDelta idle, reports, binds;
  double n_reports = 0, n_binds = 0;
  long bind_misses = 0;
  for (const Phase& p : phases) {
    const ServerDelta& v = p.valkey;
    if (!v.ok) {
      std::printf("  %-7s INFO could not be read\n", p.name.c_str());
      continue;
    }
    char main_thread[64] = "";
    if (v.cpu_main >= 0) {
      std::snprintf(main_thread, sizeof main_thread, " (main thread %.1f %%)", 100 * v.cpu_main / v.wall);
    }
    std::printf("  %-7s %.2f s: CPU %.2f s = %.1f %% of one core%s; %.0f commands/s (%.0f script calls/s); "
                "in %.1f KiB/s, out %.1f KiB/s\n",
                p.name.c_str(), v.wall, v.cpu, 100 * v.cpu / v.wall, main_thread, v.commands / v.wall,
                v.script_calls / v.wall, v.in_bytes / v.wall / 1024, v.out_bytes / v.wall / 1024);
    std::string top;
    int shown = 0;
    for (const auto& [name, calls] : by_calls(v.calls)) {
      if (shown++ == 8) break;
      char buf[128];
      std::snprintf(buf, sizeof buf, "%s%s %.0f/s (%.1f us)", top.empty() ? "" : ", ", name.c_str(), calls / v.wall,
                    static_cast<double>(v.usec.at(name)) / static_cast<double>(calls));
      top += buf;
    }
    std::printf("          top by calls (server time per call): %s\n", top.empty() ? "(none)" : top.c_str());
    if (p.name == "idle") Accumulate(v, &idle);
    if (p.name == "reports") {
      Accumulate(v, &reports);
      n_reports += static_cast<double>(p.reports);
    }
    if (p.name == "binds") {
      Accumulate(v, &binds);
      n_binds += static_cast<double>(p.binds);
      bind_misses += p.bind_rejected + p.bind_failed;
    }
  }
  if (!idle.ok) std::printf("no idle phase: the background is not taken out of the figures below\n");
  auto per_op = [&](const char* what, const char* phase, const ServerDelta& d, double ops) {
    if (!d.ok || ops <= 0) return;
    const double bg = idle.ok ? d.wall / idle.wall : 0;  // the idle phases' counts scaled to d's length
    const double cmds = (d.commands - bg * idle.commands) / ops;
    const double scripts = (d.script_calls - bg * idle.script_calls) / ops;
    const double in = (d.in_bytes - bg * idle.in_bytes) / ops;
    const double out = (d.out_bytes - bg * idle.out_bytes) / ops;
    const double cpu_us = 1e6 * (d.cpu - bg * idle.cpu) / ops;
    std::printf("per %s (%s phases: %.0f in %.1f s): %.2f commands (%.2f script calls), %.0f B in + %.0f B out "
                "= %.0f B, %.1f us of Valkey CPU\n",
                what, phase, ops, d.wall, cmds, scripts, in, out, in + out, cpu_us);
    std::map<std::string, double> each;
    for (const auto& [name, calls] : d.calls) each[name] = static_cast<double>(calls);
    if (idle.ok) {
      for (const auto& [name, calls] : idle.calls) each[name] -= bg * static_cast<double>(calls);
    }
    std::vector<std::pair<std::string, double>> v(each.begin(), each.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string list;
    for (const auto& [name, calls] : v) {
      if (calls / ops < 0.005) break;
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%s %.2f", list.empty() ? "" : ", ", name.c_str(), calls / ops);
      list += buf;
    }
    std::printf("  calls per %s: %s\n", what, list.empty() ? "(none)" : list.c_str());
  };
  per_op("agent report", "reports", reports, n_reports);
  per_op("bound pod", "binds", binds, n_binds);
  if (n_binds > 0) {
    std::printf("  (a bound pod: its reservation, FinishBind, the refusal forget, the release of an older pod, and "
                "this replica's snapshot refreshes; %ld binds not bound also counted in)\n", bind_misses);
  }
  for (const Phase& p : phases) {
    if (p.name != "both" || !p.valkey.ok) continue;
    const ServerDelta& v = p.valkey;
    char main_thread[64] = "";
    if (v.cpu_main >= 0) {
      std::snprintf(main_thread, sizeof main_thread, " (main thread %.1f %%)", 100 * v.cpu_main / v.wall);
    }
    std::printf("both: %d reports/s + %d binds/s (done %.0f + %.0f/s): Valkey CPU %.1f %% of one core%s\n", p.rate,
                p.bind_rate, p.reports / p.seconds, p.binds / p.seconds, 100 * v.cpu / v.wall, main_thread);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    int* num = a == "--nodes" ? &o.nodes : a == "--gpus" ? &o.gpus : a == "--entries" ? &o.entries
             : a == "--rate" ? &o.rate : a == "--filter-rate" ? &o.filter_rate : a == "--seconds" ? &o.seconds
             : a == "--rounds" ? &o.rounds : a == "--writers" ? &o.writers : a == "--remote" ? &o.remote : a == "--old" ? &o.old
             : a == "--bind-rate" ? &o.bind_rate : a == "--binders" ? &o.binders : nullptr;
    if (a == "--valkey") o.valkey = v;
    else if (a == "--phases") o.phases = v;
    else if (num != nullptr) *num = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "usage: usage_bench --valkey URL [--nodes N] [--gpus G] [--entries E] [--rate R] "
                           "[--filter-rate F] [--bind-rate B] [--binders T] [--phases idle,reports,binds,both] "
                           "[--seconds S] [--rounds K] [--writers W] [--remote 0|1] [--old 0|1]\n");
      return 2;
    }
  }
  std::vector<PhaseKind> kinds;
  if (o.phases.empty()) o.phases = o.bind_rate > 0 ? "idle,reports,binds,both" : "idle,reports";
  if (!ParsePhases(o.phases, &kinds)) {
    std::fprintf(stderr, "usage_bench: --phases takes a comma-separated list of idle, reports, binds, both\n");
    return 2;
  }
  if (o.nodes < 1 || o.gpus < 1 || o.entries < 0 || o.rate < 0 || o.filter_rate < 1 || o.seconds < 1 ||
      o.rounds < 1 || o.writers < 1 || o.bind_rate < 0 || o.binders < 1) {
    std::fprintf(stderr, "usage_bench: --nodes, --gpus, --filter-rate, --seconds, --rounds, --writers and "
                         "--binders must be positive; --entries, --rate and --bind-rate not negative\n");
    return 2;
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
  // The ledger sealed as the leader seals it after a rebuild: binds reserve
  // with require_sealed, as every bind with Kubernetes does.
  {
    auto begun = store->BeginRebuild("usage_bench");
    if (!begun.ok() || (!begun->sealed && !store->Seal(begun->rebuild_token, {}).ok())) {
      std::fprintf(stderr, "usage_bench: sealing the ledger failed\n");
      return 1;
    }
  }
  store->StartEpochWatch();
  if (!store->Snapshot().ok()) return 1;
  std::vector<std::string> names;
  for (int n = 0; n < o.nodes; ++n) names.push_back(NodeName(n));
  std::vector<std::string_view> views(names.begin(), names.end());
  vramd::ledger::VramRequest req;
  req.total = req.per_gpu = req.peak_per_gpu = 16 * kGi;
  vramd::ledger::Policy policy;
  // Each bound pod asks what every ledger entry holds: 8 GiB on one GPU.
  vramd::ledger::VramRequest bind_req;
  bind_req.total = bind_req.per_gpu = bind_req.peak_per_gpu = 8 * kGi;
  const int64_t in_flight_ttl_ms = vramd::config::BindInFlightMs(vramd::config::Config{});
  const vramd::SystemClock clock;
  vramd::extender::RefusalRecorder refusals(store.get(), &clock);
  // INFO goes through a client of its own.
  auto admin = vramd::store::NewValkeyClient(ClientOptions(o, prefix));

  const long rss_before = RssKb();
  // Every node reports once first, so that every phase filters over nodes
  // with fresh usage (a node with usage takes the fit's usage path).
  for (int n = 0; n < o.nodes; ++n) {
    auto rep = vramd::http::DecodeUsageReport(bodies[1][n]);
    if (!rep.ok() || !store->PushReport(names[n], *rep, false).ok()) return 1;
  }
  if (!store->Snapshot().ok()) return 1;
  const long rss_after = RssKb();

  // Filter calls over every node at --filter-rate until `end`, each one's
  // time (the watched snapshot included) added to `us`.
  auto filter_until = [&](SteadyClock::time_point end, std::vector<double>* us) {
    const auto fperiod = std::chrono::nanoseconds(1'000'000'000LL / o.filter_rate);
    auto next = SteadyClock::now();
    while (SteadyClock::now() < end) {
      const auto c0 = SteadyClock::now();
      auto snap = store->WatchedSnapshot();
      if (!snap.ok()) return false;
      const int64_t now_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      auto fr = vramd::ledger::Filter(**snap, views, req, policy, now_ms);
      us->push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - c0).count());
      next += fperiod;
      std::this_thread::sleep_until(next);
    }
    return true;
  };
  // Longer than the usage refresher's period (SnapshotCache::kUsageRefreshMs).
  constexpr auto kSettle = std::chrono::milliseconds(1500);

  // Bind i (counted over every phase) places pod entries + i on node
  // (entries + i) % nodes and releases pod i: an entry of the first ledger
  // (Populate put pod k on node k % nodes) or one bound `entries` binds ago.
  std::atomic<long> next_bind{0};
  std::vector<Phase> phases;
  for (int r = 0; r < o.rounds; ++r) {
    for (const PhaseKind& kind : kinds) {
      Phase ph;
      ph.name = kind.name;
      ph.rate = kind.reports ? o.rate : 0;
      ph.bind_rate = kind.binds ? o.bind_rate : 0;
      const int rate = ph.rate;
      // Before each phase the work of the last one settles (the usage
      // refresher's last refresh), filter calls going on, unmeasured.
      std::vector<double> settle_us;
      if (!filter_until(SteadyClock::now() + kSettle, &settle_us)) return 1;
      const ServerCounters before = ReadCounters(*admin);
      std::atomic<bool> stop{false};
      std::atomic<long> reports{0}, refused{0};
      std::atomic<long> bound{0}, rejected{0}, failed{0}, release_failed{0};
      std::vector<std::thread> writers;
      std::vector<std::vector<double>> bind_us(o.binders);
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
              if (rep.ok() && o.old) {  // the old report: used bytes per GPU only
                rep->version = 1;
                for (auto& g : rep->gpus) {
                  g.total = g.outside_pods = 0;
                  g.uuid.clear();
                  g.pods.clear();
                }
              }
              if (!rep.ok() || !store->PushReport(names[n], *rep, false).ok()) refused.fetch_add(1);
              reports.fetch_add(1);
              i += o.writers;
              next += period;
              std::this_thread::sleep_until(next);
            }
          });
        }
      }
      const int bind_rate = ph.bind_rate;
      if (bind_rate > 0) {
        for (int b = 0; b < o.binders; ++b) {
          writers.emplace_back([&, b] {
            const auto period = std::chrono::nanoseconds(1'000'000'000LL * o.binders / bind_rate);
            auto next = SteadyClock::now();
            while (!stop.load()) {
              const long i = next_bind.fetch_add(1);
              const long k = o.entries + i;
              BindTarget t{NodeName(static_cast<int>(k % o.nodes)), Uid(k), "team-" + std::to_string(k % 40),
                           "inference-" + std::to_string(k)};
              vramd::ledger::VramRequest breq = bind_req;
              breq.ns = t.ns;
              const auto c0 = SteadyClock::now();
              const BindEnd end = BindOnePod(*store, refusals, t, breq, policy, clock, in_flight_ttl_ms);
              bind_us[b].push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - c0).count());
              (end == BindEnd::kBound ? bound : end == BindEnd::kRejected ? rejected : failed).fetch_add(1);
              if (o.entries > 0 && !store->Release(NodeName(static_cast<int>(i % o.nodes)), Uid(i)).ok()) {
                release_failed.fetch_add(1);
              }
              next += period;
              std::this_thread::sleep_until(next);
            }
          });
        }
      }
      const auto t0 = SteadyClock::now();
      if (!filter_until(t0 + std::chrono::seconds(o.seconds), &ph.us)) return 1;
      stop = true;
      for (auto& t : writers) t.join();
      if (remote > 0) {
        int st = 0;
        waitpid(remote, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ph.refused = -1;
        reports.store(static_cast<long>(rate) * o.seconds);
      }
      ph.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
      ph.valkey = Diff(before, ReadCounters(*admin));
      ph.reports = reports.load();
      if (ph.refused == 0) ph.refused = refused.load();
      ph.binds = bound.load();
      ph.bind_rejected = rejected.load();
      ph.bind_failed = failed.load();
      ph.release_failed = release_failed.load();
      for (const auto& v : bind_us) ph.bind_us.insert(ph.bind_us.end(), v.begin(), v.end());
      std::sort(ph.bind_us.begin(), ph.bind_us.end());
      std::sort(ph.us.begin(), ph.us.end());
      phases.push_back(std::move(ph));
    }
  }
  refusals.Stop();
  std::printf("usage_bench: %d nodes x %d GPUs, %d entries; filter over every node at %d/s; report body %zu bytes, "
              "decoded in %.1f us; reports taken by %s\n",
              o.nodes, o.gpus, o.entries, o.filter_rate, bodies[0][0].size(), decode_us,
              o.remote ? "another process" : "the measuring process");
  for (const Phase& p : phases) {
    std::string binds;
    if (p.bind_rate > 0) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    ", binds %4d/s (done %.0f/s, rejected %ld, failed %ld, releases failed %ld; "
                    "store calls p50 %.0f us, p99 %.0f us)",
                    p.bind_rate, p.binds / p.seconds, p.bind_rejected, p.bind_failed, p.release_failed,
                    Pct(p.bind_us, 0.5), Pct(p.bind_us, 0.99));
      binds = buf;
    }
    std::printf("reports %4d/s (done %.0f/s, refused %ld)%s: filter calls %zu, p50 %.0f us, p99 %.0f us, max %.0f us\n",
                p.rate, p.reports / p.seconds, p.refused, binds.c_str(), p.us.size(), Pct(p.us, 0.5), Pct(p.us, 0.99),
                p.us.empty() ? 0.0 : p.us.back());
  }
  // Per kind of phase (its report and bind rates), over every round: the
  // filter calls pooled (a p99 over rounds x calls, ~rounds times the tail
  // samples of one phase) and the median of the rounds' own p99s.
  std::map<std::pair<int, int>, std::vector<const Phase*>> by_kind;
  for (const Phase& p : phases) by_kind[{p.rate, p.bind_rate}].push_back(&p);
  for (const auto& [kind, list] : by_kind) {
    std::vector<double> pooled, p99s;
    for (const Phase* p : list) {
      pooled.insert(pooled.end(), p->us.begin(), p->us.end());
      p99s.push_back(Pct(p->us, 0.99));
    }
    std::sort(pooled.begin(), pooled.end());
    std::sort(p99s.begin(), p99s.end());
    std::printf("pooled, reports %4d/s, binds %4d/s, %zu phases: filter calls %zu, p50 %.0f us, p99 %.0f us, "
                "p99.9 %.0f us; median of the phases' p99 %.0f us\n",
                kind.first, kind.second, list.size(), pooled.size(), Pct(pooled, 0.5), Pct(pooled, 0.99),
                Pct(pooled, 0.999), Pct(p99s, 0.5));
  }
  std::printf("RSS with the snapshot held: %.1f MiB before the nodes reported, %.1f MiB after (per-pod figures "
              "on every GPU), %.1f MiB at the end (with the usage refresher's spare snapshot)\n",
              rss_before / 1024.0, rss_after / 1024.0, RssKb() / 1024.0);
  const auto counts = store->SnapshotReloads();
  std::printf("snapshot refreshes: %llu incremental (%llu of them on a copy of every node, %llu on the spare "
              "brought up to date; %llu nodes re-read as usage only), %llu full\n",
              static_cast<unsigned long long>(counts.incremental), static_cast<unsigned long long>(counts.copied),
              static_cast<unsigned long long>(counts.caught_up), static_cast<unsigned long long>(counts.usage_nodes),
              static_cast<unsigned long long>(counts.full));
  PrintValkey(phases);
  if (next_bind.load() > 0) {
    auto end_snap = store->Snapshot();
    size_t held = 0;
    if (end_snap.ok()) {
      for (const auto& [name, n] : (*end_snap)->nodes) held += n.entries.size();
    }
    std::printf("binds: %ld in all; the ledger holds %zu entries at the end (%d at the start)\n", next_bind.load(), held,
                o.entries);
  }
  for (int n = 0; n < o.nodes; ++n) (void)store->RemoveNode(names[n]);
  (void)client->Command({"DEL", prefix + ":nodes", prefix + ":pods", prefix + ":epoch", prefix + ":changes",
                         prefix + ":reported", prefix + ":inflight", prefix + ":sealed", prefix + ":rebuilding",
                         prefix + ":reconciled", prefix + ":refused", prefix + ":refused:ts"});
  return 0;
}
