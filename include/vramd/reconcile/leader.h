// Leader election over a Valkey lease (key P:leader, SET NX PX, renewed by the
// holder every lease/3, taken over when it lapses). Several replicas serve
// the extender verbs; only the leader runs the background loops.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "vramd/metrics/registry.h"
#include "vramd/store/valkey_client.h"

namespace vramd::reconcile {

class LeaderElector {
 public:
  LeaderElector(std::shared_ptr<store::ValkeyClient> valkey, std::string identity, int lease_ms,
                metrics::Registry* registry);
  ~LeaderElector();

  void Start();
  // Stops renewing and gives the lease up (if held) so a standby takes over at once.
  void Stop();

  // True while this replica holds the lease and renewed it within the lease
  // period minus a safety margin (a partitioned leader steps down on its own).
  bool IsLeader() const;
  const std::string& identity() const { return identity_; }
  // The current holder as Valkey sees it ("" when none).
  std::string CurrentLeader();

  // One acquire-or-renew attempt (the loop calls this; tests may too).
  bool TryAcquireOrRenew();

 private:
  void Loop(std::stop_token st);

  std::shared_ptr<store::ValkeyClient> valkey_;
  std::string identity_;
  std::string key_;
  int lease_ms_;
  std::atomic<bool> leader_{false};
  std::atomic<int64_t> renewed_at_ms_{0};  // steady clock
  metrics::Family<metrics::Gauge>* gauge_;
  metrics::Family<metrics::Counter>* transitions_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::jthread thread_;
};

// hostname-pid-random: unique per process.
std::string MakeReplicaIdentity();

}  // namespace vramd::reconcile
