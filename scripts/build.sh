#!/usr/bin/env bash
# Configures and builds vramd into build/ (binaries in build/bin).
#   BUILD_DIR=build-asan CMAKE_ARGS="-DVRAMD_SANITIZE=address,undefined" scripts/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
