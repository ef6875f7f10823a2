// A mutex that clang's thread-safety analysis understands, and the
// annotations that use it (leveldb's port::Mutex and Abseil's Mutex are the
// models). libstdc++'s std::mutex carries no capability attribute, so
// GUARDED_BY(a std::mutex) would not be checked; vramd::Mutex is std::mutex
// with the attributes. The sanitizer trees build with clang's
// -Wthread-safety -Werror=thread-safety (CMakeLists.txt), so a guarded field
// read or written without its mutex fails that build; g++ ignores the
// attributes.
//
//   class Cache {
//     Mutex mu_;
//     int hits_ GUARDED_BY(mu_) = 0;
//     void Bump() EXCLUSIVE_LOCKS_REQUIRED(mu_) { ++hits_; }
//    public:
//     void Hit() { MutexLock l(&mu_); Bump(); }
//   };
//
// Condition variables: CondVar waits on a MutexLock. The analysis does not
// follow lambdas, so wait in a loop on the guarded condition instead of
// passing a predicate that reads guarded fields.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>

#if defined(__clang__)
#define VRAMD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define VRAMD_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) VRAMD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY VRAMD_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) VRAMD_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) VRAMD_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) VRAMD_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) VRAMD_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define EXCLUSIVE_LOCKS_REQUIRED(...) VRAMD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define LOCKS_EXCLUDED(...) VRAMD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define EXCLUSIVE_LOCK_FUNCTION(...) VRAMD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define UNLOCK_FUNCTION(...) VRAMD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUSIVE_TRYLOCK_FUNCTION(...) VRAMD_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ASSERT_EXCLUSIVE_LOCK(...) VRAMD_THREAD_ANNOTATION(assert_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS VRAMD_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace vramd {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() UNLOCK_FUNCTION() { mu_.unlock(); }
  bool TryLock() EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds the mutex (no run-time check).
  void AssertHeld() const ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu->mu_) {}
  ~MutexLock() UNLOCK_FUNCTION() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// A condition variable used with MutexLock. Every wait may wake spuriously:
// callers loop on their condition. The mutex is held again on return.
class CondVar {
 public:
  void Wait(MutexLock* l) { cv_.wait(l->lock_); }
  // False when the time ran out.
  template <class Rep, class Period>
  bool WaitFor(MutexLock* l, std::chrono::duration<Rep, Period> d) {
    return cv_.wait_for(l->lock_, d) == std::cv_status::no_timeout;
  }
  template <class Clock, class Duration>
  bool WaitUntil(MutexLock* l, std::chrono::time_point<Clock, Duration> t) {
    return cv_.wait_until(l->lock_, t) == std::cv_status::no_timeout;
  }
  // Returns at `d`, at a notify, or as soon as `st` asks to stop.
  template <class Rep, class Period>
  void WaitFor(MutexLock* l, std::stop_token st, std::chrono::duration<Rep, Period> d) {
    cv_.wait_for(l->lock_, st, d, [] { return false; });
  }
  // Predicate forms: return pred() (false when the time ran out or a stop
  // was asked for with pred() still false). A predicate that reads guarded
  // fields says so: [this]() EXCLUSIVE_LOCKS_REQUIRED(mu_) { return poked_; }.
  template <class Rep, class Period, class Pred>
  bool WaitFor(MutexLock* l, std::chrono::duration<Rep, Period> d, Pred pred) {
    return cv_.wait_for(l->lock_, d, std::move(pred));
  }
  template <class Rep, class Period, class Pred>
  bool WaitFor(MutexLock* l, std::stop_token st, std::chrono::duration<Rep, Period> d, Pred pred) {
    return cv_.wait_for(l->lock_, st, d, std::move(pred));
  }
  // Returns at `t`, at a notify, or as soon as `st` asks to stop.
  template <class Clock, class Duration>
  void WaitUntil(MutexLock* l, std::stop_token st, std::chrono::time_point<Clock, Duration> t) {
    cv_.wait_until(l->lock_, st, t, [] { return false; });
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;  // _any: it can wait on a stop token
};

}  // namespace vramd
