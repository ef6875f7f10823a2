// QueueWatcher on the fake kube client: a CRD that is not installed (404)
// and then is, relists after 410 and after a watch that ends, spec changes
// versus status-only updates.
#include "vramd/reconcile/queue_watch.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "fakes/fake_kube_client.h"
#include "fakes/reconcile_helpers.h"

namespace vramd::reconcile {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubeClient;
using QueueEvent = kube::WatchEvent<ledger::QueueSpec>;
using OnQueueEvent = std::function<void(const QueueEvent&)>;

constexpr int64_t kGi = int64_t{1} << 30;

// Polls `pred` for up to 10 s; true when it held.
bool Eventually(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

ledger::QueueSpec Spec(const std::string& name, int64_t deserved_gi, std::vector<std::string> namespaces = {}) {
  ledger::QueueSpec q;
  q.name = name;
  q.uid = "uid-" + name;
  q.deserved = deserved_gi * kGi;
  q.namespaces = std::move(namespaces);
  return q;
}

std::vector<std::string> Names(const std::vector<ledger::QueueSpec>& specs) {
  std::vector<std::string> out;
  for (const auto& q : specs) out.push_back(q.name);
  return out;
}

// Captures what spdlog's default logger writes during a test.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string Text() {
    spdlog::default_logger()->flush();
    return out_.str();
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A watch that stays open and quiet until stopped.
Status QuietWatch(const std::string&, const std::atomic<bool>& stop, const OnQueueEvent&) {
  while (!stop.load()) std::this_thread::sleep_for(1ms);
  return Status::Ok();
}

QueueWatchOptions Fast() {
  QueueWatchOptions o;
  o.not_installed_retry_ms = 5;
  o.backoff_initial_ms = 1;
  o.backoff_max_ms = 5;
  return o;
}

TEST(QueueWatcher, NotInstalledRetriesQuietlyThenPicksTheQueuesUp) {
  LogCapture log;
  FakeKubeClient kube;
  kube.fail_list_queues = NotFound("list vramqueues: HTTP 404: the server could not find the requested resource");
  kube.watch_queues = QuietWatch;
  metrics::Registry registry;
  std::atomic<int> changes{0};
  QueueWatcher w(&kube, [&] { ++changes; }, &registry, Fast());
  EXPECT_TRUE(w.Installed());  // not known to be missing before the first list
  w.Start();

  ASSERT_TRUE(Eventually([&] { return kube.CallCount("list-queues") >= 5; }));
  EXPECT_FALSE(w.Installed());
  EXPECT_FALSE(w.Synced());
  EXPECT_TRUE(w.Specs().empty());
  EXPECT_EQ(changes.load(), 1);  // Installed() flipped once; the retries change nothing
  EXPECT_EQ(kube.CallCount("watch-queues"), 0u);
  EXPECT_EQ(Count(log.Text(), "CRD is not installed"), 1u) << log.Text();  // one warning, not one per retry
  const std::string not_installed = testing::Sample(registry, "vramd_queue_watch_events_total{type=\"not_installed\"}");
  ASSERT_FALSE(not_installed.empty());
  EXPECT_GE(std::stoi(not_installed), 4);

  // The CRD is installed and two queues are created.
  kube.SetQueue(Spec("team-b", 6));
  kube.SetQueue(Spec("team-a", 10, {"ml"}));
  kube.SetListQueuesFailure(Status::Ok());
  ASSERT_TRUE(Eventually([&] { return w.Synced(); }));
  EXPECT_TRUE(w.Installed());
  EXPECT_EQ(Names(w.Specs()), (std::vector<std::string>{"team-a", "team-b"}));  // sorted by name
  EXPECT_EQ(w.Specs()[0], Spec("team-a", 10, {"ml"}));
  EXPECT_TRUE(Eventually([&] { return changes.load() == 2; }));
  EXPECT_EQ(w.lists(), 1u);
  EXPECT_TRUE(Eventually([&] { return kube.CallCount("watch-queues 1") == 1; }));  // from the list's version
  EXPECT_EQ(Count(log.Text(), "CRD is installed"), 1u) << log.Text();
  w.Stop();
}

TEST(QueueWatcher, TheCrdRemovedEmptiesTheCopy) {
  FakeKubeClient kube;
  kube.SetQueue(Spec("team-a", 10));
  std::atomic<int> watches{0};
  // The first watch ends as the API server ends it when the CRD goes away.
  kube.watch_queues = [&](const std::string& rv, const std::atomic<bool>& stop, const OnQueueEvent& on) {
    if (++watches == 1) {
      kube.SetListQueuesFailure(NotFound("HTTP 404"));
      return Status::Ok();
    }
    return QuietWatch(rv, stop, on);
  };
  metrics::Registry registry;
  QueueWatcher w(&kube, nullptr, &registry, Fast());
  w.Start();
  ASSERT_TRUE(Eventually([&] { return !w.Installed(); }));
  EXPECT_TRUE(w.Specs().empty());
  EXPECT_FALSE(w.Synced());
  w.Stop();
}

TEST(QueueWatcher, RelistsAfter410AndAfterAWatchTheServerEnded) {
  FakeKubeClient kube;
  kube.SetQueue(Spec("team-a", 10));
  kube.SetQueuesResourceVersion("10");
  std::atomic<int> watches{0};
  kube.watch_queues = [&](const std::string& rv, const std::atomic<bool>& stop, const OnQueueEvent& on) {
    switch (++watches) {
      case 1:  // an event, then 410 Gone; meanwhile team-b appeared and team-a changed
        on(QueueEvent{kube::WatchEventType::kModified, Spec("team-a", 12)});
        kube.SetQueue(Spec("team-a", 14));
        kube.SetQueue(Spec("team-b", 1));
        kube.SetQueuesResourceVersion("20");
        return Conflict("410 Gone: too old resource version: 10 (20)");
      case 2:  // the server's timeout ends the stream
        kube.SetQueuesResourceVersion("30");
        return Status::Ok();
      default:
        return QuietWatch(rv, stop, on);
    }
  };
  metrics::Registry registry;
  QueueWatcher w(&kube, nullptr, &registry, Fast());
  w.Start();
  ASSERT_TRUE(Eventually([&] { return watches.load() >= 3; }));
  EXPECT_TRUE(w.Synced());
  EXPECT_EQ(w.lists(), 3u);
  EXPECT_EQ(kube.CallCount("watch-queues 10"), 1u);
  EXPECT_EQ(kube.CallCount("watch-queues 20"), 1u);
  EXPECT_EQ(kube.CallCount("watch-queues 30"), 1u);
  std::vector<ledger::QueueSpec> specs = w.Specs();
  ASSERT_EQ(Names(specs), (std::vector<std::string>{"team-a", "team-b"}));
  EXPECT_EQ(specs[0].deserved, 14 * kGi);  // the list's, not the older event's
  EXPECT_EQ(testing::Sample(registry, "vramd_queue_watch_events_total{type=\"relist\"}"), "3");
  w.Stop();
}

TEST(QueueWatcher, SpecChangesWakeTheCallerAndStatusOnlyUpdatesDoNot) {
  FakeKubeClient kube;
  kube.SetQueue(Spec("team-a", 10, {"ml"}));
  std::atomic<bool> delivered{false};
  std::atomic<int> changes{0};
  std::vector<int> changes_after;  // changes after each event (written on the watcher's thread)
  kube.watch_queues = [&](const std::string& rv, const std::atomic<bool>& stop, const OnQueueEvent& on) {
    if (delivered.load()) return QuietWatch(rv, stop, on);
    auto send = [&](kube::WatchEventType t, const ledger::QueueSpec& q) {
      on(QueueEvent{t, q});
      changes_after.push_back(changes.load());
    };
    using T = kube::WatchEventType;
    send(T::kModified, Spec("team-a", 10, {"ml"}));  // 0: the leader's status patch: same spec
    send(T::kModified, Spec("team-a", 12, {"ml"}));  // 1: deserved changed
    send(T::kModified, Spec("team-a", 12, {"ml", "cv"}));  // 2: namespaces changed
    ledger::QueueSpec broken = Spec("team-a", 12, {"ml", "cv"});
    broken.decode_error = "spec.overQuotaWeight: -1 is not an integer from 0 to 1000000";
    send(T::kModified, broken);  // 3: now invalid
    send(T::kBookmark, ledger::QueueSpec{});  // 4: nothing
    send(T::kAdded, Spec("team-b", 1));  // 5: a new queue
    ledger::QueueSpec recreated = Spec("team-b", 1);
    recreated.uid = "uid-team-b-2";
    send(T::kModified, recreated);  // 6: deleted and created again meanwhile: another uid
    send(T::kDeleted, Spec("nobody", 1));  // 7: never seen: nothing
    send(T::kDeleted, Spec("team-b", 1));  // 8: gone
    delivered = true;
    return QuietWatch(rv, stop, on);
  };
  metrics::Registry registry;
  QueueWatcher w(&kube, [&] { ++changes; }, &registry, Fast());
  w.Start();
  ASSERT_TRUE(Eventually([&] { return delivered.load(); }));
  // 1 for the first list (the copy became synced), then one per real change.
  EXPECT_EQ(changes_after, (std::vector<int>{1, 2, 3, 4, 4, 5, 6, 6, 7}));
  std::vector<ledger::QueueSpec> specs = w.Specs();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].namespaces, (std::vector<std::string>{"ml", "cv"}));
  EXPECT_FALSE(specs[0].decode_error.empty());
  EXPECT_EQ(testing::Sample(registry, "vramd_queue_watch_events_total{type=\"modified\"}"), "5");
  EXPECT_EQ(testing::Sample(registry, "vramd_queue_watch_events_total{type=\"deleted\"}"), "2");
  EXPECT_EQ(w.lists(), 1u);
  w.Stop();
}

TEST(QueueWatcher, OtherErrorsRetryAndUnsync) {
  LogCapture log;
  FakeKubeClient kube;
  kube.SetQueue(Spec("team-a", 10));
  kube.fail_list_queues = Internal("list vramqueues: HTTP 403 (check RBAC): forbidden");
  kube.watch_queues = QuietWatch;
  metrics::Registry registry;
  QueueWatcher w(&kube, nullptr, &registry, Fast());
  w.Start();
  ASSERT_TRUE(Eventually([&] { return kube.CallCount("list-queues") >= 5; }));
  EXPECT_TRUE(w.Installed());  // a 403 says nothing about the CRD
  EXPECT_FALSE(w.Synced());
  EXPECT_EQ(Count(log.Text(), "listing vramqueues failed: "), 1u) << log.Text();  // logged once while the same
  kube.SetListQueuesFailure(Status::Ok());
  ASSERT_TRUE(Eventually([&] { return w.Synced(); }));
  EXPECT_EQ(Names(w.Specs()), std::vector<std::string>{"team-a"});
  w.Stop();
}

TEST(QueueWatcher, StopEndsAWaitForTheCrdPromptly) {
  FakeKubeClient kube;
  kube.fail_list_queues = NotFound("HTTP 404");
  metrics::Registry registry;
  QueueWatcher w(&kube, nullptr, &registry);  // the default 30 s retry
  w.Start();
  ASSERT_TRUE(Eventually([&] { return !w.Installed(); }));
  const auto t0 = std::chrono::steady_clock::now();
  w.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(kube.CallCount("list-queues"), 1u);
}

}  // namespace
}  // namespace vramd::reconcile
