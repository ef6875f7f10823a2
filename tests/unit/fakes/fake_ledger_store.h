// An in-memory LedgerStore for unit tests of the adapters (extender, API).
// Same semantics as the Valkey store for what the tests exercise; the real
// store is tested against a real server in tests/integration.
#pragma once

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <set>

#include "vramd/ledger/fit.h"
#include "vramd/ledger/placement.h"
#include "vramd/ledger/quantity.h"
#include "vramd/mutex.h"
#include "vramd/store/ledger_store.h"

namespace vramd::testing {

class FakeLedgerStore : public store::LedgerStore {
 public:
  bool unavailable = false;  // every call fails with kUnavailable
  int64_t now_ms = 1'000'000;

  Result<ledger::SnapshotPtr> Snapshot() override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    auto s = std::make_shared<ledger::Snapshot>(snap_.Clone());
    for (const auto& [name, ts] : per_pod_ts_) {
      auto it = s->nodes.find(name);
      if (it != s->nodes.end()) DerivePodUsage(&it->second, ts);
    }
    return ledger::SnapshotPtr(s);
  }

  // When set, WatchedSnapshot() answers this view (one that lags the ledger)
  // instead of the current one.
  std::optional<ledger::Snapshot> watched_view;
  Result<ledger::SnapshotPtr> WatchedSnapshot() override {
    {
      MutexLock l(&mu_);
      if (watched_view && !unavailable) return ledger::SnapshotPtr(std::make_shared<ledger::Snapshot>(watched_view->Clone()));
    }
    return Snapshot();
  }

  Result<store::ReserveOutcome> Reserve(const store::ReserveRequest& req) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    if (req.require_sealed && !snap_.sealed) return Unavailable("the VRAM ledger is being rebuilt");
    auto it = snap_.nodes.find(req.node);
    if (it == snap_.nodes.end()) return NotFound("node " + req.node + " is not in the ledger");
    ledger::Node& n = it->second;
    for (const auto& e : n.entries) {
      if (e.pod_uid == req.entry.pod_uid && e.state != ledger::EntryState::kHold) {
        if (req.in_flight_ttl_ms > 0) in_flight.insert(req.entry.pod_uid);
        return store::ReserveOutcome::kAlreadyHeld;
      }
    }
    // The pod's own hold (any node) is not counted against it; put back
    // unless the reservation is written (reserve.lua replaces it).
    struct HoldAside {
      FakeLedgerStore* s;
      std::vector<std::pair<std::string, ledger::Entry>> held;
      bool keep_out = false;
      ~HoldAside() NO_THREAD_SAFETY_ANALYSIS {  // under mu_, held by Reserve
        if (!keep_out) {
          for (auto& [node, e] : held) s->snap_.nodes[node].entries.push_back(e);
        }
      }
    } aside{this, {}};
    for (auto& [name, nn] : snap_.nodes) {
      for (const ledger::Entry& e : nn.entries) {
        if (e.pod_uid == req.entry.pod_uid) aside.held.emplace_back(name, e);
      }
      std::erase_if(nn.entries, [&](const ledger::Entry& e) { return e.pod_uid == req.entry.pod_uid; });
    }
    // The fit rule, the peak rule and their reasons are the ledger's (fit.h),
    // checked in the reserve script's order; on a refusal, again without the
    // holds of lower-priority pods on the wanted GPUs, which are then taken
    // (reserve.lua; ledger::MayTakeHold).
    auto refusal = [&]() -> std::optional<Status> {
      auto vec = ledger::GpuVectors(n, now_ms, ledger::FitPolicy{req.fit_on_usage, req.usage_max_age_ms});
      const std::vector<ledger::GpuPeak> peaks = ledger::GpuPeaks(n);
      const ledger::PeakDemand pd = ledger::PeakDemandOf(req.entry, req.max_peak_ratio);
      std::vector<ledger::GpuShort> short_gpus;
      std::vector<ledger::GpuPeakShort> peak_short;
      for (int g : req.entry.gpus) {
        auto gi = std::find_if(n.gpus.begin(), n.gpus.end(), [&](const ledger::Gpu& x) { return x.index == g; });
        if (gi == n.gpus.end()) return NotFound("no GPU " + std::to_string(g));
        const ledger::Vectors& v = vec[gi - n.gpus.begin()];
        const ledger::GpuPeak& p = peaks[gi - n.gpus.begin()];
        if (!ledger::HasRoom(v, req.entry.per_gpu)) short_gpus.push_back({g, v});
        else if (!ledger::PeakRoom(v, p, pd)) {
          peak_short.push_back({g, v.capacity, ledger::GpuPeak{p.peak + pd.peak, p.victim + pd.cover}});
        }
      }
      const int count = static_cast<int>(req.entry.gpus.size());
      if (!short_gpus.empty()) {
        return Status(Code::kInsufficient,
                      ledger::RefusedReason(req.entry.per_gpu, count, short_gpus, req.entry.peak_per_gpu));
      }
      if (!peak_short.empty()) {
        return Status(Code::kInsufficient, ledger::PeakRefusedReason(req.entry.per_gpu, req.entry.peak_per_gpu,
                                                                     count, peak_short, req.max_peak_ratio));
      }
      return std::nullopt;
    };
    std::optional<Status> refused = refusal();
    if (refused && refused->code() == Code::kInsufficient) {
      std::vector<ledger::Entry> all = n.entries;
      std::erase_if(n.entries, [&](const ledger::Entry& h) {
        return h.state == ledger::EntryState::kHold && h.priority < req.entry.priority &&
               std::any_of(h.gpus.begin(), h.gpus.end(), [&](int g) {
                 return std::find(req.entry.gpus.begin(), req.entry.gpus.end(), g) != req.entry.gpus.end();
               });
      });
      if (n.entries.size() < all.size() && !refusal()) {
        refused.reset();
      } else {
        n.entries = std::move(all);
      }
    }
    if (refused) return *refused;
    ledger::Entry e = req.entry;
    e.created_ms = now_ms;
    n.entries.push_back(e);
    aside.keep_out = true;
    ++snap_.epoch;
    ++reserves;
    if (req.in_flight_ttl_ms > 0) in_flight.insert(req.entry.pod_uid);
    return store::ReserveOutcome::kReserved;
  }

  Result<bool> Release(const std::string& node, const std::string& uid) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    auto it = snap_.nodes.find(node);
    if (it == snap_.nodes.end()) return false;
    auto& es = it->second.entries;
    size_t before = es.size();
    std::erase_if(es, [&](const ledger::Entry& e) { return e.pod_uid == uid; });
    const bool removed = es.size() != before;
    if (removed) ++snap_.epoch, ++releases;
    if (removed) TransferRoomLocked(node, uid);
    return removed;
  }

  Result<bool> ReleaseHold(const std::string& node, const std::string& uid) override {
    {
      MutexLock l(&mu_);
      if (unavailable) return Unavailable("fake store down");
      auto it = snap_.nodes.find(node);
      if (it == snap_.nodes.end()) return false;
      const auto& es = it->second.entries;
      if (std::none_of(es.begin(), es.end(), [&](const ledger::Entry& e) {
            return e.pod_uid == uid && e.state == ledger::EntryState::kHold;
          })) {
        return false;
      }
    }
    return Release(node, uid);
  }

  Status SetEntryState(const std::string& node, const std::string& uid, ledger::EntryState st) override {
    MutexLock l(&mu_);
    for (auto& e : snap_.nodes[node].entries) {
      if (e.pod_uid == uid) {
        e.state = st;
        ++snap_.epoch;
        return Status::Ok();
      }
    }
    return NotFound("no entry");
  }

  Result<bool> RefreshEntry(const std::string& node, const ledger::Entry& entry) override {
    MutexLock l(&mu_);
    for (auto& e : snap_.nodes[node].entries) {
      if (e.pod_uid != entry.pod_uid) continue;
      if (e.state != entry.state || e.per_gpu != entry.per_gpu || e.gpus != entry.gpus ||
          e.created_ms != entry.created_ms || e.last_active_ms != entry.last_active_ms) {
        return false;
      }
      e = entry;
      ++snap_.epoch;
      return true;
    }
    return false;
  }

  Status PutEntry(const std::string& node, const ledger::Entry& entry) override {
    MutexLock l(&mu_);
    auto& es = snap_.nodes[node].entries;
    std::erase_if(es, [&](const ledger::Entry& e) { return e.pod_uid == entry.pod_uid; });
    es.push_back(entry);
    ++snap_.epoch;
    return Status::Ok();
  }

  // HoldRoom and the release of a victim as hold_room.lua and release.lua
  // do them, on the caller's clock (now_ms).
  Result<HoldOutcome> HoldRoom(const std::string& node, const std::vector<std::string>& victims,
                               const ledger::Entry& hold, int64_t ttl_ms) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    if (snap_.nodes.count(node) == 0) return NotFound("node " + node + " is not in the ledger");
    if (HolderPlacedLocked(hold.pod_uid)) return HoldOutcome::kHolderPlaced;
    int waiting = 0;
    for (const std::string& v : victims) {
      const auto& es = snap_.nodes[node].entries;
      if (std::any_of(es.begin(), es.end(), [&](const ledger::Entry& e) { return e.pod_uid == v; })) {
        room_for_[node][v] = {hold, ttl_ms};
        ++waiting;
      }
    }
    if (waiting > 0) return HoldOutcome::kPending;
    WriteHoldLocked(node, hold, ttl_ms);
    return HoldOutcome::kHeld;
  }
  Result<bool> HoldPending(const std::string& uid) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    for (const auto& [node, records] : room_for_) {
      for (const auto& [victim, rec] : records) {
        if (rec.first.pod_uid == uid) return true;
      }
    }
    return false;
  }
  bool HolderPlacedLocked(const std::string& uid) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [name, n] : snap_.nodes) {
      for (const ledger::Entry& e : n.entries) {
        if (e.pod_uid == uid && e.state != ledger::EntryState::kHold) return true;
      }
    }
    return false;
  }
  void WriteHoldLocked(const std::string& node, const ledger::Entry& hold, int64_t ttl_ms) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto& [name, n] : snap_.nodes) {
      std::erase_if(n.entries, [&](const ledger::Entry& e) { return e.pod_uid == hold.pod_uid; });
    }
    ledger::Entry e = hold;
    e.created_ms = now_ms;
    e.hold_until_ms = now_ms + ttl_ms;
    snap_.nodes[node].entries.push_back(e);
    ++snap_.epoch;
  }
  // After `uid`'s entry left `node`: its pending hold, when it was the last victim.
  void TransferRoomLocked(const std::string& node, const std::string& uid) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto n = room_for_.find(node);
    if (n == room_for_.end()) return;
    auto r = n->second.find(uid);
    if (r == n->second.end()) return;
    const auto [hold, ttl] = r->second;
    n->second.erase(r);
    for (const auto& [v, rec] : n->second) {
      if (rec.first.pod_uid == hold.pod_uid) return;  // another victim still holds it
    }
    if (!HolderPlacedLocked(hold.pod_uid)) WriteHoldLocked(node, hold, ttl);
  }

  Status SetCapacity(const std::string& node, const std::vector<store::GpuCapacity>& gpus) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    ledger::Node& n = snap_.nodes[node];
    n.name = node;
    n.gpus.clear();
    for (const auto& g : gpus) n.gpus.push_back(ledger::Gpu{g.index, g.uuid, g.capacity});
    ++snap_.epoch;
    return Status::Ok();
  }

  Status RemoveNode(const std::string& node) override {
    MutexLock l(&mu_);
    snap_.nodes.erase(node);
    reported_.erase(node);
    per_pod_ts_.erase(node);
    ++snap_.epoch;
    return Status::Ok();
  }

  // As the Valkey store: checked, then all of it or nothing; entries' used
  // and GPUs' untracked bytes are derived when a snapshot is taken.
  Status PushReport(const std::string& node, const ledger::UsageReport& report, bool in_cluster) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    if (Status s = ledger::CheckUsageReport(report); !s.ok()) {
      return InvalidArgument("usage of node " + node + ": " + s.message());
    }
    auto it = snap_.nodes.find(node);
    if (it == snap_.nodes.end() && !in_cluster) return NotFound("node " + node + " is not in the ledger");
    if (it != snap_.nodes.end()) {
      if (Status s = ledger::CheckReportAgainstNode(report, it->second); !s.ok()) return s;
    }
    if (report.version >= 2) {
      std::vector<store::ReportedGpu>& r = reported_[node];
      r.clear();
      for (const auto& g : report.gpus) r.push_back({g.index, g.total, g.uuid});
    }
    ++reports;
    if (it == snap_.nodes.end()) return Status::Ok();
    for (auto& g : it->second.gpus) {
      g.used = g.used_ts_ms = g.total = g.outside_pods = g.untracked = 0;
      g.pods.clear();
      g.enforcement = {};
      if (g.uuid == reported_uuid_[node][g.index]) g.uuid.clear();  // the last report's, not the capacity's
      for (const auto& u : report.gpus) {
        if (u.index != g.index) continue;
        g.used = u.used;
        g.used_ts_ms = now_ms;
        g.total = u.total;
        g.outside_pods = u.outside_pods;
        g.pods = u.pods;
        std::sort(g.pods.begin(), g.pods.end(), [](const auto& a, const auto& b) { return a.uid < b.uid; });
        g.enforcement = u.enforcement;
        if (g.uuid.empty() && !u.uuid.empty()) {
          g.uuid = u.uuid;
          reported_uuid_[node][g.index] = u.uuid;
        }
      }
    }
    if (report.version >= 2) per_pod_ts_[node] = now_ms;
    else per_pod_ts_.erase(node);
    ++snap_.epoch;
    return Status::Ok();
  }

  Result<std::map<std::string, std::vector<store::ReportedGpu>>> ReportedGpus() override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    return reported_;
  }
  int reports = 0;  // reports accepted

  Status BeginBind(const std::string& uid, int64_t) override {
    MutexLock l(&mu_);
    in_flight.insert(uid);
    return Status::Ok();
  }
  Status EndBind(const std::string& uid) override {
    MutexLock l(&mu_);
    in_flight.erase(uid);
    return Status::Ok();
  }
  Result<std::set<std::string>> BindsInFlight() override {
    MutexLock l(&mu_);
    return in_flight;
  }
  Status MarkReconciled() override {
    reconciled_ms = now_ms;
    return Status::Ok();
  }
  Result<int64_t> LastReconciled() override { return reconciled_ms; }
  // The shared eviction budget on the caller's clock (`now_ms`).
  Result<std::string> BudgetTake(const std::string& key, int max_per_minute, int64_t cooldown_ms, int64_t now,
                                 const std::string& leader_identity = "") override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    if (!leader_identity.empty() && !leader_holder.empty() && leader_identity != leader_holder) {
      return Conflict(leader_identity + " does not hold the leader lease in the store");
    }
    if (max_per_minute <= 0) return std::string();
    auto it = budget_until_.find(key);
    if (it != budget_until_.end() && now < it->second.first) return std::string();
    int in_window = 0;
    for (const auto& [id, t] : budget_recent_) in_window += now - t < 60'000 ? 1 : 0;
    if (in_window >= max_per_minute) return std::string();
    std::string id = "claim-" + std::to_string(++budget_seq_);
    if (cooldown_ms > 0) budget_until_[key] = {now + cooldown_ms, id};
    budget_recent_.emplace_back(id, now);
    return id;
  }
  Status BudgetRecord(const std::string& key, int64_t cooldown_ms, int64_t now) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    std::string id = "claim-" + std::to_string(++budget_seq_);
    if (cooldown_ms > 0) budget_until_[key] = {now + cooldown_ms, id};
    budget_recent_.emplace_back(id, now);
    return Status::Ok();
  }
  Status BudgetGiveBack(const std::string& key, const std::string& claim) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    std::erase_if(budget_recent_, [&](const auto& r) { return r.first == claim; });
    if (auto it = budget_until_.find(key); it != budget_until_.end() && it->second.second == claim) {
      budget_until_.erase(it);
    }
    return Status::Ok();
  }

  std::set<std::string> in_flight;
  int64_t reconciled_ms = 0;
  std::string leader_holder;  // the leader lease's holder as BudgetTake's fence reads it ("": not checked)

  // The seal: sealed from the start (a test of the rebuild calls LoseStore).
  Result<store::SealState> ReadSeal() override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    return SealLocked();
  }
  Result<store::SealState> BeginRebuild(const std::string& who) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    if (!snap_.sealed && rebuild_token_.empty()) {
      rebuild_token_ = std::to_string(now_ms) + ":" + who;
      rebuild_since_ms_ = now_ms;
    }
    return SealLocked();
  }
  Status Seal(const std::string& token, const std::vector<std::pair<std::string, std::string>>& required) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    if (snap_.sealed) return Status::Ok();
    if (token.empty() || token != rebuild_token_) return Unavailable("the rebuild was restarted");
    for (const auto& [node, uid] : required) {
      auto it = snap_.nodes.find(node);
      const bool held = it != snap_.nodes.end() &&
                        std::any_of(it->second.entries.begin(), it->second.entries.end(),
                                    [&uid = uid](const ledger::Entry& e) { return e.pod_uid == uid; });
      if (!held) return Unavailable("entry of pod " + uid + " on node " + node + " is missing");
    }
    snap_.sealed = true;
    rebuild_token_.clear();
    ++snap_.epoch;
    ++seals;
    return Status::Ok();
  }
  // Test helper: the store lost everything (FLUSHALL).
  void LoseStore() {
    MutexLock l(&mu_);
    snap_ = ledger::Snapshot();
    snap_.sealed = false;
    snap_.epoch = 1;
    rebuild_token_.clear();
    in_flight.clear();
  }
  int seals = 0;

  Status Ping() override { return unavailable ? Unavailable("fake store down") : Status::Ok(); }

  // Filter refusals, stamped with now_ms; the oldest (then the smallest uid)
  // go beyond store::kMaxRefusals.
  Status RecordRefusals(const std::vector<store::Refusal>& refusals) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    for (store::Refusal r : refusals) {
      if (r.uid.empty()) continue;
      if (r.nodes.size() > store::kMaxRefusalNodes) r.nodes.resize(store::kMaxRefusalNodes);
      r.ts_ms = now_ms;
      refused_[r.uid] = std::move(r);
    }
    while (refused_.size() > store::kMaxRefusals) {
      auto oldest = std::min_element(refused_.begin(), refused_.end(), [](const auto& a, const auto& b) {
        return a.second.ts_ms < b.second.ts_ms;
      });
      refused_.erase(oldest);
    }
    ++refusal_writes;
    return Status::Ok();
  }
  Result<std::vector<store::Refusal>> ReadRefusals(int64_t max_age_ms) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    std::erase_if(refused_, [&](const auto& kv) { return kv.second.ts_ms < now_ms - max_age_ms; });
    std::vector<store::Refusal> out;
    for (const auto& [uid, r] : refused_) out.push_back(r);
    return out;
  }
  Status ForgetRefusals(const std::vector<std::string>& uids) override {
    MutexLock l(&mu_);
    if (unavailable) return Unavailable("fake store down");
    for (const std::string& uid : uids) refused_.erase(uid);
    ++refusal_writes;
    return Status::Ok();
  }
  std::atomic<int> refusal_writes = 0;  // RecordRefusals and ForgetRefusals calls that succeeded

  // Test helpers.
  void AddNode(const std::string& name, std::vector<int64_t> caps) {
    std::vector<store::GpuCapacity> gpus;
    for (size_t i = 0; i < caps.size(); ++i) gpus.push_back({static_cast<int>(i), caps[i], ""});
    (void)SetCapacity(name, gpus);
  }
  std::vector<ledger::Entry> Entries(const std::string& node) {
    MutexLock l(&mu_);
    return snap_.nodes[node].entries;
  }

  int reserves = 0;
  int releases = 0;

 private:
  // Entries' used / used_ts_ms and GPUs' untracked bytes from the per-pod
  // figures of a version-2 report made at `ts` (the Valkey store's decoder
  // does the same when it reads the node).
  static void DerivePodUsage(ledger::Node* n, int64_t ts) {
    std::set<std::string> uids;
    for (ledger::Entry& e : n->entries) {
      uids.insert(e.pod_uid);
      e.used = 0;
      e.used_ts_ms = ts;
      e.busy = false;
      for (const ledger::Gpu& g : n->gpus) {
        if (std::find(e.gpus.begin(), e.gpus.end(), g.index) == e.gpus.end()) continue;
        for (const ledger::PodUsage& p : g.pods) {
          if (p.uid != e.pod_uid) continue;
          e.used = std::max(e.used, p.used);
          e.busy = e.busy || p.active;
        }
      }
    }
    for (ledger::Gpu& g : n->gpus) {
      g.untracked = 0;
      for (const ledger::PodUsage& p : g.pods) {
        if (!uids.count(p.uid)) g.untracked += p.used;
      }
    }
  }
  std::map<std::string, std::vector<store::ReportedGpu>> reported_ GUARDED_BY(mu_);
  std::map<std::string, std::map<int, std::string>> reported_uuid_ GUARDED_BY(mu_);
  std::map<std::string, int64_t> per_pod_ts_ GUARDED_BY(mu_);  // node -> time of its v2 report

  store::SealState SealLocked() const EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    store::SealState st;
    st.sealed = snap_.sealed;
    st.rebuild_token = rebuild_token_;
    st.rebuild_since_ms = rebuild_since_ms_;
    st.now_ms = now_ms;
    return st;
  }
  Mutex mu_;
  std::string rebuild_token_ GUARDED_BY(mu_);
  int64_t rebuild_since_ms_ GUARDED_BY(mu_) = 0;
  ledger::Snapshot snap_ GUARDED_BY(mu_);
  std::map<std::string, store::Refusal> refused_ GUARDED_BY(mu_);  // uid -> its refusal
  // key -> (end of its cooldown, the claim holding it); (claim, time) per action.
  std::map<std::string, std::pair<int64_t, std::string>> budget_until_ GUARDED_BY(mu_);
  std::vector<std::pair<std::string, int64_t>> budget_recent_ GUARDED_BY(mu_);
  uint64_t budget_seq_ GUARDED_BY(mu_) = 0;
  // Pending holds (HoldRoom): node -> victim uid -> (hold, ttl).
  std::map<std::string, std::map<std::string, std::pair<ledger::Entry, int64_t>>> room_for_ GUARDED_BY(mu_);
};

}  // namespace vramd::testing
