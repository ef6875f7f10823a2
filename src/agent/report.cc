#include "vramd/agent/report.h"

#include <algorithm>
#include <map>

#include "vramd/json_string.h"

namespace vramd::agent {

Report BuildReport(std::string_view agent, std::string_view source, const std::vector<GpuReading>& readings,
                   const PodOfPid& pods) {
  Report r;
  r.agent = agent;
  r.source = source;
  r.gpus.reserve(readings.size());
  for (const GpuReading& g : readings) {
    GpuReport out;
    out.index = g.index;
    out.uuid = g.uuid;
    out.name = g.name;
    const int64_t total = std::max<int64_t>(g.total_bytes, 0);
    auto cap = [total](int64_t v) { return std::clamp<int64_t>(v, 0, total); };
    // a + b capped at total, for a and b in [0, total]: never overflows.
    auto add = [total](int64_t a, int64_t b) { return b > total - a ? total : a + b; };
    out.total_bytes = total;
    out.used_bytes = cap(g.used_bytes);
    out.mig = g.mig;
    out.processes_unavailable = g.processes_unavailable;
    out.invalid_process_lists = g.invalid_process_lists;
    out.utilization_percent = g.utilization_percent;
    // Without per-process activity, a busy GPU makes each of its pods active.
    const bool gpu_busy = !g.activity_known && g.utilization_percent > 0;
    std::map<std::string_view, PodUsage> by_pod;
    int64_t outside = 0;
    for (const ProcessUsage& p : g.processes) {
      if (!g.processes_unavailable.empty()) break;
      int64_t bytes = cap(p.used_bytes);
      auto it = pods.find(p.pid);
      if (it == pods.end()) {
        outside = add(outside, bytes);
      } else if (it->second == kNotAttributed) {
        continue;  // gone, or in two pods' cgroups: nobody's
      } else {
        PodUsage& pod = by_pod[it->second];
        pod.used_bytes = add(pod.used_bytes, bytes);
        pod.active = pod.active || gpu_busy || (g.activity_known && p.active);
      }
    }
    out.outside_pods_bytes = outside;
    out.pods.reserve(by_pod.size());
    for (auto& [uid, pod] : by_pod) {
      pod.uid = std::string(uid);
      out.pods.push_back(std::move(pod));
    }
    r.gpus.push_back(std::move(out));
  }
  std::sort(r.gpus.begin(), r.gpus.end(), [](const GpuReport& a, const GpuReport& b) { return a.index < b.index; });
  return r;
}

std::string ReportJson(const Report& report) {
  std::string s;
  s.reserve(256 + report.gpus.size() * 256);
  s += "{\"version\":2,\"agent\":";
  AppendJsonString(report.agent, &s);
  s += ",\"source\":";
  AppendJsonString(report.source, &s);
  s += ",\"gpus\":[";
  for (size_t i = 0; i < report.gpus.size(); ++i) {
    const GpuReport& g = report.gpus[i];
    if (i > 0) s += ',';
    s += "{\"index\":" + std::to_string(g.index);
    if (!g.uuid.empty()) {
      s += ",\"uuid\":";
      AppendJsonString(g.uuid, &s);
    }
    if (!g.name.empty()) {
      s += ",\"name\":";
      AppendJsonString(g.name, &s);
    }
    s += ",\"total_bytes\":" + std::to_string(g.total_bytes);
    s += ",\"used_bytes\":" + std::to_string(g.used_bytes);
    const bool per_process = g.processes_unavailable.empty();
    if (per_process) s += ",\"outside_pods_bytes\":" + std::to_string(g.outside_pods_bytes);
    s += g.mig ? ",\"mig\":true" : ",\"mig\":false";
    if (per_process) {
      s += ",\"pods\":[";
      for (size_t j = 0; j < g.pods.size(); ++j) {
        if (j > 0) s += ',';
        s += "{\"uid\":";
        AppendJsonString(g.pods[j].uid, &s);
        s += ",\"used_bytes\":" + std::to_string(g.pods[j].used_bytes);
        s += g.pods[j].active ? ",\"active\":true}" : "}";
      }
      s += "]";
    } else {
      s += ",\"processes_unavailable\":";
      AppendJsonString(g.processes_unavailable, &s);
    }
    if (g.invalid_process_lists > 0) s += ",\"invalid_process_lists\":" + std::to_string(g.invalid_process_lists);
    if (g.utilization_percent >= 0) s += ",\"utilization_percent\":" + std::to_string(g.utilization_percent);
    if (!g.enforcement.backend.empty()) {
      s += ",\"enforcement\":{\"backend\":";
      AppendJsonString(g.enforcement.backend, &s);
      s += ",\"reason\":";
      AppendJsonString(g.enforcement.reason, &s);
      s += ",\"pods\":[";
      for (size_t j = 0; j < g.enforcement.pods.size(); ++j) {
        const ledger::PodEnforcement& p = g.enforcement.pods[j];
        if (j > 0) s += ',';
        s += "{\"uid\":";
        AppendJsonString(p.uid, &s);
        s += ",\"state\":";
        AppendJsonString(ledger::EnforceStateName(p.state), &s);
        if (!p.reason.empty()) {
          s += ",\"reason\":";
          AppendJsonString(p.reason, &s);
        }
        s += "}";
      }
      s += "]}";
    }
    s += "}";
  }
  s += "]}";
  return s;
}

}  // namespace vramd::agent
