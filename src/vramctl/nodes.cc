// `vramctl nodes` and `vramctl pods`: the ledger per node and GPU, per pod.
// Each table is a list of columns (output.h): a column is one line.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client.h"
#include "commands.h"
#include "output.h"
#include "vramd/ledger/quantity.h"

namespace vramctl {
namespace {

using nlohmann::json;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// GET a JSON document; false with *err set when vramd was not reached, did
// not answer JSON, or answered an error.
bool GetJson(const Target& t, const std::string& path, json* out, std::string* err) {
  Client cli(t);
  Answer a = cli.Get(path);
  if (!a.reached) {
    *err = a.error;
    return false;
  }
  if (!a.json) {
    *err = "vramd answered HTTP " + std::to_string(a.status) + " with a body that is not JSON";
    return false;
  }
  if (a.status != 200) {
    *err = "HTTP " + std::to_string(a.status) + ": " + a.body.value("error", a.text);
    return false;
  }
  *out = std::move(a.body);
  return true;
}

// The nodes asked for: every node, or the one named (args[0]).
bool GetNodes(const Context& c, const std::vector<std::string>& args, json* nodes, std::string* err) {
  const std::string node = args.empty() ? "" : args[0];
  json body;
  if (!GetJson(c.target, node.empty() ? "/v1/nodes" : "/v1/nodes/" + QueryParam(node), &body, err)) return false;
  *nodes = node.empty() ? body["nodes"] : json::array({body});
  return true;
}

std::string Join(const json& ints) {
  std::string s;
  for (const json& g : ints) s += (s.empty() ? "" : ",") + std::to_string(g.get<int>());
  return s.empty() ? "-" : s;
}

// PEAK of a GPU: its peak demand (peak_bytes), with '!' when the peak rule
// does not hold there (burst_safe false); of a node ("all"): the sum over its
// GPUs, '!' when any GPU is unsafe. "-" from a server without the figures.
std::string PeakCell(const json& node, const json* gpu) {
  int64_t sum = 0;
  bool unsafe = false;
  bool known = false;
  auto add = [&](const json& g) {
    const json& p = At(g, "peak_bytes");
    if (!p.is_number_integer()) return;
    known = true;
    sum += p.get<int64_t>();
    const json& safe = At(g, "burst_safe");
    unsafe = unsafe || (safe.is_boolean() && !safe.get<bool>());
  };
  if (gpu != nullptr) {
    add(*gpu);
  } else {
    for (const json& g : At(node, "gpus")) add(g);
  }
  if (!known) return "-";
  return vramd::ledger::FormatBytes(sum) + (unsafe ? "!" : "");
}

// A line of `nodes`: a node's sums (gpu "all") or one of its GPUs.
struct NodeRow {
  const json* node;
  const json* v;      // the node, or the GPU
  std::string gpu;    // "all", or the index with '*' when usage is not fresh
  int pods;           // reservations on the node, or on the GPU
  int64_t now_ms;
};

const std::vector<Column<NodeRow>>& NodeColumns() {
  static const std::vector<Column<NodeRow>> columns = {
      {"NODE", false, [](const NodeRow& r) { return r.gpu == "all" ? r.node->value("name", "") : ""; }},
      {"GPU", false, [](const NodeRow& r) { return r.gpu; }},
      {"CAPACITY", false, [](const NodeRow& r) { return Bytes(At(*r.v, "capacity_bytes")); }},
      {"ALLOCATED", false, [](const NodeRow& r) { return Bytes(At(*r.v, "allocated_bytes")); }},
      {"USED", false, [](const NodeRow& r) { return Bytes(At(*r.v, "used_bytes")); }},
      {"PEAK", false, [](const NodeRow& r) { return PeakCell(*r.node, r.gpu == "all" ? nullptr : r.v); }},
      {"OVERSUB", false, [](const NodeRow& r) { return RatioText(At(At(*r.v, "metrics"), "over_subscription")); }},
      {"UTIL", false, [](const NodeRow& r) { return RatioText(At(At(*r.v, "metrics"), "utilization")); }},
      {"SAT", false, [](const NodeRow& r) { return RatioText(At(At(*r.v, "metrics"), "saturation")); }},
      {"HEADROOM", false, [](const NodeRow& r) { return Bytes(At(At(*r.v, "metrics"), "headroom_bytes")); }},
      {"POTENTIAL", false, [](const NodeRow& r) { return Bytes(At(At(*r.v, "metrics"), "potential_bytes")); }},
      {"RISK", false, [](const NodeRow& r) { return RatioText(At(At(*r.v, "metrics"), "risk")); }},
      {"PODS", true, [](const NodeRow& r) { return std::to_string(r.pods); }},
      {"REPORTED", true,
       [](const NodeRow& r) { return r.gpu == "all" ? "-" : AgeText(At(*r.v, "usage_reported_ms"), r.now_ms); }},
      {"UUID", true,
       [](const NodeRow& r) {
         const json& u = At(*r.v, "uuid");
         return r.gpu != "all" && u.is_string() && !u.get<std::string>().empty() ? u.get<std::string>() : "-";
       }},
  };
  return columns;
}

// A line of `pods`.
struct PodRow {
  const json* node;
  const json* pod;
  int64_t now_ms;
};

const std::vector<Column<PodRow>>& PodColumns() {
  static const std::vector<Column<PodRow>> columns = {
      {"NODE", false, [](const PodRow& r) { return r.node->value("name", ""); }},
      {"POD", false, [](const PodRow& r) { return r.pod->value("namespace", "") + "/" + r.pod->value("name", ""); }},
      {"GPUS", false, [](const PodRow& r) { return Join(At(*r.pod, "gpus")); }},
      {"VRAM/GPU", false, [](const PodRow& r) { return Bytes(At(*r.pod, "vram_per_gpu_bytes")); }},
      // The pod's largest per-GPU figure from the node agent's report; "-" without one.
      {"USED", false,
       [](const PodRow& r) {
         return r.pod->value("usage_reported_ms", int64_t{0}) > 0 ? Bytes(At(*r.pod, "used_per_gpu_bytes")) : "-";
       }},
      {"STATE", false, [](const PodRow& r) { return r.pod->value("state", "-"); }},
      // Issue 34: whether the node enforces the pod's VRAM (enforced,
      // dry-run, accounted, failed); "-" until its agent reports it.
      {"LIMIT", false,
       [](const PodRow& r) {
         const json& e = At(*r.pod, "enforcement");
         return e.is_object() ? e.value("state", "-") : std::string("-");
       }},
      {"MODEL", false,
       [](const PodRow& r) {
         std::string m = r.pod->value("model", "");
         return m.empty() ? "-" : m;
       }},
      {"PEAK/GPU", true, [](const PodRow& r) { return Bytes(At(*r.pod, "peak_per_gpu_bytes")); }},
      {"PRIORITY", true, [](const PodRow& r) { return std::to_string(r.pod->value("priority", 0)); }},
      {"AGE", true, [](const PodRow& r) { return AgeText(At(*r.pod, "created_ms"), r.now_ms); }},
      {"UID", true, [](const PodRow& r) { return r.pod->value("uid", "-"); }},
      {"LIMIT-REASON", true,
       [](const PodRow& r) {
         const json& e = At(*r.pod, "enforcement");
         std::string why = e.is_object() ? e.value("reason", "") : "";
         return why.empty() ? std::string("-") : why;
       }},
  };
  return columns;
}

}  // namespace

int NodesCommand(const Context& c, const std::vector<std::string>& args) {
  if (args.size() > 1) return Fail("usage: " + c.program + " nodes [NODE]", 2);
  json nodes;
  std::string err;
  if (!GetNodes(c, args, &nodes, &err)) return Fail(err);
  if (c.output == Format::kJson) {
    std::cout << nodes.dump(2) << "\n";
    return 0;
  }
  const int64_t now = NowMs();
  std::vector<NodeRow> rows;
  for (const json& n : nodes) {
    rows.push_back({&n, &n, "all", static_cast<int>(At(n, "pods").size()), now});
    for (const json& g : At(n, "gpus")) {
      const int index = g.value("index", 0);
      int pods = 0;
      for (const json& p : At(n, "pods")) {
        for (const json& i : At(p, "gpus")) pods += i.is_number_integer() && i.get<int>() == index ? 1 : 0;
      }
      rows.push_back({&n, &g, std::to_string(index) + (g.value("usage_fresh", false) ? "" : "*"), pods, now});
    }
  }
  PrintColumns(NodeColumns(), rows, c.output);
  std::printf("(* usage not reported or stale: U = A)\n");
  for (const NodeRow& r : rows) {
    if (r.gpu == "all" && PeakCell(*r.node, nullptr).ends_with('!')) {
      std::printf("(! peak demand above capacity not covered by designated victims, or above the ceiling)\n");
      break;
    }
  }
  return 0;
}

int PodsCommand(const Context& c, const std::vector<std::string>& args) {
  if (args.size() > 1) return Fail("usage: " + c.program + " pods [NODE]", 2);
  json nodes;
  std::string err;
  if (!GetNodes(c, args, &nodes, &err)) return Fail(err);
  if (c.output == Format::kJson) {
    // The API's pod objects, each with the node it is on.
    json pods = json::array();
    for (const json& n : nodes) {
      for (json p : At(n, "pods")) {
        p["node"] = n.value("name", "");
        pods.push_back(std::move(p));
      }
    }
    std::cout << pods.dump(2) << "\n";
    return 0;
  }
  const int64_t now = NowMs();
  std::vector<PodRow> rows;
  for (const json& n : nodes) {
    for (const json& p : At(n, "pods")) rows.push_back({&n, &p, now});
  }
  PrintColumns(PodColumns(), rows, c.output);
  return 0;
}

}  // namespace vramctl
