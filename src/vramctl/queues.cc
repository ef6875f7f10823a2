// `vramctl queues`: the VRAM queues (issue 16) as GET /v1/queues answers
// them: deserved quota, limit, what each holds, its fair share, what waits,
// and whether the VramQueue object is valid. `-o json` prints the answer.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client.h"
#include "commands.h"
#include "output.h"

namespace vramctl {
namespace {

using nlohmann::json;

// A byte figure, "-" when absent or null (no limit).
std::string Figure(const json& q, const char* key) { return Bytes(At(q, key)); }

const std::vector<Column<json>>& QueueColumns() {
  static const std::vector<Column<json>> columns = {
      {"NAME", false,
       [](const json& q) {
         const json& s = At(q, "synthetic");
         return Text(At(q, "name"), "?") + (s.is_boolean() && s.get<bool>() ? "*" : "");
       }},
      {"PARENT", false,
       [](const json& q) {
         std::string p = Text(At(q, "parent"));
         return p.empty() ? "-" : p;
       }},
      {"DESERVED", false, [](const json& q) { return Figure(q, "deserved_bytes"); }},
      {"LIMIT", false, [](const json& q) { return Figure(q, "limit_bytes"); }},
      {"ALLOCATED", false, [](const json& q) { return Figure(q, "allocated_bytes"); }},
      {"FAIR SHARE", false, [](const json& q) { return Figure(q, "fair_share_bytes"); }},
      {"PENDING", false, [](const json& q) { return Figure(q, "pending_bytes"); }},
      // "True", or why the object is not valid (its condition's reason).
      {"VALID", false,
       [](const json& q) {
         const json& v = At(q, "valid");
         if (!v.is_boolean()) return std::string("-");
         if (v.get<bool>()) return std::string("True");
         std::string reason = Text(At(q, "reason"));
         return reason.empty() ? std::string("False") : reason;
       }},
      {"WEIGHT", true,
       [](const json& q) {
         const json& w = At(q, "weight");
         return w.is_number_integer() ? std::to_string(w.get<int64_t>()) : std::string("-");
       }},
      {"NON-PREEMPTIBLE", true, [](const json& q) { return Figure(q, "allocated_nonpreemptible_bytes"); }},
      {"MESSAGE", true,
       [](const json& q) {
         std::string m = Text(At(q, "message"));
         return m.empty() ? "-" : m;
       }},
  };
  return columns;
}

}  // namespace

int PrintQueues(const nlohmann::json& answer, Format format) {
  if (format == Format::kJson) {
    std::cout << answer.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return 0;
  }
  const json& queues = At(answer, "queues");
  if (!queues.is_array()) return Fail("vramd's answer has no list of queues");
  std::vector<json> rows;
  bool synthetic = false;
  for (const json& q : queues) {
    rows.push_back(q);
    const json& s = At(q, "synthetic");
    synthetic = synthetic || (s.is_boolean() && s.get<bool>());
  }
  PrintColumns(QueueColumns(), rows, format);
  if (rows.empty()) std::printf("(no queues)\n");
  if (synthetic) std::printf("(* no VramQueue object: the default queue of namespaces that no queue names)\n");
  return 0;
}

int QueuesCommand(const Context& c, const std::vector<std::string>& args) {
  if (!args.empty()) return Fail("usage: " + c.program + " queues", 2);
  Client cli(c.target);
  Answer a = cli.Get("/v1/queues");
  if (!a.reached) return Fail(a.error);
  if (a.status != 200) return Fail(Describe(a));
  if (!a.json) return Fail("vramd answered HTTP 200 with a body that is not JSON");
  return PrintQueues(a.body, c.output);
}

}  // namespace vramctl
