// The key names of the VRAM ledger in Valkey (P = client prefix, NODE inside
// a hash tag):
//   P:nodes          set   node names
//   P:{NODE}:cap     hash  gpu index -> capacity bytes; "uuid:<idx>" -> GPU UUID
//   P:{NODE}:alloc   hash  pod uid -> entry JSON (entry_codec.h)
//   P:{NODE}:used    hash  the node agent's last report: gpu index -> bytes in use;
//                          "ts" -> report time (server ms); from a version-2
//                          report also "v" -> "3" and per GPU "g:<idx>" ->
//                          "<total>,<outside>,<uuid>[,<uid>=<bytes>]..." (physical
//                          bytes, bytes outside pods, GPU UUID or empty, each
//                          pod's bytes; ledger_decode.h). Read too, as vramd
//                          wrote them before with "v" -> "2": "total:<idx>",
//                          "uuid:<idx>", "outside:<idx>", "pod:<idx>:<uid>";
//                          per GPU whose agent enforces or reports limits
//                          (issue 34) "e:<idx>" -> "<backend>,<reason>[,<uid>=<state>[:<reason>]]..."
//                          (ledger_decode.h; a replica before issue 34 counts
//                          the field as malformed and reads the rest)
//   P:{NODE}:models  hash  model -> last placement on the node (server ms)
//   P:{NODE}:roomfor hash  victim uid -> the hold waiting for its release
//   P:holdwait       hash  holder uid -> until when (ms) room is being made for it
//                          (lua/hold_fn.lua; issue 32)
//   P:pods           hash  pod uid -> node holding its entry (idempotency, moves)
//   P:epoch          int   INCR on every change of the keys above (not P:pods alone)
//   P:changes        zset  change log: node -> epoch of its last change
//                          (a usage report alone: "{u}<node>"); member ''
//                          -> the epoch after which every change is logged
//                          (lua/bump.lua; at most ~100,000 members)
//   P:sealed         str   present while the ledger is complete: "<ms>:<token>"
//                          of the rebuild that sealed it (ReadSeal, Seal); the
//                          token ends with " run=<run_id>" of the server process
//                          it was made on, and counts only there (lua/bump.lua)
//   P:unsealed       str   why the ledger was unsealed: "epoch", "restarted"
//                          (absent: the store is new or was emptied)
//   P:rebuilding     str   "<ms>:<who> run=<run_id>": the rebuild under way (BeginRebuild)
//   P:reported       hash  node -> its last version-2 report's GPUs,
//                          "<idx>=<total>=<uuid>,..." (node sync's last capacity
//                          source; also nodes not yet in the ledger)
//   P:inflight       hash  pod uid -> expiry of its bind in flight (server ms)
//   P:reconciled     str   server ms of the last completed reconcile
//   P:refused        hash  pod uid -> filter refusal JSON (refusal_codec.h)
//   P:refused:ts     zset  pod uid -> server ms of that refusal (the oldest go
//                          first beyond kMaxRefusals)
//   P:budget:recent  zset  the eviction budget's minute; P:budget:k:<key> its
//                          cooldowns (lua/budget_*.lua); P:leader the leader
//                          lease (lease.h), the budget's fence
// Private to src/store.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "vramd/store/lease.h"

namespace vramd::store {

struct LedgerKeys {
  explicit LedgerKeys(std::string p) : prefix(std::move(p)) {}

  // P:{NODE}:<what>, `node` having passed CheckNodeName (ledger_checks.h).
  std::string Node(std::string_view node, std::string_view what) const {
    std::string k;
    k.reserve(prefix.size() + node.size() + what.size() + 4);
    k += prefix;
    k += ":{";
    k += node;
    k += "}:";
    k += what;
    return k;
  }

  const std::string prefix;
  const std::string nodes = prefix + ":nodes";
  const std::string pods = prefix + ":pods";
  const std::string epoch = prefix + ":epoch";
  const std::string changes = prefix + ":changes";
  const std::string inflight = prefix + ":inflight";
  const std::string reported = prefix + ":reported";
  const std::string sealed = prefix + ":sealed";
  const std::string unsealed = prefix + ":unsealed";  // lua/bump.lua derives it from `sealed`
  const std::string rebuilding = prefix + ":rebuilding";
  const std::string reconciled = prefix + ":reconciled";
  const std::string holdwait = prefix + ":holdwait";  // pod uid -> ms: room being made for it (hold_room.lua)
  const std::string budget_recent = prefix + ":budget:recent";   // the eviction budget's minute (zset)
  const std::string leader = prefix + ":" + kLeaderLeaseName;    // the leader lease (lease.h): the budget's fence
  std::string BudgetKey(const std::string& key) const { return prefix + ":budget:k:" + key; }
  const std::string refused = prefix + ":refused";
  const std::string refused_ts = prefix + ":refused:ts";
};

}  // namespace vramd::store
