// Must NOT compile under the sanitizer trees' flags (scripts/sanitize.sh,
// thread_safety_canary): a field guarded by a vramd::Mutex written without
// holding it. If it compiles, clang's thread-safety analysis is not checking
// vramd's annotations and a clean sanitizer build proves nothing about them.
#include "vramd/mutex.h"

class Counter {
 public:
  void Good() {
    vramd::MutexLock l(&mu_);
    ++n_;
  }
  void Bad() { ++n_; }  // the deliberate bug

 private:
  vramd::Mutex mu_;
  int n_ GUARDED_BY(mu_) = 0;
};

int main() {
  Counter c;
  c.Good();
  c.Bad();
}
