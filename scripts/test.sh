#!/usr/bin/env bash
# One command: install what is missing, build, and run every test tier:
#   unit         pure logic and adapters with fakes (GoogleTest)
#   integration  against a real Valkey-compatible server started here (redis-server)
#   e2e          against a real kube-apiserver + kube-scheduler (built once from
#                Debian's kubernetes source package and cached) and redis-server
#   deploy       Helm chart (helm lint/template, policy checks, promtool), the
#                rendered scheduler config against the real kube-scheduler, image libs
#   sanitize     unit and integration tiers under ASan+UBSan, the concurrency tests
#                under TSan, zero reports (scripts/sanitize.sh; build-asan, build-tsan)
#   fuzz         a short libFuzzer run of every fuzz target (scripts/fuzz.sh; build-fuzz)
# Options: TIERS="unit integration" scripts/test.sh   (default: all tiers)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# sanitize and fuzz build three more trees (ASan+UBSan, TSan, clang/libFuzzer): opt in with
#   TIERS="unit integration e2e deploy sanitize fuzz" scripts/test.sh
TIERS=${TIERS:-"unit integration e2e deploy"}

scripts/install-deps.sh --test
scripts/build.sh

if [[ " $TIERS " == *" e2e "* || " $TIERS " == *" deploy "* ]]; then
  tests/e2e/testbed/build-k8s.sh
fi

# A throwaway Valkey-compatible server on loopback for the integration tier.
work=$(mktemp -d /tmp/vramd-test.XXXXXX)
cleanup() {
  if [[ -f "$work/redis.pid" ]]; then kill "$(cat "$work/redis.pid")" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes \
  --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work"
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" ping >/dev/null || { echo "test.sh: redis-server did not start"; cat "$work/redis.log"; exit 1; }
export VRAMD_TEST_VALKEY_URL="redis://127.0.0.1:$port"

labels=$(echo "$TIERS" | tr ' ' '|')
status=0
ctest --test-dir build -L "^($labels)\$" --output-on-failure -j2 --timeout 900 \
  --output-junit "$work/junit.xml" | tee "$work/ctest.log" || status=$?

# Tiers that are scripts of their own (their own build directories).
sanitize_result="not run"
fuzz_result="not run"
if [[ " $TIERS " == *" sanitize "* ]]; then
  echo
  if scripts/sanitize.sh 2>&1 | tee "$work/sanitize.log"; then sanitize_result=ok; else sanitize_result=FAILED; status=1; fi
fi
if [[ " $TIERS " == *" fuzz "* ]]; then
  echo
  if scripts/fuzz.sh 2>&1 | tee "$work/fuzz.log"; then fuzz_result=ok; else fuzz_result=FAILED; status=1; fi
fi

echo
echo "== tests per tier =="
for tier in $TIERS; do
  case $tier in
    sanitize) echo "sanitize: $sanitize_result ($(grep -c ' ok$' "$work/sanitize.log" || true) runs clean, $(grep -c ' FAILED$' "$work/sanitize.log" || true) failed)" ;;
    fuzz) echo "fuzz: $fuzz_result ($(grep -c ' ok$' "$work/fuzz.log" || true) targets clean, $(grep -c ' FAILED$' "$work/fuzz.log" || true) failed)" ;;
    *)
      n=$(ctest --test-dir build -N -L "^$tier\$" | sed -n 's/^Total Tests: //p')
      echo "$tier: ${n:-0} tests"
      ;;
  esac
done
grep -E '^[0-9]+% tests passed' "$work/ctest.log" | tail -1 | sed 's/^/ctest: /' || true
echo "test.sh: took $(( $(date +%s) - start )) s"
exit $status
