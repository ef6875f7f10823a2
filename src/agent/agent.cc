#include "vramd/agent/agent.h"

#include <spdlog/spdlog.h>

#include <set>

#include "vramd/agent/drm.h"
#include "vramd/agent/nvml_source.h"

#ifndef VRAMD_VERSION
#define VRAMD_VERSION "0.0.0"
#endif

namespace vramd::agent {

std::string AgentName() { return std::string("vramd-agent/") + VRAMD_VERSION; }

Result<std::unique_ptr<GpuSource>> OpenSource(const AgentOptions& options) {
  std::string why_not_nvml;
  if (options.source == "nvml" || options.source == "auto") {
    Result<std::unique_ptr<GpuSource>> nvml = OpenNvml(options.nvml_library);
    if (nvml.ok() || options.source == "nvml") return nvml;
    why_not_nvml = nvml.status().message();
  }
  if (DrmSource::ReadCards(options.sys_root).empty()) {
    std::string why = "no DRM card with VRAM figures (mem_info_vram_total) under " + options.sys_root + "/class/drm";
    return NotFound(why_not_nvml.empty() ? why : why_not_nvml + "; " + why);
  }
  return std::unique_ptr<GpuSource>(std::make_unique<DrmSource>(options.sys_root, options.proc_root));
}

Agent::Agent(SourceOpener open, std::string proc_root, Pusher* pusher, int64_t interval_ms, std::string cgroup_root)
    : open_(std::move(open)),
      attribution_(std::move(proc_root)),
      pusher_(pusher),
      interval_ms_(interval_ms),
      enforcer_(std::move(cgroup_root)) {}

void Agent::TakeAnswer(std::string_view body) {
  Result<EnforceOrders> orders = DecodeEnforceOrders(body);
  if (!orders.ok()) {
    if (orders_problem_ != orders.status().message()) {
      spdlog::error("vramd's enforcement orders are refused ({}): nothing is enforced until a good answer",
                    orders.status().message());
    }
    orders_problem_ = orders.status().message();
    orders_ = EnforceOrders{};
    return;
  }
  if (!orders_problem_.empty()) spdlog::info("vramd's enforcement orders are read again");
  orders_problem_.clear();
  if (orders->mode != orders_.mode) {
    spdlog::info("enforcement: mode {} (vramd's enforce.mode for this node)", ledger::EnforceModeName(orders->mode));
  }
  orders_ = std::move(*orders);
}

Agent::~Agent() { Stop(); }

void Agent::Problem(const std::string& what) {
  if (what != last_problem_) spdlog::warn("{}", what);
  last_problem_ = what;
}

Result<Report> Agent::Pass() {
  passes_.fetch_add(1);
  if (!source_) {
    Result<std::unique_ptr<GpuSource>> s = open_();
    if (!s.ok()) {
      Problem("no GPU source on this node, idle (nothing is reported; trying again every pass): " +
              s.status().message());
      return s.status();
    }
    source_ = std::move(*s);
    if (announced_ != source_->Name()) spdlog::info("reading GPUs through {}", source_->Name());
    announced_ = source_->Name();
  }
  Result<std::vector<GpuReading>> readings = source_->Read();
  if (!readings.ok()) {
    // The driver or library went away: open it again next pass.
    Problem(std::string(source_->Name()) + ": " + readings.status().message() + "; reopening every pass");
    source_.reset();
    return readings.status();
  }
  if (!last_problem_.empty()) {
    spdlog::info("{}: GPUs read again", source_->Name());
    last_problem_.clear();
  }
  PodOfPid pods = attribution_.Attribute(*readings);
  Report report = BuildReport(AgentName(), source_->Name(), *readings, pods);
  std::set<std::string> busy;  // pods with processes on a GPU now
  for (const GpuReport& g : report.gpus) {
    for (const PodUsage& p : g.pods) busy.insert(p.uid);
  }
  std::map<int, ledger::GpuEnforcement> enforcement = enforcer_.Apply(orders_, *readings, source_.get(), busy);
  last_readings_ = std::move(*readings);
  last_busy_ = std::move(busy);
  for (GpuReport& g : report.gpus) {
    if (auto e = enforcement.find(g.index); e != enforcement.end()) g.enforcement = std::move(e->second);
  }
  // A counter per GPU: the process lists that failed validation since the agent started.
  for (GpuReport& g : report.gpus) {
    int64_t& total = invalid_process_lists_[g.index];
    total += g.invalid_process_lists;
    g.invalid_process_lists = total;
  }
  return report;
}

int64_t Agent::PassAndPush() {
  Result<Report> report = Pass();
  if (!report.ok() || pusher_ == nullptr) return interval_ms_;
  if (report->gpus.empty()) return interval_ms_;  // nothing to say
  PushOutcome out = pusher_->Push(ReportJson(*report));
  if (out.kind == PushKind::kOk) {
    TakeAnswer(out.body);
    // The orders take effect now, on this pass's GPUs, not a pass later: a new
    // pod's limit is written within one interval of the report that follows
    // its bind. The next pass applies them again (nothing unchanged is
    // rewritten) and reports the outcome.
    if (source_) enforcer_.Apply(orders_, last_readings_, source_.get(), last_busy_);
    if (failures_ > 0) spdlog::info("report accepted again after {} failed push(es)", failures_);
    failures_ = 0;
    pushes_.fetch_add(1);
    return interval_ms_;
  }
  ++failures_;
  int64_t delay = NextDelayMs(interval_ms_, out.kind, failures_);
  if (out.kind == PushKind::kRejected) {
    spdlog::error("vramd refused the report (HTTP {}): {}; next try in {} ms", out.status, out.message, delay);
  } else {
    spdlog::warn("push failed ({}{}), attempt {}; next try in {} ms", out.status ? "HTTP " + std::to_string(out.status) + ": " : "",
                 out.message, failures_, delay);
  }
  return delay;
}

void Agent::Start() {
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void Agent::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  {
    MutexLock l(&mu_);
    cv_.NotifyAll();
  }
  thread_.join();
}

void Agent::Loop(std::stop_token st) {
  while (!st.stop_requested()) {
    int64_t delay = 0;
    try {
      delay = PassAndPush();
    } catch (const std::exception& e) {
      spdlog::error("agent pass failed: {}", e.what());
      delay = interval_ms_;
    }
    MutexLock l(&mu_);
    cv_.WaitFor(&l, st, std::chrono::milliseconds(delay));
  }
}

}  // namespace vramd::agent
