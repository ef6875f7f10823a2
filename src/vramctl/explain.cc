// `vramctl explain`: per node, whether a pod fits now, on which GPUs, and if
// not, why; with queues, the pod's queue, and "waits on its queue" when the
// queue refuses it. `-o json` prints the API's answer; `-o wide` is the table.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>

#include "client.h"
#include "commands.h"
#include "output.h"

namespace vramctl {

int ExplainCommand(const Context& c, const std::vector<std::string>& args) {
  using nlohmann::json;
  if (args.empty() || (args[0] == "-f" && args.size() != 2) || (args[0] != "-f" && args.size() != 1)) {
    return Fail("usage: " + c.program + " explain NAMESPACE/POD | -f POD.json", 2);
  }
  Client cli(c.target);
  Answer a;
  if (args[0] != "-f") {
    std::string ns = "default", pod = args[0];
    if (auto slash = pod.find('/'); slash != std::string::npos) {
      ns = pod.substr(0, slash);
      pod = pod.substr(slash + 1);
    }
    a = cli.Get("/v1/explain?namespace=" + QueryParam(ns) + "&pod=" + QueryParam(pod));
  } else {
    std::ifstream in(args[1]);
    if (!in) return Fail("cannot read " + args[1], 2);
    std::stringstream body;
    body << in.rdbuf();
    a = cli.PostText("/v1/explain", body.str(), "application/json");
  }
  if (!a.reached) return Fail(a.error);
  json& j = a.body;
  if (!a.json) return Fail("HTTP " + std::to_string(a.status) + ": not JSON");
  if (a.status != 200) return Fail("HTTP " + std::to_string(a.status) + ": " + j.value("error", ""));
  if (c.output == Format::kJson) {
    std::cout << j.dump(2) << "\n";
    return j.contains("error") ? 1 : 0;
  }
  return PrintExplain(std::move(j));
}

namespace {

// The pod's queue ("queue" of the answer): where it stands and whether it
// admits the pod. "" without one (queues off, or no VramQueue objects).
std::string QueueLine(const nlohmann::json& q) {
  if (!q.is_object()) return "";
  const nlohmann::json& p = At(q, "preemptible");
  const bool preemptible = p.is_boolean() && p.get<bool>();
  const std::string pod = preemptible ? "the pod is preemptible (may run over quota)"
                                      : "the pod is not preemptible (in-quota VRAM only)";
  if (!At(q, "name").is_string()) return "  queue: none (no queue serves its namespace, and no default queue); " + pod;
  return "  queue " + Text(At(q, "name")) + ": allocated " + Bytes(At(q, "allocated_bytes")) + ", fair share " +
         Bytes(At(q, "fair_share_bytes")) + ", deserved " + Bytes(At(q, "deserved_bytes")) + ", limit " +
         Bytes(At(q, "limit_bytes")) + "; " + pod;
}

}  // namespace

int PrintExplain(nlohmann::json j) {
  using nlohmann::json;
  std::printf("pod %s/%s", j["pod"].value("namespace", "").c_str(), j["pod"].value("name", "").c_str());
  if (j.contains("error")) {
    std::printf(": %s\n", j["error"].get<std::string>().c_str());
    return 1;
  }
  const json& r = j["request"];
  std::printf(" needs %s", Bytes(At(r, "total_bytes")).c_str());
  if (r.value("gpu_count", 1) > 1) {
    std::printf(" (%s on each of %d GPUs)", Bytes(At(r, "per_gpu_bytes")).c_str(), r.value("gpu_count", 1));
  }
  if (j.contains("bound_to")) std::printf("; bound to %s", j["bound_to"].get<std::string>().c_str());
  const json& queue = At(j, "queue");
  const json& admitted = At(queue, "admitted");
  if (admitted.is_boolean() && !admitted.get<bool>() && !j.contains("bound_to")) {
    // The queue refuses it: that is why it waits, whatever room the GPUs have.
    const std::string reason = Text(At(queue, "reason"), "");
    std::printf("; waits on its queue: %s\n", reason.empty() ? "(no reason given)" : reason.c_str());
  } else {
    std::printf("; fits on %d of %zu nodes now\n", j.value("fits_on", 0), j["nodes"].size());
  }
  if (std::string line = QueueLine(queue); !line.empty()) std::printf("%s\n", line.c_str());
  const json& reasons = At(j, "reasons");
  if (reasons.is_array() && !reasons.empty()) {
    std::printf("  why not, grouped as kube-scheduler's event shows it:\n");
    for (const json& g : reasons) {
      std::printf("  %8d × %s\n", g.value("nodes", 0), Text(At(g, "reason")).c_str());
    }
    std::printf("  per node:\n");
  }
  for (const json& n : j["nodes"]) {
    std::string v = n.value("verdict", "");
    if (v == "fits") {
      std::string g;
      for (const json& x : At(n, "gpus")) g += (g.empty() ? "" : ",") + std::to_string(x.get<int>());
      std::printf("  %-24s fits on GPU %s (score %d)\n", n.value("node", "").c_str(), g.c_str(), n.value("score", 0));
    } else {
      std::printf("  %-24s %s: %s\n", n.value("node", "").c_str(), v == "no_room_now" ? "no room now" : "never fits",
                  n.value("reason", "").c_str());
    }
  }
  return 0;
}

}  // namespace vramctl
