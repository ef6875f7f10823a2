# Sourced by scripts/test.sh, scripts/sanitize.sh and scripts/mutation.sh.
# start_test_redis WORK NAME: a throwaway Valkey-compatible server
# (redis-server) on a free loopback port, no persistence, its pid, log and
# data in WORK (the caller stops it with stop_test_redis WORK on exit);
# exports VRAMD_TEST_VALKEY_URL. NAME prefixes the error when it does not start.
start_test_redis() {
  local work=$1 name=$2 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes \
    --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work"
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  if ! redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "$name: redis-server did not start"
    cat "$work/redis.log"
    return 1
  fi
  export VRAMD_TEST_VALKEY_URL="redis://127.0.0.1:$port"
}

# stop_test_redis WORK: stops the server start_test_redis started in WORK
# (if any) and waits (up to 5 s) until it has exited: it writes its log as it
# exits, so removing WORK before then can fail ("Directory not empty"), and
# under `set -e` that failure became the exit status of a passing tier.
stop_test_redis() {
  local work=$1 pid
  [[ -f "$work/redis.pid" ]] || return 0
  pid=$(cat "$work/redis.pid")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "stop_test_redis: redis-server $pid still runs after 5 s; killing it" >&2
  kill -9 "$pid" 2>/dev/null || true
}
