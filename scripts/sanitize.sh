#!/usr/bin/env bash
# The unit and integration tiers under sanitizers, with zero reports allowed:
#   asan  AddressSanitizer (+ LeakSanitizer) and UndefinedBehaviorSanitizer
#         (build-asan/, clang; the same tree holds the fuzz targets)
#   tsan  ThreadSanitizer (build-tsan/, clang)
# Each runs every unit test, every integration test and the system tests
# (tests/system: the real vramd binary against redis-server). The
# integration and system tests spawn vramd and vramctl from the same
# sanitized build, so the daemon runs under the sanitizer too. Every process
# writes its reports to files (log_path); the run fails on any report and
# on any failed test. Before the tests, a canary (a deliberate heap overflow
# and a deliberate data race, built with the same flags) must produce a
# report, so a sanitizer that silently reports nothing fails the tier.
#   scripts/sanitize.sh                      both
#   SANITIZERS=tsan scripts/sanitize.sh      one of them
#   GTEST_FILTER='*Concurrent*' scripts/sanitize.sh   a subset of the GoogleTest cases
# Needs a Valkey-compatible server at VRAMD_TEST_VALKEY_URL (scripts/test.sh
# exports it); when unset, a redis-server is started on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
SANITIZERS=${SANITIZERS:-"asan tsan"}
GTEST_FILTER=${GTEST_FILTER:-"*"}
# shellcheck source=scripts/lib/sanitized-tree.sh
source scripts/lib/sanitized-tree.sh
TEST_TIMEOUT=${SANITIZE_TEST_TIMEOUT:-1200}

work=$(mktemp -d /tmp/vramd-sanitize.XXXXXX)
cleanup() {
  if [[ -f "$work/redis.pid" ]]; then
    pid=$(cat "$work/redis.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT
if [[ -z "${VRAMD_TEST_VALKEY_URL:-}" ]]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes \
    --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work"
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" ping >/dev/null || { echo "sanitize.sh: redis-server did not start"; cat "$work/redis.log"; exit 1; }
  export VRAMD_TEST_VALKEY_URL="redis://127.0.0.1:$port"
fi

# build DIR SANITIZE: configure once (cached), build only the tiers' binaries.
build() {
  local dir=$1 san=$2
  configure_sanitized "$dir" "$san"
  if ! cmake --build "$dir" -j"$(nproc)" --target unit_tests integration_tests vramd vramctl >"$dir/sanitize-build.log" 2>&1; then
    grep -v -e '^\[' -e '^gmake' -e '^-- ' "$dir/sanitize-build.log" | tail -60
    echo "sanitize.sh: building $dir failed (log: $dir/sanitize-build.log)"
    return 1
  fi
  for b in unit_tests integration_tests vramd vramctl; do
    [[ -x "$dir/bin/$b" ]] || { echo "sanitize.sh: $dir/bin/$b did not build"; return 1; }
  done
}

# canary SANITIZE OPTIONS_VAR: a program with the bug this sanitizer exists
# for, built with the tree's flags, must leave a report where the tests'
# reports are looked for; otherwise "0 reports" would prove nothing.
canary() {
  local san=$1 var=$2 dir="$work/canary-$1"
  mkdir -p "$dir"
  cat >"$dir/canary.cc" <<'CANARY'
#include <cstdlib>
#include <thread>
int shared = 0;
int main(int argc, char**) {
  int* p = static_cast<int*>(std::malloc(4 * sizeof(int)));
  std::thread t([] { shared = 1; });  // races with the write below (TSan)
  shared = 2;
  t.join();
  int v = p[argc + 3];  // reads one past the end (ASan)
  std::free(p);
  return v == 42 ? 0 : shared;
}
CANARY
  clang++ -std=c++20 -O1 -g -fsanitize="$san" -fno-omit-frame-pointer "$dir/canary.cc" -o "$dir/canary" -lpthread
  env "$var=halt_on_error=1:log_path=$dir/report" "$dir/canary" >/dev/null 2>&1 || true
  if ! grep -qs -E "ERROR: (AddressSanitizer|ThreadSanitizer)|WARNING: ThreadSanitizer" "$dir"/report*; then
    echo "sanitize.sh: the $san canary left no report in $dir: the sanitizer runtime is not reporting"
    return 1
  fi
  echo "sanitize.sh: $san canary reported its bug ($(grep -ohs -E '(AddressSanitizer|ThreadSanitizer): [a-z-]+( race)?' "$dir"/report* | head -1))"
}

# run NAME REPORT_DIR BINARY [gtest args]: the tests must pass and no process
# (the test binary, or a vramd/vramctl it started) may leave a report.
status=0
summary=()
run() {
  local name=$1 reports=$2
  shift 2
  local t0 rc=0 log="$work/$name.log"
  t0=$(date +%s)
  timeout "$TEST_TIMEOUT" "$@" >"$log" 2>&1 || rc=$?
  local n
  n=$(find "$reports" -type f | wc -l)
  local passed
  passed=$(sed -n -e 's/^\[  PASSED  \] \([0-9]*\) tests\?.*/\1/p' -e 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -1)
  if ((rc != 0 || n != 0)); then
    status=1
    echo "== $name FAILED (exit $rc, $n sanitizer report(s))"
    if grep -q -E 'Failure$|^(FAIL|ERROR): ' "$log"; then
      grep -A12 -E 'Failure$|^(FAIL|ERROR): ' "$log" | head -80
    elif ((rc != 0 && n == 0)); then
      tail -30 "$log"  # no test failed: a crash, a hang (exit 124) or a bad exit
    fi
    grep -E '^\[  FAILED  \]' "$log" | sort -u | head -20 || true
    for f in $(find "$reports" -type f | head -5); do
      echo "--- $f"
      head -60 "$f"
    done
    summary+=("$(printf '%-18s %6s tests  %4ss  exit %s, %s report(s)  FAILED' "$name" "${passed:-?}" \
      "$(( $(date +%s) - t0 ))" "$rc" "$n")")
  else
    summary+=("$(printf '%-18s %6s tests  %4ss  0 reports  ok' "$name" "${passed:-?}" "$(( $(date +%s) - t0 ))")")
  fi
}

# tiers SAN DIR OPTIONS...: unit, integration and system tests of DIR, each
# with its own report directory.
tiers() {
  local san=$1 dir=$2
  shift 2
  local tier r opts
  for tier in unit integration system; do
    r="$work/reports-$san.$tier"
    mkdir -p "$r"
    opts=()
    for o in "$@"; do opts+=("${o//@R@/$r}"); done
    case $tier in
      system)
        run "$san.$tier" "$r" env "${opts[@]}" VRAMD_BIN_DIR="$PWD/$dir/bin" PYTHONUNBUFFERED=1 \
          bash -c 'cd tests/system && python3 -m unittest discover -p "*_test.py" -v' ;;
      *) run "$san.$tier" "$r" env "${opts[@]}" "$dir/bin/${tier}_tests" --gtest_filter="$GTEST_FILTER" ;;
    esac
  done
}

for s in $SANITIZERS; do
  t0=$(date +%s)
  case $s in
    asan)
      build build-asan address,undefined
      echo "sanitize.sh: build-asan built in $(( $(date +%s) - t0 )) s"
      canary address ASAN_OPTIONS || status=1
      tiers asan build-asan "ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:log_path=@R@/asan" \
        "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=@R@/ubsan" "LSAN_OPTIONS=log_path=@R@/lsan"
      ;;
    tsan)
      build build-tsan thread
      echo "sanitize.sh: build-tsan built in $(( $(date +%s) - t0 )) s"
      canary thread TSAN_OPTIONS || status=1
      tiers tsan build-tsan "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:log_path=@R@/tsan"
      ;;
    *) echo "sanitize.sh: unknown sanitizer $s (asan, tsan)"; exit 2 ;;
  esac
done

echo
echo "== sanitizers =="
printf '%s\n' "${summary[@]}"
echo "sanitize.sh: took $(( $(date +%s) - start )) s"
exit $status
