// `vramctl nodes` and `vramctl pods`: the ledger per node and GPU, per pod.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client.h"
#include "commands.h"
#include "output.h"

namespace vramctl {
namespace {

using nlohmann::json;

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

void PrintNodeRow(const char* fmt, const std::string& name, const std::string& gpu, const json& v) {
  const json& m = v["metrics"];
  std::printf(fmt, name.c_str(), gpu.c_str(), Bytes(v["capacity_bytes"]).c_str(), Bytes(v["allocated_bytes"]).c_str(),
              Bytes(v["used_bytes"]).c_str(), RatioText(m["over_subscription"]).c_str(),
              RatioText(m["utilization"]).c_str(), RatioText(m["saturation"]).c_str(),
              Bytes(m["headroom_bytes"]).c_str(), Bytes(m["potential_bytes"]).c_str(), RatioText(m["risk"]).c_str());
}

}  // namespace

int NodesCommand(const Target& t, const std::vector<std::string>& args) {
  bool as_json = false;
  std::string node;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" && i + 1 < args.size() && args[i + 1] == "json") {
      as_json = true;
      ++i;
    } else {
      node = args[i];
    }
  }
  json body;
  std::string err;
  if (!GetJson(t, node.empty() ? "/v1/nodes" : "/v1/nodes/" + node, &body, &err)) return Fail(err);
  json nodes = node.empty() ? body["nodes"] : json::array({body});
  if (as_json) {
    std::cout << nodes.dump(2) << "\n";
    return 0;
  }
  const char* fmt = "%-20s %-5s %10s %10s %10s %7s %7s %7s %10s %10s %6s\n";
  std::printf(fmt, "NODE", "GPU", "CAPACITY", "ALLOCATED", "USED", "OVERSUB", "UTIL", "SAT", "HEADROOM", "POTENTIAL",
              "RISK");
  for (const json& n : nodes) {
    PrintNodeRow(fmt, n.value("name", ""), "all", n);
    for (const json& g : n["gpus"]) {
      std::string label = std::to_string(g.value("index", 0));
      if (!g.value("usage_fresh", false)) label += "*";
      PrintNodeRow(fmt, "", label, g);
    }
  }
  std::printf("(* usage not reported or stale: U = A)\n");
  return 0;
}

int PodsCommand(const Target& t, const std::vector<std::string>& args) {
  json body;
  std::string err;
  std::string node = args.empty() ? "" : args[0];
  if (!GetJson(t, node.empty() ? "/v1/nodes" : "/v1/nodes/" + node, &body, &err)) return Fail(err);
  json nodes = node.empty() ? body["nodes"] : json::array({body});
  const char* fmt = "%-20s %-40s %-8s %12s %12s %-12s %s\n";
  std::printf(fmt, "NODE", "POD", "GPUS", "VRAM/GPU", "USED", "STATE", "MODEL");
  for (const json& n : nodes) {
    for (const json& p : n["pods"]) {
      std::string gpus;
      for (const json& g : p["gpus"]) gpus += (gpus.empty() ? "" : ",") + std::to_string(g.get<int>());
      std::string pod = p.value("namespace", "") + "/" + p.value("name", "");
      // USED: the pod's largest per-GPU figure from the node agent's report; "-" without one.
      std::string used = p.value("usage_reported_ms", int64_t{0}) > 0 ? Bytes(p["used_per_gpu_bytes"]) : "-";
      std::printf(fmt, n.value("name", "").c_str(), pod.c_str(), gpus.c_str(), Bytes(p["vram_per_gpu_bytes"]).c_str(),
                  used.c_str(), p.value("state", "").c_str(), p.value("model", "").c_str());
    }
  }
  return 0;
}

}  // namespace vramctl
