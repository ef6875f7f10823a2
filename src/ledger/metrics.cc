#include "vramd/ledger/metrics.h"

#include <limits>

namespace vramd::ledger {

double SafeRatio(double num, double den) {
  if (den == 0) return num == 0 ? 0 : std::numeric_limits<double>::infinity();
  return num / den;
}

SixMetrics ComputeMetrics(const Vectors& v) {
  SixMetrics m;
  const double c = static_cast<double>(v.capacity);
  const double a = static_cast<double>(v.allocated);
  const double u = static_cast<double>(v.used);
  m.over_subscription = SafeRatio(a, c);
  m.utilization = SafeRatio(u, a);
  m.saturation = SafeRatio(u, c);
  m.headroom = v.capacity - v.used;
  m.potential = v.allocated - v.used;
  // Past capacity (negative headroom) any burst fails: risk is +Inf rather than
  // the negative number a plain division would report as "safe".
  m.risk = m.headroom < 0 ? std::numeric_limits<double>::infinity()
                          : SafeRatio(static_cast<double>(m.potential), static_cast<double>(m.headroom));
  return m;
}

}  // namespace vramd::ledger
