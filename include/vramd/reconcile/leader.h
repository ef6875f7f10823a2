// Leader election over a store::Lease (in Valkey: key P:leader, renewed by
// the holder every lease/3, taken over when it lapses). Several replicas
// serve the extender verbs; only the leader runs the background loops.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "vramd/clock.h"
#include "vramd/metrics/registry.h"
#include "vramd/mutex.h"
#include "vramd/store/lease.h"

namespace vramd::reconcile {

class LeaderElector {
 public:
  // `clock` (not owned; null: a monotonic clock) only times the local
  // step-down below: differences of NowMs() are all that is used.
  LeaderElector(std::shared_ptr<store::Lease> lease, std::string identity, int lease_ms,
                metrics::Registry* registry, const Clock* clock = nullptr);
  ~LeaderElector();

  void Start();
  // Stops renewing and gives the lease up (if held) so a standby takes over at once.
  void Stop();

  // True while this replica holds the lease and renewed it within the lease
  // period minus a safety margin (a partitioned leader steps down on its own).
  bool IsLeader() const;
  const std::string& identity() const { return identity_; }
  // The current holder as the lease's store sees it ("" when none or unknown).
  std::string CurrentLeader();

  // One acquire-or-renew attempt (the loop calls this; tests may too).
  bool TryAcquireOrRenew();

 private:
  void Loop(std::stop_token st);

  std::shared_ptr<store::Lease> lease_;
  std::string identity_;
  int lease_ms_;
  const Clock* clock_;
  std::atomic<bool> leader_{false};
  std::atomic<int64_t> renewed_at_ms_{0};  // clock_
  metrics::Family<metrics::Gauge>* gauge_;
  metrics::Family<metrics::Counter>* transitions_;
  Mutex mu_;  // only for cv_'s wait
  CondVar cv_;
  std::jthread thread_;
};

// hostname-pid-random: unique per process.
std::string MakeReplicaIdentity();

}  // namespace vramd::reconcile
