// The environment an integration test gives the vramd or vramctl it starts:
// never the caller's whole environment (a developer's VRAMD_POLICY or
// VRAMD_RESERVE_PERCENT would silently change what is tested), only what a
// process needs to run and to report (PATH, HOME, LANG, LC_*, TMPDIR, the
// sanitizers' *_OPTIONS as scripts/sanitize.sh sets them, LLVM_PROFILE_FILE),
// then what the test sets explicitly. Keep the list in sync with
// tests/e2e/testbed.py and tests/system/harness.py (INHERITED_ENV).
#pragma once

#include <unistd.h>  // declares environ (extern "C") before we name it

#include <map>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace vramd::itest {

inline bool InheritedVariable(std::string_view name) {
  static constexpr std::string_view kInherited[] = {"PATH",          "HOME",          "LANG",
                                                   "TMPDIR",        "ASAN_OPTIONS",  "TSAN_OPTIONS",
                                                   "UBSAN_OPTIONS", "LSAN_OPTIONS",  "LLVM_PROFILE_FILE"};
  for (std::string_view k : kInherited) {
    if (name == k) return true;
  }
  return name.starts_with("LC_");
}

// An environment block for posix_spawn/execve: the inherited variables of
// `from` (a NULL-terminated "NAME=value" array, default: ours), then `set`
// (which wins). Owns its strings; envp() stays valid while the object lives.
class CleanEnv {
 public:
  explicit CleanEnv(const std::map<std::string, std::string>& set = {}, char** from = environ) {
    std::map<std::string, std::string> vars;
    for (char** e = from; e != nullptr && *e != nullptr; ++e) {
      std::string_view kv(*e);
      const size_t eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      std::string name(kv.substr(0, eq));
      if (InheritedVariable(name)) vars[name] = std::string(kv.substr(eq + 1));
    }
    for (const auto& [k, v] : set) vars[k] = v;
    for (const auto& [k, v] : vars) entries_.push_back(k + "=" + v);
    for (std::string& s : entries_) ptrs_.push_back(s.data());
    ptrs_.push_back(nullptr);
  }
  CleanEnv(const CleanEnv&) = delete;
  CleanEnv& operator=(const CleanEnv&) = delete;

  char** envp() { return ptrs_.data(); }
  const std::vector<std::string>& entries() const { return entries_; }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> ptrs_;
};

}  // namespace vramd::itest
