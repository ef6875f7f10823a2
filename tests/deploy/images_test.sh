#!/usr/bin/env bash
# Tests scripts/images.sh: builds every image into OUT_DIR (the root
# filesystems come from the cache under ${VRAMD_CACHE:-~/.cache/vramd}/images,
# or from Debian's archive the first time) and checks what a runtime would get:
#
#  1. bad options fail with a message (unknown image in --only, invalid --tag);
#  2. each docker-archive holds one image with the expected tag (manifest.json
#     RepoTags), layer count, and config (skopeo inspect --config: user,
#     entrypoint, arguments, PATH);
#  3. the layers, unpacked in order into a directory, form a root filesystem in
#     which the programs run WITHOUT the host's libraries: each dynamic binary
#     is started through the image's own dynamic loader with the image's
#     library directories, `--list` proves every library resolves inside the
#     image, and then:
#       vramd    /usr/bin/vramd --version prints the project version; vramctl
#                (and vramd-agent when built) resolve; uid 65532 in /etc/passwd
#       valkey   redis-server --version; valkey-server (the name the chart
#                runs) serves a chart-like configuration and valkey-cli pings
#                it; /bin/sh exists (the chart's command); uid 999 in /etc/passwd,
#                /data (the working directory) owned by it
#       pause    one layer holding only /pause, static, `-v` names the version
#       kube-scheduler  static, `--version` names the Kubernetes version;
#                uid 65532 in /etc/passwd, /tmp is 1777
#  4. --only vramd --tag T --out DIR2 builds only vramd.tar, tagged T.
#
# Needs vramd/vramctl (VRAMD_BIN_DIR or build/bin) and the testbed's pause and
# kube-scheduler (tests/e2e/testbed/build-k8s.sh): without them it FAILS.
# Usage: tests/deploy/images_test.sh [OUT_DIR]   (default: a temporary directory)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
version=$(sed -n 's/^project(vramd VERSION \([^ )]*\).*/\1/p' CMakeLists.txt)
k8s_version=${VRAMD_K8S_VERSION:-1.20.2}
bin_dir=${VRAMD_BIN_DIR:-$root/build/bin}
export VRAMD_BIN_DIR=$bin_dir
failures=0

work=$(mktemp -d /tmp/vramd-images-test.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
out=${1:-$work/images}

fail() { echo "images_test: FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "images_test: ok: $*"; }
step() { printf '\n== images_test: %s\n' "$*"; }
expect_eq() {  # expect_eq WHAT ACTUAL EXPECTED
  if [[ $2 == "$3" ]]; then ok "$1: $2"; else fail "$1: got '$2', expected '$3'"; fi
}
command -v jq >/dev/null || { echo "images_test: FAIL: jq is needed (scripts/install-deps.sh --test)" >&2; exit 1; }

# --- 1. bad options --------------------------------------------------------
step "options"
if msg=$(scripts/images.sh --only vramd,nosuch --out "$work/none" 2>&1); then
  fail "--only with an unknown image succeeded"
elif grep -q "unknown image 'nosuch'" <<<"$msg"; then ok "--only nosuch is refused: $msg"
else fail "--only nosuch failed without naming it: $msg"; fi
if msg=$(scripts/images.sh --tag 'bad tag' --out "$work/none" 2>&1); then
  fail "--tag 'bad tag' succeeded"
elif grep -q "not a valid image tag" <<<"$msg"; then ok "an invalid --tag is refused: $msg"
else fail "--tag 'bad tag' failed without saying why: $msg"; fi
[[ ! -e $work/none ]] || fail "a refused invocation created its output directory"

# --- 2. build ----------------------------------------------------------------
step "build (scripts/images.sh --out $out)"
t=$(date +%s)
scripts/images.sh --out "$out" || { echo "images_test: FAIL: scripts/images.sh" >&2; exit 1; }
echo "images_test: scripts/images.sh took $(($(date +%s) - t)) s"

# archive_tags FILE -> the RepoTags of its single image, comma-separated.
archive_tags() { tar -xOf "$1" manifest.json | jq -r 'if length == 1 then .[0].RepoTags | join(",") else "\(length) images" end'; }
archive_layers() { tar -xOf "$1" manifest.json | jq -r '.[0].Layers[]'; }
config_of() { skopeo inspect --config "docker-archive:$1" | jq -c ".config | $2"; }

# unpack FILE DIR: the layers in order, as a runtime stacks them (these images
# have no whiteouts; one would be a defect here).
unpack() {
  local file=$1 dir=$2 layer
  mkdir -p "$dir"
  while read -r layer; do
    if tar -xOf "$file" "$layer" | tar -t | grep -q '\.wh\.'; then fail "${file##*/}: layer $layer has whiteout entries"; fi
    tar -xOf "$file" "$layer" | tar -x -C "$dir"
  done < <(archive_layers "$file")
}

# in_root ROOT PATH -> the host path of PATH as the image sees it, following
# symbolic links inside ROOT (absolute links are relative to ROOT).
in_root() {
  python3 - "$1" "$2" <<'PY'
import os, sys
root, path = sys.argv[1], sys.argv[2]
def resolve(path, depth=0):
    if depth > 40:
        sys.exit(f"too many links at {path}")
    cur = "/"
    parts = [p for p in path.split("/") if p not in ("", ".")]
    for i, p in enumerate(parts):
        if p == "..":
            cur = os.path.dirname(cur) or "/"
            continue
        cand = os.path.join(cur, p)
        host = root + cand
        if os.path.islink(host):
            target = os.readlink(host)
            target = target if target.startswith("/") else os.path.join(cur, target)
            cur = resolve(target, depth + 1)
        else:
            cur = cand
    return cur
print(root + resolve(path))
PY
}

# run_in ROOT BINARY ARGS...: BINARY (a path inside ROOT) started by the
# image's dynamic loader with only the image's library directories. Its
# argv[0] keeps BINARY's name (redis-server is a link to redis-check-rdb and
# picks its mode by that name): a link of that name outside ROOT points to
# the resolved file.
run_in() {
  local r=$1 bin=$2; shift 2
  local host interp loader
  host=$(in_root "$r" "$bin")
  interp=$(readelf -l "$host" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  [[ -n $interp ]] || { echo "run_in: $bin has no program interpreter" >&2; return 1; }
  loader=$(in_root "$r" "$interp")
  mkdir -p "$work/argv0${r#"$work"}"
  ln -sfn "$host" "$work/argv0${r#"$work"}/${bin##*/}"
  "$loader" --inhibit-cache --library-path "$r/usr/lib/x86_64-linux-gnu:$r/lib/x86_64-linux-gnu:$r/usr/lib:$r/lib" \
    "$work/argv0${r#"$work"}/${bin##*/}" "$@"
}

is_static() { ! readelf -l "$1" | grep -q 'program interpreter'; }
passwd_has() {  # passwd_has ROOT UID
  awk -F: -v u="$2" '$3 == u { found = 1 } END { exit !found }' "$1/etc/passwd"
}

# --- 3. each image -------------------------------------------------------------
check_libs() {  # check_libs ROOT BINARY (path inside ROOT)
  local r=$1 bin=$2 host interp loader list bad
  host=$(in_root "$r" "$bin")
  [[ -x $host ]] || { fail "$bin is not an executable file in the image"; return; }
  interp=$(readelf -l "$host" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  loader=$(in_root "$r" "$interp")
  [[ -x $loader ]] || { fail "$bin: the image lacks its loader $interp"; return; }
  list=$("$loader" --inhibit-cache --library-path "$r/usr/lib/x86_64-linux-gnu:$r/lib/x86_64-linux-gnu:$r/usr/lib:$r/lib" --list "$host" 2>&1) ||
    { fail "$bin: the loader cannot list its libraries: $list"; return; }
  bad=$(awk -v r="$r/" '/=>/ && !/linux-vdso/ { if ($3 == "not" || index($3, r) != 1) print $1 " => " $3 }' <<<"$list")
  if [[ -n $bad ]]; then
    fail "$bin: libraries not found in the image: $(tr '\n' ' ' <<<"$bad")"
  else
    ok "$bin: all $(grep -c '=>' <<<"$list") libraries resolve inside the image"
  fi
}

step "vramd.tar"
f=$out/vramd.tar
bins=(vramd vramctl)
[[ -x $bin_dir/vramd-agent ]] && bins+=(vramd-agent)
expect_eq "vramd.tar tag" "$(archive_tags "$f")" "localhost/vramd:$version"
expect_eq "vramd.tar layers" "$(archive_layers "$f" | wc -l)" 2
expect_eq "vramd user" "$(config_of "$f" .User)" '"65532:65532"'
expect_eq "vramd entrypoint" "$(config_of "$f" .Entrypoint)" '["/usr/bin/vramd"]'
expect_eq "vramd arguments" "$(config_of "$f" .Cmd)" '["--listen","0.0.0.0:8080"]'
# deploy/Dockerfile builds the same image for users with a registry.
dockerfile_json() {  # dockerfile_json INSTRUCTION: its JSON-array argument, compact
  sed -n "s/^$1 //p" deploy/Dockerfile | tail -1 | jq -c .
}
expect_eq "vramd entrypoint = deploy/Dockerfile's" "$(config_of "$f" .Entrypoint)" "$(dockerfile_json ENTRYPOINT)"
expect_eq "vramd arguments = deploy/Dockerfile's" "$(config_of "$f" .Cmd)" "$(dockerfile_json CMD)"
expect_eq "vramd user = deploy/Dockerfile's" "$(config_of "$f" .User)" "\"$(sed -n 's/^USER //p' deploy/Dockerfile | tail -1)\""
r=$work/root-vramd
unpack "$f" "$r"
for b in "${bins[@]}"; do
  if grep -q "/out/usr/bin/$b\b" deploy/Dockerfile; then ok "deploy/Dockerfile installs /usr/bin/$b too"
  else fail "deploy/Dockerfile does not install /usr/bin/$b"; fi
done
for b in "${bins[@]}"; do check_libs "$r" "/usr/bin/$b"; done
expect_eq "vramd --version inside the image" "$(run_in "$r" /usr/bin/vramd --version 2>&1)" "vramd $version"
if run_in "$r" /usr/bin/vramctl --help 2>&1 | grep -q '^Usage: vramctl'; then ok "vramctl --help runs inside the image"
else fail "vramctl --help did not run inside the image"; fi
if passwd_has "$r" 65532; then ok "vramd: /etc/passwd names uid 65532"; else fail "vramd: no uid 65532 in /etc/passwd"; fi
if [[ -s $r/etc/ssl/certs/ca-certificates.crt ]]; then ok "vramd: CA certificates present"
else fail "vramd: /etc/ssl/certs/ca-certificates.crt missing"; fi

step "valkey.tar"
f=$out/valkey.tar
expect_eq "valkey.tar tag" "$(archive_tags "$f")" "localhost/valkey:$version"
expect_eq "valkey.tar layers" "$(archive_layers "$f" | wc -l)" 1
expect_eq "valkey user" "$(config_of "$f" .User)" '"999:999"'
expect_eq "valkey entrypoint" "$(config_of "$f" .Entrypoint)" '["redis-server"]'
if config_of "$f" .Env | grep -q '"PATH=[^"]*/usr/bin'; then ok "valkey: PATH reaches /usr/bin"; else fail "valkey: no PATH with /usr/bin in the config"; fi
r=$work/root-valkey
unpack "$f" "$r"
for b in redis-server redis-cli; do check_libs "$r" "/usr/bin/$b"; done
if v=$(run_in "$r" /usr/bin/redis-server --version 2>&1) && [[ $v == "Redis server v="* ]]; then ok "redis-server --version inside the image: $v"
else fail "redis-server --version inside the image: $v"; fi
if [[ -x $(in_root "$r" /bin/sh) ]]; then ok "valkey: /bin/sh exists (the chart's command)"; else fail "valkey: no /bin/sh"; fi
if passwd_has "$r" 999; then ok "valkey: /etc/passwd names uid 999"; else fail "valkey: no uid 999 in /etc/passwd"; fi
expect_eq "valkey working directory" "$(config_of "$f" .WorkingDir)" '"/data"'
expect_eq "valkey /data owner and mode" "$(stat -c '%u:%g %a' "$r/data")" "999:999 750"
# The chart runs `valkey-server /etc/valkey/valkey.conf` and probes with valkey-cli.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/valkey-data"
cat >"$work/valkey.conf" <<CONF
bind 127.0.0.1
port $port
protected-mode no
dir $work/valkey-data
appendonly yes
appendfsync everysec
save ""
maxmemory-policy noeviction
CONF
run_in "$r" /usr/bin/valkey-server "$work/valkey.conf" >"$work/valkey.log" 2>&1 &
pids+=($!)
pong=""
for _ in $(seq 100); do
  pong=$(run_in "$r" /usr/bin/valkey-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null || true)
  [[ $pong == PONG ]] && break
  sleep 0.1
done
if [[ $pong == PONG ]] && [[ $(run_in "$r" /usr/bin/valkey-cli -h 127.0.0.1 -p "$port" set vramd:images ok 2>&1) == OK ]]; then
  ok "valkey-server from the image serves a chart-like configuration; valkey-cli pings and writes"
else
  fail "valkey-server from the image did not answer valkey-cli; its log:"; sed 's/^/    /' "$work/valkey.log" >&2
fi
run_in "$r" /usr/bin/valkey-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true

step "pause.tar"
f=$out/pause.tar
expect_eq "pause.tar tag" "$(archive_tags "$f")" "localhost/pause:v$k8s_version"
expect_eq "pause.tar layers" "$(archive_layers "$f" | wc -l)" 1
expect_eq "pause entrypoint" "$(config_of "$f" .Entrypoint)" '["/pause"]'
r=$work/root-pause
unpack "$f" "$r"
expect_eq "pause layer contents" "$(cd "$r" && find . -mindepth 1 | sort | tr '\n' ' ')" "./pause "
if is_static "$r/pause"; then ok "pause is static"; else fail "pause is not a static program"; fi
expect_eq "pause -v" "$("$r/pause" -v 2>&1)" "pause.c v$k8s_version"

step "kube-scheduler.tar"
f=$out/kube-scheduler.tar
expect_eq "kube-scheduler.tar tag" "$(archive_tags "$f")" "localhost/kube-scheduler:v$k8s_version"
expect_eq "kube-scheduler.tar layers" "$(archive_layers "$f" | wc -l)" 1
expect_eq "kube-scheduler user" "$(config_of "$f" .User)" '"65532:65532"'
expect_eq "kube-scheduler entrypoint" "$(config_of "$f" .Entrypoint)" '["/usr/local/bin/kube-scheduler"]'
if config_of "$f" .Env | grep -q '"PATH=[^"]*/usr/local/bin'; then ok "kube-scheduler: PATH reaches /usr/local/bin (the chart runs 'kube-scheduler')"
else fail "kube-scheduler: no PATH with /usr/local/bin in the config"; fi
r=$work/root-kube-scheduler
unpack "$f" "$r"
if is_static "$r/usr/local/bin/kube-scheduler"; then ok "kube-scheduler is static"; else fail "kube-scheduler is not static"; fi
expect_eq "kube-scheduler --version" "$("$r/usr/local/bin/kube-scheduler" --version 2>&1)" "Kubernetes v$k8s_version"
if passwd_has "$r" 65532; then ok "kube-scheduler: /etc/passwd names uid 65532"; else fail "kube-scheduler: no uid 65532 in /etc/passwd"; fi
expect_eq "kube-scheduler /tmp mode" "$(stat -c %a "$r/tmp")" 1777

# --- 4. --only and --tag ---------------------------------------------------------
step "--only vramd --tag"
scripts/images.sh --only vramd --tag "$version-test.1" --out "$work/only" >/dev/null ||
  fail "scripts/images.sh --only vramd --tag $version-test.1"
expect_eq "--only vramd wrote" "$(find "$work/only" -mindepth 1 -printf '%f ')" "vramd.tar "
[[ -f $work/only/vramd.tar ]] && expect_eq "--tag" "$(archive_tags "$work/only/vramd.tar")" "localhost/vramd:$version-test.1"

if ((failures > 0)); then
  echo "images_test: $failures problem(s) found" >&2
  exit 1
fi
echo "images_test: PASS"
