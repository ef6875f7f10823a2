// The one eviction path (DESIGN.md §7): every pod vramd removes — the pressure
// watchdog's victim, an idle pod, later reclaim and preemption — goes through
// Evictor::Act. In dry-run it records a Warning Event on the pod, logs and
// counts the action; in enforce it evicts through the Eviction API
// (KubeClient::EvictPod: PodDisruptionBudgets respected, the pod's UID a
// precondition) and then records the Event. What to evict is decided
// elsewhere, by pure functions of the ledger core; the caller rate-limits.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vramd/kube/kube_client.h"
#include "vramd/ledger/protection.h"
#include "vramd/metrics/registry.h"
#include "vramd/store/ledger_store.h"

namespace vramd::reconcile {

enum class ActionMode { kDryRun, kEnforce };  // config strings "dry-run" | "enforce"

// "dry-run" | "enforce": the config string and the metric label.
const char* ActionModeName(ActionMode mode);

struct EvictionAction {
  std::string ns, name, uid, node;
  int gpu = -1;        // the GPU under pressure; -1 when the action is about a node
  std::string reason;  // metric label: "pressure" | "idle" (later "reclaim", "preempt")
  std::string detail;  // "uses 10.7Gi, declared 3Gi; GPU 0 of node-1 has 0.8Gi free, floor 1.5Gi"
  std::string for_ns, for_name, for_uid;  // optional: the pod this makes room for (gets an Event too)
};

enum class ActionResult {
  kRecorded,  // dry-run: the Event was posted (or its failure logged) and the action counted
  kEvicted,   // enforce: the API server accepted the eviction
  kBlocked,   // enforce: refused, normally by a PodDisruptionBudget; the caller may try again later
  kGone,      // enforce: the pod was gone or replaced (other UID); nothing done, nothing counted
  kFailed,    // enforce: the API call failed (logged and counted)
  kFenced,    // this replica is no longer the leader: nothing done (logged and counted)
};

// Event reasons (on the evicted pod, type Warning; on the pod it made room
// for, type Normal).
inline constexpr const char* kWouldEvictEventReason = "VramdWouldEvict";
inline constexpr const char* kEvictedEventReason = "VramdEvicted";
inline constexpr const char* kMadeRoomEventReason = "VramdMadeRoom";

// The Event message on the evicted pod: "would recycle: <detail>" /
// "recycled: <detail>" (reason "pressure"), "would evict idle pod: <detail>" /
// "evicted idle pod: <detail>" ("idle"), "would evict (<reason>): <detail>" /
// "evicted (<reason>): <detail>" (any other reason).
std::string EvictionEventMessage(const EvictionAction& action, ActionMode mode);

// The eviction budget every replica shares, kept in the store so that a
// leader change keeps it (issue 32; LedgerStore::BudgetTake): at most one
// action per key (a GPU for the watchdog, a pod for idle eviction, a pending
// pod for reclaim) within `cooldown_ms`, at most `max_per_minute` evictions
// over the cluster in any minute. The watchdog, idle eviction and reclaim
// each hold one (their own cooldown and rate; one minute in the store).
//
// An action is claimed before it is made (Take), never recorded after: a
// leader killed between its eviction and a later write would leave no
// cooldown, and the next leader would evict again at once.
class EvictionBudget {
 public:
  // `leader_identity` (empty: none) is checked against the leader lease in
  // the store in the same step as each claim (LedgerStore::BudgetTake): the
  // fence, atomic with the action's record, beside the Evictor's own check.
  EvictionBudget(store::LedgerStore* store, int64_t cooldown_ms, int max_per_minute, std::string leader_identity = "")
      : store_(store),
        cooldown_ms_(cooldown_ms),
        max_per_minute_(max_per_minute),
        leader_identity_(std::move(leader_identity)) {}
  // The claim's id when one action on `key` may be made now (its cooldown
  // started, counted in the minute); nullopt while the key's cooldown runs,
  // the minute is full, or the store cannot say (logged: no action).
  std::optional<std::string> Take(const std::string& key, int64_t now_ms);
  // Counts one more eviction made under a claim (the second pod of an action).
  void Record(const std::string& key, int64_t now_ms);
  // A claim whose action did nothing (refused, failed, fenced): back.
  void GiveBack(const std::string& key, const std::string& claim);

 private:
  store::LedgerStore* store_;
  int64_t cooldown_ms_;
  int max_per_minute_;
  std::string leader_identity_;
};

// Holds the room an enforced action made for a pending pod (issue 32):
// ledger::RoomMadeFor on `node` of `snap` without `victims`, given to
// LedgerStore::HoldRoom for `hold_ms` (0: holds off): held from the moment
// the last victim's entry is released. Logged; a hold that cannot be
// computed or written is only a warning (the room is then anyone's, as
// before holds existed). Returns whether a hold was written or waits.
bool HoldRoom(store::LedgerStore* store, const ledger::Snapshot& snap, const std::string& node,
              const std::vector<std::string>& victims, const ledger::PendingPod& pod, const ledger::Policy& policy,
              int64_t hold_ms, int64_t now_ms);

class Evictor {
 public:
  // Registers vramd_watchdog_actions_total{mode,reason} (recorded or evicted
  // actions) and vramd_watchdog_eviction_failures_total{reason,why} (why:
  // "blocked" | "error"); the series of the reasons "pressure" and "idle"
  // exist from the start. `kube` and `registry` must outlive the Evictor.
  //
  // `may_act` (null: always) is the fence (issue 32): asked right before
  // every action, not once per pass, so that a replica that lost the
  // leadership during a long pass acts no more (LeaderElector::IsLeader: the
  // lease renewed within its period less a margin, no I/O). When it says no:
  // nothing is done, kFenced, a warning and
  // vramd_watchdog_eviction_failures_total{why="not_leader"}.
  Evictor(kube::KubeClient* kube, metrics::Registry* registry, std::function<bool()> may_act = nullptr);

  // Carries out one action. dry-run: posts the Event, logs, counts
  // (kRecorded; an Event that cannot be posted is logged, the action still
  // counts). enforce: evicts, then posts the Event, logs and counts
  // (kEvicted); a blocked eviction or a failed call is logged and counted as
  // a failure; a gone pod is logged at debug level only. When for_name is
  // set, a recorded or evicted action also posts a Normal Event on that pod:
  // "vramd would evict|evicted NS/NAME to make room: <detail>".
  // Thread-safe (no state besides the counters).
  ActionResult Act(const EvictionAction& action, ActionMode mode);

  // Whether an action of several pods may go whole (issue 32): in enforce,
  // each pod's eviction is asked of the API server with dryRun (its
  // PodDisruptionBudgets checked, nothing evicted). Returns the index of the
  // first pod that would be refused (kBlocked; logged and counted as
  // why="blocked"), kPrecheckFailed when the API cannot tell (the action
  // waits a pass), or kPrecheckPassed. One action, or dry-run mode: passed
  // without a call (the eviction itself is the check).
  static constexpr int kPrecheckPassed = -1;
  static constexpr int kPrecheckFailed = -2;
  int Precheck(const std::vector<EvictionAction>& actions, ActionMode mode);

 private:
  void PostEvent(const std::string& ns, const std::string& name, const std::string& uid, const char* type,
                 const char* reason, const std::string& message);

  kube::KubeClient* kube_;
  std::function<bool()> may_act_;
  metrics::Family<metrics::Counter>* actions_;
  metrics::Family<metrics::Counter>* failures_;
};

}  // namespace vramd::reconcile
