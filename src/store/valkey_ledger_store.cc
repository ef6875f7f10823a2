// The VRAM ledger in Valkey.
//
// Keys (P = client prefix, NODE inside a hash tag):
//   P:nodes          set   node names
//   P:{NODE}:cap     hash  gpu index -> capacity bytes; "uuid:<idx>" -> GPU UUID
//   P:{NODE}:alloc   hash  pod uid -> entry JSON (entry_codec.h)
//   P:{NODE}:used    hash  gpu index -> bytes in use; "ts" -> report time (server ms)
//   P:{NODE}:models  hash  model -> last placement on the node (server ms)
//   P:pods           hash  pod uid -> node holding its entry (idempotency, moves)
//   P:epoch          int   INCR on every change of the keys above (not P:pods alone)
//   P:changes        zset  change log: node -> epoch of its last change; member ''
//                          -> the epoch after which every change is logged
//                          (kBumpLua; at most ~100,000 members)
//   P:sealed         str   present while the ledger is complete: "<ms>:<token>"
//                          of the rebuild that sealed it (ReadSeal, Seal)
//   P:rebuilding     str   "<ms>:<who>": the rebuild under way (BeginRebuild)
//
// Every write is one Lua script (atomic) that stamps times with the server's
// TIME, so replicas' clocks never matter, and moves the epoch and logs the
// nodes it changed with the shared bump() prelude. Snapshot() caches the
// ledger at one epoch; when the epoch moves it reads again only the nodes
// logged after the cached epoch (Refresh), or the whole ledger (Load) when
// the log cannot vouch for that. Entry JSON (entry_codec.h) is compact and
// flat so that Lua's cjson reads it; numbers stay below 2^53.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <mutex>
#include <optional>
#include <thread>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "vramd/ledger/fit.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/quantity.h"
#include "vramd/metrics/thread_guard.h"
#include "vramd/parse.h"
#include "vramd/store/valkey_client.h"
#include "store/entry_codec.h"
#include "store/lua_scripts.h"  // generated from src/store/lua/*.lua

namespace vramd::store {
namespace {

using ledger::Entry;
using ledger::EntryState;

// ---------------------------------------------------------------------------
// Scripts. KEYS are passed explicitly where known in advance; the other
// node's alloc key (moves) is built from the prefix, which is fine for the
// standalone primary DESIGN.md §3 prescribes. Every write script is built as
// the prelude lua/bump.lua followed by its body (WriteScript), and ends a change
// with bump(). The scripts live in src/store/lua/*.lua (each opens with what it
// takes, returns and guarantees), embedded at build time as lua::k<Name>.

// A write script: the shared prelude (lua/bump.lua), then the body.
std::string WriteScript(std::string_view body) { return std::string(lua::kBump).append(body); }
// With a shared Lua helper (defined after bump, so it may call it) before the body.
std::string WriteScript(std::string_view helper, std::string_view body) {
  return std::string(lua::kBump).append(helper).append(body);
}

bool ParseInt64(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseIndex(std::string_view s, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && *out >= 0;
}

// A node name becomes part of key names inside a hash tag.
Status CheckNodeName(const std::string& node) {
  if (node.empty()) return InvalidArgument("empty node name");
  if (node.find_first_of("{}") != std::string::npos) {
    return InvalidArgument("node name '" + node + "' contains '{' or '}'");
  }
  return Status::Ok();
}

Status CheckEntry(const Entry& e, bool reserve) {
  if (e.pod_uid.empty()) return InvalidArgument("entry without a pod UID");
  const std::string who = "entry of pod " + e.ns + "/" + e.name + " (" + e.pod_uid + ")";
  if (e.gpus.empty()) return InvalidArgument(who + " lists no GPU");
  for (size_t i = 0; i < e.gpus.size(); ++i) {
    if (e.gpus[i] < 0) return InvalidArgument(who + " lists a negative GPU index");
    if (i > 0 && e.gpus[i] <= e.gpus[i - 1]) {
      return InvalidArgument(who + ": GPU indices must be ascending and distinct");
    }
  }
  if (e.per_gpu < 0 || (reserve && e.per_gpu == 0)) {
    return InvalidArgument(who + ": per-GPU amount must be positive");
  }
  if (e.peak_per_gpu < 0) return InvalidArgument(who + ": negative peak");
  if (std::string problem = EntryFieldProblem(e); !problem.empty()) return InvalidArgument(who + ": " + problem);
  return Status::Ok();
}

// A script's reply that is not what the script returns: the server refusing
// writes for now (a replica after failover, out of memory, loading...) is
// kUnavailable; anything else (a script error) is a bug, kInternal.
Status ScriptError(std::string_view what, const Reply& r) {
  if (!r.is_error()) return Internal("valkey " + std::string(what) + " script: unexpected reply");
  static constexpr std::string_view kTransient[] = {"READONLY", "OOM",        "BUSY",
                                                     "LOADING",  "MASTERDOWN", "NOREPLICAS",
                                                     "TRYAGAIN", "CLUSTERDOWN"};
  for (std::string_view t : kTransient) {
    if (std::string_view(r.str).starts_with(t)) {
      return Unavailable("valkey refused the " + std::string(what) + " script: " + r.str);
    }
  }
  return Internal("valkey " + std::string(what) + " script failed: " + r.str);
}

// Counts a write of this process once it has returned (whatever its
// outcome): WatchedSnapshot() then reads the epoch before trusting its cache.
struct WriteMark {
  std::atomic<uint64_t>* writes;
  ~WriteMark() { writes->fetch_add(1); }
};

class ValkeyLedgerStore final : public LedgerStore {
 public:
  explicit ValkeyLedgerStore(std::shared_ptr<ValkeyClient> client)
      : client_(std::move(client)),
        prefix_(client_->prefix()),
        nodes_key_(prefix_ + ":nodes"),
        pods_key_(prefix_ + ":pods"),
        epoch_key_(prefix_ + ":epoch"),
        changes_key_(prefix_ + ":changes") {}

  ~ValkeyLedgerStore() override {
    watch_stop_.store(true);
    if (watch_thread_.joinable()) watch_thread_.join();
  }

  // The write scripts publish each new epoch on the channel named like the
  // epoch key (kBumpLua). While subscribed, WatchedSnapshot() returns the
  // cached snapshot without reading the epoch when (1) no notification
  // names a newer epoch, (2) this process wrote nothing since the cache was
  // last confirmed by an epoch read, and (3) that confirmation happened
  // under the current subscription (anything published while it was down
  // is lost: a new subscription forces one epoch read first).
  void StartEpochWatch() override {
    if (watch_thread_.joinable()) return;
    watch_thread_ = std::thread([this] {
      // Subscribe returns at stop; an exception is counted and the watch starts over.
      while (!watch_stop_.load()) {
        if (metrics::GuardedStep(metrics::kThreadEpochWatch, [this] {
          (void)client_->Subscribe(
              epoch_key_, watch_stop_,
              [this](bool live) {
                if (live) {
                  watched_epoch_.store(0);  // a new primary may count from lower
                  watch_gen_.fetch_add(1);
                  watch_live_.store(true);
                  spdlog::info("valkey: following ledger changes on {}", epoch_key_);
                } else {
                  watch_live_.store(false);
                }
              },
              [this](const std::string& payload) {
                int64_t e = 0;
                if (!ParseInt64(payload, &e) || e < 0) return;
                uint64_t cur = watched_epoch_.load();
                while (cur < static_cast<uint64_t>(e) && !watched_epoch_.compare_exchange_weak(cur, e)) {
                }
              });
        })) {
          break;
        }
        watch_live_.store(false);
        metrics::PauseAfterError(watch_stop_);
      }
    });
  }

  bool EpochWatchLive() const override { return watch_live_.load(); }
  uint64_t EpochChecks() const override { return epoch_checks_.load(); }

  Result<ledger::SnapshotPtr> WatchedSnapshot() override {
    if (watch_live_.load()) {
      std::lock_guard lk(cache_mu_);
      if (cache_ && cache_gen_ == watch_gen_.load() && cache_writes_ == local_writes_.load() &&
          cache_->epoch >= watched_epoch_.load()) {
        return cache_;
      }
    }
    return Snapshot();
  }

  Result<ledger::SnapshotPtr> Snapshot() override {
    // What the cache will be known to cover once the epoch read below
    // confirms it (or a reload replaces it): read before that epoch read.
    const uint64_t gen = watch_gen_.load();
    const uint64_t writes = local_writes_.load();
    // When the cache is known to be behind — this process wrote since it was
    // confirmed, or a notification names a newer epoch — a lone epoch read
    // would only say so: the refresh reads the epoch itself, in the same
    // round trip as the change log.
    bool behind = false;
    {
      std::lock_guard lk(cache_mu_);
      behind = cache_ && (cache_writes_ != writes ||
                          (watch_live_.load() && cache_gen_ == gen && cache_->epoch < watched_epoch_.load()));
    }
    std::optional<uint64_t> epoch;
    if (!behind) {
      epoch_checks_.fetch_add(1);
      auto read = ReadEpoch();
      if (!read.ok()) return read.status();
      epoch = *read;
    }
    // Taken after the epoch read (or, when behind, after the writes this
    // call must see): a reload that starts later reads newer data.
    const uint64_t ticket = seq_.fetch_add(1) + 1;
    if (epoch) {
      std::lock_guard lk(cache_mu_);
      if (cache_ && cache_->epoch == *epoch) {
        Vouch(gen, writes);
        return cache_;
      }
    }
    // One reload at a time; the others wait and take its result when it
    // started after their epoch read (or saw the same epoch).
    std::unique_lock reload(reload_mu_);
    {
      std::lock_guard lk(cache_mu_);
      const bool same = cache_ && epoch && cache_->epoch == *epoch;
      if (same) Vouch(gen, writes);
      if (cache_ && (same || cache_seq_ >= ticket)) return cache_;
    }
    const uint64_t start = seq_.load();
    ledger::SnapshotPtr base;
    {
      std::lock_guard lk(cache_mu_);
      base = cache_;
    }
    // With a cached snapshot only the nodes changed since its epoch are
    // read again (Refresh falls back to Load when it cannot vouch for that).
    auto loaded = base ? Refresh(std::move(base)) : Load();
    if (!loaded.ok()) return loaded.status();
    ledger::SnapshotPtr fresh = std::move(loaded).value();
    ledger::SnapshotPtr old;
    {
      std::lock_guard lk(cache_mu_);
      old = std::exchange(cache_, fresh);
      cache_seq_ = start;
      Vouch(gen, writes);
    }
    reload.unlock();
    return fresh;  // the previous snapshot, if unused, is freed here, outside both locks
  }

  Result<ReserveOutcome> Reserve(const ReserveRequest& req) override {
    WriteMark mark{&local_writes_};
    if (Status s = CheckNodeName(req.node); !s.ok()) return s;
    if (Status s = CheckEntry(req.entry, /*reserve=*/true); !s.ok()) return s;
    const Entry& e = req.entry;
    std::vector<std::string> args;
    args.reserve(9 + e.gpus.size());
    args.push_back(prefix_);
    args.push_back(req.node);
    args.push_back(e.pod_uid);
    args.push_back(EncodeEntry(e, /*omit_created=*/true));
    args.push_back(std::to_string(e.per_gpu));
    args.emplace_back(req.fit_on_usage ? "1" : "0");
    args.push_back(std::to_string(std::max<int64_t>(req.usage_max_age_ms, 0)));
    args.push_back(e.model);
    args.push_back(std::to_string(std::max<int64_t>(req.in_flight_ttl_ms, 0)));
    args.emplace_back(req.require_sealed ? "1" : "0");
    args.push_back(std::to_string(max_epoch_seen_.load()));
    for (int g : e.gpus) args.push_back(std::to_string(g));
    auto r = client_->EvalReplicated(
        reserve_,
        {nodes_key_, NodeKey(req.node, "cap"), NodeKey(req.node, "alloc"), NodeKey(req.node, "used"),
         NodeKey(req.node, "models"), pods_key_, epoch_key_, changes_key_, inflight_key_, sealed_key_},
        args);
    if (!r.ok()) return r.status();
    const Reply& rep = r->reply;
    if (rep.type != Reply::Type::kArray || rep.elements.empty() ||
        rep.elements[0].type != Reply::Type::kString) {
      return ScriptError("reserve", rep);
    }
    const std::string& tag = rep.elements[0].str;
    const auto arg = [&](size_t i) -> std::string {
      return i < rep.elements.size() ? rep.elements[i].str : std::string();
    };
    const std::string pod = "pod " + e.ns + "/" + e.name + " (" + e.pod_uid + ")";
    if ((tag == "reserved" || tag == "moved" || tag == "held") && !r->replication.ok()) {
      return NotReplicated(req.node, e.pod_uid, pod, /*ours=*/tag != "held", r->replication);
    }
    if (tag == "reserved") return ReserveOutcome::kReserved;
    if (tag == "held") return ReserveOutcome::kAlreadyHeld;
    if (tag == "rebuilding") {
      if (arg(1) == "epoch went back") {
        spdlog::error("valkey: the ledger's epoch went back (a replica that missed writes was promoted?): "
                      "unsealed; the leader rebuilds it from the cluster");
      }
      return Unavailable(std::string(kRebuildingMessage) + " (" + arg(1) + ")");
    }
    if (tag == "moved") {
      spdlog::info("moved the unbound reservation of {} from node {} to node {}", pod, arg(1),
                   req.node);
      return ReserveOutcome::kMoved;
    }
    if (tag == "conflict") {
      return Conflict(pod + " already holds VRAM on node " + arg(1) + " (state " + arg(2) + ")");
    }
    if (tag == "no_node") return NotFound("node " + req.node + " is not in the ledger");
    if (tag == "no_gpu") {
      return NotFound("GPU " + arg(1) + " of node " + req.node + " is not in the ledger");
    }
    if (tag == "bad_cap") {
      return Internal("capacity of GPU " + arg(1) + " of node " + req.node +
                      " is not a number: '" + arg(2) + "'");
    }
    if (tag == "insufficient" && rep.elements.size() == 2) {
      return Status(Code::kInsufficient, InsufficientReason(req, rep.elements[1]));
    }
    return ScriptError("reserve", rep);
  }

  Result<bool> Release(const std::string& node, const std::string& pod_uid) override {
    WriteMark mark{&local_writes_};
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    if (pod_uid.empty()) return InvalidArgument("release without a pod UID");
    auto r = client_->Eval(release_, {NodeKey(node, "alloc"), pods_key_, epoch_key_, changes_key_},
                           {pod_uid, node});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("release", *r);
    return r->integer > 0;
  }

  Status SetEntryState(const std::string& node, const std::string& pod_uid,
                       EntryState state) override {
    return RunSetState(set_state_, {NodeKey(node, "alloc"), epoch_key_, changes_key_}, node, pod_uid, state);
  }

  Status FinishBind(const std::string& node, const std::string& pod_uid) override {
    return RunSetState(finish_bind_, {NodeKey(node, "alloc"), epoch_key_, changes_key_, inflight_key_}, node,
                       pod_uid, EntryState::kBound);
  }

  Status PutEntry(const std::string& node, const Entry& entry) override {
    WriteMark mark{&local_writes_};
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    if (Status s = CheckEntry(entry, /*reserve=*/false); !s.ok()) return s;
    const bool stamp = entry.created_ms <= 0;
    auto r = client_->EvalReplicated(put_entry_,
                                     {nodes_key_, NodeKey(node, "alloc"), NodeKey(node, "models"),
                                      pods_key_, epoch_key_, changes_key_},
                                     {prefix_, node, entry.pod_uid, EncodeEntry(entry, stamp),
                                      stamp ? "1" : "0", entry.model});
    if (!r.ok()) return r.status();
    if (r->reply.type != Reply::Type::kInteger) return ScriptError("put-entry", r->reply);
    if (!r->replication.ok()) {
      return Unavailable("the entry of pod " + entry.pod_uid + " on node " + node +
                         " is not replicated: " + r->replication.message());
    }
    return Status::Ok();
  }

  Status SetCapacity(const std::string& node, const std::vector<GpuCapacity>& gpus) override {
    WriteMark mark{&local_writes_};
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    std::vector<std::string> args;
    args.reserve(1 + 4 * gpus.size());
    args.push_back(node);
    std::set<int> seen;
    for (const auto& g : gpus) {
      if (g.index < 0) return InvalidArgument("node " + node + ": negative GPU index");
      if (!seen.insert(g.index).second) {
        return InvalidArgument("node " + node + ": GPU " + std::to_string(g.index) +
                               " listed twice");
      }
      if (g.capacity < 0) {
        return InvalidArgument("node " + node + ": negative capacity for GPU " +
                               std::to_string(g.index));
      }
      args.push_back(std::to_string(g.index));
      args.push_back(std::to_string(g.capacity));
      if (!g.uuid.empty()) {
        args.push_back("uuid:" + std::to_string(g.index));
        args.push_back(g.uuid);
      }
    }
    auto r = client_->Eval(set_capacity_,
                           {nodes_key_, NodeKey(node, "cap"), epoch_key_, changes_key_}, args);
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("set-capacity", *r);
    return Status::Ok();
  }

  Status RemoveNode(const std::string& node) override {
    WriteMark mark{&local_writes_};
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    auto r = client_->Eval(remove_node_,
                           {nodes_key_, NodeKey(node, "cap"), NodeKey(node, "alloc"),
                            NodeKey(node, "used"), NodeKey(node, "models"), pods_key_,
                            epoch_key_, changes_key_},
                           {node});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("remove-node", *r);
    return Status::Ok();
  }

  Status PushUsage(const std::string& node, const std::map<int, int64_t>& used) override {
    WriteMark mark{&local_writes_};
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    std::vector<std::string> args;
    args.reserve(1 + 2 * used.size());
    args.push_back(node);
    for (const auto& [gpu, bytes] : used) {
      if (gpu < 0) return InvalidArgument("usage of node " + node + ": negative GPU index");
      if (bytes < 0) {
        return InvalidArgument("usage of node " + node + ": negative bytes for GPU " +
                               std::to_string(gpu));
      }
      args.push_back(std::to_string(gpu));
      args.push_back(std::to_string(bytes));
    }
    auto r = client_->Eval(push_usage_,
                           {nodes_key_, NodeKey(node, "used"), epoch_key_, changes_key_}, args);
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("push-usage", *r);
    if (r->integer == -1) return NotFound("node " + node + " is not in the ledger");
    return Status::Ok();
  }

  Status BeginBind(const std::string& pod_uid, int64_t ttl_ms) override {
    auto r = client_->Eval(begin_bind_, {inflight_key_}, {pod_uid, std::to_string(ttl_ms)});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("marking the bind in flight failed: " + r->str);
    return Status::Ok();
  }

  Status EndBind(const std::string& pod_uid) override {
    auto r = client_->Command({"HDEL", inflight_key_, pod_uid});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("clearing the bind in flight failed: " + r->str);
    return Status::Ok();
  }

  Result<std::set<std::string>> BindsInFlight() override {
    auto r = client_->Eval(binds_in_flight_, {inflight_key_}, {});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("reading binds in flight failed: " + r->str);
    std::set<std::string> out;
    for (const Reply& e : r->elements) out.insert(e.str);
    return out;
  }

  Result<SealState> ReadSeal() override {
    auto r = client_->Eval(read_seal_, {sealed_key_, rebuilding_key_, epoch_key_, changes_key_},
                           {std::to_string(max_epoch_seen_.load())});
    if (!r.ok()) return r.status();
    return ParseSeal("read-seal", *r);
  }

  Result<SealState> BeginRebuild(const std::string& who) override {
    auto r = client_->Eval(begin_rebuild_, {sealed_key_, rebuilding_key_}, {who});
    if (!r.ok()) return r.status();
    return ParseSeal("begin-rebuild", *r);
  }

  Status Seal(const std::string& token, const std::vector<std::pair<std::string, std::string>>& required) override {
    WriteMark mark{&local_writes_};
    std::vector<std::string> args;
    args.reserve(2 + 2 * required.size());
    args.push_back(prefix_);
    args.push_back(token);
    for (const auto& [node, uid] : required) {
      if (Status s = CheckNodeName(node); !s.ok()) return s;
      args.push_back(node);
      args.push_back(uid);
    }
    auto r = client_->Eval(seal_, {sealed_key_, rebuilding_key_, epoch_key_, changes_key_}, args);
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kArray || r->elements.empty()) return ScriptError("seal", *r);
    const std::string& tag = r->elements[0].str;
    if (tag == "sealed") return Status::Ok();
    if (tag == "token") return Unavailable("the rebuild was restarted (the store lost data again)");
    if (tag == "missing" && r->elements.size() == 4) {
      return Unavailable(std::to_string(r->elements[1].integer) + " bound pod(s) still have no entry, e.g. pod " +
                         r->elements[3].str + " on node " + r->elements[2].str);
    }
    return ScriptError("seal", *r);
  }

  Status MarkReconciled() override {
    auto r = client_->Eval(mark_reconciled_, {reconciled_key_}, {});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("stamping the reconcile failed: " + r->str);
    return Status::Ok();
  }

  Result<int64_t> LastReconciled() override {
    auto r = client_->Command({"GET", reconciled_key_});
    if (!r.ok()) return r.status();
    if (r->is_nil()) return int64_t{0};
    if (r->type != Reply::Type::kString) return Internal("unexpected reply for " + reconciled_key_);
    std::optional<int64_t> ms = vramd::ParseInt64(r->str);
    if (!ms) return Internal(reconciled_key_ + " is not a number");
    return *ms;
  }

  Status Ping() override {
    auto r = client_->Command({"PING"});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Unavailable("valkey PING failed: " + r->str);
    return Status::Ok();
  }

  uint64_t MalformedFieldsSkipped() const override { return malformed_.load(); }

  ReloadCounts SnapshotReloads() const override {
    return {full_reloads_.load(), incremental_reloads_.load()};
  }

 private:
  std::string NodeKey(std::string_view node, std::string_view what) const {
    std::string k;
    k.reserve(prefix_.size() + node.size() + what.size() + 4);
    k += prefix_;
    k += ":{";
    k += node;
    k += "}:";
    k += what;
    return k;
  }

  Result<uint64_t> ReadEpoch() {
    auto r = client_->Command({"GET", epoch_key_});
    if (!r.ok()) return r.status();
    auto e = ParseEpoch(*r);
    if (e.ok()) Saw(*e);
    return e;
  }

  // The highest epoch read from the store (ReadSeal and Reserve pass it: a
  // lower one later means the store lost writes).
  void Saw(uint64_t epoch) {
    uint64_t cur = max_epoch_seen_.load();
    while (cur < epoch && !max_epoch_seen_.compare_exchange_weak(cur, epoch)) {
    }
  }

  Result<SealState> ParseSeal(const char* what, const Reply& r) const {
    if (r.type != Reply::Type::kArray || r.elements.size() != 3 || r.elements[0].type != Reply::Type::kInteger ||
        r.elements[2].type != Reply::Type::kInteger) {
      return ScriptError(what, r);
    }
    SealState st;
    st.sealed = r.elements[0].integer == 1;
    st.rebuild_token = r.elements[1].str;
    st.now_ms = r.elements[2].integer;
    if (!st.rebuild_token.empty()) {
      int64_t since = 0;
      const size_t colon = st.rebuild_token.find(':');
      if (ParseInt64(std::string_view(st.rebuild_token).substr(0, colon), &since)) st.rebuild_since_ms = since;
      else st.rebuild_since_ms = st.now_ms;  // unreadable: the quiet period starts now
    }
    return st;
  }

  Result<uint64_t> ParseEpoch(const Reply& r) const {
    if (r.is_nil()) return uint64_t{0};
    int64_t v = 0;
    if (r.type == Reply::Type::kString && ParseInt64(r.str, &v) && v >= 0) {
      return static_cast<uint64_t>(v);
    }
    return Internal("valkey key " + epoch_key_ + " is not a counter" +
                    (r.is_error() ? ": " + r.str : std::string()));
  }

  // Reads the whole ledger. The epoch is read before the data (same round
  // trip as the node set, executed first), so the data is at least as new as
  // the label: a write that lands during the load moves the epoch past the
  // label and the next Snapshot() reloads. The load is not one transaction
  // (it would stall the server for the whole read): a write racing it may be
  // half-visible until that next reload.
  // Called with reload_mu_ held (as is Refresh).
  Result<ledger::SnapshotPtr> Load() {
    auto head = client_->Pipeline({{"GET", epoch_key_}, {"SMEMBERS", nodes_key_}, {"EXISTS", sealed_key_}});
    if (!head.ok()) return head.status();
    auto epoch = ParseEpoch((*head)[0]);
    if (!epoch.ok()) return epoch.status();
    Saw(*epoch);
    const Reply& members = (*head)[1];
    if (members.type != Reply::Type::kArray) {
      return Internal("valkey key " + nodes_key_ + " is not a set" +
                      (members.is_error() ? ": " + members.str : std::string()));
    }
    const size_t n = members.elements.size();
    std::vector<std::vector<std::string>> cmds;
    cmds.reserve(4 * n);
    static constexpr const char* kParts[] = {"cap", "alloc", "used", "models"};
    for (const auto& m : members.elements) {
      for (const char* part : kParts) cmds.push_back({"HGETALL", NodeKey(m.str, part)});
    }
    auto snap = std::make_shared<ledger::Snapshot>();
    snap->epoch = *epoch;
    snap->sealed = (*head)[2].type == Reply::Type::kInteger && (*head)[2].integer == 1;
    snap->nodes.reserve(n);
    Problems problems;
    NodeProblems node_problems;
    EntryDecoder decoder;
    // Each node is built as soon as its four replies have arrived, so only
    // one node's replies are held at a time.
    Reply parts[4];
    Status s = client_->PipelineEach(cmds, [&](size_t i, Reply& r) {
      parts[i % 4] = std::move(r);
      if (i % 4 != 3) return;
      const std::string& name = members.elements[i / 4].str;
      ledger::Node node;
      node.name = name;
      const uint64_t before = problems.count;
      BuildNode(&node, parts[0], parts[1], parts[2], parts[3], &decoder, &problems);
      if (problems.count != before) node_problems[name] = problems.count - before;
      snap->nodes.emplace(name, std::move(node));
    });
    if (!s.ok()) return s;
    node_problems_ = std::move(node_problems);
    ReportProblems(problems, snap->epoch);
    full_reloads_.fetch_add(1);
    // Filter and prioritize read the compact index, not the nodes: at 5,000
    // nodes x 8 GPUs a filter call takes ~0.25 ms instead of 1-2 ms (the
    // index costs ~1.5 ms here, once per reload; docs/performance.md).
    ledger::IndexSnapshot(snap.get());
    return ledger::SnapshotPtr(std::move(snap));
  }

  // Brings `base` up to date by reading again only the nodes that the change
  // log (P:changes, see kBumpLua) names after base.epoch: one round trip for
  // the epoch and the log, one for those nodes (membership of P:nodes and
  // the same four hashes Load reads), and a copy of the other nodes from
  // `base`. The epoch is read first, before the log and the node data, so
  // the result is at least as new as its label (the argument of Load). A
  // node that is not logged after base.epoch last changed before `base`
  // read its epoch, so `base` holds its current data. The result equals a
  // Load at the same epoch. Falls back to Load when the log cannot vouch
  // for that, or when more than half the nodes changed. `base` is the cached
  // snapshot, passed as the only reference besides cache_ (see Writable).
  Result<ledger::SnapshotPtr> Refresh(ledger::SnapshotPtr base) {
    const uint64_t e0 = base->epoch;
    const size_t max_changed = base->nodes.size() / 2;
    auto head = client_->Pipeline({{"GET", epoch_key_},
                                   {"ZSCORE", changes_key_, ""},
                                   {"ZRANGEBYSCORE", changes_key_, "(" + std::to_string(e0), "+inf",
                                    "WITHSCORES", "LIMIT", "0", std::to_string(max_changed + 1)},
                                   {"EXISTS", sealed_key_}});
    if (!head.ok()) return head.status();
    auto epoch = ParseEpoch((*head)[0]);
    if (!epoch.ok()) return epoch.status();
    Saw(*epoch);
    // Sealing and unsealing move the epoch, so an unchanged epoch keeps it.
    const bool sealed = (*head)[3].type == Reply::Type::kInteger && (*head)[3].integer == 1;
    const Reply& marker = (*head)[1];
    const Reply& log = (*head)[2];
    std::vector<std::string> changed;
    const char* why = nullptr;
    uint64_t since = 0;
    if (*epoch == e0) return base;  // nothing changed (a caller that skipped the epoch read)
    if (*epoch < e0) {
      why = "the epoch went back";
    } else if (marker.type != Reply::Type::kString || !ParseScore(marker.str, &since)) {
      why = "no change log";
    } else if (since > e0) {
      why = "the change log starts after the cached epoch";
    } else if (log.type != Reply::Type::kArray || log.elements.size() % 2 != 0) {
      why = "the change log is not a sorted set";
    } else if (log.elements.size() / 2 > max_changed) {
      why = "more than half the nodes changed";
    } else {
      uint64_t last = 0;
      changed.reserve(log.elements.size() / 2);
      for (size_t i = 0; i < log.elements.size(); i += 2) {
        uint64_t score = 0;
        if (log.elements[i].str.empty()) {
          why = "the change log restarted";  // its marker moved past e0 after the ZSCORE
          break;
        }
        if (!ParseScore(log.elements[i + 1].str, &score)) {
          why = "the change log holds a bad score";
          break;
        }
        last = std::max(last, score);
        changed.push_back(log.elements[i].str);
      }
      // Every epoch is logged (as the score of a node it changed, or of a
      // later change of that node): a lower last score means something
      // moved the epoch without logging (an older vramd, a manual INCR).
      if (why == nullptr && last < *epoch) why = "a change was not logged";
    }
    if (why != nullptr) {
      spdlog::debug("ledger: full reload from epoch {} to {}: {}", e0, *epoch, why);
      base.reset();
      return Load();
    }

    static constexpr const char* kParts[] = {"cap", "alloc", "used", "models"};
    std::vector<std::vector<std::string>> cmds;
    cmds.reserve(5 * changed.size());
    for (const std::string& name : changed) {
      cmds.push_back({"SISMEMBER", nodes_key_, name});
      for (const char* part : kParts) cmds.push_back({"HGETALL", NodeKey(name, part)});
    }
    auto replies = client_->Pipeline(cmds);
    if (!replies.ok()) return replies.status();
    if (replies->size() != cmds.size()) return Internal("valkey pipeline: reply count mismatch");

    // Build the changed nodes first: nothing below can fail once the
    // snapshot to change is taken from the cache.
    Problems problems;
    NodeProblems node_problems = node_problems_;
    EntryDecoder decoder;
    std::vector<std::pair<std::string, std::optional<ledger::Node>>> updates;
    updates.reserve(changed.size());
    for (size_t k = 0; k < changed.size(); ++k) {
      std::string& name = changed[k];
      Reply* r = &(*replies)[5 * k];
      if (r[0].type != Reply::Type::kInteger) {
        return Internal("valkey key " + nodes_key_ + " is not a set" +
                        (r[0].is_error() ? ": " + r[0].str : std::string()));
      }
      node_problems.erase(name);
      if (r[0].integer == 0) {  // removed from the ledger
        updates.emplace_back(std::move(name), std::nullopt);
        continue;
      }
      ledger::Node node;
      node.name = name;
      const uint64_t before = problems.count;
      BuildNode(&node, r[1], r[2], r[3], r[4], &decoder, &problems);
      if (problems.count != before) node_problems[name] = problems.count - before;
      updates.emplace_back(std::move(name), std::move(node));
    }

    // The index of the snapshot being changed: only the changed nodes'
    // records are rebuilt (Writable drops it from the snapshot it returns).
    std::shared_ptr<const ledger::PlacementIndex> old_index = base->index;
    const ledger::Snapshot* const base_ptr = base.get();
    std::vector<std::string> changed_names;
    changed_names.reserve(updates.size());
    for (const auto& u : updates) changed_names.push_back(u.first);
    std::shared_ptr<ledger::Snapshot> snap = Writable(std::move(base));
    snap->epoch = *epoch;
    snap->sealed = sealed;
    for (auto& [name, node] : updates) {
      if (node) {
        snap->nodes.insert_or_assign(name, std::move(*node));
      } else {
        snap->nodes.erase(name);
      }
    }
    node_problems_ = std::move(node_problems);
    ReportProblems(problems, snap->epoch);
    ledger::ReindexSnapshot(snap.get(), std::move(old_index), changed_names, /*nodes_moved=*/snap.get() != base_ptr);
    incremental_reloads_.fetch_add(1);
    return ledger::SnapshotPtr(std::move(snap));
  }

  // The snapshot Refresh changes: the cached one itself when nothing else
  // holds it (a filter call holds one only for its duration), which spares
  // copying every node (~10 ms at 5,000 nodes x 8 GPUs / 50,000 entries)
  // and freeing the old ones; otherwise a copy, so that a snapshot a caller
  // holds never changes. The cache is emptied while the taken one is
  // changed; callers meanwhile wait on reload_mu_ and take the result.
  // Called with reload_mu_ held, `base` being cache_ and the caller's only
  // reference.
  std::shared_ptr<ledger::Snapshot> Writable(ledger::SnapshotPtr base) {
    {
      std::lock_guard lk(cache_mu_);
      if (cache_ == base) {
        cache_.reset();
        // New references come only from cache_ (under cache_mu_) or from
        // copying an existing one, so a count of 1 stays 1. The fence pairs
        // with the release of the last other holder's decrement: its reads
        // of the snapshot happen before the changes below.
        if (base.use_count() == 1) {
          std::atomic_thread_fence(std::memory_order_acquire);
          auto own = std::const_pointer_cast<ledger::Snapshot>(std::move(base));
          own->index.reset();  // points into the nodes; IndexSnapshot rebuilds it
          return own;  // created non-const by Load or Refresh (make_shared<Snapshot>)
        }
        cache_ = base;
      }
    }
    return std::make_shared<ledger::Snapshot>(*base);  // copies the nodes, not the index
  }

  // A sorted-set score that is a whole number below 2^53 (an epoch).
  static bool ParseScore(std::string_view s, uint64_t* out) {
    double d = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (ec != std::errc() || p != s.data() + s.size()) return false;
    if (!(d >= 0 && d < 9007199254740992.0) || d != static_cast<double>(static_cast<uint64_t>(d))) {
      return false;
    }
    *out = static_cast<uint64_t>(d);
    return true;
  }

  // Malformed fields per node of the cached snapshot (nodes without any are
  // left out); MalformedFieldsSkipped is their sum. Guarded by reload_mu_.
  using NodeProblems = std::unordered_map<std::string, uint64_t>;

  struct Problems {
    uint64_t count = 0;
    std::vector<std::string> samples;  // the first few, for the log
    void Add(std::string what) {
      ++count;
      if (samples.size() < 5) samples.push_back(std::move(what));
    }
  };

  // Hash replies alternate field, value.
  static bool IsHash(const Reply& r) {
    return r.type == Reply::Type::kArray && r.elements.size() % 2 == 0;
  }

  static void BuildNode(ledger::Node* node, Reply& cap, Reply& alloc, const Reply& used,
                        const Reply& models, EntryDecoder* decoder, Problems* problems) {
    const std::string& name = node->name;
    if (!IsHash(cap)) {
      problems->Add("node " + name + ": capacity key is not a hash");
    } else {
      node->gpus.reserve(cap.elements.size() / 2);
      std::vector<std::pair<int, std::string*>> uuids;
      for (size_t i = 0; i < cap.elements.size(); i += 2) {
        const std::string& f = cap.elements[i].str;
        std::string& v = cap.elements[i + 1].str;
        ledger::Gpu g;
        if (f.starts_with("uuid:")) {
          int idx = 0;
          if (ParseIndex(std::string_view(f).substr(5), &idx)) {
            uuids.emplace_back(idx, &v);
          } else {
            problems->Add("node " + name + ": capacity field '" + f + "' is not uuid:<index>");
          }
          continue;
        }
        if (!ParseIndex(f, &g.index)) {
          problems->Add("node " + name + ": capacity field '" + f + "' is not a GPU index");
          continue;
        }
        if (!ParseInt64(v, &g.capacity) || g.capacity < 0) {
          problems->Add("node " + name + ": capacity of GPU " + f + " is not a byte count: '" +
                        v + "'");
          continue;
        }
        node->gpus.push_back(std::move(g));
      }
      std::sort(node->gpus.begin(), node->gpus.end(),
                [](const ledger::Gpu& a, const ledger::Gpu& b) { return a.index < b.index; });
      for (auto& [idx, uuid] : uuids) {
        if (ledger::Gpu* g = FindGpu(node, idx)) g->uuid = std::move(*uuid);
      }
    }

    if (!IsHash(used)) {
      problems->Add("node " + name + ": usage key is not a hash");
    } else if (!used.elements.empty()) {
      int64_t ts = 0;
      for (size_t i = 0; i < used.elements.size(); i += 2) {
        if (used.elements[i].str == "ts" && !ParseInt64(used.elements[i + 1].str, &ts)) {
          problems->Add("node " + name + ": usage time is not a number");
        }
      }
      for (size_t i = 0; i < used.elements.size(); i += 2) {
        const std::string& f = used.elements[i].str;
        if (f == "ts") continue;
        int idx = 0;
        int64_t bytes = 0;
        if (!ParseIndex(f, &idx) || !ParseInt64(used.elements[i + 1].str, &bytes) || bytes < 0) {
          problems->Add("node " + name + ": usage field '" + f + "' is malformed");
          continue;
        }
        if (ledger::Gpu* g = FindGpu(node, idx)) {
          g->used = bytes;
          g->used_ts_ms = ts;
        }
      }
    }

    if (!IsHash(alloc)) {
      problems->Add("node " + name + ": allocation key is not a hash");
    } else {
      node->entries.reserve(alloc.elements.size() / 2);
      std::string why;
      for (size_t i = 0; i < alloc.elements.size(); i += 2) {
        Entry e;
        if (!decoder->Decode(alloc.elements[i + 1].str, &e, &why)) {
          problems->Add("node " + name + ": entry of pod " + alloc.elements[i].str + " skipped: " +
                        why);
          continue;
        }
        e.pod_uid = std::move(alloc.elements[i].str);
        node->entries.push_back(std::move(e));
      }
      // Oldest first (ties by UID), so snapshots are deterministic. Fields
      // mostly come back in insertion order, already sorted.
      const auto older = [](const Entry& a, const Entry& b) {
        return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.pod_uid < b.pod_uid;
      };
      if (!std::is_sorted(node->entries.begin(), node->entries.end(), older)) {
        std::sort(node->entries.begin(), node->entries.end(), older);
      }
    }

    if (!IsHash(models)) {
      problems->Add("node " + name + ": models key is not a hash");
    } else {
      for (size_t i = 0; i < models.elements.size(); i += 2) {
        int64_t ms = 0;
        if (!ParseInt64(models.elements[i + 1].str, &ms)) {
          problems->Add("node " + name + ": time of model '" + models.elements[i].str +
                        "' is not a number");
          continue;
        }
        node->models.emplace(models.elements[i].str, ms);
      }
    }
  }

  static ledger::Gpu* FindGpu(ledger::Node* node, int index) {
    auto it = std::lower_bound(node->gpus.begin(), node->gpus.end(), index,
                               [](const ledger::Gpu& g, int i) { return g.index < i; });
    return it != node->gpus.end() && it->index == index ? &*it : nullptr;
  }

  // Publishes the number of malformed fields in the ledger (the sum over
  // node_problems_, which the caller just updated) and logs it, with the
  // samples the load or refresh `p` met, when it changed since the last
  // load or refresh (the same corrupt field would otherwise be logged on
  // every reload).
  void ReportProblems(const Problems& p, uint64_t epoch) {
    uint64_t total = 0;
    for (const auto& [node, n] : node_problems_) total += n;
    const uint64_t before = malformed_.exchange(total);
    if (total == 0 || total == before) return;
    spdlog::warn("ledger at epoch {}: skipped {} malformed field(s) in valkey", epoch, total);
    for (const auto& s : p.samples) spdlog::warn("ledger: {}", s);
  }

  // A reservation the primary wrote but too few replicas acknowledged
  // (ValkeyOptions::min_replicas_ack): a failover now would lose it, so it
  // does not count. One this call wrote (`ours`) is released again, best
  // effort (a release that does not arrive only leaves a stale reservation,
  // which reconcile frees); a retry of the bind reserves it anew. One that
  // was already there (an earlier attempt of the same pod) is left alone.
  Status NotReplicated(const std::string& node, const std::string& uid, const std::string& pod,
                       bool ours, const Status& replication) {
    std::string msg = "the reservation of " + pod + " on node " + node +
                      " is not replicated: " + replication.message();
    if (ours) {
      auto undo = client_->Eval(
          release_, {NodeKey(node, "alloc"), pods_key_, epoch_key_, changes_key_}, {uid, node});
      if (!undo.ok() || undo->type != Reply::Type::kInteger) {
        msg += " (releasing it failed too: " +
               (undo.ok() ? ScriptError("release", *undo).message() : undo.status().message()) + ")";
      } else {
        msg += " (released it)";
      }
    }
    return Unavailable(std::move(msg));
  }

  // The reason of a refused reservation, in the ledger's words, from the
  // GPUs without room and their vectors as the script saw them.
  std::string InsufficientReason(const ReserveRequest& req, const Reply& fails) const {
    std::vector<ledger::GpuShort> short_gpus;
    for (const Reply& f : fails.elements) {
      if (f.type != Reply::Type::kArray || f.elements.size() < 5) continue;
      const int64_t alloc = f.elements[2].integer;
      const bool known = f.elements[4].integer != 0;
      short_gpus.push_back({static_cast<int>(f.elements[0].integer),
                            ledger::Vectors{f.elements[1].integer, alloc, known ? f.elements[3].integer : alloc}});
    }
    return ledger::RefusedReason(req.entry.per_gpu, static_cast<int>(req.entry.gpus.size()), short_gpus);
  }

  // SetEntryState and FinishBind: `script` ends with set_state(KEYS[1..3],
  // uid, state, node). Only "bound" must survive a failover before the
  // caller goes on; reconcile derives "terminating" from the pod again.
  Status RunSetState(const Script& script, const std::vector<std::string>& keys, const std::string& node,
                     const std::string& pod_uid, EntryState state) {
    WriteMark mark{&local_writes_};
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    if (pod_uid.empty()) return InvalidArgument("entry state change without a pod UID");
    const std::vector<std::string> args{pod_uid, ledger::EntryStateName(state), node};
    Status replication;
    Result<Reply> r = Internal("unreached");
    if (state == EntryState::kBound) {
      auto rr = client_->EvalReplicated(script, keys, args);
      if (!rr.ok()) return rr.status();
      replication = rr->replication;
      r = std::move(rr->reply);
    } else {
      r = client_->Eval(script, keys, args);
    }
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("set-state", *r);
    if (r->integer == 1 && !replication.ok()) {
      return Unavailable("marking the entry of pod " + pod_uid + " on node " + node +
                         " bound is not replicated: " + replication.message());
    }
    if (r->integer == -1) return NotFound("no ledger entry for pod " + pod_uid + " on node " + node);
    if (r->integer == -2) {
      return Internal("the ledger entry of pod " + pod_uid + " on node " + node + " is not readable JSON");
    }
    return Status::Ok();
  }

  const std::shared_ptr<ValkeyClient> client_;
  const std::string prefix_;
  const std::string nodes_key_;
  const std::string pods_key_;
  const std::string epoch_key_;
  const std::string changes_key_;
  const std::string inflight_key_ = prefix_ + ":inflight";
  const std::string sealed_key_ = prefix_ + ":sealed";
  const std::string rebuilding_key_ = prefix_ + ":rebuilding";
  const std::string reconciled_key_ = prefix_ + ":reconciled";

  const Script reserve_{WriteScript(lua::kFit, lua::kReserve)};
  const Script release_{WriteScript(lua::kRelease)};
  const Script set_state_{WriteScript(lua::kSetStateFn, lua::kSetState)};
  const Script finish_bind_{WriteScript(lua::kSetStateFn, lua::kFinishBind)};
  const Script put_entry_{WriteScript(lua::kPutEntry)};
  const Script set_capacity_{WriteScript(lua::kSetCapacity)};
  const Script remove_node_{WriteScript(lua::kRemoveNode)};
  const Script push_usage_{WriteScript(lua::kPushUsage)};
  const Script read_seal_{WriteScript(lua::kReadSeal)};
  const Script begin_rebuild_{std::string(lua::kBeginRebuild)};
  const Script seal_{WriteScript(lua::kSeal)};
  // Binds in flight: P:inflight hash uid -> expiry (server ms).
  const Script begin_bind_{std::string(lua::kBeginBind)};
  const Script binds_in_flight_{std::string(lua::kBindsInFlight)};
  const Script mark_reconciled_{std::string(lua::kMarkReconciled)};

  // The epoch watch (StartEpochWatch, WatchedSnapshot).
  std::atomic<bool> watch_stop_{false};
  std::thread watch_thread_;
  std::atomic<bool> watch_live_{false};
  std::atomic<uint64_t> watch_gen_{0};       // subscriptions made so far
  std::atomic<uint64_t> watched_epoch_{0};   // highest epoch notified under the current one
  std::atomic<uint64_t> local_writes_{0};    // write scripts this process ran (WriteMark)
  std::atomic<uint64_t> epoch_checks_{0};
  std::atomic<uint64_t> max_epoch_seen_{0};  // Saw()
  uint64_t cache_gen_ = 0;     // guarded by cache_mu_: the cache covers every change
  uint64_t cache_writes_ = 0;  //   notified under subscription cache_gen_ and local write cache_writes_

  // With cache_mu_ held: the cached snapshot is at least as new as an epoch
  // read made after watch_gen_ was `gen` and local_writes_ was `writes`.
  void Vouch(uint64_t gen, uint64_t writes) {
    cache_gen_ = std::max(cache_gen_, gen);
    cache_writes_ = std::max(cache_writes_, writes);
  }

  std::atomic<uint64_t> seq_{0};      // Snapshot() calls that read an epoch
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> full_reloads_{0};
  std::atomic<uint64_t> incremental_reloads_{0};
  NodeProblems node_problems_;        // guarded by reload_mu_
  std::mutex reload_mu_;              // held for a whole reload
  std::mutex cache_mu_;               // guards cache_, cache_seq_ (held briefly)
  ledger::SnapshotPtr cache_;
  uint64_t cache_seq_ = 0;            // seq_ when the cached load began
};

}  // namespace

std::unique_ptr<LedgerStore> NewValkeyLedgerStore(std::shared_ptr<ValkeyClient> client) {
  return std::make_unique<ValkeyLedgerStore>(std::move(client));
}

}  // namespace vramd::store
