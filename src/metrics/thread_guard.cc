#include "vramd/metrics/thread_guard.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <map>
#include <thread>
#include <utility>

#include "vramd/mutex.h"

namespace vramd::metrics {
namespace {

thread_local std::string current_work;

// Process-wide counts by thread name.
struct Counts {
  Mutex mu;
  std::map<std::string, uint64_t, std::less<>> by_thread GUARDED_BY(mu);
};

Counts& TheCounts() {
  static Counts* counts = [] {
    auto* c = new Counts;  // never destroyed: threads may fail during static destruction
    MutexLock lock(&c->mu);
    for (const char* t : kKnownThreads) c->by_thread[t] = 0;
    return c;
  }();
  return *counts;
}

void Count(const char* thread) {
  Counts& c = TheCounts();
  MutexLock lock(&c.mu);
  ++c.by_thread[thread];
}

}  // namespace

void ExportThreadErrors(Registry* registry) {
  registry->AddCollector([](TextWriter& w) {
    std::map<std::string, uint64_t, std::less<>> snapshot;
    {
      Counts& c = TheCounts();
      MutexLock lock(&c.mu);
      snapshot = c.by_thread;
    }
    w.Header("vramd_thread_errors_total",
             "Exceptions that escaped a background thread's step (logged with what it was working on); the "
             "thread went on.",
             "counter");
    for (const auto& [thread, n] : snapshot) w.Sample("vramd_thread_errors_total", {{"thread", thread}}, n);
  });
}

bool GuardedStep(const char* thread, const std::function<void()>& step) {
  const std::string saved = current_work;
  auto report = [&](const char* what) {
    Count(thread);
    spdlog::error("thread {}: uncaught exception while working on {}: {}", thread,
                  current_work.empty() ? std::string("(nothing recorded)") : current_work, what);
    current_work = saved;
  };
  try {
    step();
    return true;
  } catch (const std::exception& e) {
    report(e.what());
  } catch (...) {
    report("an exception that is not a std::exception");
  }
  return false;
}

uint64_t ThreadErrors(std::string_view thread) {
  Counts& c = TheCounts();
  MutexLock lock(&c.mu);
  auto it = c.by_thread.find(thread);
  return it == c.by_thread.end() ? 0 : it->second;
}

void PauseAfterError(std::stop_token st, std::chrono::milliseconds pause) {
  Mutex m;
  CondVar cv;
  MutexLock lock(&m);
  cv.WaitFor(&lock, st, pause);
}

void PauseAfterError(const std::atomic<bool>& stop, std::chrono::milliseconds pause) {
  const auto until = std::chrono::steady_clock::now() + pause;
  while (!stop.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(20), until - std::chrono::steady_clock::now()));
  }
}

WorkingOn::WorkingOn(std::string what)
    : previous_(std::exchange(current_work, std::move(what))), uncaught_(std::uncaught_exceptions()) {}

WorkingOn::~WorkingOn() {
  if (std::uncaught_exceptions() > uncaught_) return;  // unwinding: GuardedStep reports it, then restores
  current_work = std::move(previous_);
}

const std::string& CurrentWork() { return current_work; }

}  // namespace vramd::metrics
