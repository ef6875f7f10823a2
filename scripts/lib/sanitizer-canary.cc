// Canaries for scripts/sanitize.sh: `sanitizer-canary BUG` commits one
// deliberate bug that the sanitizers of its build must report. Built with the
// flags of the tree under test and run with the options its tests get, so a
// tier that reports nothing has proven its reports would be seen.
//   heap-overflow    AddressSanitizer
//   signed-overflow  UndefinedBehaviorSanitizer (signed-integer-overflow)
//   misaligned       UndefinedBehaviorSanitizer (alignment)
//   leak             LeakSanitizer
//   race             ThreadSanitizer
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

int canary_shared = 0;  // external linkage: the race below is not folded away

namespace {

void* volatile leaked = nullptr;

__attribute__((noinline)) void Leak() {
  leaked = std::malloc(4096);
  leaked = nullptr;  // the only pointer to the block is gone
}

}  // namespace

int main(int argc, char** argv) {
  const char* bug = argc > 1 ? argv[1] : "";
  if (std::strcmp(bug, "heap-overflow") == 0) {
    int* p = static_cast<int*>(std::malloc(4 * sizeof(int)));
    const int v = p[argc + 2];  // argc is 2: p[4], one past the end
    std::free(p);
    return v == 42 ? 0 : 1;
  }
  if (std::strcmp(bug, "signed-overflow") == 0) {
    int x = INT_MAX - 1;
    x += argc;  // INT_MAX + 1
    return x == 0 ? 0 : 1;
  }
  if (std::strcmp(bug, "misaligned") == 0) {
    alignas(8) char buf[16] = {};
    const int* p = reinterpret_cast<const int*>(buf + argc - 1);  // buf + 1
    return *p;
  }
  if (std::strcmp(bug, "leak") == 0) {
    Leak();
    return 0;
  }
  if (std::strcmp(bug, "race") == 0) {
    std::thread t([] { canary_shared = 1; });
    canary_shared = 2;  // unsynchronised with the thread's write
    t.join();
    return canary_shared == 3 ? 0 : 1;
  }
  return 2;  // unknown bug: no report, and the caller's check fails
}
