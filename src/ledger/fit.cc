#include "vramd/ledger/fit.h"

#include <algorithm>
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

namespace {

// RankGpus over the GPUs where `per_gpu` fits (every GPU for INT64_MIN): a
// stable insertion sort (a node has few GPUs).
size_t Rank(std::span<const Vectors> gpus, int64_t per_gpu, GpuOrder order, size_t* out) {
  const bool tightest = order == GpuOrder::kTightest;
  size_t m = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const int64_t f = FreeBytes(gpus[i]);
    if (!FitsIn(per_gpu, f)) continue;
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
  return Rank(gpus, per_gpu, order, out);
}

std::vector<size_t> ChooseGpus(std::span<const Vectors> gpus, int64_t per_gpu, int count, GpuOrder order) {
  std::vector<size_t> ranked(gpus.size());
  const size_t m = Rank(gpus, per_gpu, order, ranked.data());
  if (count < 0 || m < static_cast<size_t>(count)) return {};
  return FirstAscending(std::move(ranked), m, static_cast<size_t>(count));
}

std::vector<size_t> MostFreeGpus(std::span<const Vectors> gpus, int count) {
  std::vector<size_t> ranked(gpus.size());
  const size_t m = Rank(gpus, std::numeric_limits<int64_t>::min(), GpuOrder::kMostFree, ranked.data());
  return FirstAscending(std::move(ranked), m, static_cast<size_t>(std::max(count, 0)));
}

std::string NeedsText(int64_t per_gpu, int count) {
  std::string s = "needs " + FormatBytes(per_gpu);
  if (count == 1) return s + " on 1 GPU";
  return s + " on each of " + std::to_string(count) + " GPUs";
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

std::string RefusedReason(int64_t per_gpu, int count, std::span<const GpuShort> short_gpus) {
  std::string out = NeedsText(per_gpu, count);
  out += "; free is ";
  if (short_gpus.empty()) out += "less on some GPU";
  for (size_t i = 0; i < short_gpus.size(); ++i) {
    if (i > 0) out += ", ";
    AppendFreeOn(short_gpus[i].gpu_index, short_gpus[i].v, &out);
  }
  return out;
}

}  // namespace vramd::ledger
