#include "vramd/reconcile/leader.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <random>

#include "vramd/metrics/thread_guard.h"

namespace vramd::reconcile {
namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const store::Script& AcquireScript() {
  static const store::Script s(R"lua(
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
)lua");
  return s;
}

const store::Script& ReleaseScript() {
  static const store::Script s(R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua");
  return s;
}

}  // namespace

std::string MakeReplicaIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%06x", rd() & 0xffffff);
  return std::string(host) + "-" + std::to_string(getpid()) + "-" + suffix;
}

LeaderElector::LeaderElector(std::shared_ptr<store::ValkeyClient> valkey, std::string identity, int lease_ms,
                             metrics::Registry* registry)
    : valkey_(std::move(valkey)), identity_(std::move(identity)), key_(valkey_->prefix() + ":leader"),
      lease_ms_(lease_ms) {
  gauge_ = &registry->AddGauge("vramd_is_leader", "1 on the replica that runs the background loops.", {"replica"});
  gauge_->With({identity_}).Set(0);
  transitions_ = &registry->AddCounter("vramd_leader_transitions_total",
                                      "Times this replica became or stopped being the leader.", {"to"});
}

LeaderElector::~LeaderElector() { Stop(); }

bool LeaderElector::TryAcquireOrRenew() {
  Result<store::Reply> r = valkey_->Eval(AcquireScript(), {key_}, {identity_, std::to_string(lease_ms_)});
  bool held = r.ok() && r->type == store::Reply::Type::kInteger && r->integer == 1;
  if (held) renewed_at_ms_.store(SteadyMs());
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
  return SteadyMs() - renewed_at_ms_.load() < lease_ms_ - lease_ms_ / 4;
}

std::string LeaderElector::CurrentLeader() {
  Result<store::Reply> r = valkey_->Command({"GET", key_});
  if (!r.ok() || r->type != store::Reply::Type::kString) return "";
  return r->str;
}

void LeaderElector::Start() {
  thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
}

void LeaderElector::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  cv_.notify_all();
  thread_.join();
  if (leader_.exchange(false)) {
    (void)valkey_->Eval(ReleaseScript(), {key_}, {identity_});
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
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, st, std::chrono::milliseconds(lease_ms_ / 3), [] { return false; });
  }
}

}  // namespace vramd::reconcile
