#!/usr/bin/env bash
# One command: install what is missing, build, start a Valkey-compatible
# server on loopback and run vramd standalone on the capacity model's three
# homelab nodes (deploy/demo/config.json). Ctrl-C stops both.
# Builds only what the demo runs (the vramd and vramctl targets): the tests
# and benchmarks are scripts/test.sh's business. The configure options stay
# as they are (VRAMD_BUILD_TESTS=OFF would stick in build/'s cache, which
# scripts/test.sh shares). Prints how long it took to get vramd started.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
scripts/install-deps.sh
BUILD_TARGETS="vramd vramctl" scripts/build.sh

state=${VRAMD_CACHE:-$HOME/.cache/vramd}/demo
mkdir -p "$state"
port=6399
if ! redis-cli -p $port ping >/dev/null 2>&1; then
  redis-server --bind 127.0.0.1 --port $port --dir "$state" --appendonly yes --save '' \
    --daemonize yes --pidfile "$state/redis.pid" --logfile "$state/redis.log"
  for _ in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
fi
echo "Valkey-compatible server on 127.0.0.1:$port (data in $state)"
cat <<'TXT'

vramd is starting on http://127.0.0.1:8080 with three nodes: ness-linux3 (96Gi),
ness-server2 (8Gi), ness-legion1 (8Gi). In another terminal, try:

  build/bin/vramctl nodes                                   # the ledger and the six metrics
  curl -s -XPOST localhost:8080/scheduler/filter -d @tests/data/extender/filter-multicontainer-initcontainer.json
  curl -s -XPOST localhost:8080/scheduler/bind -d '{"PodName":"hermes-beast","PodNamespace":"default","PodUID":"fa0e8038-ccff-4777-944f-8e5ce19b3dd9","Node":"ness-linux3"}'
  build/bin/vramctl pods                                    # hermes-beast now holds 32Gi on ness-linux3
  curl -s -XPUT localhost:8080/v1/nodes/ness-linux3/usage -d '{"gpus":{"0":"40Gi"}}'
  build/bin/vramctl nodes ness-linux3                       # usage above allocation: potential < 0
  curl -s localhost:8080/metrics | grep '^vramd_gpu_'

Ctrl-C stops vramd (the Valkey server keeps running: redis-cli -p 6399 shutdown).
TXT
printf 'demo.sh: vramd starting after %dm %02ds (installs and build included)\n\n' $((SECONDS / 60)) $((SECONDS % 60))
exec build/bin/vramd --config deploy/demo/config.json
