#!/usr/bin/env bash
# The mutation tier: "shown failing" as a check. Each tests/mutations/*.patch
# is a small deliberate bug (a mutant) with the test that must catch it:
#   Mutant: one line: what the patch breaks
#   Build:  the CMake targets the patch touches (built incrementally)
#   Test:   a shell command run in the scratch copy's root with $BIN (its
#           build/bin) and $VRAMD_TEST_VALKEY_URL set; it must fail on the
#           mutant and pass on the code as it is
# followed by a unified diff (git diff format, paths a/ b/ from the root).
#
# The patches are applied to a scratch copy of the checkout (build-mutation/,
# rsync'd from the working tree, its own build tree build-mutation/build,
# configured as scripts/build.sh configures build/: ccache's CCACHE_BASEDIR
# makes every unchanged file a cache hit of build/'s compile, so a mutant
# costs the files it touches and the links of its targets). The working tree
# is never modified.
# Order: every distinct Test first runs on the unmutated copy and must pass
# (a test failing for another reason would "catch" every mutant); then, per
# patch: apply (a patch that no longer applies fails the tier: update it
# with the code), build its targets (a mutant that does not compile fails
# the tier: it proves nothing), run its Test, revert. The tier fails if any
# mutant survives (its Test passed).
#   scripts/mutation.sh                       every patch
#   MUTANTS="fit-h-le fit-lua-le" scripts/mutation.sh
#                                             some of them (said loudly: not the full tier)
# Needs a Valkey-compatible server at VRAMD_TEST_VALKEY_URL (scripts/test.sh
# exports it); when unset, a redis-server is started on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s)
scratch=$root/build-mutation
TEST_TIMEOUT=${MUTATION_TEST_TIMEOUT:-300}

mapfile -t patches < <(ls tests/mutations/*.patch 2>/dev/null | sort)
((${#patches[@]} > 0)) || { echo "mutation.sh: no tests/mutations/*.patch"; exit 1; }
partial=""
if [[ -n "${MUTANTS:-}" ]]; then
  sel=()
  for m in $MUTANTS; do
    [[ -f tests/mutations/$m.patch ]] || { echo "mutation.sh: no tests/mutations/$m.patch"; exit 2; }
    sel+=("tests/mutations/$m.patch")
  done
  patches=("${sel[@]}")
  partial="PARTIAL RUN: MUTANTS='$MUTANTS'; this is not the full mutation tier"
  printf '\n!!! mutation.sh: %s\n\n' "$partial"
fi

work=$(mktemp -d /tmp/vramd-mutation.XXXXXX)
cleanup() {
  if [[ -f "$work/redis.pid" ]]; then kill "$(cat "$work/redis.pid")" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=scripts/lib/test-redis.sh
source scripts/lib/test-redis.sh
if [[ -z "${VRAMD_TEST_VALKEY_URL:-}" ]]; then
  start_test_redis "$work" mutation.sh || exit 1
fi

# field PATCH NAME: the value of a header line "NAME: value" before the diff.
field() { sed -n "/^diff --git /q; s/^$2: *//p" "$1" | head -1; }

# The scratch copy: the working tree's files (tracked and untracked, as
# scripts see them), never its build trees or .git. By content (--checksum)
# and without the working tree's times: a file whose content is unchanged
# keeps its time, one that changed (or was reverted after a mutant) gets a
# new one, so build-mutation/build rebuilds exactly what differs from the
# objects it holds (a mutant's object never survives its revert).
mkdir -p "$scratch"
rsync -rlpD --checksum --delete --exclude=/.git --exclude=/build --exclude='/build-*' --exclude=__pycache__ ./ "$scratch/"
targets=()
for p in "${patches[@]}"; do
  for f in Mutant Build Test; do
    [[ -n "$(field "$p" $f)" ]] || { echo "mutation.sh: $p has no '$f:' line"; exit 1; }
  done
  read -r -a tg <<<"$(field "$p" Build)"
  targets+=("${tg[@]}")
done
mapfile -t targets < <(printf '%s\n' "${targets[@]}" | sort -u)

# build TARGETS...: as scripts/build.sh builds build/ (same compile flags,
# so ccache hits), in the scratch copy. A mutant costs its files' compiles,
# its targets' links and the build tool's look at every file: with Ninja
# (ninja-build) that look is ~0.1 s instead of make's ~3 s, and lld links
# unit_tests in ~0.5 s instead of ~2 s; both only change how the scratch
# tree builds, never what it compiles (issue 35: the tier within 10 minutes).
scratch_cmake=()
if command -v ninja >/dev/null 2>&1; then scratch_cmake+=(-G Ninja); fi
if command -v ld.lld >/dev/null 2>&1; then
  scratch_cmake+=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)
fi
want_gen=$([[ " ${scratch_cmake[*]} " == *" Ninja "* ]] && echo Ninja || echo "Unix Makefiles")
have_gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$scratch/build/CMakeCache.txt" 2>/dev/null || true)
if [[ -n "$have_gen" && "$have_gen" != "$want_gen" ]]; then
  echo "mutation.sh: the scratch tree was made by $have_gen, now $want_gen: starting it afresh"
  rm -rf "$scratch/build"
fi
echo "mutation.sh: scratch tree with $want_gen$(command -v ld.lld >/dev/null 2>&1 && echo ', linked by lld')"
build() {
  (cd "$scratch" && CMAKE_ARGS="${scratch_cmake[*]}" BUILD_TARGETS="$*" scripts/build.sh) >"$work/build.log" 2>&1
}
t=$(date +%s)
if ! build "${targets[@]}"; then
  grep -v -e '^\[' -e '^gmake' | tail -40 <"$work/build.log"
  echo "mutation.sh: the unmutated scratch copy did not build (${targets[*]})"
  exit 1
fi
echo "mutation.sh: scratch copy built (${targets[*]}) in $(( $(date +%s) - t )) s"

export BIN=$scratch/build/bin
# runtest CMD LOG: the Test command in the scratch root, bounded in time.
runtest() {
  (cd "$scratch" && timeout "$TEST_TIMEOUT" bash -c "$1") >"$2" 2>&1
}
# The failing lines of a test's output (GoogleTest, unittest, the shell).
failures() {
  grep -E '^\[  FAILED  \]|^(FAIL|ERROR): |Failure$|^AssertionError' "$1" | sort -u | head -"${2:-6}" || true
}

# Whether a test's output says it ran nothing (a GoogleTest filter or a
# unittest name that matches no test passes with 0 tests: it would let every
# mutant survive, or, unnoticed, none be tested).
ran_nothing() {
  if grep -q -E '^\[==========\] Running 0 tests|^Ran 0 tests' "$1"; then
    echo "mutation.sh: the test ran no test case"
    return 0
  fi
  return 1
}

status=0
summary=()
# Baseline: each distinct Test passes on the code as it is.
declare -A baseline=()
for p in "${patches[@]}"; do
  cmd=$(field "$p" Test)
  [[ -n "${baseline[$cmd]:-}" ]] && continue
  if runtest "$cmd" "$work/baseline.log" && ! ran_nothing "$work/baseline.log"; then
    baseline[$cmd]=ok
  else
    baseline[$cmd]=FAILED
    status=1
    echo "mutation.sh: the Test of $(basename "$p") fails on the unmutated code: $cmd"
    failures "$work/baseline.log" 20
    tail -20 "$work/baseline.log"
  fi
done
((status == 0)) && echo "mutation.sh: the ${#baseline[@]} distinct tests pass on the unmutated code"

for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  cmd=$(field "$p" Test)
  read -r -a tg <<<"$(field "$p" Build)"
  t=$(date +%s)
  verdict=""
  if [[ "${baseline[$cmd]}" != ok ]]; then
    verdict="NOT RUN (its test fails unmutated)"
  elif ! (cd "$scratch" && patch -p1 --dry-run --fuzz=0 -s <"$root/$p") >"$work/apply.log" 2>&1; then
    verdict="STALE (the patch no longer applies: $(head -1 "$work/apply.log"))"
    status=1
  else
    (cd "$scratch" && patch -p1 --fuzz=0 -s --no-backup-if-mismatch <"$root/$p")
    if ! build "${tg[@]}"; then
      verdict="BROKEN (the mutant does not compile)"
      grep -E 'error' "$work/build.log" | head -5 || true
      status=1
    elif runtest "$cmd" "$work/$name.log"; then
      verdict="SURVIVED (its test passed)"
      status=1
    else
      rc=$?
      verdict="killed"
      ((rc == 124)) && verdict="killed (its test timed out after ${TEST_TIMEOUT} s)"
      failures "$work/$name.log" 3 | sed "s/^/  $name: /"
    fi
    (cd "$scratch" && patch -p1 -R --fuzz=0 -s --no-backup-if-mismatch <"$root/$p")
  fi
  summary+=("$(printf '%-30s %4s s  %s' "$name" "$(( $(date +%s) - t ))" "$verdict")")
  echo "mutation.sh: $name: $verdict  [$(field "$p" Mutant)]"
done

echo
echo "== mutants =="
printf '%s\n' "${summary[@]}"
killed=$(printf '%s\n' "${summary[@]}" | grep -c '  killed' || true)
echo "mutation.sh: ${killed} of ${#patches[@]} mutants killed; took $(( $(date +%s) - start )) s"
[[ -n "$partial" ]] && echo "!!! mutation.sh: $partial"
exit $status
