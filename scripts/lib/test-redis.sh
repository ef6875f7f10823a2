# Sourced by scripts/test.sh, scripts/sanitize.sh and scripts/mutation.sh.
# start_test_redis WORK NAME: a throwaway Valkey-compatible server
# (redis-server) on a free loopback port, no persistence, its pid, log and
# data in WORK (the caller kills "$(cat WORK/redis.pid)" on exit); exports
# VRAMD_TEST_VALKEY_URL. NAME prefixes the error when it does not start.
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
