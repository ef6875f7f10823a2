#!/usr/bin/env bash
# HTTP load on loopback (issue 6, item 3): vramd (standalone, --no-kube) and
# the two baseline echo servers (simdjson, nlohmann), side by side in one run,
# driven by wrk with the real extender bodies (tests/data/extender) scaled to
# 100, 1,000 and 5,000 node names. Then bind's store work (reserve + release
# in Valkey) with bench/store_bench at a fixed rate from 8 clients.
#
#   scripts/bench-http.sh                      # everything, ~6 minutes
#   NAMES="100 5000" DURATION=10 scripts/bench-http.sh
#
# Environment:
#   BUILD_DIR   where bin/vramd, bin/baseline_server, bin/store_bench are (build)
#   NAMES       node-name counts (default "100 1000 5000")
#   DURATION    seconds per wrk run (default 10); WARMUP seconds before each (2)
#   CONNS       wrk connections (default 4); WRK_THREADS wrk threads (default 1)
#   LEDGER      empty | half-full: half-full writes one 80Gi entry per GPU on
#               every odd node first, so vramd also builds reasons (default half-full)
#   SERVERS     which servers to load (default "vramd simdjson nlohmann")
#   VERBS       default "filter prioritize"
#   STORE_BENCH 1 to run bench/store_bench too (default 1)
#   BIND_NAMES  ledger sizes (nodes) for the standalone filter+bind run with
#               bench/bind_http.py, 8 clients (default "100 5000"; "" skips it)
#   OUT         results directory (default a new /tmp/vramd-bench-http.XXXX)
# Everything listens on 127.0.0.1 on free ports; every process started here is
# stopped on exit, and the Redis server is a throwaway one.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
NAMES=${NAMES:-"100 1000 5000"}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-4}
WRK_THREADS=${WRK_THREADS:-1}
LEDGER=${LEDGER:-half-full}
SERVERS=${SERVERS:-"vramd simdjson nlohmann"}
VERBS=${VERBS:-"filter prioritize"}
STORE_BENCH=${STORE_BENCH:-1}
BIND_NAMES=${BIND_NAMES-"100 5000"}
OUT=${OUT:-$(mktemp -d /tmp/vramd-bench-http.XXXXXX)}
mkdir -p "$OUT"

for b in vramd baseline_server store_bench; do
  [[ -x "$BUILD_DIR/bin/$b" ]] || {
    echo "bench-http.sh: $BUILD_DIR/bin/$b is missing; build with:" >&2
    echo "  cmake -S . -B $BUILD_DIR -DVRAMD_BUILD_BENCH=ON && cmake --build $BUILD_DIR -j2 --target vramd baseline_server store_bench" >&2
    exit 1
  }
done
if ! command -v wrk >/dev/null; then
  echo "bench-http.sh: installing wrk (Debian)" >&2
  apt-get install -y wrk >/dev/null
fi
command -v redis-server >/dev/null || { echo "bench-http.sh: redis-server is missing (apt-get install redis-server)" >&2; exit 1; }

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -f "$OUT/redis.pid" ]]; then kill "$(cat "$OUT/redis.pid")" 2>/dev/null || true; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {  # url, seconds
  for _ in $(seq $(( $2 * 10 ))); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "bench-http.sh: $1 did not answer" >&2
  return 1
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "cpu: $(nproc) x $(lscpu | sed -n 's/^Model name: *//p')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "wrk: -t$WRK_THREADS -c$CONNS -d${DURATION}s (warm-up ${WARMUP}s); ledger: $LEDGER"
} | tee "$OUT/machine.txt"

redis_port=$(free_port)
redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --daemonize yes \
  --pidfile "$OUT/redis.pid" --logfile "$OUT/redis.log" --dir "$OUT"
for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis_url="redis://127.0.0.1:$redis_port"

# Request bodies and configs: the fixtures with NodeNames scaled to N.
python3 - "$ROOT/tests/data/extender" "$OUT" $NAMES <<'EOF'
import json, sys
src, out, counts = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
def name(i): return "gpu-node-%05d" % i
for n in counts:
    names = [name(i) for i in range(n)]
    for verb, fixture in (("filter", "filter-multicontainer-initcontainer.json"),
                          ("prioritize", "prioritize-multicontainer.json")):
        body = json.load(open(f"{src}/{fixture}"))
        body["NodeNames"] = names
        with open(f"{out}/{verb}-{n}.json", "w") as f:
            json.dump(body, f, separators=(",", ":"))
    cfg = {"nodes": [{"name": x, "gpus": ["80Gi"] * 8} for x in names],
           "log": {"level": "warn"}, "node_sync_interval_ms": 600000}
    with open(f"{out}/vramd-{n}.json", "w") as f:
        json.dump(cfg, f)
EOF

# Odd nodes full: one bound 80Gi entry per GPU, in the store's entry format.
fill_half() {  # n
  python3 - "$1" <<'EOF' | redis-cli -p "$redis_port" --pipe >/dev/null
import sys
n = int(sys.argv[1])
def cmd(*a):
    out = [f"*{len(a)}\r\n"]
    for x in a:
        b = str(x)
        out.append(f"${len(b.encode())}\r\n{b}\r\n")
    sys.stdout.write("".join(out))
gi = 1 << 30
for i in range(1, n, 2):
    node = "gpu-node-%05d" % i
    for g in range(8):
        uid = f"fill-{i}-{g}"
        e = ('{"ns":"bench","name":"%s","gpus":[%d],"per_gpu":%d,"peak_per_gpu":%d,"model":"",'
             '"state":"bound","created_ms":1700000000000}') % (uid, g, 80 * gi, 80 * gi)
        cmd("HSET", "vramd:{%s}:alloc" % node, uid, e)
        cmd("HSET", "vramd:pods", uid, node)
cmd("INCR", "vramd:epoch")
EOF
}

results="$OUT/results.jsonl"
: > "$results"
cpu_ticks() {  # utime+stime of the given pids, in clock ticks
  local t=0 p
  for p in "$@"; do t=$(( t + $(awk '{print $14 + $15}' "/proc/$p/stat") )); done
  echo "$t"
}
hz=$(getconf CLK_TCK)
run_wrk() {  # label url path body pid...  (pids: the server and what it calls)
  local label=$1 url=$2 path=$3 body=$4; shift 4
  wrk -t"$WRK_THREADS" -c"$CONNS" -d"${WARMUP}s" -s bench/wrk/post.lua "$url" -- "$path" "$body" >/dev/null
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  local c0; c0=$(cpu_ticks "$@")
  wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency -s bench/wrk/post.lua "$url" -- "$path" "$body" \
    > "$OUT/wrk-$label.txt"
  local c1; c1=$(cpu_ticks "$@")
  local line; line=$(sed -n 's/^RESULT //p' "$OUT/wrk-$label.txt")
  line="{\"label\":\"$label\",\"server_cpu_s\":$(python3 -c "print(($c1 - $c0) / $hz)"),${line#\{}"
  echo "${line%\}},\"load1\":$load}" >> "$results"
  echo "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("  %-24s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  server CPU %6.1f us/req  errors %d non-2xx %d" % (r["label"], r["rps"], r["p50_us"]/1e3, r["p99_us"]/1e3, r["server_cpu_s"] * 1e6 / max(r["requests"], 1), r["errors"], r["non2xx"]))'
}

for n in $NAMES; do
  echo "== $n node names"
  redis-cli -p "$redis_port" flushall >/dev/null
  vport=$(free_port)
  "$BUILD_DIR/bin/vramd" --no-kube --config "$OUT/vramd-$n.json" --listen "127.0.0.1:$vport" \
    --valkey "$redis_url" > "$OUT/vramd-$n.log" 2>&1 &
  vpid=$!; pids+=("$vpid")
  wait_http "http://127.0.0.1:$vport/healthz" 30
  for _ in $(seq 600); do
    [[ "$(redis-cli -p "$redis_port" scard vramd:nodes)" == "$n" ]] && break
    sleep 0.1
  done
  [[ "$LEDGER" == half-full ]] && fill_half "$n"
  declare -A url=([vramd]="http://127.0.0.1:$vport")
  declare -A spids=([vramd]="$vpid $(cat "$OUT/redis.pid")")  # vramd's cost includes its epoch reads
  bpids=()
  for parser in simdjson nlohmann; do
    bport=$(free_port)
    "$BUILD_DIR/bin/baseline_server" --parser "$parser" --listen "127.0.0.1:$bport" > "$OUT/baseline-$parser-$n.log" 2>&1 &
    bpid=$!; bpids+=("$bpid"); pids+=("$bpid")
    url[$parser]="http://127.0.0.1:$bport"
    spids[$parser]=$bpid
    wait_http "http://127.0.0.1:$bport/healthz" 10
  done
  for verb in $VERBS; do
    for server in $SERVERS; do
      # shellcheck disable=SC2086
      run_wrk "$server-$verb-$n" "${url[$server]}" "/scheduler/$verb" "$OUT/$verb-$n.json" ${spids[$server]}
    done
  done
  # Resident memory of each server after its runs.
  for s in vramd; do echo "  vramd RSS after the runs: $(( $(awk '/VmRSS/{print $2}' /proc/$vpid/status) / 1024 )) MiB"; done
  kill "$vpid" "${bpids[@]}" 2>/dev/null || true
  wait "$vpid" "${bpids[@]}" 2>/dev/null || true
done

for n in $BIND_NAMES; do
  echo "== standalone filter + bind over HTTP, ledger of $n nodes, 8 clients"
  redis-cli -p "$redis_port" flushall >/dev/null
  # GPUs large enough that the run never fills the ledger.
  python3 -c "import json,sys; n=int(sys.argv[1]); json.dump({'nodes': [{'name': 'gpu-node-%05d' % i, 'gpus': ['10Ti'] * 8} for i in range(n)], 'log': {'level': 'error'}, 'node_sync_interval_ms': 600000}, open(sys.argv[2], 'w'))" "$n" "$OUT/vramd-bind-$n.json"
  [[ -f "$OUT/filter-100.json" ]] || python3 -c "import json,sys; b=json.load(open(sys.argv[1])); json.dump(b, open(sys.argv[2], 'w'))" \
    tests/data/extender/filter-multicontainer-initcontainer.json "$OUT/filter-100.json"
  vport=$(free_port)
  "$BUILD_DIR/bin/vramd" --no-kube --config "$OUT/vramd-bind-$n.json" --listen "127.0.0.1:$vport" \
    --valkey "$redis_url" > "$OUT/vramd-bind-$n.log" 2>&1 &
  vpid=$!; pids+=("$vpid")
  wait_http "http://127.0.0.1:$vport/healthz" 30
  for _ in $(seq 600); do
    [[ "$(redis-cli -p "$redis_port" scard vramd:nodes)" == "$n" ]] && break
    sleep 0.1
  done
  echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 bench/bind_http.py --url "http://127.0.0.1:$vport" --body "$OUT/filter-100.json" --nodes "$n" \
    --clients 8 --seconds "$DURATION" | tee "$OUT/bind-$n.txt" | sed 's/^/  /'
  kill "$vpid" 2>/dev/null || true
  wait "$vpid" 2>/dev/null || true
done

if [[ "$STORE_BENCH" == 1 ]]; then
  echo "== bind's store work: reserve + release, 8 clients"
  redis-cli -p "$redis_port" flushall >/dev/null
  echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$BUILD_DIR/bin/store_bench" --valkey "$redis_url" --clients 8 --rate 1000 --seconds "$DURATION" \
    | tee "$OUT/store-rate1000.txt" | sed 's/^/  /'
  "$BUILD_DIR/bin/store_bench" --valkey "$redis_url" --clients 8 --rate 0 --seconds "$DURATION" \
    | tee "$OUT/store-closed.txt" | sed 's/^/  /'
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
echo "results: $OUT (results.jsonl, wrk-*.txt, store-*.txt)"
