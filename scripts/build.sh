#!/usr/bin/env bash
# Configures and builds vramd into build/ (binaries in build/bin).
#   BUILD_DIR=build-asan CMAKE_ARGS="-DVRAMD_SANITIZE=address,undefined" scripts/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# A new tree is a Ninja tree when ninja is installed (install-deps installs
# it): Ninja's look at an up-to-date tree takes ~0.1 s where make's takes ~3 s.
# A tree made before keeps its generator (CMake cannot change it in place).
gen=()
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" && " ${CMAKE_ARGS:-} " != *" -G "* ]] && command -v ninja >/dev/null 2>&1; then
  gen=(-G Ninja)
fi
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
