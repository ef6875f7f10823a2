#!/usr/bin/env bash
# Every benchmark of docs/performance.md, one after the other (about 15 min on
# 2 cores). Builds what is missing first. Never run by the test command.
#
#   scripts/bench.sh                  # all
#   PARTS="micro scale" scripts/bench.sh
#
# Parts: micro (Google Benchmark), http (scripts/bench-http.sh: wrk against
# vramd and the baselines, plus store_bench), scale (scale_bench against a
# throwaway redis-server), sched (bench/sched_throughput.py on the e2e testbed:
# needs tests/e2e/testbed/build-k8s.sh to have run once).
# Results go to OUT (default a new /tmp/vramd-bench.XXXX).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
PARTS=${PARTS:-"micro http scale sched"}
OUT=${OUT:-$(mktemp -d /tmp/vramd-bench.XXXXXX)}
mkdir -p "$OUT"

cmake -S . -B "$BUILD_DIR" -DVRAMD_BUILD_BENCH=ON -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
kernels=""
[[ "$(uname -m)" == x86_64 ]] && kernels="simdjson_kernels_fallback simdjson_kernels_westmere simdjson_kernels_haswell"
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j"$(nproc)" --target vramd micro_bench baseline_server store_bench scale_bench $kernels

echo "machine: $(nproc) x $(lscpu | sed -n 's/^Model name: *//p'); load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/machine.txt"

for part in $PARTS; do
  echo "== $part (load $(cut -d' ' -f1-3 /proc/loadavg))"
  case $part in
    micro)
      "$BUILD_DIR/bin/micro_bench" --benchmark_min_time=0.3 --benchmark_repetitions=3 \
        --benchmark_report_aggregates_only=true --benchmark_out="$OUT/micro.json" --benchmark_out_format=json
      for k in $kernels; do "$BUILD_DIR/bin/$k"; done | tee "$OUT/simdjson-kernels.txt"
      ;;
    http)
      BUILD_DIR=$BUILD_DIR OUT="$OUT/http" scripts/bench-http.sh
      ;;
    scale)
      work=$(mktemp -d /tmp/vramd-scale.XXXXXX)
      port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
      redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes \
        --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work"
      for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
      "$BUILD_DIR/bin/scale_bench" --valkey "redis://127.0.0.1:$port" --reloads 10 | tee "$OUT/scale.txt" || true
      kill "$(cat "$work/redis.pid")" 2>/dev/null || true
      rm -rf "$work"
      ;;
    sched)
      VRAMD_BIN_DIR="$PWD/$BUILD_DIR/bin" python3 bench/sched_throughput.py --echo-extender \
        --json "$OUT/sched-default.json" | tee "$OUT/sched-default.txt"
      VRAMD_BIN_DIR="$PWD/$BUILD_DIR/bin" python3 bench/sched_throughput.py --scheduler-qps 1000 --rounds 3 \
        --echo-extender --json "$OUT/sched-qps1000.json" | tee "$OUT/sched-qps1000.txt"
      ;;
    *) echo "bench.sh: unknown part $part" >&2; exit 2 ;;
  esac
done
echo "results: $OUT"
