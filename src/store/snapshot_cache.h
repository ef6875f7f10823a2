// The ledger store's read side: the cached snapshot of the ledger, kept up
// to date at the epoch (P:epoch, ledger_keys.h) by reading again only the
// nodes the change log names (Refresh) or the whole ledger (Load), and the
// epoch watch that lets WatchedSnapshot() skip the epoch read. The
// LedgerStore methods of the same names (vramd/store/ledger_store.h) state
// the contracts; ValkeyLedgerStore forwards them here. Thread-safe.
// Private to src/store.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "vramd/ledger/model.h"
#include "vramd/mutex.h"
#include "vramd/status.h"
#include "vramd/store/ledger_store.h"
#include "vramd/store/valkey_client.h"
#include "store/ledger_decode.h"
#include "store/ledger_keys.h"

namespace vramd::store {

class SnapshotCache {
 public:
  explicit SnapshotCache(std::shared_ptr<ValkeyClient> client);
  // Stops the epoch watch and waits for its thread.
  ~SnapshotCache();
  SnapshotCache(const SnapshotCache&) = delete;
  SnapshotCache& operator=(const SnapshotCache&) = delete;

  // Starts the epoch watch, and with it the usage refresher: a change
  // notified as usage only (a node agent's report, lua/push_usage.lua) does
  // not make WatchedSnapshot() refresh on the caller's thread; a thread of
  // this cache refreshes the snapshot for such changes at most once per
  // kUsageRefreshMs, so that 1,000 reports/s do not turn every filter call into
  // a refresh (the refresher does not take the cached snapshot out of the
  // cache, so that no filter call waits for it: it keeps the snapshot its
  // last refresh replaced as a spare and brings that up to date, copying
  // only the nodes changed since, see Writable); they see a report within
  // kUsageRefreshMs of its notification
  // (Snapshot() sees it at once, as every other change). Any other change
  // notified, or written by this process, is picked up on the next call as
  // before.
  void StartEpochWatch();
  static constexpr int64_t kUsageRefreshMs = 1000;
  // Nodes a refresh reads per round trip (Refresh).
  static constexpr size_t kRefreshChunk = 64;
  // How the change log names a node whose change was its usage report
  // alone (lua/bump.lua's member_prefix).
  static constexpr std::string_view kUsageMember = "{u}";
  bool EpochWatchLive() const { return watch_live_.load(); }
  uint64_t EpochChecks() const { return epoch_checks_.load(); }
  Result<ledger::SnapshotPtr> WatchedSnapshot();
  Result<ledger::SnapshotPtr> Snapshot();
  // The cached snapshot as it is (no epoch read, no refresh); null before the
  // first load.
  ledger::SnapshotPtr Cached() {
    MutexLock lk(&cache_mu_);
    return cache_;
  }
  uint64_t MalformedFieldsSkipped() const { return malformed_.load(); }
  LedgerStore::ReloadCounts Reloads() const {
    return {full_reloads_.load(),      incremental_reloads_.load(), copied_reloads_.load(),
            caught_up_reloads_.load(), usage_nodes_.load(),         own_writes_.load()};
  }

  // Counts a write of this process once it has returned (whatever its
  // outcome): WatchedSnapshot() then reads the epoch before trusting its
  // cache, unless ApplyOwnEntry or ApplyOwnState put the write into the cache (and counted it).
  // While it runs, WatchedSnapshot() allows the cache to lag the notified
  // epoch by one more: the notification may be of this very write, which
  // no call has to see before it returns (issue 36: a third of the
  // refreshes left were of a bind's own write announced before its answer
  // was laid on). Another process's write notified meanwhile is seen once
  // this one returns (it then cannot be laid on, and the cache refreshes).
  class WriteMark {
   public:
    explicit WriteMark(SnapshotCache* cache) : cache_(cache) { cache_->writes_in_flight_.fetch_add(1); }
    ~WriteMark() {
      if (!counted_) cache_->local_writes_.fetch_add(1);
      cache_->writes_in_flight_.fetch_sub(1);
    }
    WriteMark(const WriteMark&) = delete;
    WriteMark& operator=(const WriteMark&) = delete;

   private:
    friend class SnapshotCache;
    SnapshotCache* const cache_;
    bool counted_ = false;
  };

  // A reserve of this process (the one `mark` counts, lua/reserve.lua) that
  // changed node `node` alone and moved the epoch by one, to `epoch`. When
  // the cached snapshot is at epoch - 1, holds the node with no field it
  // could not read, and can change without a copy of every node (no call
  // holds it, or the usage refresher's spare is free; see Writable) nor a
  // wait (no refresh or other apply runs), it is brought to `epoch` with the
  // write laid on its own copy of the node: exactly what a refresh would
  // read, without a round trip and without the script answering the node's
  // hashes (issues 17 and 36: each bind's reserve and bound mark otherwise
  // cost the next filter call a refresh of two round trips). When the cache
  // covered every write of this process before, it covers this one too and
  // the write is counted here, so that WatchedSnapshot() trusts the cache
  // without reading the epoch. Anything else (the cache older, another write
  // of this process landed meanwhile) leaves the next call to refresh as
  // before. Returns whether the write was applied at once. A write the
  // cache is not ready for (it is further behind, or a refresh or another
  // write's apply holds it) is kept, and laid on in epoch order once the
  // cache reaches the epoch before it (after the write before it, or a
  // refresh); the next call then needs no refresh when nothing else moved
  // the epoch (a bind's reserve and bound mark race each other's and the
  // filter calls' refreshes: without this, one write in four missed the
  // cache, and each miss cost a refresh).
  struct OwnEntry {
    std::string uid;              // the pod reserved
    std::string text;             // the entry's text as the script stored it
    std::string model;            // placed on the node at now_ms ("" none)
    int64_t now_ms = 0;           // the entry's created_ms and the model's time
    std::vector<std::string> taken;  // holds the script removed from the node
    // The node's usage report: a version-2 one (its per-pod figures apply to
    // every entry, the new one too) made at usage_ts_ms.
    bool per_pod = false;
    int64_t usage_ts_ms = 0;
  };
  bool ApplyOwnEntry(WriteMark* mark, uint64_t epoch, const std::string& node, const OwnEntry& write);

  // ApplyOwnEntry for a write that changed only the state of one entry (the
  // bound mark: set_state_fn.lua rewrites the entry's "state" and nothing
  // else): the cached node with entry `uid` in state `state` is exactly what
  // a refresh would read, so the script answers no hash at all. Not applied
  // when the cached node lacks the entry or has fields it could not read.
  bool ApplyOwnState(WriteMark* mark, uint64_t epoch, const std::string& node, const std::string& uid,
                     ledger::EntryState state);

  // The highest epoch read from the store (ReadSeal and Reserve pass it: a
  // lower one later means the store lost writes).
  uint64_t MaxEpochSeen() const { return max_epoch_seen_.load(); }

 private:
  Result<uint64_t> ReadEpoch();
  void Saw(uint64_t epoch);
  Result<ledger::SnapshotPtr> Load() EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  Result<ledger::SnapshotPtr> Refresh(ledger::SnapshotPtr base) EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  // What Refresh changes (Writable): the snapshot, the index to update
  // incrementally, whether the nodes that index points to moved, and the
  // nodes Writable itself changed (to index again too).
  struct Changeable {
    std::shared_ptr<ledger::Snapshot> snap;
    std::shared_ptr<const ledger::PlacementIndex> old_index;
    bool nodes_moved = false;
    std::vector<std::string> caught_up;
  };
  // With copy_ok false, a null snap instead of a copy (the cache as it was).
  Changeable Writable(ledger::SnapshotPtr base, bool copy_ok = true) EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  // An own write as the cache lays it on its node: `check` says, reading the
  // cached node, whether it can be (false: the next call refreshes instead);
  // `apply` then changes the node in place and cannot fail (no copy of the
  // node: copying it to change one entry was 2 % of vramd's CPU, issue 36).
  // Both own what they read: a kept write outlives its caller's frame.
  struct OwnChange {
    std::function<bool(const ledger::Node& cached)> check;
    std::function<void(ledger::Node* node)> apply;
  };
  // ApplyOwnEntry and ApplyOwnState once it holds reload_mu_; the snapshot it
  // replaced goes to *old (freed by the caller outside the locks). With
  // `only_clean`, a cached node with unreadable fields is not changed.
  // `mark` null: a kept write, counted when it was kept (Keep).
  // kLater: a call holds the cached snapshot, and laying the write on would
  // take a copy of every node (Writable): it may be laid on once the call
  // lets go. kNever: it cannot (the cache is not at the epoch before it, or
  // its node has a field the cache could not read, or `check` says no).
  enum class Applied { kApplied, kLater, kNever };
  Applied ApplyOwnWriteLocked(WriteMark* mark, uint64_t epoch, const std::string& node, const OwnChange& change,
                              bool only_clean, ledger::SnapshotPtr* old) EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  bool ApplyOwn(WriteMark* mark, uint64_t epoch, const std::string& node, OwnChange change, bool only_clean);
  // Own writes kept for later (ApplyOwnEntry): by epoch, at most kMaxKept
  // (the oldest go first; a refresh reads what they changed anyway).
  struct KeptWrite {
    std::string node;
    OwnChange change;
    bool only_clean = false;
  };
  static constexpr size_t kMaxKept = 64;
  // Keeps the write `mark` counts, and counts it as returned now (it is
  // not covered until laid on).
  void Keep(WriteMark* mark, uint64_t epoch, const std::string& node, OwnChange change, bool only_clean);
  // Lays the kept writes that follow the cached snapshot's epoch on it, in
  // order, and drops those it has passed; the snapshots replaced go to *old.
  void LayKeptLocked(std::vector<ledger::SnapshotPtr>* old) EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  // LayKeptLocked when writes are kept and no reload or apply runs.
  void TryLayKept();
  // Nodes rebuilt from the store (nullopt: removed from the ledger).
  using NodeUpdates = std::vector<std::pair<std::string, std::optional<ledger::Node>>>;
  // Refresh's and the own writes' last step: `base` (the cached snapshot,
  // the caller's only reference besides cache_) with `updates` put in,
  // labelled `epoch`, its index rebuilt for the changed nodes;
  // `node_problems` becomes node_problems_ and `problems` is reported.
  // Null, with nothing changed, when that would take a copy of every node
  // and copy_ok is false (Writable).
  // With `change_node`, `change` is applied to that node (in the snapshot,
  // in place) and it is indexed again too.
  ledger::SnapshotPtr Install(ledger::SnapshotPtr base, uint64_t epoch, bool sealed, const std::string& unseal_reason,
                              NodeUpdates updates, NodeProblems node_problems, const Problems& problems,
                              bool copy_ok = true, const std::string* change_node = nullptr,
                              const std::function<void(ledger::Node*)>* change = nullptr)
      EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  void ReportProblems(const Problems& p, uint64_t epoch) EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  void Vouch(uint64_t gen, uint64_t writes) EXCLUSIVE_LOCKS_REQUIRED(cache_mu_);

  const std::shared_ptr<ValkeyClient> client_;
  const LedgerKeys keys_;

  // The epoch watch (StartEpochWatch, WatchedSnapshot).
  std::atomic<bool> watch_stop_{false};
  std::thread watch_thread_;
  std::atomic<bool> watch_live_{false};
  std::atomic<uint64_t> watch_gen_{0};       // subscriptions made so far
  std::atomic<uint64_t> watched_epoch_{0};   // highest epoch notified under the current one
  // The usage refresher (StartEpochWatch): the highest usage-only epoch
  // notified, and a wake-up when one is newer than the cache.
  std::atomic<uint64_t> watched_usage_epoch_{0};
  void UsageRefresher(std::stop_token st);
  Mutex usage_mu_;
  CondVar usage_cv_;
  bool usage_pending_ GUARDED_BY(usage_mu_) = false;
  std::jthread usage_thread_;
  std::atomic<uint64_t> local_writes_{0};    // write scripts this process ran (WriteMark)
  std::atomic<uint64_t> writes_in_flight_{0};  // WriteMarks alive: write scripts not returned yet
  std::atomic<uint64_t> epoch_checks_{0};
  std::atomic<uint64_t> max_epoch_seen_{0};  // Saw()
  std::atomic<uint64_t> seq_{0};      // Snapshot() calls that read an epoch
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> full_reloads_{0};
  std::atomic<uint64_t> incremental_reloads_{0};
  std::atomic<uint64_t> copied_reloads_{0};
  std::atomic<uint64_t> caught_up_reloads_{0};
  std::atomic<uint64_t> usage_nodes_{0};
  std::atomic<uint64_t> own_writes_{0};
  // Lock order: reload_mu_, then cache_mu_.
  Mutex reload_mu_;  // held for a whole reload
  // Malformed fields per node of the cached snapshot; MalformedFieldsSkipped
  // is their sum.
  NodeProblems node_problems_ GUARDED_BY(reload_mu_);
  // The last Load or Refresh that made a new snapshot: the snapshot it
  // started from (null for a load, or a refresh that changed its base in
  // place), the one it made, and the nodes in which they differ. Identities
  // only, never dereferenced; `to` is the newest snapshot made, and `from`
  // is compared only with spare_, which keeps it alive.
  struct Step {
    const ledger::Snapshot* from = nullptr;
    const ledger::Snapshot* to = nullptr;
    std::vector<std::string> changed;
  };
  Step last_step_ GUARDED_BY(reload_mu_);
  Mutex kept_mu_ ACQUIRED_AFTER(reload_mu_);  // held briefly, never with cache_mu_
  std::map<uint64_t, KeptWrite> kept_ GUARDED_BY(kept_mu_);
  std::atomic<size_t> kept_count_{0};  // kept_.size(), read without the lock
  // The usage refresher's spare: the snapshot its last refresh replaced.
  // When it is last_step_.from and nothing else holds it, the next refresh
  // of last_step_.to changes it instead of a copy of every node (Writable).
  ledger::SnapshotPtr spare_ GUARDED_BY(reload_mu_);
  Mutex cache_mu_ ACQUIRED_AFTER(reload_mu_);  // held briefly
  ledger::SnapshotPtr cache_ GUARDED_BY(cache_mu_);
  uint64_t cache_seq_ GUARDED_BY(cache_mu_) = 0;  // seq_ when the cached load began
  // The cache covers every change notified under subscription cache_gen_
  // and local write cache_writes_.
  uint64_t cache_gen_ GUARDED_BY(cache_mu_) = 0;
  uint64_t cache_writes_ GUARDED_BY(cache_mu_) = 0;
};

}  // namespace vramd::store
