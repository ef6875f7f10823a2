// The agent's loop: every interval, open the GPU source when there is none,
// read it, attribute the processes to pods, build the report and push it.
// A node without a source (no NVML library, no DRM card with VRAM figures)
// logs one line and stays idle: it pushes nothing and tries again every pass,
// logging again only when the reason changes; so is a source that opens but
// cannot be read (it is reopened every pass).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "vramd/agent/attribution.h"
#include "vramd/agent/enforce.h"
#include "vramd/agent/gpu_source.h"
#include "vramd/agent/options.h"
#include "vramd/agent/pusher.h"
#include "vramd/agent/report.h"
#include "vramd/mutex.h"

namespace vramd::agent {

using SourceOpener = std::function<Result<std::unique_ptr<GpuSource>>()>;

// The source `options` choose: "nvml", "drm", or "auto" (NVML when its
// library loads, else DRM when a card has VRAM figures, else kNotFound with
// both reasons).
Result<std::unique_ptr<GpuSource>> OpenSource(const AgentOptions& options);

// "vramd-agent/<version>"
std::string AgentName();

class Agent {
 public:
  // `pusher` may be null (--once); it must outlive the agent. `cgroup_root`:
  // the cgroup v2 mount enforcement works in (agent/enforce.h).
  Agent(SourceOpener open, std::string proc_root, Pusher* pusher, int64_t interval_ms,
        std::string cgroup_root = "/sys/fs/cgroup");
  ~Agent();  // Stop()
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // One pass without pushing: kNotFound/kUnavailable while there is no source.
  // The enforcement orders of vramd's last answer are applied to the GPUs
  // read, and the report says how (GpuReport::enforcement).
  Result<Report> Pass();

  // Takes vramd's answer to a report (its enforcement orders; a malformed
  // one is logged and leaves nothing in force: mode off). The loop applies
  // them at once to the last pass's GPUs, and again at the next pass.
  void TakeAnswer(std::string_view body);

  // The loop on its own thread; Stop() returns at once (the wait is woken).
  void Start();
  void Stop();

  int64_t passes() const { return passes_.load(); }
  int64_t pushes() const { return pushes_.load(); }

 private:
  void Loop(std::stop_token st);
  int64_t PassAndPush();  // the delay to the next pass
  void Problem(const std::string& what);  // logged when it starts or changes

  SourceOpener open_;
  ProcAttribution attribution_;
  Pusher* pusher_;
  int64_t interval_ms_;
  std::unique_ptr<GpuSource> source_;  // the loop's thread only
  std::string last_problem_;           // the loop's thread only: logged once until it changes
  std::string announced_;              // the loop's thread only: the source last announced
  int failures_ = 0;                   // the loop's thread only
  std::map<int, int64_t> invalid_process_lists_;  // the loop's thread only: per GPU index, since start
  Enforcer enforcer_;                  // the loop's thread only
  EnforceOrders orders_;               // the loop's thread only: vramd's answer to the last report
  std::vector<GpuReading> last_readings_;  // the loop's thread only: the last pass's, for orders applied at once
  std::set<std::string> last_busy_;        // the loop's thread only: pods with processes then
  std::string orders_problem_;         // the loop's thread only: why the last answer was refused (logged once)
  std::atomic<int64_t> passes_{0};
  std::atomic<int64_t> pushes_{0};
  Mutex mu_;
  CondVar cv_;
  std::jthread thread_;
};

}  // namespace vramd::agent
