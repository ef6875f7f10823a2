#!/usr/bin/env bash
# Builds the Kubernetes v1.20.2 commands the test tiers run: kube-apiserver and
# kube-scheduler (end-to-end testbed), kube-controller-manager, kubelet,
# kube-proxy and kubectl (the real-node tier, tests/realnode), and the pause
# container's program (build/pause/linux/pause.c, linked statically).
#
# No Kubernetes binaries can be downloaded on the test machines, but Debian's
# archive carries the 1.20.2 source (source package `kubernetes`, all Go
# dependencies vendored) and Go 1.19. This script:
#   1. installs the build and runtime dependencies (apt, idempotent);
#   2. adds a deb-src entry and downloads the `kubernetes` source package;
#   3. patches the vendored github.com/modern-go/reflect2 v1.0.1, whose map
#      iteration crashes (SIGSEGV) under Go >= 1.18, the way upstream v1.0.2 did;
#   4. builds the two commands with CGO_ENABLED=0 and caches them in
#      ${VRAMD_CACHE:-$HOME/.cache/vramd}/k8s-1.20.2/bin/.
# When both binaries are already cached it exits at once. The Go build cache is
# kept under the same directory, so a rebuild (e.g. after deleting bin/) is
# much quicker; the unpacked source tree is removed after each build.
#
# Usage: tests/e2e/testbed/build-k8s.sh        (as root, or with passwordless sudo)
set -euo pipefail

readonly K8S_VERSION=1.20.2
readonly CACHE_ROOT="${VRAMD_CACHE:-$HOME/.cache/vramd}"
readonly PREFIX="$CACHE_ROOT/k8s-$K8S_VERSION"
readonly BIN_DIR="$PREFIX/bin"
readonly WORK_DIR="$PREFIX/work"          # removed after a successful build
readonly GO_BUILD_CACHE="$PREFIX/go-build" # kept: makes rebuilds quicker
readonly BINARIES=(kube-apiserver kube-scheduler kube-controller-manager kubelet kube-proxy kubectl)
readonly WHAT_TARGETS="cmd/kube-scheduler cmd/kube-apiserver cmd/kube-controller-manager cmd/kubelet cmd/kube-proxy cmd/kubectl"
# Build tools, then what the testbed runs next to the two binaries.
readonly APT_PACKAGES=(golang-go make patch rsync jq ca-certificates
                       etcd-server openssl redis-server)
readonly RUNTIME_TOOLS=(etcd openssl redis-server)

log() { printf '[build-k8s %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[build-k8s] ERROR: %s\n' "$*" >&2; exit 1; }

binaries_cached() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done
  [[ -x "$BIN_DIR/pause" ]]
}

runtime_tools_present() {
  local t
  for t in "${RUNTIME_TOOLS[@]}"; do command -v "$t" >/dev/null || return 1; done
}

# Fast path: nothing to do.
if binaries_cached && runtime_tools_present; then
  log "Kubernetes $K8S_VERSION commands already in $BIN_DIR"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  die "apt-get needs root: run as root or with passwordless sudo"
fi

install_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
      || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "installing ${missing[*]}"
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
}

# Adds a deb-src twin of the Debian sources unless `kubernetes` is already
# known as a source package.
ensure_deb_src() {
  if apt-cache showsrc kubernetes 2>/dev/null | grep -q "^Package: kubernetes"; then
    return 0
  fi
  local src=/etc/apt/sources.list.d/debian.sources
  if [[ -f "$src" ]]; then
    log "adding deb-src entry /etc/apt/sources.list.d/vramd-deb-src.sources"
    sed -E 's/^Types:.*/Types: deb-src/' "$src" \
      | "${SUDO[@]}" tee /etc/apt/sources.list.d/vramd-deb-src.sources >/dev/null
  elif [[ -f /etc/apt/sources.list ]]; then
    log "adding deb-src entry /etc/apt/sources.list.d/vramd-deb-src.list"
    sed -nE 's/^deb (.*)/deb-src \1/p' /etc/apt/sources.list \
      | "${SUDO[@]}" tee /etc/apt/sources.list.d/vramd-deb-src.list >/dev/null
  else
    die "no Debian apt sources found to derive a deb-src entry from"
  fi
  "${SUDO[@]}" apt-get update -qq
  apt-cache showsrc kubernetes 2>/dev/null | grep -q "^Package: kubernetes" \
    || die "source package 'kubernetes' still unknown after adding deb-src"
}

# The reflect2 fix (same change as upstream v1.0.2): since Go 1.18
# reflect.mapiterinit fills a caller-owned iterator instead of returning one,
# so the linkname declaration gains a third parameter and `hiter` must be as
# large as runtime.hiter (the runtime writes all of its fields).
write_reflect2_patch() {
  cat >"$1" <<'PATCH'
--- a/vendor/github.com/modern-go/reflect2/unsafe_link.go
+++ b/vendor/github.com/modern-go/reflect2/unsafe_link.go
@@ -25,11 +25,11 @@
 //go:noescape
 func mapaccess(rtype unsafe.Pointer, m unsafe.Pointer, key unsafe.Pointer) (val unsafe.Pointer)
 
-// m escapes into the return value, but the caller of mapiterinit
-// doesn't let the return value escape.
+// Since Go 1.18 the runtime fills an iterator owned by the caller instead
+// of allocating one (reflect.mapiterinit gained a third parameter).
 //go:noescape
 //go:linkname mapiterinit reflect.mapiterinit
-func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer) *hiter
+func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)
 
 //go:noescape
 //go:linkname mapiternext reflect.mapiternext
@@ -44,7 +44,21 @@
 type hiter struct {
 	key   unsafe.Pointer // Must be in first position.  Write nil to indicate iteration end (see cmd/internal/gc/range.go).
 	value unsafe.Pointer // Must be in second position (see cmd/internal/gc/range.go).
-	// rest fields are ignored
+	// The remaining fields mirror runtime.hiter so that the runtime, which
+	// now writes into memory allocated here, stays inside this struct.
+	t           unsafe.Pointer
+	h           unsafe.Pointer
+	buckets     unsafe.Pointer
+	bptr        unsafe.Pointer
+	overflow    *[]unsafe.Pointer
+	oldoverflow *[]unsafe.Pointer
+	startBucket uintptr
+	offset      uint8
+	wrapped     bool
+	B           uint8
+	i           uint8
+	bucket      uintptr
+	checkBucket uintptr
 }
 
 // add returns p+x.
--- a/vendor/github.com/modern-go/reflect2/unsafe_map.go
+++ b/vendor/github.com/modern-go/reflect2/unsafe_map.go
@@ -108,8 +108,10 @@
 }
 
 func (type2 *UnsafeMapType) UnsafeIterate(obj unsafe.Pointer) MapIterator {
+	var it hiter
+	mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj), &it)
 	return &UnsafeMapIterator{
-		hiter:      mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj)),
+		hiter:      &it,
 		pKeyRType:  type2.pKeyRType,
 		pElemRType: type2.pElemRType,
 	}
PATCH
}

# Compiles and runs a tiny program that iterates maps through the patched
# reflect2 (what the API server does when encoding JSON), so a bad patch
# fails here in seconds rather than as an API server crash later.
check_reflect2() {
  local src=$1 dir=hack/vramd-reflect2-check
  mkdir -p "$dir"
  cat >"$dir/main.go" <<'GO'
package main

import (
	"fmt"
	"os"

	"github.com/modern-go/reflect2"
)

func main() {
	m := map[string]int{}
	for i := 0; i < 1000; i++ {
		m[fmt.Sprint("k", i)] = i
	}
	mt := reflect2.TypeOf(m).(reflect2.MapType)
	for round := 0; round < 50; round++ {
		n, sum := 0, 0
		for it := mt.Iterate(&m); it.HasNext(); {
			_, v := it.Next()
			n++
			sum += *v.(*int)
		}
		if n != 1000 || sum != 999*1000/2 {
			fmt.Println("reflect2 map iteration is wrong:", n, sum)
			os.Exit(1)
		}
	}
	fmt.Println("reflect2 map iteration OK")
}
GO
  # GOPATH mode, as Kubernetes' own build uses (its go.mod does not satisfy
  # Go 1.19's module mode); the vendor/ tree is found through the GOPATH.
  (cd "$src/.go/src/k8s.io/kubernetes" &&
    env -u GOFLAGS GO111MODULE=off GOPATH="$src/.go" GOPROXY=off \
      GOCACHE="$GO_BUILD_CACHE" CGO_ENABLED=0 go run "./$dir")
  rm -rf "$dir"
}

build() {
  local start=$SECONDS

  install_packages "${APT_PACKAGES[@]}"
  ensure_deb_src

  rm -rf "$WORK_DIR"
  mkdir -p "$WORK_DIR" "$GO_BUILD_CACHE" "$BIN_DIR"
  cd "$WORK_DIR"

  log "downloading the kubernetes source package"
  # Sandbox::User=root: the work dir is not readable by apt's _apt user.
  apt-get -qq -o APT::Sandbox::User=root source --download-only kubernetes >/dev/null
  local orig
  orig=$(ls kubernetes_*really${K8S_VERSION}.orig.tar.gz 2>/dev/null | head -n1) \
    || true
  [[ -n "$orig" ]] || die "no kubernetes_*really${K8S_VERSION}.orig.tar.gz downloaded: $(ls)"
  log "unpacking $orig"
  tar -xzf "$orig"
  local src="$WORK_DIR/kubernetes-$K8S_VERSION"
  [[ -f "$src/Makefile" ]] || die "unexpected tarball layout: $src/Makefile missing"
  rm -f "$orig"
  cd "$src"

  log "patching vendor/github.com/modern-go/reflect2"
  write_reflect2_patch "$WORK_DIR/reflect2.patch"
  patch -p1 --forward --quiet <"$WORK_DIR/reflect2.patch"

  # Kubernetes' build wants the tree inside a GOPATH at k8s.io/kubernetes.
  mkdir -p .go/src/k8s.io
  ln -sfn ../../.. .go/src/k8s.io/kubernetes
  check_reflect2 "$src"
  # hack/lib/golang.sh forces GOCACHE=_output/local/go/cache; point that at the
  # persistent cache. The tree's path never changes, so entries stay valid.
  mkdir -p _output/local/go
  ln -sfn "$GO_BUILD_CACHE" _output/local/go/cache

  log "building $WHAT_TARGETS (10-15 minutes on 2 cores)"
  local build_start=$SECONDS
  env -u GOFLAGS GOPATH="$src/.go" GOPROXY=off CGO_ENABLED=0 HOME="$WORK_DIR" \
    make WHAT="$WHAT_TARGETS" 2>&1 \
    | tee "$PREFIX/build.log" | grep --line-buffered -E '^\+\+\+|^!!!|error' || true
  # make's status is lost in the pipe; the binaries are the proof.
  local out="$src/_output/local/bin/linux/amd64" b
  for b in "${BINARIES[@]}"; do
    [[ -x "$out/$b" ]] || die "make did not produce $b; see $PREFIX/build.log"
  done
  log "make took $((SECONDS - build_start)) s"

  # The pause container's program, from the same source (the real node's
  # sandbox image); static, so the image needs nothing else.
  gcc -Os -static -o "$BIN_DIR/.pause.tmp" build/pause/linux/pause.c \
    -DVERSION="v$K8S_VERSION" || die "cannot build build/pause/linux/pause.c"
  mv -f "$BIN_DIR/.pause.tmp" "$BIN_DIR/pause"

  local version
  for b in "${BINARIES[@]}"; do
    if [[ $b == kubectl ]]; then
      version=$("$out/$b" version --client --short)
    else
      version=$("$out/$b" --version)
    fi
    [[ "$version" == *"v$K8S_VERSION"* ]] || die "$b --version says: $version"
    cp "$out/$b" "$BIN_DIR/.$b.tmp"
    mv -f "$BIN_DIR/.$b.tmp" "$BIN_DIR/$b" # atomic: never a half-copied binary
  done

  cd "$PREFIX"
  local rm_start=$SECONDS
  rm -rf "$WORK_DIR"
  log "removed the source tree in $((SECONDS - rm_start)) s"
  log "done in $((SECONDS - start)) s: $(ls "$BIN_DIR" | tr '\n' ' ')"
}

mkdir -p "$PREFIX"
# One build at a time; a second caller waits and then finds the binaries.
exec 9>"$PREFIX/.build.lock"
flock 9

install_packages "${APT_PACKAGES[@]}"
if binaries_cached; then
  log "Kubernetes $K8S_VERSION commands already in $BIN_DIR"
  exit 0
fi
build
