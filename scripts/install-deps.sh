#!/usr/bin/env bash
# Installs what vramd needs to build, run and test, from Debian's packages.
# Idempotent: packages already present are not reinstalled.
#   scripts/install-deps.sh          build + run dependencies
#   scripts/install-deps.sh --test   also what the test tiers need (testbed, promtool, helm, images)
#   scripts/install-deps.sh --images only what scripts/images.sh needs (mmdebstrap, umoci, skopeo)
set -euo pipefail

pkgs=(build-essential cmake pkg-config libcpp-httplib-dev nlohmann-json3-dev libhiredis-dev
      libspdlog-dev libsimdjson-dev libssl-dev redis-server redis-tools libgtest-dev libgmock-dev
      libbenchmark-dev curl ca-certificates ccache)
# Container images without a registry or engine (scripts/images.sh).
image_pkgs=(mmdebstrap umoci skopeo)
if [[ "${1:-}" == "--images" ]]; then
  pkgs=("${image_pkgs[@]}")
fi
if [[ "${1:-}" == "--test" ]]; then
  pkgs+=(python3 golang-go etcd-server rsync jq openssl prometheus clang libclang-rt-14-dev gdb
        redis-sentinel ninja-build lld "${image_pkgs[@]}")
  # The real-node tier (tests/realnode): container runtime, CNI, kube-proxy's tools, cluster DNS.
  pkgs+=(containerd runc containernetworking-plugins iptables conntrack socat dnsmasq-base nftables)
  # npm (for the Helm CLI package): Debian's, unless the image already has one
  # (a nodejs from elsewhere conflicts with Debian's npm package).
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
  pkgs+=(zsh)  # vramctl's zsh completion is run by tests/system/vramctl_test.py
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
