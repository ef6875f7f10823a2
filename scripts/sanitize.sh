#!/usr/bin/env bash
# The unit and integration tiers under sanitizers, with zero reports allowed:
#   asan  AddressSanitizer (+ LeakSanitizer) and UndefinedBehaviorSanitizer:
#         every unit and integration test (build-asan/)
#   tsan  ThreadSanitizer: the concurrency tests (build-tsan/): racing
#         reservations and snapshots, lock contention and the lock API, the
#         vramctl lock CLI, the Kubernetes client's connection pool, the Valkey
#         client's pool and Sentinel failover, and the HTTP server under bad clients
# The integration tests spawn vramd and vramctl from the same sanitized build,
# so the daemon runs under the sanitizer too. Every process writes its reports
# to files (log_path); the run fails on any report and on any failed test.
#   scripts/sanitize.sh                      both
#   SANITIZERS=tsan scripts/sanitize.sh      one of them
#   TSAN_FILTER='*Concurrent*' scripts/sanitize.sh   another gtest filter for tsan
# Needs a Valkey-compatible server at VRAMD_TEST_VALKEY_URL (scripts/test.sh
# exports it); when unset, a redis-server is started on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
SANITIZERS=${SANITIZERS:-"asan tsan"}
TSAN_FILTER=${TSAN_FILTER:-"*Concurrent*:GpuLock*:LockRoutesTest.*:LockCliTest.*:BadInput.*:RestClientTest.*:SentinelFailoverTest.*:ValkeyStoreTest.A*Connection*:ValkeyClientTest.*"}
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
  if [[ ! -f "$dir/CMakeCache.txt" ]]; then
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAMD_SANITIZE="$san" \
      -DVRAMD_BUILD_BENCH=OFF -DVRAMD_BUILD_TESTS=ON >/dev/null
  fi
  if ! cmake --build "$dir" -j"$(nproc)" --target unit_tests integration_tests vramd vramctl >"$dir/sanitize-build.log" 2>&1; then
    grep -v -e '^\[' -e '^gmake' -e '^-- ' "$dir/sanitize-build.log" | tail -60
    echo "sanitize.sh: building $dir failed (log: $dir/sanitize-build.log)"
    return 1
  fi
  for b in unit_tests integration_tests vramd vramctl; do
    [[ -x "$dir/bin/$b" ]] || { echo "sanitize.sh: $dir/bin/$b did not build"; return 1; }
  done
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
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?.*/\1/p' "$log" | tail -1)
  if ((rc != 0 || n != 0)); then
    status=1
    echo "== $name FAILED (exit $rc, $n sanitizer report(s))"
    if grep -q 'Failure$' "$log"; then
      grep -A12 'Failure$' "$log" | head -80
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

for s in $SANITIZERS; do
  case $s in
    asan)
      t0=$(date +%s)
      build build-asan address,undefined
      echo "sanitize.sh: build-asan built in $(( $(date +%s) - t0 )) s"
      for tier in unit integration; do
        r="$work/reports-asan.$tier"
        mkdir -p "$r"
        run "asan.$tier" "$r" env ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:log_path=$r/asan" \
          UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$r/ubsan" LSAN_OPTIONS="log_path=$r/lsan" \
          "build-asan/bin/${tier}_tests"
      done
      ;;
    tsan)
      t0=$(date +%s)
      build build-tsan thread
      echo "sanitize.sh: build-tsan built in $(( $(date +%s) - t0 )) s"
      for tier in unit integration; do
        r="$work/reports-tsan.$tier"
        mkdir -p "$r"
        run "tsan.$tier" "$r" env TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$r/tsan" \
          "build-tsan/bin/${tier}_tests" --gtest_filter="$TSAN_FILTER"
      done
      ;;
    *) echo "sanitize.sh: unknown sanitizer $s (asan, tsan)"; exit 2 ;;
  esac
done

echo
echo "== sanitizers =="
printf '%s\n' "${summary[@]}"
echo "sanitize.sh: took $(( $(date +%s) - start )) s"
exit $status
