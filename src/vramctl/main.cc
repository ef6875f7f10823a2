// vramctl: a CLI over vramd's HTTP API.
#include <httplib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lock.h"
#include "target.h"
#include "vramd/ledger/quantity.h"

namespace {

using nlohmann::json;

const char* kUsage = R"(vramctl - command-line client of vramd

Usage: vramctl [--server URL] [--token-file FILE] COMMAND

Commands:
  nodes [NODE]        per node and GPU: capacity, allocation, usage and the six metrics
  nodes -o json       the same as JSON
  pods [NODE]         reservations per pod: node, GPUs, VRAM per GPU, state
  explain NS/POD      per node: does the pod fit now, on which GPUs, and if not, why
  explain -f POD.json the same for a Pod manifest (JSON) that is not created yet
  lock ...            GPU locks: acquire, heartbeat, release, list, run (see `vramctl lock --help`)

Options:
  --server URL        vramd's address (default $VRAMD_SERVER or http://127.0.0.1:8080)
  --token-file FILE   bearer token for mutating calls (default $VRAMD_TOKEN_FILE)
)";

using vramctl::Target;

std::string Bytes(const json& v) {
  if (!v.is_number()) return "-";
  return vramd::ledger::FormatBytes(v.get<int64_t>());
}

std::string RatioText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v.get<double>());
  return buf;
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "vramctl: %s\n", msg.c_str());
  return 1;
}

bool Get(const Target& t, const std::string& path, json* out, std::string* err) {
  httplib::Client cli(t.scheme_host_port);
  cli.set_connection_timeout(3, 0);
  cli.set_read_timeout(10, 0);
  if (!t.token.empty()) cli.set_bearer_token_auth(t.token);
  auto res = cli.Get(path);
  if (!res) {
    *err = "cannot reach vramd at " + t.scheme_host_port + ": " + httplib::to_string(res.error());
    return false;
  }
  *out = json::parse(res->body, nullptr, false);
  if (out->is_discarded()) {
    *err = "vramd answered HTTP " + std::to_string(res->status) + " with a body that is not JSON";
    return false;
  }
  if (res->status != 200) {
    *err = "HTTP " + std::to_string(res->status) + ": " + out->value("error", res->body);
    return false;
  }
  return true;
}

void PrintNodeRow(const char* fmt, const std::string& name, const std::string& gpu, const json& v) {
  const json& m = v["metrics"];
  std::printf(fmt, name.c_str(), gpu.c_str(), Bytes(v["capacity_bytes"]).c_str(), Bytes(v["allocated_bytes"]).c_str(),
              Bytes(v["used_bytes"]).c_str(), RatioText(m["over_subscription"]).c_str(),
              RatioText(m["utilization"]).c_str(), RatioText(m["saturation"]).c_str(),
              Bytes(m["headroom_bytes"]).c_str(), Bytes(m["potential_bytes"]).c_str(), RatioText(m["risk"]).c_str());
}

int Nodes(const Target& t, const std::vector<std::string>& args) {
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
  if (!Get(t, node.empty() ? "/v1/nodes" : "/v1/nodes/" + node, &body, &err)) return Fail(err);
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

int Pods(const Target& t, const std::vector<std::string>& args) {
  json body;
  std::string err;
  std::string node = args.empty() ? "" : args[0];
  if (!Get(t, node.empty() ? "/v1/nodes" : "/v1/nodes/" + node, &body, &err)) return Fail(err);
  json nodes = node.empty() ? body["nodes"] : json::array({body});
  const char* fmt = "%-20s %-40s %-8s %12s %-12s %s\n";
  std::printf(fmt, "NODE", "POD", "GPUS", "VRAM/GPU", "STATE", "MODEL");
  for (const json& n : nodes) {
    for (const json& p : n["pods"]) {
      std::string gpus;
      for (const json& g : p["gpus"]) gpus += (gpus.empty() ? "" : ",") + std::to_string(g.get<int>());
      std::string pod = p.value("namespace", "") + "/" + p.value("name", "");
      std::printf(fmt, n.value("name", "").c_str(), pod.c_str(), gpus.c_str(), Bytes(p["vram_per_gpu_bytes"]).c_str(),
                  p.value("state", "").c_str(), p.value("model", "").c_str());
    }
  }
  return 0;
}

int Explain(const Target& t, const std::vector<std::string>& args) {
  if (args.empty() || (args[0] == "-f" && args.size() < 2)) {
    return Fail("usage: vramctl explain NAMESPACE/POD | -f POD.json");
  }
  httplib::Client cli(t.scheme_host_port);
  cli.set_connection_timeout(3, 0);
  cli.set_read_timeout(10, 0);
  httplib::Result res = [&]() {
    if (args[0] != "-f") {
      std::string ns = "default", pod = args[0];
      if (auto slash = pod.find('/'); slash != std::string::npos) {
        ns = pod.substr(0, slash);
        pod = pod.substr(slash + 1);
      }
      return cli.Get("/v1/explain?namespace=" + httplib::detail::encode_query_param(ns) +
                     "&pod=" + httplib::detail::encode_query_param(pod));
    }
    std::ifstream in(args[1]);
    std::stringstream body;
    body << in.rdbuf();
    return cli.Post("/v1/explain", body.str(), "application/json");
  }();
  if (!res) return Fail("cannot reach vramd at " + t.scheme_host_port + ": " + httplib::to_string(res.error()));
  json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return Fail("HTTP " + std::to_string(res->status) + ": not JSON");
  if (res->status != 200) return Fail("HTTP " + std::to_string(res->status) + ": " + j.value("error", ""));
  std::printf("pod %s/%s", j["pod"].value("namespace", "").c_str(), j["pod"].value("name", "").c_str());
  if (j.contains("error")) {
    std::printf(": %s\n", j["error"].get<std::string>().c_str());
    return 1;
  }
  const json& r = j["request"];
  std::printf(" needs %s", Bytes(r["total_bytes"]).c_str());
  if (r.value("gpu_count", 1) > 1) {
    std::printf(" (%s on each of %d GPUs)", Bytes(r["per_gpu_bytes"]).c_str(), r.value("gpu_count", 1));
  }
  if (j.contains("bound_to")) std::printf("; bound to %s", j["bound_to"].get<std::string>().c_str());
  std::printf("; fits on %d of %zu nodes now\n", j.value("fits_on", 0), j["nodes"].size());
  for (const json& n : j["nodes"]) {
    std::string v = n.value("verdict", "");
    if (v == "fits") {
      std::string g;
      for (const json& x : n["gpus"]) g += (g.empty() ? "" : ",") + std::to_string(x.get<int>());
      std::printf("  %-24s fits on GPU %s (score %d)\n", n.value("node", "").c_str(), g.c_str(), n.value("score", 0));
    } else {
      std::printf("  %-24s %s: %s\n", n.value("node", "").c_str(), v == "no_room_now" ? "no room now" : "never fits",
                  n.value("reason", "").c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Target t;
  const char* env_server = std::getenv("VRAMD_SERVER");
  t.scheme_host_port = env_server ? env_server : "http://127.0.0.1:8080";
  std::string token_file = std::getenv("VRAMD_TOKEN_FILE") ? std::getenv("VRAMD_TOKEN_FILE") : "";
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--server" || a == "-s") && i + 1 < argc) {
      t.scheme_host_port = argv[++i];
    } else if (a.rfind("--server=", 0) == 0) {
      t.scheme_host_port = a.substr(9);
    } else if (a == "--token-file" && i + 1 < argc) {
      token_file = argv[++i];
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      rest.assign(argv + i, argv + argc);
      break;
    }
  }
  if (!token_file.empty()) {
    FILE* f = std::fopen(token_file.c_str(), "r");
    if (f == nullptr) return Fail("cannot read token file " + token_file);
    char buf[4096];
    size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    t.token.assign(buf, n);
    while (!t.token.empty() && (t.token.back() == '\n' || t.token.back() == '\r')) t.token.pop_back();
  }
  if (t.scheme_host_port.find("://") == std::string::npos) t.scheme_host_port = "http://" + t.scheme_host_port;
  if (rest.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  std::string cmd = rest[0];
  std::vector<std::string> args(rest.begin() + 1, rest.end());
  if (cmd == "nodes") return Nodes(t, args);
  if (cmd == "pods") return Pods(t, args);
  if (cmd == "explain") return Explain(t, args);
  if (cmd == "lock") return vramctl::LockCommand(t, args);
  return Fail("unknown command " + cmd + " (see --help)");
}
