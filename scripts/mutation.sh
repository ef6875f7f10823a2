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
# is never modified. MUTATION_WORKERS (default: the cores, at most 4) copies
# run mutants side by side.
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
# Mutants run WORKERS at a time, each worker in a scratch copy of its own
# (build-mutation, build-mutation-2, ...): a mutant mostly recompiles one file
# on one core, so two workers on two cores take about half the time.
WORKERS=${MUTATION_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || { echo "mutation.sh: MUTATION_WORKERS=$WORKERS is not a count"; exit 2; }
scratches=("$scratch")
for ((w = 2; w <= WORKERS; w++)); do scratches+=("$root/build-mutation-$w"); done
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
  stop_test_redis "$work"
  rm -rf "$work"
}
# shellcheck source=scripts/lib/test-redis.sh
source scripts/lib/test-redis.sh
trap cleanup EXIT
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
for sc in "${scratches[@]}"; do
  mkdir -p "$sc"
  rsync -rlpD --checksum --delete --exclude=/.git --exclude=/build --exclude='/build-*' --exclude=__pycache__ ./ "$sc/"
done
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
# unit_tests in ~0.5 s instead of ~2 s (CMakeLists.txt links with lld); both
# only change how the scratch tree builds, never what it compiles.
scratch_cmake=()
if command -v ninja >/dev/null 2>&1; then scratch_cmake+=(-G Ninja); fi
want_gen=$([[ " ${scratch_cmake[*]} " == *" Ninja "* ]] && echo Ninja || echo "Unix Makefiles")
for sc in "${scratches[@]}"; do
  have_gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$sc/build/CMakeCache.txt" 2>/dev/null || true)
  if [[ -n "$have_gen" && "$have_gen" != "$want_gen" ]]; then
    echo "mutation.sh: ${sc#"$root"/} was made by $have_gen, now $want_gen: starting it afresh"
    rm -rf "$sc/build"
  fi
done
echo "mutation.sh: $WORKERS scratch tree(s) with $want_gen"
# build SCRATCH LOG TARGETS...
build() {
  local sc=$1 log=$2
  shift 2
  (cd "$sc" && CMAKE_ARGS="${scratch_cmake[*]}" BUILD_TARGETS="$*" scripts/build.sh) >"$log" 2>&1
}
t=$(date +%s)
for sc in "${scratches[@]}"; do
  if ! build "$sc" "$work/build.log" "${targets[@]}"; then
    grep -v -e '^\[' -e '^gmake' | tail -40 <"$work/build.log"
    echo "mutation.sh: the unmutated scratch copy ${sc#"$root"/} did not build (${targets[*]})"
    exit 1
  fi
done
echo "mutation.sh: scratch copies built (${targets[*]}) in $(( $(date +%s) - t )) s"

# runtest SCRATCH CMD LOG: the Test command in a scratch root (its build/bin
# as $BIN), bounded in time.
runtest() {
  (cd "$1" && BIN=$1/build/bin timeout "$TEST_TIMEOUT" bash -c "$2") >"$3" 2>&1
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
  if runtest "$scratch" "$cmd" "$work/baseline.log" && ! ran_nothing "$work/baseline.log"; then
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

# mutant INDEX SCRATCH: one patch applied, built, tested and reverted in one
# scratch copy; its summary row goes to $work/row.INDEX, its lines to stdout.
mutant() {
  local i=$1 sc=$2 p=${patches[$1]} name cmd t verdict rc
  local -a tg
  name=$(basename "$p" .patch)
  cmd=$(field "$p" Test)
  read -r -a tg <<<"$(field "$p" Build)"
  t=$(date +%s)
  if [[ "${baseline[$cmd]}" != ok ]]; then
    verdict="NOT RUN (its test fails unmutated)"
  elif ! (cd "$sc" && patch -p1 --dry-run --fuzz=0 -s <"$root/$p") >"$work/apply.$i.log" 2>&1; then
    verdict="STALE (the patch no longer applies: $(head -1 "$work/apply.$i.log"))"
  else
    (cd "$sc" && patch -p1 --fuzz=0 -s --no-backup-if-mismatch <"$root/$p")
    if ! build "$sc" "$work/build.$i.log" "${tg[@]}"; then
      verdict="BROKEN (the mutant does not compile)"
      grep -E 'error' "$work/build.$i.log" | head -5 || true
    elif runtest "$sc" "$cmd" "$work/$name.log"; then
      verdict="SURVIVED (its test passed)"
    else
      rc=$?
      verdict="killed"
      ((rc == 124)) && verdict="killed (its test timed out after ${TEST_TIMEOUT} s)"
      failures "$work/$name.log" 3 | sed "s/^/  $name: /"
    fi
    (cd "$sc" && patch -p1 -R --fuzz=0 -s --no-backup-if-mismatch <"$root/$p")
  fi
  printf '%-30s %4s s  %s\n' "$name" "$(( $(date +%s) - t ))" "$verdict" >"$work/row.$i"
  echo "mutation.sh: $name: $verdict  [$(field "$p" Mutant)]"
}
# Worker w takes patches w-1, w-1+WORKERS, ...; each writes its lines whole.
pids=()
for ((w = 0; w < WORKERS; w++)); do
  (
    for ((i = w; i < ${#patches[@]}; i += WORKERS)); do
      out=$(mutant "$i" "${scratches[$w]}" 2>&1)
      printf '%s\n' "$out"
    done
  ) &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for i in "${!patches[@]}"; do
  if [[ -f "$work/row.$i" ]]; then
    summary+=("$(cat "$work/row.$i")")
  else
    summary+=("$(printf '%-30s %4s    %s' "$(basename "${patches[$i]}" .patch)" "-" "NOT RUN (its worker stopped)")")
  fi
done
# Anything but a kill fails the tier (a survivor, a stale or broken patch).
if printf '%s\n' "${summary[@]}" | grep -v -q '  killed'; then status=1; fi

echo
echo "== mutants =="
printf '%s\n' "${summary[@]}"
killed=$(printf '%s\n' "${summary[@]}" | grep -c '  killed' || true)
echo "mutation.sh: ${killed} of ${#patches[@]} mutants killed; took $(( $(date +%s) - start )) s"
[[ -n "$partial" ]] && echo "!!! mutation.sh: $partial"
exit $status
