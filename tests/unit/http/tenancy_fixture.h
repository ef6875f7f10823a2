// A hand-built ledger::TenancyView for the tests of the views of the queues
// (GET /v1/queues, explain's queue, vramctl queues / explain): the figures
// are written out here, not computed by ledger::ComputeTenancy, so these
// tests check the views alone.
//
// Queues (QueueSet order: the objects by name, then the synthetic default):
//   0 broken    invalid (Cycle)
//   1 research  deserved 24Gi, limit 40Gi, parent of team-a and team-b
//   2 team-a    research/, namespaces {team-a}, deserved 16Gi, no limit, weight 2
//   3 team-b    research/, namespaces {team-b}, deserved 8Gi, limit 32Gi
//   4 default   synthetic, unmanaged
// Usage: team-a holds 2Gi (non-preemptible), team-b 28Gi (preemptible) with
// 8Gi pending; research 30Gi. Fair shares: research 36Gi, team-a 16Gi,
// team-b 20Gi. So a pod of team-b asking 8Gi more is refused (28 + 8 > 32),
// a non-preemptible pod of team-a asking 4Gi is admitted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vramd/ledger/queues.h"

namespace vramd::testing {

inline constexpr int64_t kTenancyGi = int64_t{1} << 30;

inline ledger::TenancyView TenancyFixture() {
  constexpr int64_t Gi = kTenancyGi;
  auto set = std::make_shared<ledger::QueueSet>();
  auto add = [&](std::string name, std::string parent, std::vector<std::string> ns, int64_t deserved,
                 std::optional<int64_t> limit, int64_t weight) -> ledger::Queue& {
    ledger::Queue q;
    q.spec.name = std::move(name);
    q.spec.parent = std::move(parent);
    q.spec.namespaces = std::move(ns);
    q.spec.deserved = deserved;
    q.spec.limit = limit;
    q.spec.weight = weight;
    q.reason = "Valid";
    set->queues.push_back(std::move(q));
    return set->queues.back();
  };
  ledger::Queue& broken = add("broken", "broken", {}, 4 * Gi, std::nullopt, 1);
  broken.valid = false;
  broken.reason = "Cycle";
  broken.message = "queue broken: its parent chain comes back to itself";
  add("research", "", {}, 24 * Gi, 40 * Gi, 1).children = {2, 3};
  add("team-a", "research", {"team-a"}, 16 * Gi, std::nullopt, 2).parent = 1;
  add("team-b", "research", {"team-b"}, 8 * Gi, 32 * Gi, 1).parent = 1;
  ledger::Queue& def = add("default", "", {}, 0, std::nullopt, 1);
  def.synthetic = true;
  def.unmanaged = true;
  set->objects = 4;
  set->default_queue = 4;
  set->by_namespace = {{"team-a", 2}, {"team-b", 3}};

  ledger::TenancyView v;
  v.usage = {{}, {30 * Gi, 2 * Gi, 8 * Gi}, {2 * Gi, 2 * Gi, 0}, {28 * Gi, 0, 8 * Gi}, {}};
  v.fair_shares = {0, 36 * Gi, 16 * Gi, 20 * Gi, 0};
  for (size_t i = 0; i < set->queues.size(); ++i) {
    const ledger::Queue& q = set->queues[i];
    ledger::QueueStatus s;
    s.name = q.spec.name;
    s.parent = q.spec.parent;
    s.valid = q.valid;
    s.synthetic = q.synthetic;
    s.reason = q.reason;
    s.message = q.message;
    s.deserved = q.spec.deserved;
    s.limit = q.spec.limit;
    s.weight = q.spec.weight;
    s.allocated = v.usage[i].allocated;
    s.allocated_nonpreemptible = v.usage[i].allocated_nonpreemptible;
    s.pending = v.usage[i].pending;
    s.fair_share = v.fair_shares[i];
    v.statuses.push_back(std::move(s));
  }
  v.set = std::move(set);
  return v;
}

}  // namespace vramd::testing
