// The threads' last line of defence (thread_guard.h): an exception that
// escapes a step is caught, logged with what the thread was working on,
// counted, and the loop goes on.
#include "vramd/metrics/thread_guard.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace vramd::metrics {
namespace {

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

TEST(ThreadGuard, AStepThatReturnsIsNotCounted) {
  int runs = 0;
  EXPECT_TRUE(GuardedStep("test_quiet", [&] { ++runs; }));
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(ThreadErrors("test_quiet"), 0u);
}

TEST(ThreadGuard, CountsAndLogsWhatTheThreadWasWorkingOn) {
  LogCapture log;
  EXPECT_FALSE(GuardedStep("test_counts", [] {
    WorkingOn pass("plan over 3 pods");
    WorkingOn pod("pod ml/llama (uid u-1)");
    throw std::out_of_range("stoll");
  }));
  EXPECT_EQ(ThreadErrors("test_counts"), 1u);
  EXPECT_NE(log.Text().find("thread test_counts: uncaught exception while working on pod ml/llama (uid u-1): stoll"),
            std::string::npos)
      << log.Text();
  EXPECT_FALSE(GuardedStep("test_counts", [] { throw 42; }));
  EXPECT_EQ(ThreadErrors("test_counts"), 2u);
  EXPECT_NE(log.Text().find("not a std::exception"), std::string::npos) << log.Text();
}

TEST(ThreadGuard, WorkingOnIsRestoredAfterAScopeAndAfterACaughtException) {
  WorkingOn outer("reconcile pass");
  {
    WorkingOn inner("pod a/b");
    EXPECT_EQ(CurrentWork(), "pod a/b");
  }
  EXPECT_EQ(CurrentWork(), "reconcile pass");
  EXPECT_FALSE(GuardedStep("test_restore", [] {
    WorkingOn inner("node n1");
    throw std::runtime_error("boom");
  }));
  EXPECT_EQ(CurrentWork(), "reconcile pass");
}

TEST(ThreadGuard, ExportsOneSeriesPerKnownThreadFromTheStart) {
  Registry r;
  ExportThreadErrors(&r);
  EXPECT_FALSE(GuardedStep("test_exported", [] { throw std::runtime_error("x"); }));
  const std::string text = r.Render();
  EXPECT_NE(text.find("# TYPE vramd_thread_errors_total counter"), std::string::npos) << text;
  for (const char* t : kKnownThreads) {
    EXPECT_NE(text.find(std::string("vramd_thread_errors_total{thread=\"") + t + "\"} "), std::string::npos) << t;
  }
  EXPECT_NE(text.find("vramd_thread_errors_total{thread=\"test_exported\"} 1\n"), std::string::npos) << text;
}

TEST(ThreadGuard, ALoopSurvivesExceptionsAndGoesOn) {
  // The shape every vramd loop has: guard the body, pause after a failure.
  std::atomic<int> iterations{0};
  std::jthread loop([&](std::stop_token st) {
    while (!st.stop_requested()) {
      if (!GuardedStep("test_loop", [&] {
            WorkingOn ctx("iteration " + std::to_string(iterations.load()));
            if (++iterations <= 3) throw std::runtime_error("transient");
          })) {
        PauseAfterError(st, std::chrono::milliseconds(1));
      }
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (iterations.load() < 10 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  loop.request_stop();
  loop.join();
  EXPECT_GE(iterations.load(), 10);
  EXPECT_EQ(ThreadErrors("test_loop"), 3u);
}

TEST(ThreadGuard, PauseEndsAtOnceWhenStopped) {
  std::stop_source src;
  src.request_stop();
  const auto t0 = std::chrono::steady_clock::now();
  PauseAfterError(src.get_token(), std::chrono::seconds(30));
  std::atomic<bool> flag{true};
  PauseAfterError(flag, std::chrono::seconds(30));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
}  // namespace vramd::metrics
