#include "vramd/reconcile/leader.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <random>

#include "vramd/metrics/thread_guard.h"

namespace vramd::reconcile {
namespace {

// Only differences are used: a monotonic clock, immune to wall-clock steps.
class SteadyClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

std::string MakeReplicaIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%06x", rd() & 0xffffff);
  return std::string(host) + "-" + std::to_string(getpid()) + "-" + suffix;
}

LeaderElector::LeaderElector(std::shared_ptr<store::Lease> lease, std::string identity, int lease_ms,
                             metrics::Registry* registry, const Clock* clock)
    : lease_(std::move(lease)), identity_(std::move(identity)), lease_ms_(lease_ms), clock_(clock) {
  static const SteadyClock kSteady;
  if (clock_ == nullptr) clock_ = &kSteady;
  gauge_ = &registry->AddGauge("vramd_is_leader", "1 on the replica that runs the background loops.", {"replica"});
  gauge_->With({identity_}).Set(0);
  transitions_ = &registry->AddCounter("vramd_leader_transitions_total",
                                      "Times this replica became or stopped being the leader.", {"to"});
}

LeaderElector::~LeaderElector() { Stop(); }

bool LeaderElector::TryAcquireOrRenew() {
  Result<bool> r = lease_->TryAcquireOrRenew(identity_, lease_ms_);
  bool held = r.ok() && *r;
  if (held) renewed_at_ms_.store(clock_->NowMs());
  bool was = leader_.exchange(held);
  if (was != held) {
    transitions_->With({held ? "leader" : "follower"}).Inc();
    spdlog::info("replica {} is {} the leader", identity_, held ? "now" : "no longer");
  }
  if (!r.ok()) spdlog::warn("leader lease: {}", r.status().message());
  gauge_->With({identity_}).Set(held ? 1 : 0);
  return held;
}

bool LeaderElector::IsLeader() const {
  if (!leader_.load()) return false;
  // Step down locally before the lease can lapse in Valkey.
  return clock_->NowMs() - renewed_at_ms_.load() < lease_ms_ - lease_ms_ / 4;
}

std::string LeaderElector::CurrentLeader() {
  Result<std::string> r = lease_->Holder();
  return r.ok() ? *r : "";
}

void LeaderElector::Start() {
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void LeaderElector::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    cv_.NotifyAll();
    thread_.join();
  }
  if (leader_.exchange(false)) {
    (void)lease_->Release(identity_);
    gauge_->With({identity_}).Set(0);
    spdlog::info("replica {} gave up the leader lease", identity_);
  }
}

void LeaderElector::Loop(std::stop_token st) {
  while (!st.stop_requested()) {
    if (!metrics::GuardedStep(metrics::kThreadLeader, [this] { TryAcquireOrRenew(); })) {
      // Whether the lease is held is unknown: step down until a renewal succeeds.
      if (leader_.exchange(false)) {
        transitions_->With({"follower"}).Inc();
        gauge_->With({identity_}).Set(0);
        spdlog::info("replica {} is no longer the leader", identity_);
      }
    }
    MutexLock lock(&mu_);
    cv_.WaitFor(&lock, st, std::chrono::milliseconds(lease_ms_ / 3));
  }
}

}  // namespace vramd::reconcile
