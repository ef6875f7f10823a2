#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang + ASan + UBSan) into the cached
# build directory of the ASan tier (build-asan/) and runs each for a bounded
# time, starting from the seed corpus in fuzz/corpus/<target>/. Any crash, leak, sanitizer report, timeout
# or out-of-memory fails the run; the input is kept and its path printed.
#   scripts/fuzz.sh                          every target, 20 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh         longer runs (docs/fuzzing.md)
#   FUZZ_TARGETS="quantity lock" scripts/fuzz.sh   a subset (said loudly: not the full tier)
#   FUZZ_BUILD_DIR=build-asan (default)      FUZZ_JOBS=1 parallel workers per target
#   FUZZ_PARALLEL=N                          targets run N at a time (default: the cores)
# New inputs that reach new code go to $FUZZ_BUILD_DIR/corpus/<target>/ (kept
# between runs, not committed); fuzz/corpus/ is only read.
# The sanitizer options are this script's own: ASAN_OPTIONS, UBSAN_OPTIONS and
# LSAN_OPTIONS from the caller's environment (a detect_leaks=0 left exported)
# are ignored, with a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
  if [[ -n "${!v+x}" ]]; then
    echo "fuzz.sh: WARNING: ignoring $v=${!v} from the environment (this tier sets its own options)"
    unset "$v"
  fi
done
BUILD_DIR=${FUZZ_BUILD_DIR:-build-asan}
SECONDS_EACH=${FUZZ_SECONDS:-20}
# Every target of fuzz/ (NAME_fuzz.cc), unless FUZZ_TARGETS asks for a subset.
words() { tr -s ' ' '\n' <<<"$1" | sed '/^$/d' | sort -u | xargs; }  # sorted, one space apart
ALL_TARGETS=$(words "$(cd fuzz && for f in *_fuzz.cc; do printf '%s ' "${f%_fuzz.cc}"; done)")
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}
partial=""
if [[ "$(words "$TARGETS")" != "$ALL_TARGETS" ]]; then
  partial="only FUZZ_TARGETS='$TARGETS' of '$ALL_TARGETS'"
  printf '\n!!! fuzz.sh: PARTIAL RUN: %s; this is not the full fuzz tier\n\n' "$partial"
fi
JOBS=${FUZZ_JOBS:-1}

# The ASan+UBSan tree of scripts/sanitize.sh (clang; the libraries are
# instrumented for coverage): configured once, later runs rebuild what changed.
# shellcheck source=scripts/lib/sanitized-tree.sh
source scripts/lib/sanitized-tree.sh
configure_sanitized "$BUILD_DIR" address,undefined
build_targets=()
for t in $TARGETS; do build_targets+=("fuzz_$t"); done
mkdir -p "$BUILD_DIR"
if ! cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${build_targets[@]}" >"$BUILD_DIR/fuzz-build.log" 2>&1; then
  grep -v -e '^\[' -e '^gmake' -e '^-- ' "$BUILD_DIR/fuzz-build.log" | tail -60
  echo "fuzz.sh: building the fuzz targets failed (log: $BUILD_DIR/fuzz-build.log)"
  exit 1
fi
built=$(date +%s)
root=$(pwd)
bdir=$(cd "$BUILD_DIR" && pwd)

export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
logs="$bdir/fuzz-logs"
mkdir -p "$logs"
# The targets run FUZZ_PARALLEL at a time (default: the cores): each is one
# single-threaded libFuzzer process, so one after the other they leave all
# but one core idle. Each writes its summary row (and, failed, its report)
# to files of its own, printed in the targets' order once all have ended.
PARALLEL=${FUZZ_PARALLEL:-$(nproc)}
[[ "$PARALLEL" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_PARALLEL=$PARALLEL is not a count"; exit 2; }
rows=$(mktemp -d /tmp/vramd-fuzz.XXXXXX)
trap 'rm -rf "$rows"' EXIT
# fuzz_one TARGET: runs it; $rows/TARGET.row, and $rows/TARGET.failed with
# its report when it failed.
fuzz_one() {
  local t=$1 corpus artifacts dict log rc=0 execs rate cov entries verdict=ok
  corpus="$bdir/corpus/$t"
  artifacts="$bdir/artifacts/$t/"
  mkdir -p "$corpus" "$artifacts" "$logs/$t.d"
  dict="$root/fuzz/dict/json.dict"
  [[ "$t" == quantity ]] && dict="$root/fuzz/dict/quantity.dict"
  log="$logs/$t.log"
  local args=(-max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=5 -max_len=8192 -print_final_stats=1
              -dict="$dict" -artifact_prefix="$artifacts")
  ((JOBS > 1)) && args+=(-jobs="$JOBS" -workers="$JOBS")
  # With -jobs, each worker writes fuzz-N.log in the working directory (one
  # per target, as targets run side by side).
  (cd "$logs/$t.d" && rm -f fuzz-*.log && "$bdir/bin/fuzz_$t" "${args[@]}" "$corpus" "$root/fuzz/corpus/$t") \
    >"$log" 2>&1 || rc=$?
  if ((JOBS > 1)); then
    cat "$logs/$t.d"/fuzz-*.log >>"$log" 2>/dev/null || true
  fi
  rm -rf "$logs/$t.d"
  execs=$(awk '/stat::number_of_executed_units:/ {s += $2} END {print s + 0}' "$log")
  rate=$(awk '/stat::average_exec_per_sec:/ {s += $2} END {print s + 0}' "$log")
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
  entries=$(find "$corpus" -type f | wc -l)
  if ((rc != 0)); then
    verdict=FAILED
    {
      echo "== fuzz_$t FAILED (exit $rc): last lines of $log"
      grep -v -e '^#[0-9]' "$log" | tail -40 || true
      ls -1 "$artifacts" 2>/dev/null | sed "s|^|   kept input: $artifacts|" || true
    } >"$rows/$t.failed"
  fi
  printf '%-10s %12s %9s %6s %8s  %s\n' "$t" "$execs" "$rate" "${cov:-?}" "$entries" "$verdict" >"$rows/$t.row"
}
running=0
for t in $TARGETS; do
  if ((running >= PARALLEL)); then wait -n || true; running=$((running - 1)); fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait
failed=()
summary=()
for t in $TARGETS; do
  [[ -f "$rows/$t.failed" ]] && cat "$rows/$t.failed"
  if [[ -f "$rows/$t.row" ]]; then
    summary+=("$(cat "$rows/$t.row")")
    [[ -f "$rows/$t.failed" ]] && failed+=("$t")
  else
    # fuzz_one itself stopped (it writes its row last): no verdict is a failure.
    echo "== fuzz_$t FAILED: it left no result (its run was stopped)"
    failed+=("$t")
    summary+=("$(printf '%-10s %12s %9s %6s %8s  %s' "$t" - - - - FAILED)")
  fi
done

echo
echo "== fuzzing: ${SECONDS_EACH} s per target, $PARALLEL at a time, build $((built - start)) s =="
printf '%-10s %12s %9s %6s %8s  %s\n' target execs exec/s cov corpus result
printf '%s\n' "${summary[@]}"
echo "fuzz.sh: took $(( $(date +%s) - start )) s"
[[ -z "$partial" ]] || echo "!!! fuzz.sh: PARTIAL RUN: $partial; this is not the full fuzz tier"
if ((${#failed[@]})); then
  echo "fuzz.sh: FAILED: ${failed[*]} (reproduce: $BUILD_DIR/bin/fuzz_TARGET INPUT)"
  exit 1
fi
