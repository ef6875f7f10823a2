#include "vramd/ledger/capacity.h"

#include <cmath>

#include "vramd/ledger/quantity.h"
#include "vramd/parse.h"

namespace vramd::ledger {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kMaxGpusPerNode = 1024;

// Quotes at most 64 bytes of a value in a message.
std::string Quote(const std::string& what, const std::string& s) {
  return what + "=\"" + (s.size() > 64 ? s.substr(0, 64) + "..." : s) + "\"";
}

Result<int64_t> PositiveInt(const std::string& s, const std::string& what, int64_t max) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument(Quote(what, s) + " is not a whole number");
  }
  std::optional<uint64_t> v = ParseDigits(s, static_cast<uint64_t>(max));
  if (!v) return InvalidArgument(Quote(what, s) + " is out of range (0.." + std::to_string(max) + ")");
  return static_cast<int64_t>(*v);
}

}  // namespace

Result<PhysicalGpus> GpusFromNodeMetadata(const std::map<std::string, std::string>& labels,
                                          const std::map<std::string, std::string>& annotations) {
  PhysicalGpus out;
  if (auto it = annotations.find(kCapacityAnnotation); it != annotations.end()) {
    out.source = "annotation";
    const std::string& v = it->second;
    size_t start = 0;
    while (start <= v.size()) {
      size_t comma = v.find(',', start);
      std::string part = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      while (!part.empty() && part.front() == ' ') part.erase(part.begin());
      while (!part.empty() && part.back() == ' ') part.pop_back();
      Result<int64_t> b = ParseBytes(part);
      if (!b.ok()) return InvalidArgument(std::string("annotation ") + kCapacityAnnotation + ": " + b.status().message());
      if (*b > kMaxBytesPerGpu) {
        return InvalidArgument(std::string("annotation ") + kCapacityAnnotation + ": GPU " +
                               std::to_string(out.bytes.size()) + " claims " + FormatBytes(*b) +
                               ", more than the " + FormatBytes(kMaxBytesPerGpu) + " one GPU may have");
      }
      out.bytes.push_back(*b);
      if (out.bytes.size() > kMaxGpusPerNode) {
        return InvalidArgument(std::string("annotation ") + kCapacityAnnotation + " lists too many GPUs");
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  auto count = labels.find(kGfdCountLabel);
  auto memory = labels.find(kGfdMemoryLabel);
  if (count != labels.end() && memory != labels.end()) {
    Result<int64_t> n = PositiveInt(count->second, std::string("label ") + kGfdCountLabel, kMaxGpusPerNode);
    if (!n.ok()) return n.status();
    Result<int64_t> mib = PositiveInt(memory->second, std::string("label ") + kGfdMemoryLabel, kMaxBytesPerGpu / kMiB);
    if (!mib.ok()) return mib.status();
    out.source = "gfd";
    out.bytes.assign(static_cast<size_t>(*n), *mib * kMiB);
  }
  return out;
}

int64_t CapacityAfterReserve(int64_t physical, double reserve_percent, int64_t reserve_min_bytes) {
  int64_t pct = static_cast<int64_t>(std::floor(static_cast<double>(physical) * reserve_percent / 100.0));
  int64_t reserve = std::max(pct, reserve_min_bytes);
  return physical > reserve ? physical - reserve : 0;
}

}  // namespace vramd::ledger
