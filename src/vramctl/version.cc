// `vramctl version`: vramctl's version and, unless --client, the version of
// the vramd it talks to. vramd has no version endpoint; it exports
// vramd_build_info{version="..."} on /metrics, which is read here.
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client.h"
#include "commands.h"

#ifndef VRAMD_VERSION
#define VRAMD_VERSION "dev"
#endif

namespace vramctl {

std::optional<std::string> BuildInfoVersion(const std::string& metrics) {
  std::istringstream in(metrics);
  const std::string series = "vramd_build_info{", label = "version=\"";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series, 0) != 0) continue;
    const size_t end_labels = line.find('}');
    size_t at = line.find(label);
    while (at != std::string::npos && at > series.size() && line[at - 1] != '{' && line[at - 1] != ',') {
      at = line.find(label, at + 1);  // "build_version=" is not "version="
    }
    if (at == std::string::npos || end_labels == std::string::npos || at > end_labels) continue;
    at += label.size();
    const size_t close = line.find('"', at);
    if (close == std::string::npos || close > end_labels) continue;
    return line.substr(at, close - at);
  }
  return std::nullopt;
}

int VersionCommand(const Context& c, const std::vector<std::string>& args) {
  bool client_only = false;
  for (const std::string& a : args) {
    if (a == "--client") {
      client_only = true;
    } else {
      return Fail("usage: " + c.program + " version [--client]", 2);
    }
  }
  using nlohmann::json;
  json out{{"client", {{"version", VRAMD_VERSION}}}};
  std::string server_error;
  if (!client_only) {
    Client cli(c.target, 5'000);
    Answer a = cli.Get("/metrics");
    json server{{"url", c.target.scheme_host_port}};
    std::optional<std::string> v = a.reached && a.status == 200 ? BuildInfoVersion(a.text) : std::nullopt;
    if (v) {
      server["version"] = *v;
    } else {
      server_error = a.reached && a.status == 200 ? "vramd's /metrics has no vramd_build_info version" : Describe(a);
      server["error"] = server_error;
    }
    out["server"] = std::move(server);
  }
  if (c.output == Format::kJson) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "Client Version: " << VRAMD_VERSION << "\n";
    if (!client_only) {
      std::cout << "Server Version: "
                << (server_error.empty() ? out["server"]["version"].get<std::string>() : "unknown") << " ("
                << c.target.scheme_host_port << ")\n";
    }
  }
  if (!server_error.empty()) return Fail("server version unknown: " + server_error);
  return 0;
}

}  // namespace vramctl
