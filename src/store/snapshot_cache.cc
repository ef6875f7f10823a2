// The cached ledger snapshot and the epoch watch (snapshot_cache.h). Every
// write script moves the epoch and logs the nodes it changed (lua/bump.lua);
// Snapshot() caches the ledger at one epoch; when the epoch moves it reads
// again only the nodes logged after the cached epoch (Refresh), or the whole
// ledger (Load) when the log cannot vouch for that.
#include "store/snapshot_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vramd/ledger/placement.h"
#include "vramd/metrics/thread_guard.h"

namespace vramd::store {

SnapshotCache::SnapshotCache(std::shared_ptr<ValkeyClient> client)
    : client_(std::move(client)), keys_(client_->prefix()) {}

SnapshotCache::~SnapshotCache() {
  watch_stop_.store(true);
  if (usage_thread_.joinable()) {
    usage_thread_.request_stop();
    usage_cv_.NotifyAll();
    usage_thread_.join();
  }
  if (watch_thread_.joinable()) watch_thread_.join();
}

void SnapshotCache::UsageRefresher(std::stop_token st) {
  // Snapshots this thread replaced and no longer keeps as the spare, held
  // until no filter call holds them any more and then freed here (at 5,000
  // nodes x 8 GPUs and 50,000 entries, freeing one takes milliseconds: not
  // on a filter call's thread).
  std::vector<ledger::SnapshotPtr> retired;
  while (!st.stop_requested()) {
    // A count of 1 stays 1 (a replaced snapshot is never cached again); the
    // fence pairs with the last other holder's release, as in Writable.
    const auto unheld = std::partition(retired.begin(), retired.end(),
                                       [](const ledger::SnapshotPtr& p) { return p.use_count() > 1; });
    if (unheld != retired.end()) {
      std::atomic_thread_fence(std::memory_order_acquire);
      retired.erase(unheld, retired.end());
    }
    {
      MutexLock l(&usage_mu_);
      usage_cv_.WaitFor(&l, st, std::chrono::seconds(1), [this]() EXCLUSIVE_LOCKS_REQUIRED(usage_mu_) {
        return usage_pending_;
      });
      usage_pending_ = false;
    }
    if (st.stop_requested()) break;
    bool behind = false;
    {
      MutexLock lk(&cache_mu_);
      behind = cache_ && cache_->epoch < watched_usage_epoch_.load();
    }
    if (behind) {
      // Holding the cached snapshot keeps the refresh from taking it out
      // of the cache while it changes (Writable): filter calls keep
      // answering from it meanwhile instead of waiting for the refresh and
      // then refreshing again themselves (issue 14: that wait, once a
      // second, was what moved filter's p99 under agent reports). The
      // refresh changes the spare instead, or else a copy.
      ledger::SnapshotPtr held;
      {
        MutexLock lk(&cache_mu_);
        held = cache_;
      }
      Result<ledger::SnapshotPtr> s = Snapshot();  // errors: the next call's Snapshot() says them
      if (!s.ok()) spdlog::debug("valkey: usage refresh failed: {}", s.status().message());
      bool replaced = false;
      {
        MutexLock lk(&cache_mu_);
        replaced = cache_ != held;
      }
      if (replaced) {
        // The replaced snapshot is the next refresh's spare (whoever still
        // holds it lets go long before then); the previous spare, if the
        // refresh did not use it, goes.
        {
          MutexLock reload(&reload_mu_);
          std::swap(spare_, held);
        }
        if (held != nullptr && held.use_count() > 1) retired.push_back(std::move(held));  // else freed here
      }
    }
    // At most one refresh per period; reports meanwhile wait for the next.
    Mutex m;
    MutexLock l(&m);
    CondVar idle;
    idle.WaitFor(&l, st, std::chrono::milliseconds(kUsageRefreshMs));
  }
}

// The write scripts publish each new epoch on the channel named like the
// epoch key (lua/bump.lua). While subscribed, WatchedSnapshot() returns the
// cached snapshot without reading the epoch when (1) no notification
// names a newer epoch, (2) this process wrote nothing since the cache was
// last confirmed by an epoch read, and (3) that confirmation happened
// under the current subscription (anything published while it was down
// is lost: a new subscription forces one epoch read first).
void SnapshotCache::StartEpochWatch() {
  if (watch_thread_.joinable()) return;
  usage_thread_ = std::jthread([this](std::stop_token st) {
    while (!st.stop_requested()) {
      if (metrics::GuardedStep(metrics::kThreadEpochWatch, [&] { UsageRefresher(st); })) break;
      metrics::PauseAfterError(st);
    }
  });
  watch_thread_ = std::thread([this] {
    // Subscribe returns at stop; an exception is counted and the watch starts over.
    while (!watch_stop_.load()) {
      if (metrics::GuardedStep(metrics::kThreadEpochWatch, [this] {
        (void)client_->Subscribe(
            keys_.epoch, watch_stop_,
            [this](bool live) {
              if (live) {
                watched_epoch_.store(0);  // a new primary may count from lower
                watch_gen_.fetch_add(1);
                watch_live_.store(true);
                spdlog::info("valkey: following ledger changes on {}", keys_.epoch);
              } else {
                watch_live_.store(false);
              }
            },
            [this](const std::string& payload) {
              int64_t e = 0;
              std::string_view text = payload;
              const bool usage_only = text.ends_with('u');  // lua/bump.lua's bump_tag
              if (usage_only) text.remove_suffix(1);
              if (!ParseInt64(text, &e) || e < 0) return;
              if (usage_only) {
                uint64_t cur = watched_usage_epoch_.load();
                while (cur < static_cast<uint64_t>(e) && !watched_usage_epoch_.compare_exchange_weak(cur, e)) {
                }
                MutexLock l(&usage_mu_);
                usage_pending_ = true;
                usage_cv_.NotifyAll();
                return;
              }
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

Result<ledger::SnapshotPtr> SnapshotCache::WatchedSnapshot() {
  if (watch_live_.load()) {
    auto current = [this]() EXCLUSIVE_LOCKS_REQUIRED(cache_mu_) {
      return cache_ && cache_gen_ == watch_gen_.load() && cache_writes_ == local_writes_.load() &&
             cache_->epoch + writes_in_flight_.load() >= watched_epoch_.load();
    };
    {
      MutexLock lk(&cache_mu_);
      if (current()) return cache_;
    }
    // Behind by writes of this process that were kept: laid on, they may be
    // all it missed.
    if (kept_count_.load() != 0) {
      TryLayKept();
      MutexLock lk(&cache_mu_);
      if (current()) return cache_;
    }
  }
  return Snapshot();
}

Result<ledger::SnapshotPtr> SnapshotCache::Snapshot() {
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
    MutexLock lk(&cache_mu_);
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
    MutexLock lk(&cache_mu_);
    if (cache_ && cache_->epoch == *epoch) {
      Vouch(gen, writes);
      return cache_;
    }
  }
  // One reload at a time; the others wait and take its result when it
  // started after their epoch read (or saw the same epoch).
  std::vector<ledger::SnapshotPtr> olds;  // destroyed after the locks are released (declared first)
  ledger::SnapshotPtr fresh;
  ledger::SnapshotPtr old;  // destroyed after the locks are released
  {
    MutexLock reload(&reload_mu_);
    {
      MutexLock lk(&cache_mu_);
      const bool same = cache_ && epoch && cache_->epoch == *epoch;
      if (same) Vouch(gen, writes);
      if (cache_ && (same || cache_seq_ >= ticket)) return cache_;
    }
    const uint64_t start = seq_.load();
    // Writes of this process kept for later first: the refresh then reads
    // only what they do not cover.
    if (kept_count_.load() != 0) LayKeptLocked(&olds);
    ledger::SnapshotPtr base;
    {
      MutexLock lk(&cache_mu_);
      base = cache_;
    }
    // With a cached snapshot only the nodes changed since its epoch are
    // read again (Refresh falls back to Load when it cannot vouch for that).
    auto loaded = base ? Refresh(std::move(base)) : Load();
    if (!loaded.ok()) return loaded.status();
    fresh = std::move(loaded).value();
    {
      MutexLock lk(&cache_mu_);
      old = std::exchange(cache_, fresh);
      cache_seq_ = start;
      Vouch(gen, writes);
    }
    // Writes of this process kept meanwhile that follow what was read; the
    // caller gets the snapshot read (the next call gets the rest).
    if (kept_count_.load() != 0) LayKeptLocked(&olds);
  }
  return fresh;  // the previous snapshot, if unused, is freed here, outside both locks
}

Result<uint64_t> SnapshotCache::ReadEpoch() {
  auto r = client_->Command({"GET", keys_.epoch});
  if (!r.ok()) return r.status();
  auto e = ParseEpoch(*r, keys_.epoch);
  if (e.ok()) Saw(*e);
  return e;
}

// Raises max_epoch_seen_ (MaxEpochSeen) to `epoch`.
void SnapshotCache::Saw(uint64_t epoch) {
  uint64_t cur = max_epoch_seen_.load();
  while (cur < epoch && !max_epoch_seen_.compare_exchange_weak(cur, epoch)) {
  }
}

// Reads the whole ledger. The epoch is read before the data (same round
// trip as the node set, executed first), so the data is at least as new as
// the label: a write that lands during the load moves the epoch past the
// label and the next Snapshot() reloads. The load is not one transaction
// (it would stall the server for the whole read): a write racing it may be
// half-visible until that next reload.
// Called with reload_mu_ held (as is Refresh).
Result<ledger::SnapshotPtr> SnapshotCache::Load() {
  auto head = client_->Pipeline(
      {{"GET", keys_.epoch}, {"SMEMBERS", keys_.nodes}, {"EXISTS", keys_.sealed}, {"GET", keys_.unsealed}});
  if (!head.ok()) return head.status();
  auto epoch = ParseEpoch((*head)[0], keys_.epoch);
  if (!epoch.ok()) return epoch.status();
  Saw(*epoch);
  const Reply& members = (*head)[1];
  if (members.type != Reply::Type::kArray) {
    return Internal("valkey key " + keys_.nodes + " is not a set" +
                    (members.is_error() ? ": " + members.str : std::string()));
  }
  const size_t n = members.elements.size();
  std::vector<std::vector<std::string>> cmds;
  cmds.reserve(4 * n);
  static constexpr const char* kParts[] = {"cap", "alloc", "used", "models"};
  for (const auto& m : members.elements) {
    for (const char* part : kParts) cmds.push_back({"HGETALL", keys_.Node(m.str, part)});
  }
  auto snap = std::make_shared<ledger::Snapshot>();
  snap->epoch = *epoch;
  snap->sealed = (*head)[2].type == Reply::Type::kInteger && (*head)[2].integer == 1;
  if (!snap->sealed && (*head)[3].type == Reply::Type::kString) snap->unseal_reason = (*head)[3].str;
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
  last_step_ = Step{nullptr, snap.get(), {}};
  full_reloads_.fetch_add(1);
  // Filter and prioritize read the compact index, not the nodes: at 5,000
  // nodes x 8 GPUs a filter call takes ~0.25 ms instead of 1-2 ms (the
  // index costs ~1.5 ms here, once per reload; docs/performance.md).
  ledger::IndexSnapshot(snap.get());
  return ledger::SnapshotPtr(std::move(snap));
}

// Brings `base` up to date by reading again only the nodes that the change
// log (P:changes, see lua/bump.lua) names after base.epoch: one round trip for
// the epoch and the log, one for those nodes (membership of P:nodes and
// the same four hashes Load reads), and a copy of the other nodes from
// `base`. The epoch is read first, before the log and the node data, so
// the result is at least as new as its label (the argument of Load). A
// node that is not logged after base.epoch last changed before `base`
// read its epoch, so `base` holds its current data. The result equals a
// Load at the same epoch. Falls back to Load when the log cannot vouch
// for that, or when more than half the nodes changed. `base` is the cached
// snapshot, passed as the only reference besides cache_ (see Writable).
Result<ledger::SnapshotPtr> SnapshotCache::Refresh(ledger::SnapshotPtr base) {
  const uint64_t e0 = base->epoch;
  const size_t max_changed = base->nodes.size() / 2;
  auto head = client_->Pipeline({{"GET", keys_.epoch},
                                 {"ZSCORE", keys_.changes, ""},
                                 // A node may be logged twice (lua/bump.lua: a usage-only
                                 // change and another kind of change).
                                 {"ZRANGEBYSCORE", keys_.changes, "(" + std::to_string(e0), "+inf",
                                  "WITHSCORES", "LIMIT", "0", std::to_string(2 * max_changed + 2)},
                                 {"EXISTS", keys_.sealed},
                                 {"GET", keys_.unsealed}});
  if (!head.ok()) return head.status();
  auto epoch = ParseEpoch((*head)[0], keys_.epoch);
  if (!epoch.ok()) return epoch.status();
  Saw(*epoch);
  // Sealing and unsealing move the epoch, so an unchanged epoch keeps it.
  const bool sealed = (*head)[3].type == Reply::Type::kInteger && (*head)[3].integer == 1;
  const std::string unseal_reason = !sealed && (*head)[4].type == Reply::Type::kString ? (*head)[4].str : "";
  const Reply& marker = (*head)[1];
  const Reply& log = (*head)[2];
  std::vector<std::string> changed;       // read whole
  std::vector<std::string> usage_only;    // only their usage changed: capacity and usage re-read
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
  } else if (log.elements.size() / 2 > 2 * max_changed + 1) {
    why = "more than half the nodes changed";
  } else {
    uint64_t last = 0;
    changed.reserve(log.elements.size() / 2);
    for (size_t i = 0; i < log.elements.size(); i += 2) {
      uint64_t score = 0;
      const std::string& member = log.elements[i].str;
      if (member.empty()) {
        why = "the change log restarted";  // its marker moved past e0 after the ZSCORE
        break;
      }
      if (!ParseScore(log.elements[i + 1].str, &score)) {
        why = "the change log holds a bad score";
        break;
      }
      last = std::max(last, score);
      if (member.starts_with(kUsageMember)) {
        usage_only.push_back(member.substr(kUsageMember.size()));
      } else {
        changed.push_back(member);
      }
    }
    // Every epoch is logged (as the score of a node it changed, or of a
    // later change of that node): a lower last score means something
    // moved the epoch without logging (an older vramd, a manual INCR).
    if (why == nullptr && last < *epoch) why = "a change was not logged";
    // A node with a change of another kind is read whole anyway; so is one
    // the cached snapshot lacks or holds with malformed fields (their count
    // is kept per node, over all four hashes).
    std::sort(changed.begin(), changed.end());
    std::vector<std::string> kept;   // usage-only nodes read as such
    std::vector<std::string> whole;  // usage-only nodes to read whole after all
    for (std::string& name : usage_only) {
      if (std::binary_search(changed.begin(), changed.end(), name)) continue;
      const bool as_usage = base->nodes.count(name) != 0 && node_problems_.count(name) == 0;
      (as_usage ? kept : whole).push_back(std::move(name));
    }
    usage_only = std::move(kept);
    changed.insert(changed.end(), whole.begin(), whole.end());
    if (why == nullptr && changed.size() + usage_only.size() > max_changed) why = "more than half the nodes changed";
  }
  if (why != nullptr) {
    spdlog::debug("ledger: full reload from epoch {} to {}: {}", e0, *epoch, why);
    base.reset();
    return Load();
  }

  // Build the changed nodes first: nothing below can fail once the
  // snapshot to change is taken from the cache. They are read kRefreshChunk
  // at a time, each chunk decoded before the next is asked for, so that
  // Valkey's work and this thread's alternate instead of taking two cores
  // at once (issue 14: a refresh of ~1,000 nodes a second under agent
  // reports, beside filter calls on a 2-core machine).
  static constexpr const char* kParts[] = {"cap", "alloc", "used", "models"};
  Problems problems;
  NodeProblems node_problems = node_problems_;
  EntryDecoder decoder;
  NodeUpdates updates;
  updates.reserve(changed.size());
  std::vector<std::vector<std::string>> cmds;
  // Reads names[first, last): each one's membership of P:nodes, then its
  // hashes `parts`; checks the membership replies.
  const auto read_chunk = [&](const std::vector<std::string>& names, size_t first, size_t last,
                              std::span<const char* const> parts) -> Result<std::vector<Reply>> {
    cmds.clear();
    for (size_t k = first; k < last; ++k) {
      cmds.push_back({"SISMEMBER", keys_.nodes, names[k]});
      for (const char* part : parts) cmds.push_back({"HGETALL", keys_.Node(names[k], part)});
    }
    auto replies = client_->Pipeline(cmds);
    if (!replies.ok()) return replies.status();
    if (replies->size() != cmds.size()) return Internal("valkey pipeline: reply count mismatch");
    for (size_t i = 0; i < replies->size(); i += 1 + parts.size()) {
      const Reply& member = (*replies)[i];
      if (member.type != Reply::Type::kInteger) {
        return Internal("valkey key " + keys_.nodes + " is not a set" +
                        (member.is_error() ? ": " + member.str : std::string()));
      }
    }
    return replies;
  };
  // Usage-only nodes first: the capacity and usage hashes (the entries and
  // models are base's), or the whole node when RebuildUsage cannot.
  static constexpr const char* kUsageParts[] = {"cap", "used"};
  for (size_t first = 0; first < usage_only.size(); first += kRefreshChunk) {
    const size_t last = std::min(usage_only.size(), first + kRefreshChunk);
    auto replies = read_chunk(usage_only, first, last, kUsageParts);
    if (!replies.ok()) return replies.status();
    for (size_t k = first; k < last; ++k) {
      std::string& name = usage_only[k];
      Reply* r = &(*replies)[3 * (k - first)];
      if (r[0].integer == 0) {  // removed after all (that removal is logged too)
        changed.push_back(std::move(name));
        continue;
      }
      ledger::Node node;
      node.name = name;
      Problems mine;
      if (!RebuildUsage(&node, base->nodes.at(name), r[1], r[2], &mine)) {
        changed.push_back(std::move(name));
        continue;
      }
      if (mine.count != 0) node_problems[name] = mine.count;
      problems.Merge(std::move(mine));
      updates.emplace_back(std::move(name), std::move(node));
      usage_nodes_.fetch_add(1);
    }
  }
  for (size_t first = 0; first < changed.size(); first += kRefreshChunk) {
    const size_t last = std::min(changed.size(), first + kRefreshChunk);
    auto replies = read_chunk(changed, first, last, kParts);
    if (!replies.ok()) return replies.status();
    for (size_t k = first; k < last; ++k) {
      std::string& name = changed[k];
      Reply* r = &(*replies)[5 * (k - first)];
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
  }

  incremental_reloads_.fetch_add(1);
  return Install(std::move(base), *epoch, sealed, unseal_reason, std::move(updates), std::move(node_problems),
                 problems);
}

ledger::SnapshotPtr SnapshotCache::Install(ledger::SnapshotPtr base, uint64_t epoch, bool sealed,
                                           const std::string& unseal_reason, NodeUpdates updates,
                                           NodeProblems node_problems, const Problems& problems, bool copy_ok,
                                           const std::string* change_node,
                                           const std::function<void(ledger::Node*)>* change) {
  // Only the changed nodes' index records are rebuilt (Writable says from
  // which index, and which nodes it changed itself).
  const ledger::Snapshot* const base_ptr = base.get();
  Step step{nullptr, nullptr, {}};
  step.changed.reserve(updates.size() + 1);
  for (const auto& u : updates) step.changed.push_back(u.first);
  if (change_node != nullptr) step.changed.push_back(*change_node);
  Changeable w = Writable(std::move(base), copy_ok);
  if (w.snap == nullptr) return nullptr;
  std::shared_ptr<ledger::Snapshot> snap = std::move(w.snap);
  snap->epoch = epoch;
  snap->sealed = sealed;
  snap->unseal_reason = unseal_reason;
  for (auto& [name, node] : updates) {
    if (node) {
      snap->nodes.insert_or_assign(name, std::move(*node));
    } else {
      snap->nodes.erase(name);
    }
  }
  if (change_node != nullptr) {
    // The caller checked the node on `base`; the snapshot taken holds the
    // same node (base itself, or the spare brought up to date from it).
    auto it = snap->nodes.find(*change_node);
    if (it != snap->nodes.end()) (*change)(&it->second);
  }
  node_problems_ = std::move(node_problems);
  ReportProblems(problems, snap->epoch);
  std::vector<std::string> reindex = step.changed;
  if (!w.caught_up.empty()) {
    reindex.insert(reindex.end(), w.caught_up.begin(), w.caught_up.end());
    std::sort(reindex.begin(), reindex.end());
    reindex.erase(std::unique(reindex.begin(), reindex.end()), reindex.end());
  }
  ledger::ReindexSnapshot(snap.get(), std::move(w.old_index), reindex, w.nodes_moved);
  // The new snapshot differs from its base in step.changed alone: from a
  // spare brought up to date or a copy, the base itself is unchanged.
  step.from = snap.get() != base_ptr ? base_ptr : nullptr;
  step.to = snap.get();
  last_step_ = std::move(step);
  return ledger::SnapshotPtr(std::move(snap));
}

bool SnapshotCache::ApplyOwnEntry(WriteMark* mark, uint64_t epoch, const std::string& name, const OwnEntry& w) {
  // As BuildNode reads the node the reserve left: the entry from the text
  // the script stored, in place of the pod's hold (the only entry of the pod
  // a reserve replaces), the holds it took gone, the model placed, the usage
  // report's per-pod figures laid on every entry.
  ledger::Entry added;
  std::string why;
  thread_local EntryDecoder decoder;  // its parser's buffers are kept between writes
  if (!decoder.Decode(w.text, &added, &why)) return false;  // a read tells
  added.pod_uid = w.uid;
  OwnChange change;
  change.check = [](const ledger::Node&) { return true; };
  change.apply = [added = std::move(added), w](ledger::Node* node) {
    std::erase_if(node->entries, [&w](const ledger::Entry& e) {
      return e.pod_uid == w.uid || std::find(w.taken.begin(), w.taken.end(), e.pod_uid) != w.taken.end();
    });
    node->entries.push_back(added);
    SortEntriesOldestFirst(node);
    if (!w.model.empty()) node->models[w.model] = w.now_ms;
    if (w.per_pod) FillPodUsage(node, w.usage_ts_ms);
  };
  return ApplyOwn(mark, epoch, name, std::move(change), /*only_clean=*/true);
}

bool SnapshotCache::ApplyOwnState(WriteMark* mark, uint64_t epoch, const std::string& name, const std::string& uid,
                                  ledger::EntryState state) {
  const auto is_it = [uid](const ledger::Entry& e) { return e.pod_uid == uid && e.state != ledger::EntryState::kHold; };
  OwnChange change;
  // Not in the cache as the store holds it: read it.
  change.check = [is_it](const ledger::Node& cached) {
    return std::any_of(cached.entries.begin(), cached.entries.end(), is_it);
  };
  change.apply = [is_it, state](ledger::Node* node) {
    auto e = std::find_if(node->entries.begin(), node->entries.end(), is_it);
    if (e != node->entries.end()) e->state = state;
  };
  return ApplyOwn(mark, epoch, name, std::move(change), /*only_clean=*/true);
}

bool SnapshotCache::ApplyOwn(WriteMark* mark, uint64_t epoch, const std::string& name, OwnChange change,
                             bool only_clean) {
  Saw(epoch);
  bool next = false;
  {
    MutexLock lk(&cache_mu_);
    // Scripts run one at a time and each moves the epoch by one: a cache at
    // epoch - 1 differs from the store at `epoch` in this write alone. (A
    // load is not one transaction, so a cache may also hold changes newer
    // than its label; those are logged after `epoch`, and the next refresh
    // reads their nodes again, this one too if it is among them.) A cache
    // at `epoch` or later has read this write already.
    if (!cache_ || cache_->epoch >= epoch || cache_->Find(name) == nullptr) return false;
    next = cache_->epoch + 1 == epoch;
  }
  // Never waits for a refresh or another write's apply (a bind would wait
  // for their round trips): the write is kept instead, and laid on by
  // whoever holds the cache next, or the next call.
  if (!next) {
    Keep(mark, epoch, name, std::move(change), only_clean);
    TryLayKept();
    return false;
  }
  if (!reload_mu_.TryLock()) {
    Keep(mark, epoch, name, std::move(change), only_clean);
    TryLayKept();
    return false;
  }
  std::vector<ledger::SnapshotPtr> old;  // destroyed after the locks are released
  old.emplace_back();
  const Applied applied = ApplyOwnWriteLocked(mark, epoch, name, change, only_clean, &old.back());
  if (applied == Applied::kApplied) LayKeptLocked(&old);
  reload_mu_.Unlock();
  if (applied == Applied::kLater) Keep(mark, epoch, name, std::move(change), only_clean);
  return applied == Applied::kApplied;
}

void SnapshotCache::Keep(WriteMark* mark, uint64_t epoch, const std::string& name, OwnChange change,
                         bool only_clean) {
  MutexLock lk(&kept_mu_);
  if (kept_.size() >= kMaxKept) kept_.erase(kept_.begin());
  kept_.insert_or_assign(epoch, KeptWrite{name, std::move(change), only_clean});
  kept_count_.store(kept_.size());
  // Returned, as far as the cache's cover goes: counted now, and as covered
  // when laid on (a write kept and counted only on its return could be laid
  // on first, and count as covering another write that is not).
  local_writes_.fetch_add(1);
  mark->counted_ = true;
}

void SnapshotCache::TryLayKept() {
  if (kept_count_.load() == 0 || !reload_mu_.TryLock()) return;
  std::vector<ledger::SnapshotPtr> old;
  LayKeptLocked(&old);
  reload_mu_.Unlock();
}

void SnapshotCache::LayKeptLocked(std::vector<ledger::SnapshotPtr>* old) {
  for (;;) {
    uint64_t at = 0;
    {
      MutexLock lk(&cache_mu_);
      if (!cache_) return;
      at = cache_->epoch;
    }
    KeptWrite w;
    {
      MutexLock lk(&kept_mu_);
      // Those the cache has passed: a refresh read what they changed.
      kept_.erase(kept_.begin(), kept_.upper_bound(at));
      auto it = kept_.find(at + 1);
      if (it == kept_.end()) {
        kept_count_.store(kept_.size());
        return;
      }
      w = std::move(it->second);
      kept_.erase(it);
      kept_count_.store(kept_.size());
    }
    old->emplace_back();
    switch (ApplyOwnWriteLocked(nullptr, at + 1, w.node, w.change, w.only_clean, &old->back())) {
      case Applied::kApplied:
        continue;
      case Applied::kLater: {  // a call holds the snapshot: once it lets go
        MutexLock lk(&kept_mu_);
        kept_.insert_or_assign(at + 1, std::move(w));
        kept_count_.store(kept_.size());
        return;
      }
      case Applied::kNever:  // the next call's refresh reads it
        return;
    }
  }
}

SnapshotCache::Applied SnapshotCache::ApplyOwnWriteLocked(WriteMark* mark, uint64_t epoch, const std::string& name,
                                                          const OwnChange& change, bool only_clean,
                                                          ledger::SnapshotPtr* old) {
  ledger::SnapshotPtr base;
  {
    MutexLock lk(&cache_mu_);
    if (!cache_ || cache_->epoch + 1 != epoch || cache_->Find(name) == nullptr) return Applied::kNever;  // as it was
    base = cache_;
  }
  if (only_clean && node_problems_.count(name) != 0) return Applied::kNever;
  if (!change.check(*base->Find(name))) return Applied::kNever;
  // The node's count of unreadable fields stays 0 (only_clean) or as it was.
  NodeProblems node_problems = node_problems_;
  const bool sealed = base->sealed;  // reserve and the bound mark leave the seal as it is
  const std::string unseal_reason = base->unseal_reason;
  // Not at the price of a copy of every node (a call holds the cached
  // snapshot, and no spare is free): laid on once that call has let go.
  ledger::SnapshotPtr fresh = Install(std::move(base), epoch, sealed, unseal_reason, {}, std::move(node_problems),
                                      Problems{}, /*copy_ok=*/false, &name, &change.apply);
  if (fresh == nullptr) return Applied::kLater;
  own_writes_.fetch_add(1);
  MutexLock lk(&cache_mu_);
  *old = std::exchange(cache_, std::move(fresh));
  // local_writes_ - cache_writes_ is never less than the writes of this
  // process that returned and the cache does not cover (the fast path of
  // WatchedSnapshot trusts the cache when it is 0). This one is covered:
  // both count it at once, or, kept, it was counted as returned already.
  ++cache_writes_;
  if (mark != nullptr) {
    local_writes_.fetch_add(1);
    mark->counted_ = true;
  }
  return Applied::kApplied;
}

// The snapshot Refresh changes: the cached one itself when nothing else
// holds it (a filter call holds one only for its duration), which spares
// copying every node (~10 ms at 5,000 nodes x 8 GPUs / 50,000 entries)
// and freeing the old ones; otherwise a snapshot that nobody holds, so that
// a snapshot a caller holds never changes. That is the usage refresher's
// spare when the last refresh made `base` from it (it then differs from
// `base` only in the nodes that refresh changed, which are copied over from
// `base`: ~a fifth of the nodes under 1,000 agent reports/s at 5,000 nodes
// and a refresh a second), else a copy of every node. The cache is emptied
// while the taken one is changed; callers meanwhile wait on reload_mu_ and
// take the result. Called with reload_mu_ held, `base` being cache_ and the
// caller's only reference.
SnapshotCache::Changeable SnapshotCache::Writable(ledger::SnapshotPtr base, bool copy_ok) {
  {
    MutexLock lk(&cache_mu_);
    if (cache_ == base) {
      cache_.reset();
      // New references come only from cache_ (under cache_mu_) or from
      // copying an existing one, so a count of 1 stays 1. The fence pairs
      // with the release of the last other holder's decrement: its reads
      // of the snapshot happen before the changes below.
      if (base.use_count() == 1) {
        std::atomic_thread_fence(std::memory_order_acquire);
        auto own = std::const_pointer_cast<ledger::Snapshot>(std::move(base));
        // The index points into the nodes; ReindexSnapshot makes a new one.
        std::shared_ptr<const ledger::PlacementIndex> index = std::move(own->index);
        return Changeable{std::move(own), std::move(index), false, {}};
      }
      cache_ = base;
    }
  }
  // The spare is referenced only by spare_ (never cached again), so a count
  // of 1 stays 1; the fence as above, for whoever held it last.
  if (spare_ != nullptr && spare_.get() == last_step_.from && base.get() == last_step_.to &&
      spare_.use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);
    auto own = std::const_pointer_cast<ledger::Snapshot>(std::move(spare_));  // made by Refresh
    spare_.reset();
    std::shared_ptr<const ledger::PlacementIndex> index = std::move(own->index);
    for (const std::string& name : last_step_.changed) {
      auto it = base->nodes.find(name);
      if (it != base->nodes.end()) {
        own->nodes.insert_or_assign(name, it->second);
      } else {
        own->nodes.erase(name);
      }
    }
    own->epoch = base->epoch;
    own->sealed = base->sealed;
    own->unseal_reason = base->unseal_reason;
    caught_up_reloads_.fetch_add(1);
    return Changeable{std::move(own), std::move(index), false, last_step_.changed};
  }
  if (!copy_ok) return Changeable{};
  copied_reloads_.fetch_add(1);
  // A copy of the nodes, not of the index: base's index points into base.
  return Changeable{std::make_shared<ledger::Snapshot>(base->Clone()), base->index, true, {}};
}

// Publishes the number of malformed fields in the ledger (the sum over
// node_problems_, which the caller just updated) and logs it, with the
// samples the load or refresh `p` met, when it changed since the last
// load or refresh (the same corrupt field would otherwise be logged on
// every reload).
void SnapshotCache::ReportProblems(const Problems& p, uint64_t epoch) {
  uint64_t total = 0;
  for (const auto& [node, n] : node_problems_) total += n;
  const uint64_t before = malformed_.exchange(total);
  if (total == 0 || total == before) return;
  spdlog::warn("ledger at epoch {}: skipped {} malformed field(s) in valkey", epoch, total);
  for (const auto& s : p.samples) spdlog::warn("ledger: {}", s);
}

// With cache_mu_ held: the cached snapshot is at least as new as an epoch
// read made after watch_gen_ was `gen` and local_writes_ was `writes`.
void SnapshotCache::Vouch(uint64_t gen, uint64_t writes) {
  cache_gen_ = std::max(cache_gen_, gen);
  cache_writes_ = std::max(cache_writes_, writes);
}

}  // namespace vramd::store
