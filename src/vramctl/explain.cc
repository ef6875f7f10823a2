// `vramctl explain`: per node, whether a pod fits now, on which GPUs, and if
// not, why. `-o json` prints the API's answer; `-o wide` is the table.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

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
  std::printf("; fits on %d of %zu nodes now\n", j.value("fits_on", 0), j["nodes"].size());
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
