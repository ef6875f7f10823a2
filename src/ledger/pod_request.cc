#include "vramd/ledger/pod_request.h"

#include <algorithm>
#include <limits>

#include "vramd/ledger/quantity.h"
#include "vramd/parse.h"

namespace vramd::ledger {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// A container's amount: the request, defaulting to the limit (extended
// resources require request == limit; a missing request defaults to it).
Result<int64_t> Amount(const ContainerAmount& c, const char* kind, size_t idx) {
  const std::optional<std::string>& q = c.request ? c.request : c.limit;
  if (!q) return int64_t{0};
  Result<int64_t> r = ParseBytes(*q);
  if (!r.ok()) {
    return InvalidArgument(std::string(kind) + " " + std::to_string(idx) + ": " + r.status().message());
  }
  return r;
}

Status AddChecked(int64_t& acc, int64_t v) {
  if (acc > kMax - v) return InvalidArgument("the pod's total VRAM request overflows 64 bits");
  acc += v;
  return Status::Ok();
}

int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Milliseconds in one `unit` of a duration; 0 for a unit not accepted.
int64_t UnitMs(std::string_view unit) {
  if (unit == "h") return 3'600'000;
  if (unit == "m") return 60'000;
  if (unit == "s") return 1'000;
  if (unit == "ms") return 1;
  return 0;
}

// "true" in any ASCII case (vramd.io/disposable, vramd.io/evictable).
bool IsTrue(std::string_view v) {
  constexpr std::string_view kTrue = "true";
  return std::equal(v.begin(), v.end(), kTrue.begin(), kTrue.end(),
                    [](char a, char b) { return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b; });
}

}  // namespace

Result<int64_t> ParseIdleTtl(std::string_view text) {
  const auto malformed = [] {
    return InvalidArgument("not a duration: expected parts like 90s, 10m, 1h30m, 1.5h or 500ms (units h, m, s, ms)");
  };
  const auto too_long = [] { return InvalidArgument("longer than the maximum of 30 days (720h)"); };
  if (text.empty()) return InvalidArgument("empty: expected a duration such as 90s, 10m or 1h30m");
  if (text[0] == '-') return InvalidArgument("negative: the TTL must be greater than zero");
  if (text == "0") return InvalidArgument("zero: the TTL must be greater than zero");
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    // <digits>[.<digits>]: the whole part bounded before it can overflow,
    // the fraction kept to 9 digits (finer than a millisecond of an hour).
    int64_t whole = 0;
    int64_t frac = 0;
    int64_t frac_scale = 1;
    size_t digits = 0;
    for (; i < text.size() && IsDigit(text[i]); ++i, ++digits) {
      if (whole <= kMaxIdleTtlMs) whole = whole * 10 + (text[i] - '0');
    }
    if (i < text.size() && text[i] == '.') {
      for (++i; i < text.size() && IsDigit(text[i]); ++i, ++digits) {
        if (frac_scale < 1'000'000'000) {
          frac = frac * 10 + (text[i] - '0');
          frac_scale *= 10;
        }
      }
    }
    if (digits == 0) return malformed();
    const size_t unit_start = i;
    while (i < text.size() && !IsDigit(text[i]) && text[i] != '.') ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    if (unit.empty()) return InvalidArgument("missing unit after \"" + std::string(text.substr(0, i)) + "\" (units h, m, s, ms)");
    const int64_t unit_ms = UnitMs(unit);
    if (unit_ms == 0) {
      if (unit.size() > 8 || unit.find_first_of(" \t\n\r\"") != std::string_view::npos) return malformed();
      return InvalidArgument("unknown unit \"" + std::string(unit) + "\" (units h, m, s, ms)");
    }
    if (whole > kMaxIdleTtlMs) return too_long();
    total += whole * unit_ms + frac * unit_ms / frac_scale;  // <= 30 days + 2^53: no overflow
    if (total > kMaxIdleTtlMs) return too_long();
  }
  if (total == 0) return InvalidArgument("zero: the TTL must be greater than zero");
  return total;
}

Result<VramRequest> ComputeVramRequest(const PodSpecView& pod) {
  // Sum of app containers.
  int64_t apps = 0;
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    Result<int64_t> a = Amount(pod.containers[i], "container", i);
    if (!a.ok()) return a.status();
    if (Status s = AddChecked(apps, *a); !s.ok()) return s;
  }
  // Init containers run one at a time before the app containers, except
  // sidecars (restartPolicy: Always), which keep running: an init container
  // counts with the sidecars started before it, and all sidecars add to the
  // app containers' sum.
  int64_t sidecars = 0;
  int64_t init_peak = 0;
  for (size_t i = 0; i < pod.init_containers.size(); ++i) {
    Result<int64_t> a = Amount(pod.init_containers[i], "init container", i);
    if (!a.ok()) return a.status();
    if (pod.init_containers[i].sidecar) {
      if (Status s = AddChecked(sidecars, *a); !s.ok()) return s;
      init_peak = std::max(init_peak, sidecars);
    } else {
      int64_t with_sidecars = sidecars;
      if (Status s = AddChecked(with_sidecars, *a); !s.ok()) return s;
      init_peak = std::max(init_peak, with_sidecars);
    }
  }
  int64_t running = apps;
  if (Status s = AddChecked(running, sidecars); !s.ok()) return s;
  int64_t total = std::max(running, init_peak);
  if (pod.overhead) {
    Result<int64_t> o = ParseBytes(*pod.overhead);
    if (!o.ok()) return InvalidArgument("overhead: " + o.status().message());
    if (Status s = AddChecked(total, *o); !s.ok()) return s;
  }

  VramRequest req;
  req.total = total;
  req.model = pod.model;
  req.ns = pod.ns;
  req.uid = pod.uid;
  req.priority = pod.priority;
  req.priority_class = pod.priority_class;
  req.victim = IsDesignatedVictim(pod);
  req.owner_kind = pod.owner_kind;
  req.owner_uid = pod.owner_uid;
  req.evictable = pod.evictable && IsTrue(*pod.evictable);
  req.gang = pod.gang;
  if (pod.gpu_count) {
    const std::string& g = *pod.gpu_count;
    // Digits only, bounded: a 14-digit count is an error, not an int overflow.
    const std::optional<int> n = ParseSmallInt(g, kMaxGpuCount);
    if (!n || *n < 1) {
      return InvalidArgument("annotation vramd.io/gpu-count=\"" + g + "\" must be a whole number from 1 to " +
                             std::to_string(kMaxGpuCount));
    }
    req.gpu_count = *n;
  }
  req.per_gpu = CeilDiv(total, req.gpu_count);
  req.peak_per_gpu = req.per_gpu;
  if (pod.vram_peak) {
    Result<int64_t> p = ParseBytes(*pod.vram_peak);
    if (!p.ok()) return InvalidArgument("annotation vramd.io/vram-peak: " + p.status().message());
    if (*p < total) {
      return InvalidArgument("annotation vramd.io/vram-peak=" + *pod.vram_peak +
                             " is below the pod's VRAM request of " + FormatBytes(total));
    }
    req.peak_per_gpu = CeilDiv(*p, req.gpu_count);
  }
  if (pod.idle_ttl) {
    Result<int64_t> ttl = ParseIdleTtl(*pod.idle_ttl);
    if (!ttl.ok()) {
      return InvalidArgument(std::string("annotation ") + kIdleTtlAnnotation + "=\"" + *pod.idle_ttl +
                             "\": " + ttl.status().message());
    }
    req.idle_ttl_ms = *ttl;
  }
  return req;
}

namespace {

// IsDesignatedVictim's rule over any list of class names.
template <typename Names>
bool DesignatedVictim(const PodSpecView& pod, const Names& victim_classes) {
  if (!pod.priority_class.empty() &&
      std::find(victim_classes.begin(), victim_classes.end(), pod.priority_class) != victim_classes.end()) {
    return true;
  }
  return pod.disposable && IsTrue(*pod.disposable);
}

}  // namespace

bool IsDesignatedVictim(const PodSpecView& pod, std::span<const std::string_view> victim_classes) {
  return DesignatedVictim(pod, victim_classes);
}

bool IsDesignatedVictim(const PodSpecView& pod, const std::vector<std::string>& victim_classes) {
  return DesignatedVictim(pod, victim_classes);
}

Result<VramRequest> ComputeVramRequest(const PodSpecView& pod, const std::vector<std::string>& victim_classes) {
  Result<VramRequest> req = ComputeVramRequest(pod);
  if (req.ok()) req->victim = IsDesignatedVictim(pod, victim_classes);
  return req;
}

void RecordDemand(const VramRequest& d, Entry* e) {
  if (e->ns.empty()) e->ns = d.ns;
  e->model = d.model;
  e->peak_per_gpu = d.peak_per_gpu;
  RecordEvictionFacts(d, e);
}

void RecordEvictionFacts(const VramRequest& d, Entry* e) {
  e->priority = d.priority;
  e->priority_class = d.priority_class;
  e->victim = d.victim;
  e->idle_ttl_ms = d.idle_ttl_ms;
  e->owner_kind = d.owner_kind;
  e->owner_uid = d.owner_uid;
  e->evictable = d.evictable;
  e->gang = d.gang;
}

bool EvictionFactsDiffer(const VramRequest& d, const Entry& e) {
  return e.priority != d.priority || e.priority_class != d.priority_class || e.victim != d.victim ||
         e.idle_ttl_ms != d.idle_ttl_ms || e.owner_kind != d.owner_kind || e.owner_uid != d.owner_uid ||
         e.evictable != d.evictable || e.gang != d.gang;
}

std::string GangKey(const std::map<std::string, std::string>& labels,
                    const std::map<std::string, std::string>& annotations) {
  auto value = [](const std::map<std::string, std::string>& m, const char* key) -> const std::string* {
    auto it = m.find(key);
    return it == m.end() || it->second.empty() ? nullptr : &it->second;
  };
  auto bounded = [](std::string key) { return key.size() <= kMaxGangKey ? key : std::string(); };
  // kGangLabels in this order: 0, 1 pod groups, 2 + 3 a LeaderWorkerSet group, 4 JobSet, 5, 6 Job.
  const auto& k = kGangLabels;
  if (const std::string* v = value(labels, k[0].data())) return bounded("pod-group/" + *v);
  if (const std::string* v = value(labels, k[1].data())) return bounded("pod-group/" + *v);
  if (const std::string* v = value(annotations, kGangAnnotation.data())) return bounded("pod-group/" + *v);
  if (const std::string* v = value(labels, k[2].data())) {
    const std::string* index = value(labels, k[3].data());
    return bounded("lws/" + *v + "/" + (index ? *index : ""));
  }
  if (const std::string* v = value(labels, k[4].data())) return bounded("jobset/" + *v);
  if (const std::string* v = value(labels, k[5].data())) return bounded("job/" + *v);
  if (const std::string* v = value(labels, k[6].data())) return bounded("job/" + *v);
  return "";
}

}  // namespace vramd::ledger
