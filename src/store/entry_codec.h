// The JSON text of one ledger entry: the value of a field of P:{NODE}:alloc
// (the field's name is the pod UID, which the text does not repeat).
//
// The text is one flat, compact object, so that the store's Lua scripts read
// it with cjson (they read "state", "gpus" and "per_gpu"; set_state_fn.lua
// rewrites the "state" value in place), with every number below 2^53:
//
//   {"ns":S,"name":S,"gpus":[N,..],"per_gpu":N,"peak_per_gpu":N,"model":S,
//    "state":"reserved"|"bound"|"terminating",
//    "priority":N,"priority_class":S,"victim":true,"used":N,"used_ts_ms":N,
//    "last_active_ms":N,"idle_ttl_ms":N,
//    "owner_kind":S,"owner_uid":S,"evictable":true,"gang":S,
//    "created_ms":N}
//
// The fields from "priority" to "gang" are written only when they
// differ from their default (0, "", false): an entry that records none of them
// is byte for byte what vramd 0.1 wrote (tests/data/ledger/entries-v0.1.jsonl),
// so a rollback reads it unchanged and most entries stay as small as before.
// "created_ms" is always last: a Reserve sends the text up to it and the
// script appends the server's time.
//
// Decoding accepts any key order, skips unknown keys (written by a newer
// version) and gives absent new fields their defaults (entries written before
// they existed). It requires "gpus" (non-empty) and "per_gpu", and bounds
// every field it reads; a field out of bounds makes the whole entry malformed,
// with the reason said.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "vramd/ledger/model.h"

namespace vramd::store {

// Latest time an entry may carry in its new time fields (used_ts_ms,
// last_active_ms): 9999-12-31T23:59:59.999Z. Anything later is absurd.
inline constexpr int64_t kMaxEntryTimeMs = 253'402'300'799'999;

// Why the fields that the codec bounds (priority_class, used, used_ts_ms,
// last_active_ms, idle_ttl_ms) are out of bounds, or "" when they are not. The store
// checks an entry with it before writing, so that nothing it writes is
// rejected when read back.
std::string EntryFieldProblem(const ledger::Entry& e);

// The entry's JSON text. With omit_created the text ends right after
// "created_ms": and the writer appends the time and the closing brace.
// Strings are escaped by vramd::AppendJsonString (vramd/json_string.h):
// invalid UTF-8 (a free-text model annotation) becomes U+FFFD.
std::string EncodeEntry(const ledger::Entry& e, bool omit_created);

// Decodes entry texts with simdjson's on-demand API: a full reload decodes
// every entry of the cluster (50,000 at the design size). One decoder per
// thread (not thread-safe); reuse it across entries.
class EntryDecoder {
 public:
  // Decodes one text into *e, which should be default-constructed: fields
  // the text lacks (pod_uid always) are left as they are. On failure returns
  // false and says why in *why; *e is then unspecified.
  bool Decode(std::string_view text, ledger::Entry* e, std::string* why);

 private:
  simdjson::ondemand::parser parser_;
  std::string buf_;  // the text, copied with the padding simdjson reads past the end
};

}  // namespace vramd::store
