#include "vramd/ledger/fit.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "vramd/ledger/quantity.h"

namespace vramd::ledger {

std::vector<Vectors> GpuVectors(const Node& node, int64_t now_ms, const FitPolicy& policy) {
  std::vector<int64_t> alloc = AllocatedPerGpu(node);
  std::vector<Vectors> out(node.gpus.size());
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const Gpu& g = node.gpus[i];
    out[i] = GpuVectorsOf(g.capacity, alloc[i], g.used, g.used_ts_ms, now_ms, policy);
  }
  return out;
}

std::vector<GpuPeak> GpuPeaks(const Node& node) {
  std::vector<GpuPeak> out(node.gpus.size());
  for (const Entry& e : node.entries) {
    for (int g : e.gpus) {
      auto it = std::lower_bound(node.gpus.begin(), node.gpus.end(), g,
                                 [](const Gpu& gpu, int idx) { return gpu.index < idx; });
      if (it != node.gpus.end() && it->index == g) AddToPeak(&out[it - node.gpus.begin()], e);
    }
  }
  return out;
}

namespace {

// RankGpus over the GPUs where `per_gpu` fits (every GPU for INT64_MIN) and,
// with `peaks`, where the peak rule holds for `d`: a stable insertion sort (a
// node has few GPUs).
size_t Rank(std::span<const Vectors> gpus, const GpuPeak* peaks, const PeakDemand& d, int64_t per_gpu,
            GpuOrder order, size_t* out) {
  const bool tightest = order == GpuOrder::kTightest;
  size_t m = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int64_t f = FreeBytes(gpus[i]);
    if (!FitsIn(per_gpu, f)) continue;
    if (peaks != nullptr && !PeakRoom(gpus[i], peaks[i], d)) continue;
    size_t j = m++;
    while (j > 0) {
      const int64_t fp = FreeBytes(gpus[out[j - 1]]);
      if (tightest ? !(f < fp) : !(f > fp)) break;
      out[j] = out[j - 1];
      --j;
    }
    out[j] = i;
  }
  return m;
}

std::vector<size_t> FirstAscending(std::vector<size_t> ranked, size_t m, size_t count) {
  ranked.resize(std::min(m, count));
  std::sort(ranked.begin(), ranked.end());
  return ranked;
}

void AppendGpuWord(int n, std::string* out) {
  if (n == 1) {
    *out += "1 GPU";
    return;
  }
  *out += std::to_string(n);
  *out += " GPUs";
}

// "4Gi on GPU 0 (capacity 24Gi, allocated 4Gi, used 20Gi)": a GPU's free
// bytes (0 when none) and its vectors; U only when it takes room beyond A.
void AppendFreeOn(int gpu_index, const Vectors& v, std::string* out) {
  *out += FormatBytes(std::max<int64_t>(0, FreeBytes(v)));
  *out += " on GPU ";
  *out += std::to_string(gpu_index);
  *out += " (capacity ";
  *out += FormatBytes(v.capacity);
  *out += ", allocated ";
  *out += FormatBytes(v.allocated);
  if (v.used > v.allocated) {
    *out += ", used ";
    *out += FormatBytes(v.used);
  }
  *out += ')';
}

}  // namespace

size_t RankGpus(std::span<const Vectors> gpus, int64_t per_gpu, GpuOrder order, size_t* out) {
  return Rank(gpus, nullptr, PeakDemand{}, per_gpu, order, out);
}

size_t RankGpus(std::span<const Vectors> gpus, std::span<const GpuPeak> peaks, int64_t per_gpu,
                const PeakDemand& d, GpuOrder order, size_t* out) {
  return Rank(gpus, peaks.data(), d, per_gpu, order, out);
}

std::vector<size_t> ChooseGpus(std::span<const Vectors> gpus, int64_t per_gpu, int count, GpuOrder order) {
  std::vector<size_t> ranked(gpus.size());
  const size_t m = Rank(gpus, nullptr, PeakDemand{}, per_gpu, order, ranked.data());
  if (count < 0 || m < static_cast<size_t>(count)) return {};
  return FirstAscending(std::move(ranked), m, static_cast<size_t>(count));
}

std::vector<size_t> ChooseGpus(std::span<const Vectors> gpus, std::span<const GpuPeak> peaks, int64_t per_gpu,
                               int count, const PeakDemand& d, GpuOrder order) {
  std::vector<size_t> ranked(gpus.size());
  const size_t m = Rank(gpus, peaks.data(), d, per_gpu, order, ranked.data());
  if (count < 0 || m < static_cast<size_t>(count)) return {};
  return FirstAscending(std::move(ranked), m, static_cast<size_t>(count));
}

std::vector<size_t> MostFreeGpus(std::span<const Vectors> gpus, int count) {
  std::vector<size_t> ranked(gpus.size());
  const size_t m =
      Rank(gpus, nullptr, PeakDemand{}, std::numeric_limits<int64_t>::min(), GpuOrder::kMostFree, ranked.data());
  return FirstAscending(std::move(ranked), m, static_cast<size_t>(std::max(count, 0)));
}

std::string NeedsText(int64_t per_gpu, int count, int64_t peak_per_gpu) {
  std::string s = "needs " + FormatBytes(per_gpu);
  if (count == 1) s += " on 1 GPU";
  else s += " on each of " + std::to_string(count) + " GPUs";
  if (Bursts(per_gpu, peak_per_gpu)) s += " (peak " + FormatBytes(peak_per_gpu) + ")";
  return s;
}

std::string RatioText(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ratio);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

void AppendPeakMiss(int gpu_index, int64_t capacity, const GpuPeak& after, double ratio, std::string* out) {
  *out += "on GPU ";
  *out += std::to_string(gpu_index);
  *out += " peak demand would be ";
  *out += FormatBytes(after.peak);
  const int64_t over = after.peak - capacity;
  if (over > after.victim) {
    *out += " over capacity ";
    *out += FormatBytes(capacity);
    *out += ", ";
    *out += FormatBytes(over - after.victim);
    *out += " more than designated victims cover (";
    *out += FormatBytes(after.victim);
    *out += ')';
    return;
  }
  *out += ", above the ceiling ";
  *out += FormatBytes(PeakCeiling(capacity, ratio));
  *out += " (";
  *out += RatioText(ratio);
  *out += " × capacity ";
  *out += FormatBytes(capacity);
  *out += ')';
}

void AppendPeakMissReason(const NodeFit& fit, int count, int gpu_index, const Vectors& named, const GpuPeak& after,
                          double ratio, std::string* out) {
  if (fit.miss == FitMiss::kAboveCeiling) {
    *out += "; peak is above the ceiling ";
    *out += FormatBytes(PeakCeiling(named.capacity, ratio));
    *out += " (";
    *out += RatioText(ratio);
    *out += " × capacity ";
    *out += FormatBytes(named.capacity);
    *out += ") of the largest GPU (GPU ";
    *out += std::to_string(gpu_index);
    *out += ')';
    if (count > 1) {
      *out += ", ";
      AppendGpuWord(fit.within_ceiling, out);
      *out += " within it";
    }
    return;
  }
  if (fit.miss != FitMiss::kPeakShort) return;
  *out += "; ";
  if (count > 1) {
    AppendGpuWord(fit.with_peak, out);
    *out += " with room within the peak rule; ";
  }
  AppendPeakMiss(gpu_index, named.capacity, after, ratio, out);
}

void AppendMissReason(const NodeFit& fit, int count, size_t gpu_count, int gpu_index, const Vectors& named,
                      std::string* out) {
  switch (fit.miss) {
    case FitMiss::kNone:
    case FitMiss::kNoGpus:
      return;
    case FitMiss::kTooFewGpus:
      *out += "; node has only ";
      AppendGpuWord(static_cast<int>(gpu_count), out);
      return;
    case FitMiss::kTooSmall:
      *out += "; largest GPU capacity is ";
      *out += FormatBytes(fit.offer.max_capacity);
      *out += " (GPU ";
      *out += std::to_string(gpu_index);
      *out += ')';
      if (count > 1) {
        *out += ", ";
        AppendGpuWord(fit.large_enough, out);
        *out += " large enough";
      }
      return;
    case FitMiss::kAboveCeiling:
    case FitMiss::kPeakShort:
      return;  // AppendPeakMissReason
    case FitMiss::kNoRoom:
      *out += "; ";
      if (count > 1) {
        AppendGpuWord(fit.with_room, out);
        *out += " with that free; ";
      }
      *out += "largest free is ";
      AppendFreeOn(gpu_index, named, out);
      return;
  }
}

GroupedMiss GroupMiss(const NodeFit& fit, int count, size_t gpu_count, double ratio, const Vectors& most_free) {
  const bool one = count == 1;
  switch (fit.miss) {
    case FitMiss::kNone:
    case FitMiss::kNoGpus:
      return {MissGroup::kNoGpus, 0};
    case FitMiss::kTooFewGpus:
      return {MissGroup::kTooFewGpus, static_cast<int64_t>(gpu_count)};
    case FitMiss::kTooSmall:
      return {MissGroup::kTooSmall, one ? fit.offer.max_capacity : fit.large_enough};
    case FitMiss::kNoRoom:
      return {most_free.used > most_free.allocated ? MissGroup::kNoRoomInUse : MissGroup::kNoRoom,
              one ? std::max<int64_t>(0, fit.offer.max_free) : fit.with_room};
    case FitMiss::kAboveCeiling:
      return {MissGroup::kAboveCeiling, one ? PeakCeiling(fit.offer.max_capacity, ratio) : fit.within_ceiling};
    case FitMiss::kPeakShort:
      return {MissGroup::kPeakShort, one ? 0 : fit.with_peak};
  }
  return {MissGroup::kNoGpus, 0};
}

std::string GroupedReason(MissGroup group, int64_t best, int64_t per_gpu, int count, int64_t peak_per_gpu,
                          double ratio) {
  const bool one = count == 1;
  const std::string r = FormatBytes(per_gpu);
  const std::string most = " (needs " + std::to_string(count) + ", most: " + std::to_string(best) + ")";
  const std::string peak = FormatBytes(std::max(per_gpu, peak_per_gpu));
  const std::string ceiling = RatioText(ratio) + " × capacity";
  switch (group) {
    case MissGroup::kNoGpus:
      return std::string(kNoGpusReason);
    case MissGroup::kTooFewGpus:
      return "too few GPUs on the node" + most;
    case MissGroup::kTooSmall:
      return one ? "GPU too small for " + r + " (largest: " + FormatBytes(best) + ")"
                 : "too few GPUs of " + r + " or more" + most;
    case MissGroup::kNoRoom:
      return one ? "no GPU with " + r + " free (best: " + FormatBytes(best) + ")"
                 : "too few GPUs with " + r + " free" + most;
    case MissGroup::kNoRoomInUse:
      return one ? "no GPU with " + r + " free, measured usage counted (best: " + FormatBytes(best) + ")"
                 : "too few GPUs with " + r + " free, measured usage counted" + most;
    case MissGroup::kAboveCeiling:
      return one ? "peak " + peak + " above every GPU's ceiling of " + ceiling + " (highest: " + FormatBytes(best) + ")"
                 : "too few GPUs whose ceiling of " + ceiling + " holds peak " + peak + most;
    case MissGroup::kPeakShort:
      return one ? "no GPU with " + r + " free stays within the peak rule now (peak " + peak + ")"
                 : "too few GPUs with " + r + " free within the peak rule now (peak " + peak + "; " + most.substr(2);
  }
  return std::string(kNoGpusReason);
}

std::string RefusedReason(int64_t per_gpu, int count, std::span<const GpuShort> short_gpus,
                          int64_t peak_per_gpu) {
  std::string out = NeedsText(per_gpu, count, peak_per_gpu);
  out += "; free is ";
  if (short_gpus.empty()) out += "less on some GPU";
  for (size_t i = 0; i < short_gpus.size(); ++i) {
    if (i > 0) out += ", ";
    AppendFreeOn(short_gpus[i].gpu_index, short_gpus[i].v, &out);
  }
  return out;
}

std::string PeakRefusedReason(int64_t per_gpu, int64_t peak_per_gpu, int count,
                              std::span<const GpuPeakShort> short_gpus, double ratio) {
  std::string out = NeedsText(per_gpu, count, peak_per_gpu);
  if (short_gpus.empty()) out += "; the peak rule does not hold on some GPU";
  for (const GpuPeakShort& g : short_gpus) {
    out += "; ";
    AppendPeakMiss(g.gpu_index, g.capacity, g.after, ratio, &out);
  }
  return out;
}

}  // namespace vramd::ledger
