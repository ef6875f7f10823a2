// The six derived metrics of the capacity model (DESIGN.md §1).
#pragma once

#include <cstdint>

#include "vramd/ledger/model.h"

namespace vramd::ledger {

struct SixMetrics {
  double over_subscription = 0;  // A / C
  double utilization = 0;        // U / A
  double saturation = 0;         // U / C
  int64_t headroom = 0;          // C - U (may be negative)
  int64_t potential = 0;         // A - U (may be negative)
  double risk = 0;               // potential / headroom; +Inf when headroom < 0
};

// num / den with the contract's edge cases: 0/0 = 0 and x/0 = +Inf for any
// x != 0. A non-zero denominator divides normally.
double SafeRatio(double num, double den);

SixMetrics ComputeMetrics(const Vectors& v);

}  // namespace vramd::ledger
