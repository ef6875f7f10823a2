// The last line of defence of vramd's long-lived threads (reconcile, node
// sync, the pod, node and queue watches, leader election, the ledger's epoch watch,
// the HTTP listener and TLS watch): each loop runs every iteration's body in
// GuardedStep, which catches whatever escapes it, logs it with the object the
// thread was working on, counts it in vramd_thread_errors_total{thread} and
// returns, so the loop goes on (after PauseAfterError, so that a permanent
// failure does not spin). Bad input must still be handled where it is read;
// this only keeps one missed case from aborting the process (an exception
// that leaves a std::thread calls std::terminate) and every replica after it.
//
// What a thread is working on is a thread_local description set by WorkingOn
// (RAII, nestable): "pod ml/llama (uid ...)", "plan over 1200 pods". It costs
// one string copy per scope, so set it per object or per pass, not per byte.
//
// Thread-safe. The counts are process-wide (one process, one set of threads).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include "vramd/metrics/registry.h"

namespace vramd::metrics {

// The threads' names: the label values of vramd_thread_errors_total.
inline constexpr const char* kThreadReconcile = "reconcile";
inline constexpr const char* kThreadNodeSync = "node_sync";
inline constexpr const char* kThreadPodWatch = "pod_watch";
inline constexpr const char* kThreadNodeWatch = "node_watch";
inline constexpr const char* kThreadQueueWatch = "queue_watch";
inline constexpr const char* kThreadLeader = "leader";
inline constexpr const char* kThreadEpochWatch = "epoch_watch";
inline constexpr const char* kThreadHttpListen = "http_listen";
inline constexpr const char* kThreadTlsWatch = "tls_watch";
inline constexpr const char* kThreadClockSync = "clock_sync";
inline constexpr const char* kKnownThreads[] = {kThreadReconcile,  kThreadNodeSync,   kThreadPodWatch,
                                                kThreadNodeWatch,  kThreadQueueWatch, kThreadLeader,
                                                kThreadEpochWatch, kThreadHttpListen, kThreadTlsWatch,
                                                kThreadClockSync};

// Adds vramd_thread_errors_total{thread} to `registry` (a collector): every
// known thread has a series from the start, at 0; other names appear once
// they failed. Call once per registry.
void ExportThreadErrors(Registry* registry);

// Runs `step`. An exception that escapes it (std::exception or anything
// else) is logged at error level as
//   thread <thread>: uncaught exception while working on <context>: <what>
// counted for `thread`, and swallowed. True when `step` returned normally.
// The working-on context is the same after the call as before it.
bool GuardedStep(const char* thread, const std::function<void()>& step);

// Exceptions GuardedStep caught for `thread` since the process started.
uint64_t ThreadErrors(std::string_view thread);

// The pause after a failed step: `pause`, or less when a stop is requested.
inline constexpr std::chrono::milliseconds kErrorPause{1000};
void PauseAfterError(std::stop_token st, std::chrono::milliseconds pause = kErrorPause);
// The same for threads stopped by a flag (checked every 20 ms).
void PauseAfterError(const std::atomic<bool>& stop, std::chrono::milliseconds pause = kErrorPause);

// Sets this thread's working-on description for the scope; the previous one
// comes back when the scope ends normally. While an exception unwinds the
// scope the description stays, so that GuardedStep reports where it was
// thrown (GuardedStep restores its own afterwards).
class WorkingOn {
 public:
  explicit WorkingOn(std::string what);
  ~WorkingOn();
  WorkingOn(const WorkingOn&) = delete;
  WorkingOn& operator=(const WorkingOn&) = delete;

 private:
  std::string previous_;
  int uncaught_;
};

// This thread's working-on description ("" when none is set).
const std::string& CurrentWork();

}  // namespace vramd::metrics
