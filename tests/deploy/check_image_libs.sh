#!/usr/bin/env bash
# Proves deploy/Dockerfile's runtime stage without a container engine:
#
#  1. the Dockerfile has the expected shape (build stage runs the README's
#     scripts/install-deps.sh and scripts/build.sh; runtime on
#     debian:bookworm-slim; numeric non-root USER 65532; ENTRYPOINT vramd;
#     vramctl copied);
#  2. every shared library that `ldd vramd vramctl` resolves belongs (dpkg -S)
#     to a package named in the Dockerfile's RUNTIME_PACKAGES, no library is
#     missing, no -dev package is installed at run time, and each package
#     exists in this Debian release's archive (apt-cache);
#  3. smoke test: vramd runs as uid 65532 with the root filesystem remounted
#     read-only (a private mount namespace) and answers /healthz, /readyz and
#     /metrics. Where that cannot run (no redis-server, unshare or setpriv, or
#     no permission to remount / read-only in a mount namespace: run as root,
#     or in a container with CAP_SYS_ADMIN) the check FAILS, never skips.
#
# Usage: tests/deploy/check_image_libs.sh        (binaries from $VRAMD_BIN_DIR or build/bin)
# Exits non-zero with a message naming what is wrong.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin_dir=${VRAMD_BIN_DIR:-$root/build/bin}
dockerfile=${VRAMD_DOCKERFILE:-$root/deploy/Dockerfile}
failures=0

fail() { echo "check_image_libs: FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "check_image_libs: ok: $*"; }

for b in vramd vramctl; do
  [[ -x "$bin_dir/$b" ]] || { echo "check_image_libs: FAIL: $bin_dir/$b is missing (run scripts/build.sh)" >&2; exit 1; }
done
command -v dpkg >/dev/null || { echo "check_image_libs: FAIL: dpkg not found: this check needs a Debian host" >&2; exit 1; }

# --- 1. Shape of the Dockerfile -------------------------------------------
expect() {  # expect REGEX WHAT
  if grep -Eq -- "$1" "$dockerfile"; then ok "$2"; else fail "deploy/Dockerfile: $2 (no line matches /$1/)"; fi
}
expect '^FROM debian:\$\{DEBIAN_RELEASE\} AS build' "build stage on debian:bookworm"
expect '^ARG DEBIAN_RELEASE=bookworm$' "Debian release is bookworm"
expect '^RUN scripts/install-deps.sh' "build stage runs scripts/install-deps.sh"
expect '^ +scripts/build.sh' "build stage runs scripts/build.sh"
expect '^FROM debian:\$\{DEBIAN_RELEASE\}-slim AS runtime' "runtime stage on debian:bookworm-slim"
expect '^USER 65532:65532$' "numeric non-root user 65532"
expect '^ENTRYPOINT \["/usr/bin/vramd"\]$' "ENTRYPOINT is vramd"
expect '/out/usr/bin/vramctl' "vramctl is in the image"
expect '^COPY --from=build /out/ /$' "runtime stage copies only the install tree"
if grep -Eq '^(VOLUME|RUN .*(mkdir|chown) .*/(var|run|tmp))' "$dockerfile"; then
  fail "deploy/Dockerfile: the runtime stage should not prepare writable paths (read-only root filesystem)"
fi

# The package list: the lines of `ARG RUNTIME_PACKAGES="\` up to the closing quote.
mapfile -t packages < <(awk '
  /^ARG RUNTIME_PACKAGES="\\$/ { on = 1; next }
  on && /^"$/ { exit }
  on { gsub(/\\/, ""); gsub(/^[ \t]+|[ \t]+$/, ""); if ($0 != "") print }
' "$dockerfile")
if ((${#packages[@]} == 0)); then
  echo "check_image_libs: FAIL: no RUNTIME_PACKAGES list found in deploy/Dockerfile" >&2
  exit 1
fi
ok "runtime packages: ${packages[*]}"
declare -A listed=()
for p in "${packages[@]}"; do
  listed[$p]=1
  [[ $p == *-dev ]] && fail "runtime package $p is a development package"
done

# --- 2. Every library ldd resolves is covered -------------------------------
# dpkg records a file under the path its package ships (/usr/lib or /lib); on
# merged-/usr systems ldd may report the other one. Try both, then the target.
owner_of() {
  local f=$1 real cand out
  real=$(readlink -f "$f" || echo "$f")
  for cand in "$f" "/usr$f" "${f#/usr}" "$real" "/usr$real" "${real#/usr}"; do
    [[ -n "$cand" ]] || continue
    out=$(dpkg -S "$cand" 2>/dev/null | grep -v '^diversion' | head -1) || true
    if [[ -n "$out" ]]; then
      echo "${out%%:*}"
      return 0
    fi
  done
  return 1
}

declare -A needed=() users=()
for b in vramd vramctl; do
  ldd_out=$(ldd "$bin_dir/$b")
  if grep -q 'not found' <<<"$ldd_out"; then
    fail "$b: ldd reports missing libraries: $(grep 'not found' <<<"$ldd_out" | tr -s ' \t' ' ')"
  fi
  while read -r lib path; do
    [[ -n "$path" ]] && users[$path]+="$b "
  done < <(awk '/=>/ && $3 ~ /^\// { print $1, $3; next } $1 ~ /^\// { print $1, $1 }' <<<"$ldd_out")
done
for path in "${!users[@]}"; do
  lib=${path##*/}
  if ! pkg=$(owner_of "$path"); then
    fail "${users[$path]% }: no Debian package owns $path"
    continue
  fi
  needed[$pkg]+="$lib "
  if [[ -z "${listed[$pkg]:-}" ]]; then
    fail "${users[$path]% } need(s) $lib from package $pkg, which deploy/Dockerfile's RUNTIME_PACKAGES lacks"
  fi
done
for pkg in "${!needed[@]}"; do ok "$pkg provides ${needed[$pkg]% }"; done

# Packages listed but needed by no library: only data packages may be there.
for p in "${packages[@]}"; do
  if [[ -z "${needed[$p]:-}" && $p != ca-certificates ]]; then
    fail "runtime package $p is listed but no library of vramd/vramctl comes from it"
  fi
done

# Each package exists in this release's archive.
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-unknown}")
if [[ $codename != bookworm ]]; then
  echo "check_image_libs: note: this host is Debian '$codename', the image is bookworm; package names are checked against this host's archive"
fi
declare -A candidate=()
while read -r name cand; do candidate[$name]=$cand; done < <(
  apt-cache policy "${packages[@]}" 2>/dev/null | awk '/^[^ ]/ { sub(/:$/, "", $1); n = $1 } /Candidate:/ { print n, $2 }')
for p in "${packages[@]}"; do
  cand=${candidate[$p]:-}
  if [[ -z "$cand" || "$cand" == "(none)" ]]; then
    fail "runtime package $p has no installable candidate in the apt archive (apt-get update?)"
  else
    ok "$p $cand is in the archive"
  fi
done

# --- 3. Non-root, read-only root filesystem smoke test ----------------------
smoke() {
  command -v redis-server >/dev/null ||
    { fail "smoke test cannot run: redis-server is not installed (scripts/install-deps.sh --test)"; return 1; }
  command -v unshare >/dev/null && command -v setpriv >/dev/null ||
    { fail "smoke test cannot run: unshare/setpriv (util-linux) not available"; return 1; }
  local probe_err
  if ! probe_err=$(unshare -m --propagation private sh -c 'mount -o remount,bind,ro / && ! touch /.vramd-ro-probe 2>/dev/null' 2>&1); then
    fail "smoke test cannot run: / cannot be remounted read-only in a private mount namespace here" \
      "(needs root or CAP_SYS_ADMIN; $(tr -s "\n" " " <<<"${probe_err:-no message}"))"
    return 1
  fi
  local work port vport pid rc=0
  work=$(mktemp -d /tmp/vramd-image-smoke.XXXXXX)
  chmod 755 "$work"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  vport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes \
    --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work"
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  # A standalone config, as the chart would mount it (read-only, world-readable).
  # vramd runs with an empty environment, as in the image (it rejects
  # unknown VRAMD_* variables, and the test tiers set some).
  cat >"$work/config.json" <<JSON
{"listen":"127.0.0.1:$vport","valkey":{"url":"redis://127.0.0.1:$port"},"kube":{"enabled":false},
 "nodes":[{"name":"smoke-node","gpus":["24Gi"]}]}
JSON
  chmod 644 "$work/config.json"
  unshare -m --propagation private sh -c \
    'mount -o remount,bind,ro / && exec env -i PATH=/usr/bin:/bin setpriv --reuid=65532 --regid=65532 --clear-groups "$0" --config "$1"' \
    "$bin_dir/vramd" "$work/config.json" >"$work/vramd.log" 2>&1 &
  pid=$!
  local up=0
  for _ in $(seq 100); do
    if curl -fsS "http://127.0.0.1:$vport/healthz" >/dev/null 2>&1; then up=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if ((up)); then
    ok "vramd runs as uid 65532 on a read-only root filesystem: /healthz answers"
    if curl -fsS "http://127.0.0.1:$vport/readyz" >/dev/null; then ok "/readyz answers 200"; else fail "/readyz is not 200 in the smoke test"; rc=1; fi
    local metrics
    metrics=$(curl -fsS "http://127.0.0.1:$vport/metrics" || true)
    if grep -q '^vramd_build_info' <<<"$metrics"; then ok "/metrics serves vramd_build_info"; else fail "/metrics lacks vramd_build_info in the smoke test"; rc=1; fi
    if unshare -m --propagation private sh -c 'mount -o remount,bind,ro / && exec env -i PATH=/usr/bin:/bin setpriv --reuid=65532 --regid=65532 --clear-groups "$0" --server "$1" nodes' \
         "$bin_dir/vramctl" "http://127.0.0.1:$vport" | grep -q smoke-node; then
      ok "vramctl runs as uid 65532 on a read-only root filesystem"
    else
      fail "vramctl nodes did not list smoke-node in the smoke test"; rc=1
    fi
  else
    fail "vramd did not come up as uid 65532 on a read-only root filesystem; its log:"
    sed 's/^/    /' "$work/vramd.log" >&2
    rc=1
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  kill "$(cat "$work/redis.pid")" 2>/dev/null || true
  rm -rf "$work"
  return $rc
}
smoke || true

if ((failures > 0)); then
  echo "check_image_libs: $failures problem(s) found" >&2
  exit 1
fi
echo "check_image_libs: PASS"
