#!/usr/bin/env bash
# One command: install what is missing, build, and run every test tier:
#   unit         pure logic and adapters with fakes (GoogleTest)
#   integration  against a real Valkey-compatible server started here (redis-server)
#   e2e          against a real kube-apiserver + kube-scheduler (built once from
#                Debian's kubernetes source package and cached) and redis-server
#   deploy       Helm chart (helm lint/template, policy checks, promtool), the
#                rendered scheduler config against the real kube-scheduler, image libs
# Options: TIERS="unit integration" scripts/test.sh   (default: all tiers)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
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

echo
echo "== tests per tier =="
for tier in $TIERS; do
  n=$(ctest --test-dir build -N -L "^$tier\$" | sed -n 's/^Total Tests: //p')
  echo "$tier: ${n:-0} tests"
done
echo "test.sh: took $(( $(date +%s) - start )) s"
exit $status
