// The JSON text of one filter refusal (store::Refusal): the value of a field
// of P:refused (the field's name is the pod UID, which the text does not
// repeat). One flat, compact object:
//
//   {"ts_ms":N,"ns":S,"name":S,"per_gpu":N,"peak_per_gpu":N,"gpu_count":N,
//    "victim":B,"priority":N,"idle_ttl_ms":N,"nodes":[S,..]}
//
// "ts_ms" is first: the writer sends the text after it and the script
// prepends the server's time. Decoding accepts any key order, skips unknown
// keys, requires "ts_ms" and "per_gpu" and bounds every field it reads.
// Private to src/store.
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

#include "vramd/store/ledger_store.h"

namespace vramd::store {

// The text without its leading {"ts_ms":N, — that is, starting at "ns".
// At most kMaxRefusalNodes nodes are written.
std::string EncodeRefusalBody(const Refusal& r);

// Decodes one text into *r (uid is left as it is). On failure returns false
// with the reason in *why. One parser per thread; reuse it across texts.
bool DecodeRefusal(simdjson::ondemand::parser& parser, std::string_view text, Refusal* r, std::string* why);

}  // namespace vramd::store
