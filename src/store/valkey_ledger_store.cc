// The VRAM ledger in Valkey: the LedgerStore with its writes, binds in
// flight and the seal. The keys are listed in ledger_keys.h; the read side
// (the cached snapshot and the epoch watch) is snapshot_cache.h.
//
// Every write is one Lua script (atomic) that stamps times with the server's
// TIME, so replicas' clocks never matter, and moves the epoch and logs the
// nodes it changed with the shared bump() prelude. Entry JSON
// (entry_codec.h) is compact and flat so that Lua's cjson reads it; numbers
// stay below 2^53.
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "vramd/ledger/fit.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/quantity.h"
#include "vramd/parse.h"
#include "vramd/store/valkey_client.h"
#include "store/entry_codec.h"
#include "store/ledger_checks.h"
#include "store/ledger_decode.h"
#include "store/ledger_keys.h"
#include "store/refusal_codec.h"
#include "store/lua_scripts.h"  // generated from src/store/lua/*.lua
#include "store/snapshot_cache.h"

namespace vramd::store {
namespace {

using ledger::Entry;

// A ratio as the reserve script reads it (tonumber gives the same double).
std::string RatioArg(double ratio) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", ratio);
  return buf;
}
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

class ValkeyLedgerStore final : public LedgerStore {
 public:
  explicit ValkeyLedgerStore(std::shared_ptr<ValkeyClient> client)
      : client_(std::move(client)), keys_(client_->prefix()), snapshots_(client_) {}

  void StartEpochWatch() override { snapshots_.StartEpochWatch(); }
  bool EpochWatchLive() const override { return snapshots_.EpochWatchLive(); }
  uint64_t EpochChecks() const override { return snapshots_.EpochChecks(); }
  Result<ledger::SnapshotPtr> WatchedSnapshot() override { return snapshots_.WatchedSnapshot(); }
  Result<ledger::SnapshotPtr> Snapshot() override { return snapshots_.Snapshot(); }
  ledger::SnapshotPtr CachedSnapshot() override { return snapshots_.Cached(); }

  Result<ReserveOutcome> Reserve(const ReserveRequest& req) override {
    SnapshotCache::WriteMark mark(&snapshots_);
    if (Status s = CheckNodeName(req.node); !s.ok()) return s;
    if (Status s = CheckEntry(req.entry, /*reserve=*/true); !s.ok()) return s;
    const Entry& e = req.entry;
    std::vector<std::string> args;
    args.reserve(9 + e.gpus.size());
    args.push_back(keys_.prefix);
    args.push_back(req.node);
    args.push_back(e.pod_uid);
    args.push_back(EncodeEntry(e, /*omit_created=*/true));
    args.push_back(std::to_string(e.per_gpu));
    args.emplace_back(req.fit_on_usage ? "1" : "0");
    args.push_back(std::to_string(std::max<int64_t>(req.usage_max_age_ms, 0)));
    args.push_back(e.model);
    args.push_back(std::to_string(std::max<int64_t>(req.in_flight_ttl_ms, 0)));
    args.emplace_back(req.require_sealed ? "1" : "0");
    args.push_back(std::to_string(snapshots_.MaxEpochSeen()));
    const ledger::PeakDemand pd = ledger::PeakDemandOf(e, req.max_peak_ratio);
    args.push_back(std::to_string(pd.peak));
    args.push_back(std::to_string(pd.cover));
    args.push_back(RatioArg(pd.ratio));
    args.push_back(std::to_string(e.priority));
    for (int g : e.gpus) args.push_back(std::to_string(g));
    auto r = client_->EvalReplicated(
        reserve_,
        {keys_.nodes, keys_.Node(req.node, "cap"), keys_.Node(req.node, "alloc"), keys_.Node(req.node, "used"),
         keys_.Node(req.node, "models"), keys_.pods, keys_.epoch, keys_.changes, keys_.inflight, keys_.sealed},
        args);
    if (!r.ok()) return r.status();
    Reply& rep = r->reply;
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
    if (tag == "reserved") {
      // {'reserved', epoch, now, taken, v, ts} (lua/reserve.lua).
      std::vector<std::string> taken;
      if (rep.elements.size() > 3) {
        for (Reply& u : rep.elements[3].elements) taken.push_back(std::move(u.str));
      }
      if (!taken.empty()) {
        std::string uids;
        for (const std::string& u : taken) uids += (uids.empty() ? "" : ", ") + u;
        spdlog::info("{} (priority {}) took the room held on node {} for pods of lower priority: {}; they wait "
                     "again", pod, e.priority, req.node, uids);
      }
      int64_t epoch = 0, now = 0;
      if (rep.elements.size() == 6 && ParseInt64(arg(1), &epoch) && epoch > 0 && ParseInt64(arg(2), &now)) {
        SnapshotCache::OwnEntry w;
        w.uid = e.pod_uid;
        w.text = args[3] + arg(2) + "}";  // as the script stored it: ARGV[4] .. now .. '}'
        w.model = e.model;
        w.now_ms = now;
        w.taken = std::move(taken);
        w.per_pod = arg(4) == "2" || arg(4) == "3";  // as ApplyUsage reads the report
        if (!ParseInt64(arg(5), &w.usage_ts_ms)) w.usage_ts_ms = 0;
        snapshots_.ApplyOwnEntry(&mark, static_cast<uint64_t>(epoch), req.node, w);
      }
      return ReserveOutcome::kReserved;
    }
    if (tag == "held") return ReserveOutcome::kAlreadyHeld;
    if (tag == "rebuilding") {
      if (arg(1) == "epoch went back") {
        spdlog::error("valkey: the ledger's epoch went back (a replica that missed writes was promoted?): "
                      "unsealed; the leader rebuilds it from the cluster");
        return Unavailable(RebuildingMessage(kUnsealedEpoch));
      }
      if (arg(1) == "sealed by another store process") {
        spdlog::error("valkey: the ledger's seal was made by another server process (the store restarted from a "
                      "snapshot, or a replica was promoted): unsealed; the leader rebuilds it from the cluster");
        return Unavailable(RebuildingMessage(kUnsealedRestarted));
      }
      return Unavailable(RebuildingMessage(""));
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
    if (tag == "peak" && rep.elements.size() == 2) {
      return Status(Code::kInsufficient, PeakReason(req, rep.elements[1]));
    }
    return ScriptError("reserve", rep);
  }

  Result<bool> Release(const std::string& node, const std::string& pod_uid) override {
    return RunRelease(node, pod_uid, /*only_hold=*/false);
  }
  Result<bool> ReleaseHold(const std::string& node, const std::string& pod_uid) override {
    return RunRelease(node, pod_uid, /*only_hold=*/true);
  }
  Result<bool> HoldPending(const std::string& pod_uid) override {
    auto r = client_->Eval(hold_pending_, {keys_.holdwait}, {pod_uid});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("hold-pending", *r);
    return r->integer == 1;
  }
  Result<bool> RunRelease(const std::string& node, const std::string& pod_uid, bool only_hold) {
    SnapshotCache::WriteMark mark(&snapshots_);
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    if (pod_uid.empty()) return InvalidArgument("release without a pod UID");
    auto r = client_->Eval(release_, {keys_.Node(node, "alloc"), keys_.pods, keys_.epoch, keys_.changes,
                                      keys_.Node(node, "roomfor"), keys_.holdwait},
                           {pod_uid, node, only_hold ? "1" : "0", keys_.prefix});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("release", *r);
    return r->integer > 0;
  }

  Status SetEntryState(const std::string& node, const std::string& pod_uid,
                       EntryState state) override {
    return RunSetState(set_state_, {keys_.Node(node, "alloc"), keys_.epoch, keys_.changes}, node, pod_uid, state);
  }

  Status FinishBind(const std::string& node, const std::string& pod_uid) override {
    return RunSetState(finish_bind_, {keys_.Node(node, "alloc"), keys_.epoch, keys_.changes, keys_.inflight}, node,
                       pod_uid, EntryState::kBound);
  }

  // One script call (finish_binds.lua), one WAIT for the batch. Each mark has
  // a WriteMark of its own: each entry changed is one own write of its own
  // epoch, laid on the cache like FinishBind's.
  Status FinishBinds(const std::vector<BoundMark>& marks, std::vector<Status>* results) override {
    results->assign(marks.size(), Status::Ok());
    std::deque<SnapshotCache::WriteMark> write_marks;
    std::vector<size_t> sent;  // indexes into marks of the pods in the call
    std::vector<std::string> keys{keys_.epoch, keys_.changes, keys_.inflight}, args;
    for (size_t i = 0; i < marks.size(); ++i) {
      const BoundMark& m = marks[i];
      if (Status s = CheckNodeName(m.node); !s.ok()) {
        (*results)[i] = s;
        continue;
      }
      if (m.pod_uid.empty()) {
        (*results)[i] = InvalidArgument("entry state change without a pod UID");
        continue;
      }
      write_marks.emplace_back(&snapshots_);
      sent.push_back(i);
      keys.push_back(keys_.Node(m.node, "alloc"));
      args.push_back(m.pod_uid);
      args.push_back(m.node);
    }
    if (sent.empty()) return Status::Ok();
    auto r = client_->EvalReplicated(finish_binds_, keys, args);
    if (!r.ok()) return r.status();
    const Reply& reply = r->reply;
    if (reply.type != Reply::Type::kArray || reply.elements.size() != 2 * sent.size()) {
      return ScriptError("finish-binds", reply);
    }
    for (size_t j = 0; j < sent.size(); ++j) {
      const BoundMark& m = marks[sent[j]];
      const Reply& code = reply.elements[2 * j];
      const Reply& epoch_str = reply.elements[2 * j + 1];
      Status& out = (*results)[sent[j]];
      if (code.type != Reply::Type::kInteger) {
        out = ScriptError("finish-binds", reply);
        continue;
      }
      int64_t epoch = 0;
      if (code.integer == 1 && r->replication.ok() && epoch_str.type == Reply::Type::kString &&
          ParseInt64(epoch_str.str, &epoch) && epoch > 0) {
        snapshots_.ApplyOwnState(&write_marks[j], static_cast<uint64_t>(epoch), m.node, m.pod_uid,
                                 EntryState::kBound);
      }
      if (code.integer == 1 && !r->replication.ok()) {
        out = Unavailable("marking the entry of pod " + m.pod_uid + " on node " + m.node +
                          " bound is not replicated: " + r->replication.message());
      } else if (code.integer == -1) {
        out = NotFound("no ledger entry for pod " + m.pod_uid + " on node " + m.node);
      } else if (code.integer == -2) {
        out = Internal("the ledger entry of pod " + m.pod_uid + " on node " + m.node + " is not readable JSON");
      }
    }
    return Status::Ok();
  }

  Status PutEntry(const std::string& node, const Entry& entry) override {
    SnapshotCache::WriteMark mark(&snapshots_);
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    if (Status s = CheckEntry(entry, /*reserve=*/false); !s.ok()) return s;
    const bool stamp = entry.created_ms <= 0;
    auto r = client_->EvalReplicated(put_entry_,
                                     {keys_.nodes, keys_.Node(node, "alloc"), keys_.Node(node, "models"),
                                      keys_.pods, keys_.epoch, keys_.changes},
                                     {keys_.prefix, node, entry.pod_uid, EncodeEntry(entry, stamp),
                                      stamp ? "1" : "0", entry.model});
    if (!r.ok()) return r.status();
    if (r->reply.type != Reply::Type::kInteger) return ScriptError("put-entry", r->reply);
    if (!r->replication.ok()) {
      return Unavailable("the entry of pod " + entry.pod_uid + " on node " + node +
                         " is not replicated: " + r->replication.message());
    }
    return Status::Ok();
  }

  Result<HoldOutcome> HoldRoom(const std::string& node, const std::vector<std::string>& victims, const Entry& hold,
                               int64_t ttl_ms) override {
    SnapshotCache::WriteMark mark(&snapshots_);
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    if (Status s = CheckEntry(hold, /*reserve=*/false); !s.ok()) return s;
    if (hold.state != ledger::EntryState::kHold) return InvalidArgument("a hold must be in state hold");
    if (ttl_ms <= 0) return InvalidArgument("a hold needs a positive length");
    for (const std::string& v : victims) {
      if (v.empty() || v.find('\n') != std::string::npos) return InvalidArgument("a victim's UID is empty or holds a newline");
    }
    if (hold.pod_uid.find('\n') != std::string::npos) return InvalidArgument("the holder's UID holds a newline");
    Entry e = hold;
    e.hold_until_ms = 0;  // the scripts append it on the server's clock
    std::vector<std::string> args{keys_.prefix, node, hold.pod_uid, EncodeEntry(e, /*omit_created=*/true),
                                  std::to_string(ttl_ms)};
    args.insert(args.end(), victims.begin(), victims.end());
    auto r = client_->EvalReplicated(hold_room_, {keys_.nodes, keys_.Node(node, "alloc"), keys_.pods, keys_.epoch,
                                                  keys_.changes, keys_.Node(node, "roomfor"), keys_.holdwait},
                                     args);
    if (!r.ok()) return r.status();
    if (r->reply.type != Reply::Type::kInteger) return ScriptError("hold-room", r->reply);
    if (r->reply.integer < 0) return NotFound("node " + node + " is not in the ledger");
    if (r->reply.integer >= 1 && !r->replication.ok()) {
      return Unavailable("the hold for pod " + hold.pod_uid + " on node " + node +
                         " is not replicated: " + r->replication.message());
    }
    return r->reply.integer == 2 ? HoldOutcome::kPending
           : r->reply.integer == 1 ? HoldOutcome::kHeld
                                   : HoldOutcome::kHolderPlaced;
  }

  Result<bool> RefreshEntry(const std::string& node, const Entry& entry) override {
    SnapshotCache::WriteMark mark(&snapshots_);
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    if (Status s = CheckEntry(entry, /*reserve=*/false); !s.ok()) return s;
    if (entry.created_ms <= 0) return InvalidArgument("refreshing the entry of pod " + entry.pod_uid + " without its creation time");
    std::string gpus;
    for (int g : entry.gpus) {
      if (!gpus.empty()) gpus += ',';
      gpus += std::to_string(g);
    }
    // The usage figures come from the node's reports when read (ledger_decode.cc): not written.
    Entry text = entry;
    text.used = 0;
    text.used_ts_ms = 0;
    text.busy = false;
    auto r = client_->Eval(refresh_entry_, {keys_.Node(node, "alloc"), keys_.epoch, keys_.changes},
                           {entry.pod_uid, EncodeEntry(text, /*omit_created=*/false), node,
                            ledger::EntryStateName(entry.state), std::to_string(entry.per_gpu), gpus,
                            std::to_string(entry.created_ms), std::to_string(entry.last_active_ms)});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("refresh-entry", *r);
    if (r->integer == -2) {
      return Internal("the ledger entry of pod " + entry.pod_uid + " on node " + node + " is not readable JSON");
    }
    return r->integer == 1;
  }

  Status SetCapacity(const std::string& node, const std::vector<GpuCapacity>& gpus) override {
    SnapshotCache::WriteMark mark(&snapshots_);
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
                           {keys_.nodes, keys_.Node(node, "cap"), keys_.epoch, keys_.changes}, args);
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("set-capacity", *r);
    return Status::Ok();
  }

  Status RemoveNode(const std::string& node) override {
    SnapshotCache::WriteMark mark(&snapshots_);
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    auto r = client_->Eval(remove_node_,
                           {keys_.nodes, keys_.Node(node, "cap"), keys_.Node(node, "alloc"),
                            keys_.Node(node, "used"), keys_.Node(node, "models"), keys_.pods,
                            keys_.epoch, keys_.changes, keys_.reported, keys_.Node(node, "roomfor")},
                           {node, keys_.prefix});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("remove-node", *r);
    return Status::Ok();
  }

  // No WriteMark: a usage report reaches this process's watched snapshot
  // through the usage refresher, like another replica's (snapshot_cache.h).
  Status PushReport(const std::string& node, const ledger::UsageReport& report, bool in_cluster) override {
    if (Status s = CheckNodeName(node); !s.ok()) return s;
    if (Status s = ledger::CheckUsageReport(report); !s.ok()) {
      return InvalidArgument("usage of node " + node + ": " + s.message());
    }
    const bool v2 = report.version >= 2;
    std::string reported;  // P:reported's value: "<idx>=<total>=<uuid>,..."
    const size_t pairs = report.gpus.size() * (v2 ? 2 : 1) + 1;
    std::vector<std::string> args;
    args.reserve(4 + report.gpus.size() + 2 * pairs);
    args.push_back(node);
    args.emplace_back(in_cluster ? "1" : "0");
    args.emplace_back();  // reported, below
    args.push_back(std::to_string(report.gpus.size()));
    for (const ledger::GpuUsage& g : report.gpus) args.push_back(std::to_string(g.index));
    if (v2) {
      // "3": the packed layout below, which a vramd that knows only "2"
      // (per-field) then reads as a report without per-pod figures instead
      // of as one whose pods all use nothing (ledger_keys.h).
      args.emplace_back("v");
      args.emplace_back("3");
    }
    for (const ledger::GpuUsage& g : report.gpus) {
      const std::string idx = std::to_string(g.index);
      args.push_back(idx);
      args.push_back(std::to_string(g.used));
      if (!v2) continue;
      // One field per GPU for the rest of its report (ledger_keys.h): a
      // report of 8 GPUs and 80 pods is 18 fields instead of 113, and its
      // DEL + HSET costs Valkey ~14 us instead of ~124 us (docs/performance.md).
      args.push_back("g:" + idx);
      args.push_back(PackGpuUsage(g));
      if (!g.enforcement.backend.empty()) {
        args.push_back("e:" + idx);
        args.push_back(PackEnforcement(g.enforcement));
      }
      if (!reported.empty()) reported += ',';
      reported.append(idx).append("=").append(std::to_string(g.total)).append("=").append(g.uuid);
    }
    args[2] = std::move(reported);
    auto r = client_->Eval(push_usage_,
                           {keys_.nodes, keys_.Node(node, "used"), keys_.epoch, keys_.changes,
                            keys_.Node(node, "cap"), keys_.reported},
                           args);
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kArray || r->elements.empty()) return ScriptError("push-usage", *r);
    const std::string& tag = r->elements[0].str;
    if (tag == "ok") return Status::Ok();
    if (tag == "no_node") return NotFound("node " + node + " is not in the ledger");
    if (tag == "no_gpu" && r->elements.size() == 2) {
      return InvalidArgument("node " + node + " has no GPU " + r->elements[1].str);
    }
    return ScriptError("push-usage", *r);
  }

  Result<std::map<std::string, std::vector<ReportedGpu>>> ReportedGpus() override {
    auto r = client_->Command({"HGETALL", keys_.reported});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kArray || r->elements.size() % 2 != 0) {
      return Internal("unexpected reply for " + keys_.reported + (r->is_error() ? ": " + r->str : std::string()));
    }
    std::map<std::string, std::vector<ReportedGpu>> out;
    for (size_t i = 0; i < r->elements.size(); i += 2) {
      std::vector<ReportedGpu> gpus;
      if (!DecodeReportedGpus(r->elements[i + 1].str, &gpus)) {
        spdlog::warn("valkey: {} of node {} is malformed ('{}'): ignored", keys_.reported, r->elements[i].str,
                     r->elements[i + 1].str.substr(0, 80));
        continue;
      }
      out.emplace(std::move(r->elements[i].str), std::move(gpus));
    }
    return out;
  }

  Status BeginBind(const std::string& pod_uid, int64_t ttl_ms) override {
    auto r = client_->Eval(begin_bind_, {keys_.inflight}, {pod_uid, std::to_string(ttl_ms)});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("marking the bind in flight failed: " + r->str);
    return Status::Ok();
  }

  Status EndBind(const std::string& pod_uid) override {
    auto r = client_->Command({"HDEL", keys_.inflight, pod_uid});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("clearing the bind in flight failed: " + r->str);
    return Status::Ok();
  }

  Result<std::set<std::string>> BindsInFlight() override {
    auto r = client_->Eval(binds_in_flight_, {keys_.inflight}, {});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("reading binds in flight failed: " + r->str);
    std::set<std::string> out;
    for (const Reply& e : r->elements) out.insert(e.str);
    return out;
  }

  Status RecordRefusals(const std::vector<Refusal>& refusals) override {
    if (refusals.empty()) return Status::Ok();
    std::vector<std::string> args{std::to_string(kMaxRefusals)};
    args.reserve(1 + 2 * refusals.size());
    for (const Refusal& r : refusals) {
      if (r.uid.empty()) continue;
      args.push_back(r.uid);
      args.push_back(EncodeRefusalBody(r));
    }
    auto r = client_->Eval(record_refusals_, {keys_.refused, keys_.refused_ts}, args);
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("recording filter refusals failed: " + r->str);
    return Status::Ok();
  }

  Result<std::vector<Refusal>> ReadRefusals(int64_t max_age_ms) override {
    auto r = client_->Eval(read_refusals_, {keys_.refused, keys_.refused_ts}, {std::to_string(max_age_ms)});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("reading filter refusals failed: " + r->str);
    if (r->type != Reply::Type::kArray || r->elements.empty() || r->elements[0].type != Reply::Type::kInteger) {
      return Internal("reading filter refusals: unexpected reply");
    }
    const int64_t cutoff = r->elements[0].integer - max_age_ms;
    simdjson::ondemand::parser parser;
    std::vector<Refusal> out;
    std::vector<std::string> drop;
    for (size_t i = 1; i + 1 < r->elements.size(); i += 2) {
      Refusal ref;
      ref.uid = r->elements[i].str;
      std::string why;
      if (!DecodeRefusal(parser, r->elements[i + 1].str, &ref, &why)) {
        spdlog::warn("filter refusal of pod {} in {} is malformed ({}); deleting it", ref.uid, keys_.refused, why);
        drop.push_back(ref.uid);
      } else if (ref.ts_ms < cutoff) {
        drop.push_back(ref.uid);
      } else {
        out.push_back(std::move(ref));
      }
    }
    if (!drop.empty()) {
      if (Status s = ForgetRefusals(drop); !s.ok()) return s;
    }
    return out;
  }

  Status ForgetRefusals(const std::vector<std::string>& uids) override {
    if (uids.empty()) return Status::Ok();
    std::vector<std::string> hdel{"HDEL", keys_.refused}, zrem{"ZREM", keys_.refused_ts};
    hdel.insert(hdel.end(), uids.begin(), uids.end());
    zrem.insert(zrem.end(), uids.begin(), uids.end());
    Result<std::vector<Reply>> rs = client_->Pipeline({hdel, zrem});
    if (!rs.ok()) return rs.status();
    for (const Reply& x : *rs) {
      if (x.is_error()) return Internal("forgetting filter refusals failed: " + x.str);
    }
    return Status::Ok();
  }

  Result<SealState> ReadSeal() override {
    auto r = client_->Eval(read_seal_, {keys_.sealed, keys_.rebuilding, keys_.epoch, keys_.changes},
                           {std::to_string(snapshots_.MaxEpochSeen())});
    if (!r.ok()) return r.status();
    return ParseSeal("read-seal", *r);
  }

  Result<SealState> BeginRebuild(const std::string& who) override {
    auto r = client_->Eval(begin_rebuild_, {keys_.sealed, keys_.rebuilding, keys_.epoch, keys_.changes}, {who});
    if (!r.ok()) return r.status();
    return ParseSeal("begin-rebuild", *r);
  }

  Status Seal(const std::string& token, const std::vector<std::pair<std::string, std::string>>& required) override {
    SnapshotCache::WriteMark mark(&snapshots_);
    std::vector<std::string> args;
    args.reserve(2 + 2 * required.size());
    args.push_back(keys_.prefix);
    args.push_back(token);
    for (const auto& [node, uid] : required) {
      if (Status s = CheckNodeName(node); !s.ok()) return s;
      args.push_back(node);
      args.push_back(uid);
    }
    auto r = client_->Eval(seal_, {keys_.sealed, keys_.rebuilding, keys_.epoch, keys_.changes}, args);
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
    auto r = client_->Eval(mark_reconciled_, {keys_.reconciled}, {});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Internal("stamping the reconcile failed: " + r->str);
    return Status::Ok();
  }

  Result<std::string> BudgetTake(const std::string& key, int max_per_minute, int64_t cooldown_ms,
                                 int64_t /*now_ms*/, const std::string& leader_identity) override {
    std::string id = (leader_identity.empty() ? std::string() : leader_identity + "/") + budget_id_prefix_ +
                     std::to_string(budget_seq_.fetch_add(1));
    auto r = client_->Eval(budget_take_, {keys_.budget_recent, keys_.BudgetKey(key), keys_.leader},
                           {std::to_string(max_per_minute), std::to_string(std::max<int64_t>(0, cooldown_ms)), id,
                            leader_identity});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("budget-take", *r);
    if (r->integer < 0) return Conflict(leader_identity + " does not hold the leader lease in the store");
    return r->integer == 1 ? id : std::string();
  }

  Status BudgetGiveBack(const std::string& key, const std::string& claim) override {
    auto r = client_->Eval(budget_give_back_, {keys_.budget_recent, keys_.BudgetKey(key)}, {claim});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("budget-give-back", *r);
    return Status::Ok();
  }

  Status BudgetRecord(const std::string& key, int64_t cooldown_ms, int64_t /*now_ms*/) override {
    const std::string id = budget_id_prefix_ + std::to_string(budget_seq_.fetch_add(1));
    auto r = client_->Eval(budget_record_, {keys_.budget_recent, keys_.BudgetKey(key)},
                           {std::to_string(std::max<int64_t>(0, cooldown_ms)), id});
    if (!r.ok()) return r.status();
    if (r->type != Reply::Type::kInteger) return ScriptError("budget-record", *r);
    return Status::Ok();
  }

  Result<int64_t> LastReconciled() override {
    auto r = client_->Command({"GET", keys_.reconciled});
    if (!r.ok()) return r.status();
    if (r->is_nil()) return int64_t{0};
    if (r->type != Reply::Type::kString) return Internal("unexpected reply for " + keys_.reconciled);
    std::optional<int64_t> ms = vramd::ParseInt64(r->str);
    if (!ms) return Internal(keys_.reconciled + " is not a number");
    return *ms;
  }

  Status Ping() override {
    auto r = client_->Command({"PING"});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Unavailable("valkey PING failed: " + r->str);
    return Status::Ok();
  }

  uint64_t MalformedFieldsSkipped() const override { return snapshots_.MalformedFieldsSkipped(); }

  ReloadCounts SnapshotReloads() const override { return snapshots_.Reloads(); }

 private:
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
      auto undo = client_->Eval(release_,
                                {keys_.Node(node, "alloc"), keys_.pods, keys_.epoch, keys_.changes,
                                 keys_.Node(node, "roomfor"), keys_.holdwait},
                                {uid, node, "0", keys_.prefix});
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
    return ledger::RefusedReason(req.entry.per_gpu, static_cast<int>(req.entry.gpus.size()), short_gpus,
                                 req.entry.peak_per_gpu);
  }

  // The reserve script's {'peak', {{idx, cap, P, V}, ...}} in ledger's words.
  static std::string PeakReason(const ReserveRequest& req, const Reply& fails) {
    std::vector<ledger::GpuPeakShort> short_gpus;
    for (const Reply& f : fails.elements) {
      if (f.type != Reply::Type::kArray || f.elements.size() < 4) continue;
      short_gpus.push_back({static_cast<int>(f.elements[0].integer), f.elements[1].integer,
                            ledger::GpuPeak{f.elements[2].integer, f.elements[3].integer}});
    }
    return ledger::PeakRefusedReason(req.entry.per_gpu, req.entry.peak_per_gpu,
                                     static_cast<int>(req.entry.gpus.size()), short_gpus, req.max_peak_ratio);
  }

  // SetEntryState and FinishBind: `script` ends with set_state(KEYS[1..3],
  // uid, state, node). Only "bound" must survive a failover before the
  // caller goes on; reconcile derives "terminating" from the pod again.
  Status RunSetState(const Script& script, const std::vector<std::string>& keys, const std::string& node,
                     const std::string& pod_uid, EntryState state) {
    SnapshotCache::WriteMark mark(&snapshots_);
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
    // finish_bind.lua answers a change as {1, epoch}: the cache flips the
    // entry's state in its own copy of the node.
    const bool with_epoch = r->type == Reply::Type::kArray && r->elements.size() == 2 &&
                            r->elements[0].type == Reply::Type::kInteger && r->elements[0].integer == 1;
    if (with_epoch && replication.ok()) {
      int64_t epoch = 0;
      const Reply& e = r->elements[1];
      if (e.type == Reply::Type::kString && ParseInt64(e.str, &epoch) && epoch > 0) {
        snapshots_.ApplyOwnState(&mark, static_cast<uint64_t>(epoch), node, pod_uid, state);
      }
    }
    if (with_epoch) *r = Reply{Reply::Type::kInteger, 1, {}, {}};
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
  const LedgerKeys keys_;

  const Script reserve_{WriteScript(lua::kFit, lua::kReserve)};
  const Script release_{WriteScript(lua::kHoldFn, lua::kRelease)};
  const Script set_state_{WriteScript(lua::kSetStateFn, lua::kSetState)};
  const Script finish_bind_{WriteScript(lua::kSetStateFn, lua::kFinishBind)};
  const Script finish_binds_{WriteScript(lua::kSetStateFn, lua::kFinishBinds)};
  const Script put_entry_{WriteScript(lua::kPutEntry)};
  const Script refresh_entry_{WriteScript(lua::kRefreshEntry)};
  const Script hold_room_{WriteScript(lua::kHoldFn, lua::kHoldRoom)};
  const Script hold_pending_{std::string(lua::kHoldPending)};
  const Script budget_take_{std::string(lua::kBudgetTake)};
  const Script budget_give_back_{std::string(lua::kBudgetGiveBack)};
  const Script budget_record_{std::string(lua::kBudgetRecord)};
  // Action ids in the budget's minute: unique per process and action.
  const std::string budget_id_prefix_ = std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) +
                                        "-";
  std::atomic<uint64_t> budget_seq_{0};
  const Script set_capacity_{WriteScript(lua::kSetCapacity)};
  const Script remove_node_{WriteScript(lua::kRemoveNode)};
  const Script push_usage_{WriteScript(lua::kPushUsage)};
  const Script read_seal_{WriteScript(lua::kReadSeal)};
  const Script begin_rebuild_{WriteScript(lua::kBeginRebuild)};
  const Script seal_{WriteScript(lua::kSeal)};
  const Script begin_bind_{std::string(lua::kBeginBind)};
  const Script binds_in_flight_{std::string(lua::kBindsInFlight)};
  const Script mark_reconciled_{std::string(lua::kMarkReconciled)};
  const Script record_refusals_{std::string(lua::kRecordRefusals)};
  const Script read_refusals_{std::string(lua::kReadRefusals)};

  SnapshotCache snapshots_;  // the read side
};

}  // namespace

std::unique_ptr<LedgerStore> NewValkeyLedgerStore(std::shared_ptr<ValkeyClient> client) {
  return std::make_unique<ValkeyLedgerStore>(std::move(client));
}

}  // namespace vramd::store
