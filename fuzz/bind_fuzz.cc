// Fuzzes the decoding of ExtenderBindingArgs (extender::DecodeBindArgs) and
// the JSON string writer. Properties:
//  - an accepted body has the four fields, all non-empty;
//  - written back with AppendJsonString and decoded again, the same fields
//    come out (the writer escapes everything the reader needs);
//  - the bind result written for any error text is valid JSON that reads
//    back as that text (once the text is valid UTF-8).
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "vramd/extender/wire.h"

using namespace vramd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  Result<extender::BindArgs> a = extender::DecodeBindArgs(body);
  if (a.ok()) {
    FUZZ_CHECK(!a->pod_name.empty() && !a->pod_namespace.empty() && !a->pod_uid.empty() && !a->node.empty());
    std::string again = "{\"PodName\":";
    AppendJsonString(a->pod_name, &again);
    again += ",\"PodNamespace\":";
    AppendJsonString(a->pod_namespace, &again);
    again += ",\"PodUID\":";
    AppendJsonString(a->pod_uid, &again);
    again += ",\"Node\":";
    AppendJsonString(a->node, &again);
    again += "}";
    Result<extender::BindArgs> b = extender::DecodeBindArgs(again);
    FUZZ_CHECK_MSG(b.ok(), again + ": " + (b.ok() ? "" : b.status().message()));
    FUZZ_CHECK(b->pod_name == a->pod_name && b->pod_namespace == a->pod_namespace && b->pod_uid == a->pod_uid &&
               b->node == a->node);
  } else {
    FUZZ_CHECK(!a.status().message().empty());
  }

  // Any text as a bind error: the result is always JSON.
  std::string out;
  extender::WriteBindResult(body, &out);
  nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK_MSG(!j.is_discarded(), out.substr(0, 512));
  FUZZ_CHECK(j.is_object() && j["Error"].is_string());
  std::string text(body);
  bool utf8 = true;
  try {
    (void)nlohmann::json(text).dump();
  } catch (const nlohmann::json::exception&) {
    utf8 = false;
  }
  if (utf8) FUZZ_CHECK_MSG(j["Error"].get<std::string>() == text, out.substr(0, 512));
  return 0;
}
