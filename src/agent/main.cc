// vramd-agent: wiring only. Options → source, pusher, agent; SIGTERM/SIGINT stop it.
#include <pthread.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "vramd/agent/agent.h"

using namespace vramd::agent;
using vramd::Result;

int main(int argc, char** argv) {
  Result<AgentOptions> parsed =
      ParseAgentArgs(std::vector<std::string>(argv + 1, argv + argc), [](const char* n) { return std::getenv(n); });
  if (!parsed.ok()) {
    std::cerr << "vramd-agent: " << parsed.status().message() << "\n";
    return 2;
  }
  const AgentOptions& o = *parsed;
  if (o.help) {
    std::cout << AgentUsage();
    return 0;
  }
  if (o.version) {
    std::cout << AgentName() << "\n";
    return 0;
  }
  // Logs on stderr (stdout carries --once's report).
  auto logger = spdlog::stderr_logger_mt("vramd-agent");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");

  SourceOpener open = [o] { return OpenSource(o); };
  if (o.once) {
    Agent agent(open, o.proc_root, nullptr, o.interval_ms, o.cgroup_root);
    if (!o.enforce_orders.empty()) {
      std::ifstream in(o.enforce_orders);
      std::stringstream text;
      text << in.rdbuf();
      if (!in) {
        std::cerr << "vramd-agent: cannot read --enforce-orders " << o.enforce_orders << "\n";
        return 2;
      }
      agent.TakeAnswer(text.str());
    }
    Result<Report> report = agent.Pass();
    if (!report.ok()) {
      std::cerr << "vramd-agent: " << report.status().message() << "\n";
      return 1;
    }
    std::cout << ReportJson(*report) << "\n";
    return 0;
  }

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Result<std::unique_ptr<Pusher>> pusher = MakeHttpPusher(o.server, o.node, o.token_file, o.cacert, o.timeout_ms);
  if (!pusher.ok()) {
    spdlog::error("{}", pusher.status().message());
    return 2;
  }
  spdlog::info("{} on node {}: reporting to {} every {} ms", AgentName(), o.node, o.server, o.interval_ms);
  Agent agent(open, o.proc_root, pusher->get(), o.interval_ms, o.cgroup_root);
  agent.Start();
  int sig = 0;
  sigwait(&sigs, &sig);
  spdlog::info("signal {}: stopping", sig);
  agent.Stop();
  return 0;
}
