// LedgerStore: the VRAM ledger's persistence (Valkey in production).
// Thread-safe: every method may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vramd/ledger/fit.h"
#include "vramd/ledger/model.h"
#include "vramd/ledger/usage.h"
#include "vramd/status.h"

namespace vramd::store {

struct GpuCapacity {
  int index = 0;
  int64_t capacity = 0;  // bytes, reserve already subtracted
  std::string uuid;      // may be empty
};

struct ReserveRequest {
  std::string node;
  ledger::Entry entry;          // every field but created_ms (the server's time)
  bool fit_on_usage = true;     // apply max(A, U) with fresh usage, not just A
  int64_t usage_max_age_ms = 60'000;
  // The peak rule's ceiling (ledger::FitPolicy::max_peak_ratio): the entry is
  // written only where PeakOk holds once it is added (fit.h).
  double max_peak_ratio = ledger::kDefaultMaxPeakRatio;
  // > 0: the same call also marks the pod's bind in flight for this long
  // (as BeginBind) when the entry is written, moved or already held — the
  // reservation and its protection from reconcile appear together.
  int64_t in_flight_ttl_ms = 0;
  // Refuse (kUnavailable, "being rebuilt") unless the ledger is sealed (see
  // ReadSeal). Every reservation made with Kubernetes sets it; standalone
  // mode has no cluster to rebuild from and does not.
  bool require_sealed = false;
};

// Why the ledger is unsealed (P:unsealed, lua/bump.lua): its epoch went back,
// or its seal was made by another server process; "" when the store is new or
// was emptied (nothing recorded).
inline constexpr const char* kUnsealedEpoch = "epoch";
inline constexpr const char* kUnsealedRestarted = "restarted";

// What every refusal during a rebuild says (filter, prioritize, bind,
// preempt), with its cause and, when quiet_ms > 0, the longest wait for binds
// that may be in flight (the rebuild's quiet period; none when no VRAM pod is
// waiting for a bind, reconcile::AnyPodAwaitingBind). Always contains "being
// rebuilt from the cluster".
inline std::string RebuildingMessage(std::string_view why, int64_t quiet_ms = 0) {
  std::string cause;
  if (why == kUnsealedEpoch) {
    cause = "its store lost writes (its epoch went back: a replica that missed writes was promoted?)";
  } else if (why == kUnsealedRestarted) {
    cause = "its store restarted or failed over and may be an older copy (the seal was made by another server "
            "process)";
  } else {
    cause = "a new store, or one that was emptied";
  }
  std::string wait = "waiting for binds that may be in flight";
  if (quiet_ms > 0) {
    wait = "waiting up to " + std::to_string((quiet_ms + 999) / 1000) +
           " s for binds that may be in flight (none when no VRAM pod is pending)";
  }
  return "the VRAM ledger is being rebuilt from the cluster: " + cause + "; " + wait +
         "; no VRAM is granted until every bound pod's reservation is restored (kube-scheduler retries)";
}

// Whether the ledger is complete (DESIGN.md §7, docs/valkey-ha.md). A store
// that lost data (FLUSHALL, a restart without persistence, a failover to a
// replica that missed writes) loses the seal with it; the leader then rebuilds
// the ledger from the cluster and seals it again only when every bound pod's
// entry is back (Seal). No reservation that requires the seal is granted
// meanwhile, on any replica.
struct SealState {
  bool sealed = false;
  std::string rebuild_token;     // non-empty while a rebuild is under way (BeginRebuild)
  int64_t rebuild_since_ms = 0;  // server time at which that rebuild began
  int64_t now_ms = 0;            // server time of this read
};

// One GPU of a node agent's last report, as node sync reads it (ReportedGpus).
struct ReportedGpu {
  int index = 0;
  int64_t total = 0;  // physical VRAM in bytes (no reserve subtracted)
  std::string uuid;   // may be empty
  bool operator==(const ReportedGpu&) const = default;
};

// A pod vramd's filter refused for room (some node failed for VRAM now,
// none fit): the pending pods idle eviction makes room for.
struct Refusal {
  std::string uid, ns, name;
  int64_t per_gpu = 0;       // the demand (ledger::VramRequest)
  int64_t peak_per_gpu = 0;
  int gpu_count = 1;
  bool victim = false;
  int32_t priority = 0;
  std::string priority_class;      // may be empty (and is, in refusals recorded before it existed)
  int64_t idle_ttl_ms = 0;
  std::vector<std::string> nodes;  // at most kMaxRefusalNodes of those that failed for room, or of
                                   // those kube-scheduler offered when the pod's queue refused it
  int64_t ts_ms = 0;               // when it was recorded (the store's clock); set by RecordRefusals
  bool operator==(const Refusal&) const = default;
};
inline constexpr size_t kMaxRefusalNodes = 64;
// The store keeps at most this many refusals; the oldest go first.
inline constexpr size_t kMaxRefusals = 10'000;

enum class ReserveOutcome {
  kReserved,        // a new entry was written
  kAlreadyHeld,     // the same pod already holds an entry on this node (idempotent)
  kMoved,           // an unbound entry of this pod on another node was moved here
};

class LedgerStore {
 public:
  virtual ~LedgerStore() = default;

  // The ledger at the current epoch. Costs one cheap epoch read when nothing
  // changed since the last call (the cached snapshot is returned). The result
  // is at least as new as the epoch read at the start of the call.
  virtual Result<ledger::SnapshotPtr> Snapshot() = 0;

  // For filter, prioritize and preempt, which are optimistic (bind checks
  // again atomically): the snapshot may skip the epoch round trip when the
  // store is told of every ledger change by a subscription
  // (StartEpochWatch). It then reflects every write this process made before
  // the call, and every other write whose notification had arrived — at
  // most a message's delivery time behind, and a few seconds in the worst
  // case (a subscription dying silently until its PING times out). Without
  // a live subscription it is Snapshot().
  virtual Result<ledger::SnapshotPtr> WatchedSnapshot() { return Snapshot(); }

  // The snapshot this process holds now, without any I/O (null when it holds
  // none): it may lag the store by any amount. Only for hints that cost work
  // when wrong, never correctness (the pod watch's BindAccounted: a lagging
  // copy only brings a reconcile pass that was not needed).
  virtual ledger::SnapshotPtr CachedSnapshot() { return nullptr; }

  // Starts following the ledger's change notifications on a thread of its
  // own (stopped when the store is destroyed). Stores without them ignore it.
  virtual void StartEpochWatch() {}
  // Whether the subscription is up now, and how many epoch round trips
  // Snapshot() and WatchedSnapshot() made (for a metric and tests).
  virtual bool EpochWatchLive() const { return false; }
  virtual uint64_t EpochChecks() const { return 0; }

  // Atomically checks capacity (per GPU: max(A, U) + per_gpu <= C) and writes
  // the entry. Idempotent by pod UID. kInsufficient with a reason when it does
  // not fit; kNotFound when the node or a GPU index is unknown.
  // An entry of the same pod on another node is moved here (kMoved) when it is
  // still kReserved and the pod fits here (otherwise it stays where it is);
  // when it is bound or terminating the answer is kConflict. created_ms is set
  // to the server's time. kInvalidArgument for an empty UID, no GPU, GPU
  // indices not ascending and distinct, or a per_gpu that is not positive.
  virtual Result<ReserveOutcome> Reserve(const ReserveRequest& req) = 0;

  // Removes the pod's entry from `node`. Returns whether an entry was removed
  // (false is not an error: release is idempotent). The last victim entry of
  // a pending hold (HoldRoom) turns into that hold in the same step.
  virtual Result<bool> Release(const std::string& node, const std::string& pod_uid) = 0;
  // Release, only while the entry is a hold (EntryState::kHold): a holder's
  // reservation that replaced its hold meanwhile stays.
  virtual Result<bool> ReleaseHold(const std::string& node, const std::string& pod_uid) = 0;

  // Changes the state of an existing entry (kNotFound when there is none).
  virtual Status SetEntryState(const std::string& node, const std::string& pod_uid,
                               ledger::EntryState state) = 0;

  // Replaces the entry of `entry.pod_uid` on `node` by `entry` (reconcile
  // refreshing the pod's facts: priority, class, victim flag, idle TTL,
  // owner, gang; issue 32) only while the stored entry still holds what
  // `entry` does in state, per_gpu, gpus, created_ms and last_active_ms, so
  // that a release, a re-placement or a state change made meanwhile is never
  // undone. Returns whether it wrote (false: changed meanwhile, or gone).
  virtual Result<bool> RefreshEntry(const std::string& node, const ledger::Entry& entry) = 0;

  // Writes an entry unconditionally (reconcile re-adding an orphan or rebuilding):
  // no capacity check, because the pod already runs there. An entry of the same
  // pod on another node is removed; the node is added to the node set. A
  // created_ms <= 0 is replaced by the server's time.
  virtual Status PutEntry(const std::string& node, const ledger::Entry& entry) = 0;

  // Holds the room evicting `victims` (pod UIDs, on `node`) makes for the
  // pending pod `hold.pod_uid` (issue 32): `hold` in state kHold, the GPUs
  // and bytes per GPU the pod would take there. While some victim's entry is
  // still on the node (terminating: the phantom rule keeps its VRAM), the
  // hold waits with it (kPending); the release of the last of them writes
  // the hold in the same step (Release), so the room goes from the victims
  // to the pod and the ledger is never over-committed by a hold. With no
  // victim entry left it is written at once (kHeld). It ends ttl_ms after it
  // is written (hold_until_ms, the server's clock) unless the pod binds
  // first (Reserve replaces it) or reconcile ends it. A hold of the pod on
  // another node is replaced. kHolderPlaced, writing nothing, when the pod
  // holds an entry that is not a hold (bound or binding); kNotFound when the
  // node is not in the ledger.
  enum class HoldOutcome { kPending, kHeld, kHolderPlaced };
  virtual Result<HoldOutcome> HoldRoom(const std::string& node, const std::vector<std::string>& victims,
                                       const ledger::Entry& hold, int64_t ttl_ms) = 0;
  // Whether room is being made for pod `pod_uid`: a pending hold (kPending
  // above) whose victims are still terminating, until the hold is written or
  // for its ttl at most (the preempt verb gives such a pod no more victims).
  virtual Result<bool> HoldPending(const std::string& pod_uid) = 0;

  // Sets a node's GPUs (replaces the capacity hash; adds the node to the set).
  // Writing the same capacities again changes nothing (the epoch stays).
  virtual Status SetCapacity(const std::string& node, const std::vector<GpuCapacity>& gpus) = 0;

  // Removes a node and all its keys from the ledger, its reported GPUs
  // included (idempotent).
  virtual Status RemoveNode(const std::string& node) = 0;

  // Records a node agent's usage report (ledger/usage.h), stamped with the
  // server's time, in one atomic step of bounded work: per GPU the used
  // bytes, and from a version-2 report the physical total, UUID,
  // outside-pods bytes and per-pod figures. It replaces the node's previous
  // report (GPUs it omits have no usage and fall back to U = A) and moves the
  // epoch, so the next snapshot shows it (GPU used/total/uuid/outside_pods/
  // pods/untracked, entries' used/used_ts_ms: ledger/model.h). A version-2
  // report's totals and UUIDs are also kept per node for node sync
  // (ReportedGpus). Refused with nothing changed: kInvalidArgument when the
  // report fails CheckUsageReport or names a GPU index the node's capacity
  // lacks; kNotFound when the node is not in the ledger, unless `in_cluster`
  // (the caller knows the node exists in Kubernetes): then the report is kept
  // (its totals reach node sync, which may add the node) and the epoch stays.
  virtual Status PushReport(const std::string& node, const ledger::UsageReport& report, bool in_cluster) = 0;

  // The old report: used bytes per GPU index, no per-pod figures.
  // PushReport of a version-1 report; kNotFound for a node not in the ledger.
  Status PushUsage(const std::string& node, const std::map<int, int64_t>& used) {
    ledger::UsageReport r;
    r.version = 1;
    for (const auto& [index, bytes] : used) {
      ledger::GpuUsage g;
      g.index = index;
      g.used = bytes;
      r.gpus.push_back(std::move(g));
    }
    return PushReport(node, r, /*in_cluster=*/false);
  }

  // Per node, the GPUs of its last version-2 report (totals, UUIDs), for
  // nodes in the ledger and nodes only the cluster knows. Node sync's last
  // capacity source (after config, annotation and GFD labels). RemoveNode
  // forgets a node's.
  virtual Result<std::map<std::string, std::vector<ReportedGpu>>> ReportedGpus() = 0;

  // Binds in flight on any replica: BeginBind marks the pod until ttl_ms
  // passes (a crashed replica's mark expires), EndBind clears it. The
  // reconcile loop never frees a reservation whose bind is in flight.
  virtual Status BeginBind(const std::string& pod_uid, int64_t ttl_ms) = 0;
  virtual Status EndBind(const std::string& pod_uid) = 0;
  // The end of a successful bind: the entry becomes kBound (replicated like
  // SetEntryState) and the in-flight mark is cleared. Stores may do both in
  // one round trip; this default makes two calls. kNotFound when there is no
  // entry (the mark is cleared all the same).
  virtual Status FinishBind(const std::string& node, const std::string& pod_uid) {
    Status s = SetEntryState(node, pod_uid, ledger::EntryState::kBound);
    Status e = EndBind(pod_uid);
    return s.ok() ? e : s;
  }
  // FinishBind for several pods at once (the bound marker's batch): each
  // pod's in-flight mark is cleared and its entry becomes kBound. One status
  // per mark in *results (kNotFound: no entry). The returned status fails
  // when the call as a whole failed (then no result is known). Stores may do
  // it in one round trip, and then leave a kTerminating entry as it is (a
  // late mark never undoes what reconcile did meanwhile); this default calls
  // FinishBind for each.
  struct BoundMark {
    std::string node, pod_uid;
  };
  virtual Status FinishBinds(const std::vector<BoundMark>& marks, std::vector<Status>* results) {
    results->clear();
    for (const BoundMark& m : marks) results->push_back(FinishBind(m.node, m.pod_uid));
    return Status::Ok();
  }
  virtual Result<std::set<std::string>> BindsInFlight() = 0;

  // The seal (SealState). ReadSeal also checks the epoch against the highest
  // one this process has seen: an epoch that went back means the store lost
  // writes (a stale replica was promoted), so the seal is removed then and the
  // epoch moved past every value a replica may have cached.
  virtual Result<SealState> ReadSeal() = 0;
  // Starts a rebuild unless one is under way or the ledger is sealed; returns
  // the state afterwards (its token names the rebuild Seal completes).
  virtual Result<SealState> BeginRebuild(const std::string& who) = 0;
  // Seals the ledger in one atomic step, provided the rebuild `token` is still
  // the current one (a second loss meanwhile removed it) and every (node, pod
  // UID) in `required` has its entry. kUnavailable naming what is missing
  // otherwise (the caller tries again on its next pass).
  virtual Status Seal(const std::string& token,
                      const std::vector<std::pair<std::string, std::string>>& required) = 0;

  // The leader stamps the time of each full reconcile pass (server time, ms);
  // readiness of every replica looks at it.
  virtual Status MarkReconciled() = 0;
  virtual Result<int64_t> LastReconciled() = 0;

  // The eviction budget every replica shares (issue 32), so that a leader
  // change keeps it: at most one action per `key` (e.g. "gpu:node/0",
  // "pod:<uid>") within its cooldown, and at most `max_per_minute` actions
  // (<= 0: none) over the cluster in any 60 s, counted in evictions. The
  // store's clock decides; `now_ms` is for stores without one (the fake).
  // BudgetTake claims one action before it is made (so that a replica killed
  // right after its eviction leaves the cooldown behind): when allowed, it
  // starts the key's cooldown, counts the action in the minute and returns
  // the claim's id; refused, it writes nothing and returns "". BudgetRecord
  // counts one more action made under a claim (the second pod of an action
  // of several). BudgetGiveBack returns a claim whose action did nothing: it
  // leaves the minute, and the key's cooldown ends if that claim still holds
  // it. An error leaves the caller acting on nothing (the budget unknown).
  // `leader_identity` (empty: no fence) is the fence, checked in the same
  // step: a replica whose identity does not hold the leader lease in the
  // store (kLeaderLeaseName) claims nothing and gets kConflict; the claim's
  // id starts with the identity (who acted is on record with the action).
  virtual Result<std::string> BudgetTake(const std::string& key, int max_per_minute, int64_t cooldown_ms,
                                         int64_t now_ms, const std::string& leader_identity = "") = 0;
  virtual Status BudgetRecord(const std::string& key, int64_t cooldown_ms, int64_t now_ms) = 0;
  virtual Status BudgetGiveBack(const std::string& key, const std::string& claim) = 0;

  // Filter refusals (Refusal), one per pod UID: RecordRefusals writes each
  // with ts_ms = the store's time now (replacing the pod's earlier one;
  // nodes beyond kMaxRefusalNodes are dropped), then drops the oldest beyond
  // kMaxRefusals. ReadRefusals returns those recorded within max_age_ms, in
  // no particular order, and deletes older and unreadable ones.
  // ForgetRefusals deletes the pods' refusals (a bind succeeded).
  virtual Status RecordRefusals(const std::vector<Refusal>& refusals) = 0;
  virtual Result<std::vector<Refusal>> ReadRefusals(int64_t max_age_ms) = 0;
  virtual Status ForgetRefusals(const std::vector<std::string>& uids) = 0;

  // Liveness of the store (one round trip).
  virtual Status Ping() = 0;

  // How many stored fields the last snapshot load skipped because they could
  // not be parsed (bad entry JSON, non-numeric capacity...). Each is logged;
  // non-zero means the ledger holds corrupt data. Fakes may leave it at 0.
  virtual uint64_t MalformedFieldsSkipped() const { return 0; }

  // How Snapshot() refreshed its cache since the store was created: full
  // reloads of the whole ledger, and incremental refreshes that re-read only
  // the nodes changed since the cached epoch. Of the incremental ones, those
  // made while the cached snapshot was held (it may not change) either
  // copied every node (`copied`) or brought an older, unheld snapshot up to
  // date by copying only the nodes changed since (`caught_up`); the others
  // changed the cached snapshot in place. `usage_nodes`: nodes those
  // refreshes re-read as changed by a usage report alone (capacity and
  // usage hashes only). `own_writes`: writes of this process (reserve, the
  // bound mark) put into the cache from their script's reply, with no read
  // at all. For a metric and tests; fakes may leave all at 0.
  struct ReloadCounts {
    uint64_t full = 0;
    uint64_t incremental = 0;
    uint64_t copied = 0;
    uint64_t caught_up = 0;
    uint64_t usage_nodes = 0;
    uint64_t own_writes = 0;
  };
  virtual ReloadCounts SnapshotReloads() const { return {}; }
};

}  // namespace vramd::store
