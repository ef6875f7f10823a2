#!/usr/bin/env bash
# Builds the container images the Helm chart runs, on this machine, without a
# registry or a container engine, as docker-archive tarballs (load them with
# `ctr -n k8s.io images import FILE`, `docker load -i FILE` or `podman load -i FILE`):
#
#   OUT/vramd.tar           localhost/vramd:TAG   Debian bookworm minbase + the runtime
#                           libraries of deploy/Dockerfile's RUNTIME_PACKAGES; a second
#                           layer with /usr/bin/vramd, vramctl and vramd-agent (when
#                           built), stripped; user 65532:65532; entrypoint vramd
#   OUT/valkey.tar          localhost/valkey:TAG  Debian bookworm minbase + Debian's
#                           redis-server (valkey-server, valkey-cli: links to redis-server,
#                           redis-cli, the names the chart runs); user 999:999 (redis);
#                           entrypoint redis-server, working directory /data (owned by 999)
#   OUT/pause.tar           localhost/pause:vK8S  one layer, the single file /pause (the
#                           static pause program of tests/e2e/testbed/build-k8s.sh)
#   OUT/kube-scheduler.tar  localhost/kube-scheduler:vK8S  one layer: the testbed's static
#                           kube-scheduler in /usr/local/bin, /etc/passwd and /etc/group
#                           naming uid 65532, /tmp; user 65532:65532
#
# Root filesystems: `mmdebstrap --variant=minbase bookworm` from Debian's archive
# (the only network access), cached under CACHE/images/ keyed by everything that
# shapes them (suite, packages, hooks); a changed list builds a new one (80-110 s
# on a 2-core machine).
# Assembly: umoci (init, new, raw add-layer, config); output: skopeo copy
# oci:… docker-archive:…. Tools missing from the host are installed from Debian
# (scripts/install-deps.sh --images).
#
# Usage: scripts/images.sh [--only NAME,...] [--tag TAG] [--out DIR] [--rebuild-base]
#   --only          images to build, from: vramd valkey pause kube-scheduler (default: all)
#   --tag           tag of vramd and valkey (default: the CMake project VERSION)
#   --out           output directory (default: build/images)
#   --rebuild-base  build the root filesystems again even when cached (security updates)
# Environment: VRAMD_BIN_DIR (default build/bin), VRAMD_CACHE (default ~/.cache/vramd),
#   VRAMD_K8S_VERSION (default 1.20.2: binaries in CACHE/k8s-VERSION/bin).
# Prints each image built with its reference, size and time. Exits non-zero, with
# a message, when an input is missing or a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s)

die() { echo "images: FAILED: $*" >&2; exit 1; }

all_images=(vramd valkey pause kube-scheduler)
only=""
tag=""
out=$root/build/images
rebuild_base=0
while (($#)); do
  case $1 in
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --only=*) only=${1#*=}; shift ;;
    --tag) tag=${2:?--tag needs a value}; shift 2 ;;
    --tag=*) tag=${1#*=}; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --rebuild-base) rebuild_base=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

selected=()
if [[ -z $only ]]; then
  selected=("${all_images[@]}")
else
  IFS=, read -ra selected <<<"$only"
  for name in "${selected[@]}"; do
    [[ " ${all_images[*]} " == *" $name "* ]] || die "unknown image '$name' in --only (images: ${all_images[*]})"
  done
fi
wants() { [[ " ${selected[*]} " == *" $1 "* ]]; }

if [[ -z $tag ]]; then
  tag=$(sed -n 's/^project(vramd VERSION \([^ )]*\).*/\1/p' CMakeLists.txt)
  [[ -n $tag ]] || die "no 'project(vramd VERSION …)' in CMakeLists.txt; pass --tag"
fi
[[ $tag =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "'$tag' is not a valid image tag"

CACHE=${VRAMD_CACHE:-$HOME/.cache/vramd}
k8s_version=${VRAMD_K8S_VERSION:-1.20.2}
k8s_bin=$CACHE/k8s-$k8s_version/bin
bin_dir=${VRAMD_BIN_DIR:-$root/build/bin}
suite=bookworm

# Inputs first, so that a missing binary fails before a minute of mmdebstrap.
if wants vramd; then
  for b in vramd vramctl; do
    [[ -x $bin_dir/$b ]] || die "$bin_dir/$b is missing (scripts/build.sh builds it)"
  done
fi
for b in pause kube-scheduler; do
  if wants "$b" && [[ ! -x $k8s_bin/$b ]]; then
    die "$k8s_bin/$b is missing (tests/e2e/testbed/build-k8s.sh builds it)"
  fi
done

scripts/install-deps.sh --images

mkdir -p "$out" "$CACHE/images"
work=$(mktemp -d /tmp/vramd-images.XXXXXX)
trap 'rm -rf "$work"' EXIT
oci=$work/oci
umoci init --layout "$oci"
# Both ends of every copy are local files; there are no signatures to check.
printf '{"default": [{"type": "insecureAcceptAnything"}]}\n' >"$work/policy.json"

summary=()
elapsed() { echo $(($(date +%s) - $1)); }

# base_rootfs NAME PACKAGES HOOK... -> prints the path of a cached rootfs tarball.
# The cache key is a hash of every mmdebstrap argument (and mmdebstrap's
# version), so a changed package list or hook builds a new tarball.
base_rootfs() {
  local name=$1 packages=$2; shift 2
  # mmdebstrap's merged-usr hooks install usr-is-merged before the other
  # packages; without them apt satisfies init-system-helpers' "usrmerge |
  # usr-is-merged" with usrmerge, which pulls in perl (~40 MB).
  local args=(--variant=minbase --include="$packages" --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    # No documentation, manual pages or translations (licences stay).
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
    "$@")
  local key
  key=$(printf '%s\n' "$suite" "$(mmdebstrap --version)" "${args[@]}" | sha256sum | cut -c1-16)
  local file=$CACHE/images/base-$name-$key.tar
  if [[ -s $file && $rebuild_base -eq 0 ]]; then
    echo "images: base '$name' from the cache ($file)" >&2
  else
    local t
    t=$(date +%s)
    echo "images: building base '$name' with mmdebstrap (packages: $packages)" >&2
    local tmp=$work/base-$name.tar
    if ! mmdebstrap --quiet --format=tar "${args[@]}" "$suite" "$tmp" </dev/null >"$work/mmdebstrap-$name.log" 2>&1; then
      tail -n 40 "$work/mmdebstrap-$name.log" >&2
      die "mmdebstrap for base '$name' (is Debian's archive reachable? its last lines are above)"
    fi
    # The device nodes mmdebstrap made for its chroot: the runtime mounts /dev.
    tar --delete -f "$tmp" --wildcards './dev/?*'
    # Into the cache by a rename in its directory: a concurrent run sees the
    # whole file or none.
    cp "$tmp" "$file.$$.tmp"
    mv "$file.$$.tmp" "$file"
    rm -f "$tmp"
    # Older bases of this name are superseded.
    find "$CACHE/images" -maxdepth 1 -name "base-$name-*.tar" ! -name "${file##*/}" -delete
    echo "images: base '$name' built in $(elapsed "$t") s ($file)" >&2
  fi
  echo "$file"
}

# layer_from DIR FILE: a tarball of DIR's contents, owned by root, reproducible.
layer_from() {
  tar --sort=name --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$1" -cf "$2" .
}

# finish NAME REF: umoci's config is set; write OUT/NAME.tar tagged REF.
finish() {
  local name=$1 ref=$2 t=$3 dest=$out/$1.tar
  rm -f "$dest" "$dest.tmp"
  skopeo --policy "$work/policy.json" copy --quiet "oci:$oci:$name" "docker-archive:$dest.tmp:$ref" >/dev/null ||
    die "skopeo copy of $name"
  mv "$dest.tmp" "$dest"
  summary+=("$(printf '%-34s %6s MiB %4s s  %s' "$ref" \
    "$(awk -v b="$(stat -c %s "$dest")" 'BEGIN { printf "%.1f", b / 1048576 }')" "$(elapsed "$t")" "${dest#"$root"/}")")
}

path_env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

if wants pause; then
  t=$(date +%s)
  mkdir -p "$work/pause"
  install -m 0755 "$k8s_bin/pause" "$work/pause/pause"
  # Just the file: no directory entries (as the upstream pause image).
  tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$work/pause" -cf "$work/pause.tar" pause
  umoci new --image "$oci:pause"
  umoci raw add-layer --image "$oci:pause" --history.created_by "scripts/images.sh: /pause" "$work/pause.tar"
  umoci config --image "$oci:pause" --config.entrypoint /pause --config.user 65535:65535 --config.workingdir /
  finish pause "localhost/pause:v$k8s_version" "$t"
fi

if wants kube-scheduler; then
  t=$(date +%s)
  d=$work/kube-scheduler
  mkdir -p "$d/usr/local/bin" "$d/etc" "$d/tmp"
  chmod 1777 "$d/tmp"
  install -m 0755 "$k8s_bin/kube-scheduler" "$d/usr/local/bin/kube-scheduler"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$d/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$d/etc/group"
  chmod 0644 "$d/etc/passwd" "$d/etc/group"
  layer_from "$d" "$work/kube-scheduler.tar"
  umoci new --image "$oci:kube-scheduler"
  umoci raw add-layer --image "$oci:kube-scheduler" \
    --history.created_by "scripts/images.sh: kube-scheduler v$k8s_version" "$work/kube-scheduler.tar"
  umoci config --image "$oci:kube-scheduler" --config.entrypoint /usr/local/bin/kube-scheduler \
    --config.user 65532:65532 --config.env "$path_env" --config.workingdir /
  finish kube-scheduler "localhost/kube-scheduler:v$k8s_version" "$t"
fi

if wants valkey; then
  t=$(date +%s)
  # The redis user gets uid/gid 999 before redis-server's maintainer script
  # runs (adduser then keeps it); the chart runs Valkey as 999. (Hooks are
  # shell code that mmdebstrap runs with "$1" its root: single quotes.)
  # shellcheck disable=SC2016
  base=$(base_rootfs valkey redis-server \
    --essential-hook='echo "redis:x:999:999::/var/lib/redis:/usr/sbin/nologin" >>"$1/etc/passwd"; echo "redis:x:999:" >>"$1/etc/group"' \
    --customize-hook='ln -s redis-server "$1/usr/bin/valkey-server"; ln -s redis-cli "$1/usr/bin/valkey-cli"' \
    --customize-hook='mkdir -m 0750 "$1/data"; chown 999:999 "$1/data"')
  umoci new --image "$oci:valkey"
  umoci raw add-layer --image "$oci:valkey" --history.created_by "mmdebstrap --variant=minbase $suite (redis-server)" "$base"
  umoci config --image "$oci:valkey" --config.entrypoint redis-server --config.user 999:999 \
    --config.env "$path_env" --config.workingdir /data --config.exposedports 6379/tcp
  finish valkey "localhost/valkey:$tag" "$t"
fi

if wants vramd; then
  t=$(date +%s)
  # The runtime packages are deploy/Dockerfile's list (tests/deploy/check_image_libs.sh
  # proves it covers what vramd and vramctl link), so both images agree.
  mapfile -t packages < <(awk '
    /^ARG RUNTIME_PACKAGES="\\$/ { on = 1; next }
    on && /^"$/ { exit }
    on { gsub(/\\/, ""); gsub(/^[ \t]+|[ \t]+$/, ""); if ($0 != "") print }
  ' deploy/Dockerfile)
  ((${#packages[@]} > 0)) || die "no RUNTIME_PACKAGES list in deploy/Dockerfile"
  # shellcheck disable=SC2016
  base=$(base_rootfs vramd "$(IFS=,; echo "${packages[*]}")" \
    --customize-hook='chroot "$1" groupadd --system --gid 65532 vramd' \
    --customize-hook='chroot "$1" useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin vramd')
  d=$work/vramd
  mkdir -p "$d/usr/bin" "$d/usr/share/doc/vramd"
  bins=(vramd vramctl)
  [[ -x $bin_dir/vramd-agent ]] && bins+=(vramd-agent)
  for b in "${bins[@]}"; do
    strip -o "$d/usr/bin/$b" "$bin_dir/$b"
    chmod 0755 "$d/usr/bin/$b"
  done
  install -m 0644 LICENSE "$d/usr/share/doc/vramd/LICENSE"
  layer_from "$d" "$work/vramd.tar"
  umoci new --image "$oci:vramd"
  umoci raw add-layer --image "$oci:vramd" --history.created_by "mmdebstrap --variant=minbase $suite (${packages[*]})" "$base"
  umoci raw add-layer --image "$oci:vramd" --history.created_by "scripts/images.sh: ${bins[*]}" "$work/vramd.tar"
  # Numeric user so that runAsNonRoot can verify it; the chart replaces the
  # arguments with `--config /etc/vramd/config.json` (as with deploy/Dockerfile).
  umoci config --image "$oci:vramd" --config.entrypoint /usr/bin/vramd \
    --config.cmd --listen --config.cmd 0.0.0.0:8080 --config.user 65532:65532 \
    --config.env "$path_env" --config.workingdir / \
    --config.exposedports 8080/tcp --config.exposedports 8443/tcp \
    --config.label org.opencontainers.image.title=vramd \
    --config.label org.opencontainers.image.version="$tag" \
    --config.label org.opencontainers.image.licenses=Apache-2.0
  finish vramd "localhost/vramd:$tag" "$t"
fi

echo
echo "== images (${out#"$root"/}) =="
printf '%s\n' "${summary[@]}"
echo "images: took $(elapsed "$start") s"
