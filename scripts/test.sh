#!/usr/bin/env bash
# One command: install what is missing, build, and run every test tier:
#   unit         pure logic and adapters with fakes (GoogleTest)
#   integration  against a real Valkey-compatible server started here (redis-server)
#   e2e          against a real kube-apiserver + kube-scheduler (built once from
#                Debian's kubernetes source package and cached) and redis-server
#   deploy       Helm chart (helm lint/template, policy checks, promtool), the
#                rendered scheduler config against the real kube-scheduler, image libs,
#                the images built without a registry (scripts/images.sh; Debian root
#                filesystems from mmdebstrap, cached), checked inside the unpacked images
#   realnode     the Helm chart installed, upgraded, uninstalled and reinstalled on a
#                real node (kubelet + containerd + runc, CNI bridge, kube-proxy, cluster
#                DNS) with images built here (scripts/images.sh); root; the machine's
#                network and sysctls are restored and checked at its end
#   sanitize     the unit, integration and system tests and the e2e files that drive
#                vramd's threads (store loss, agent, protection, queues; hostile
#                metadata under ASan) again under ASan+UBSan and under TSan, zero
#                reports; canaries for ASan, UBSan, LSan and TSan, and the trees'
#                binaries checked for instrumentation (scripts/sanitize.sh; clang
#                trees build-asan, build-tsan, built in the background at nice 15
#                while the testbed builds and CTest runs)
#   fuzz         a short libFuzzer run of every fuzz target (scripts/fuzz.sh; build-asan)
#   mutation     each deliberate bug of tests/mutations/*.patch applied to a scratch
#                copy (build-mutation/, ccache hits of build/), its targets rebuilt and
#                the test it names run: the tier fails if a mutant survives
#                (scripts/mutation.sh; in the background at nice 19 from the build on)
# Options: TIERS="unit integration" scripts/test.sh   (default: all tiers)
#          FUZZ_SECONDS=60 scripts/test.sh             (default: 15 s per fuzz target)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

# The tiers set their own sanitizer options and run every test: options, a
# GoogleTest filter or a subset knob of the sanitize and fuzz scripts
# inherited from the caller's shell would weaken them (or shrink what CTest
# discovers) without a word. Drop them, and say so. (TIERS picks tiers.)
for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS MSAN_OPTIONS \
         GTEST_FILTER GTEST_TOTAL_SHARDS GTEST_SHARD_INDEX \
         SANITIZERS SANITIZE_GTEST_FILTER FUZZ_TARGETS; do
  if [[ -n "${!v+x}" ]]; then
    echo "test.sh: WARNING: ignoring $v=${!v} from the environment (the test command runs every test with its own options)"
    unset "$v"
  fi
done
ALL_TIERS="unit integration e2e deploy realnode sanitize fuzz mutation"
# CI runs every tier: a TIERS (or a FUZZ_SECONDS below the default)
# inherited from CI's environment would make .ci/run pass on a subset without
# a word, so it is refused there. Elsewhere a subset is said first and last.
if [[ "${CI:-}" == "true" ]]; then
  if [[ -n "${TIERS+x}" ]]; then
    echo "test.sh: TIERS=$TIERS is set in CI's environment: CI runs every tier; unset it" >&2
    exit 2
  fi
  if [[ -n "${FUZZ_SECONDS:-}" ]] && ! [[ "$FUZZ_SECONDS" =~ ^[0-9]+$ && "$FUZZ_SECONDS" -ge 15 ]]; then
    echo "test.sh: FUZZ_SECONDS=$FUZZ_SECONDS is set in CI's environment: CI fuzzes at least 15 s per target" >&2
    exit 2
  fi
fi
TIERS=${TIERS:-$ALL_TIERS}
export FUZZ_SECONDS=${FUZZ_SECONDS:-15}
partial=""
if [[ "$(printf '%s\n' $TIERS | sort -u | tr '\n' ' ')" != "$(printf '%s\n' $ALL_TIERS | sort -u | tr '\n' ' ')" ]]; then
  partial="PARTIAL RUN: $TIERS (every tier: $ALL_TIERS)"
elif ! [[ "$FUZZ_SECONDS" =~ ^[0-9]+$ && "$FUZZ_SECONDS" -ge 15 ]]; then
  partial="PARTIAL RUN: FUZZ_SECONDS=$FUZZ_SECONDS (the test command fuzzes 15 s per target)"
fi
[[ -n "$partial" ]] && echo "test.sh: $partial"
stages=()
stage() { stages+=("$(printf '%-28s %5s s' "$1" "$(( $(date +%s) - $2 ))")"); }

t=$(date +%s); scripts/install-deps.sh --test; stage "install-deps" "$t"
t=$(date +%s); scripts/build.sh; stage "build (build/)" "$t"

# The sanitizer trees (two clang trees, most of a cold run's compiling) build
# in the background at the lowest priority while the Kubernetes testbed
# builds, CTest runs and then the ASan tests run: the tests leave the cores
# idle much of the time (the sanitize tier's runs: 5 CPU-minutes in 16 one
# after the other, 4.5 in 5.5 three at a time as sanitize.sh runs them). The
# sanitize tier waits for each tree's build (a lock in sanitize.sh), then
# builds what is left: nothing, or all of it if this failed (its errors are
# reported there).
# The mutation tier (mostly compiling, its own scratch trees and Valkey) runs
# in the background the same way, below the sanitizer trees' priority (they
# are on the way to the sanitize tier, the mutants only to the end); its
# output is printed in its place below.
prebuild_pid="" mutation_pid=""
prebuild_log=$(mktemp /tmp/vramd-sanitize-prebuild.XXXXXX)
mutation_bg_log=$(mktemp /tmp/vramd-mutation.XXXXXX)
# Each in its own process group (setsid), so that an early exit stops its
# compilers and tests too.
if [[ " $TIERS " == *" sanitize "* ]]; then
  prebuild_start=$(date +%s)
  setsid nice -n 15 scripts/sanitize.sh --build-only >"$prebuild_log" 2>&1 &
  prebuild_pid=$!
fi
if [[ " $TIERS " == *" mutation "* ]]; then
  mutation_start=$(date +%s)
  setsid nice -n 19 scripts/mutation.sh >"$mutation_bg_log" 2>&1 &
  mutation_pid=$!
fi
stop_background() {
  local p
  for p in "$prebuild_pid" "$mutation_pid"; do
    if [[ -n "$p" ]]; then kill -- "-$p" 2>/dev/null || true; fi
  done
  rm -f "$prebuild_log" "$mutation_bg_log"
}
trap stop_background EXIT

# e2e and deploy run the real kube-scheduler; sanitize runs one e2e file too;
# realnode runs the kubelet and friends built by the same script.
if [[ " $TIERS " == *" e2e "* || " $TIERS " == *" deploy "* || " $TIERS " == *" sanitize "* ||
      " $TIERS " == *" realnode "* ]]; then
  t=$(date +%s); tests/e2e/testbed/build-k8s.sh; stage "kubernetes testbed" "$t"
fi

# A throwaway Valkey-compatible server on loopback for the integration tier.
work=$(mktemp -d /tmp/vramd-test.XXXXXX)
cleanup() {
  stop_test_redis "$work"
  stop_background
  rm -rf "$work"
}
# shellcheck source=scripts/lib/test-redis.sh
source scripts/lib/test-redis.sh
trap cleanup EXIT
start_test_redis "$work" test.sh || exit 1

# The tiers CTest runs; sanitize and fuzz are scripts of their own.
ctest_tiers=$(echo "$TIERS" | tr ' ' '\n' | grep -v -E '^(sanitize|fuzz|mutation|)$' | tr '\n' ' ' | sed 's/ $//' || true)
status=0
touch "$work/ctest.log"
if [[ -n "$ctest_tiers" ]]; then
  t=$(date +%s)
  # The JUnit file holds each entry's status and output, counted at the end
  # (scripts/lib/test_counts.py): large enough limits that CTest does not cut
  # a passed entry's output (its default: 1 KiB, keeping the head, so a Python
  # file's "Ran N tests" summary would be lost); a cut keeps head and tail.
  # Four entries at once, but at most one CPU-bound entry per core (the
  # resource spec: one `cpus` slot per core, which the GoogleTest cases, the
  # include checks and the image build each take; CMakeLists.txt): the e2e
  # and system files, which mostly wait on their testbeds, run beside them.
  cores=$(nproc)
  printf '{"version": {"major": 1, "minor": 0}, "local": [{"cpus": [%s]}]}\n' \
    "$(seq 0 $((cores - 1)) | sed 's/.*/{"id": "&", "slots": 1}/' | paste -sd, -)" >"$work/resources.json"
  ctest --test-dir build -L "^($(echo "$ctest_tiers" | tr ' ' '|'))\$" --no-tests=error --output-on-failure \
    -j$((cores + 2)) --resource-spec-file "$work/resources.json" --timeout 900 \
    --test-output-size-passed 4194304 --test-output-size-failed 4194304 --test-output-truncation middle \
    --output-junit "$work/junit.xml" | tee "$work/ctest.log" || status=$?
  stage "ctest ($ctest_tiers)" "$t"
  # Which tier (label) each entry is in, for the counts.
  ctest --test-dir build --show-only=json-v1 >"$work/tests.json" || status=1
fi

# Tiers that are scripts of their own (their own build directories).
sanitize_result="not run"
fuzz_result="not run"
mutation_result="not run"
if [[ " $TIERS " == *" sanitize "* ]]; then
  echo
  t=$(date +%s)
  if scripts/sanitize.sh 2>&1 | tee "$work/sanitize.log"; then sanitize_result=ok; else sanitize_result=FAILED; status=1; fi
  # Done by now: sanitize.sh waited for both trees.
  if wait "$prebuild_pid"; then
    echo "test.sh: in the background from $(( prebuild_start - start )) s into the run: $(grep -h 'built in' "$prebuild_log" | tr '\n' ' ')"
  else
    echo "test.sh: building the sanitizer trees in the background failed (sanitize.sh built them again):"
    tail -20 "$prebuild_log"
  fi
  prebuild_pid=""
  stage "sanitize (build + run)" "$t"
fi
if [[ " $TIERS " == *" fuzz "* ]]; then
  echo
  t=$(date +%s)
  if scripts/fuzz.sh 2>&1 | tee "$work/fuzz.log"; then fuzz_result=ok; else fuzz_result=FAILED; status=1; fi
  stage "fuzz (build + ${FUZZ_SECONDS} s/target)" "$t"
fi
if [[ " $TIERS " == *" mutation "* ]]; then
  echo
  t=$(date +%s)
  if wait "$mutation_pid"; then mutation_result=ok; else mutation_result=FAILED; status=1; fi
  mutation_pid=""
  cp "$mutation_bg_log" "$work/mutation.log"
  cat "$work/mutation.log"
  echo "test.sh: the mutation tier ran in the background from $(( mutation_start - start )) s into the run, for $(( $(date +%s) - mutation_start )) s in all"
  stage "mutation (waited for)" "$t"
fi

# The CTest tiers' tests counted from what ran (GoogleTest's and unittest's own
# summaries in each entry's output): run, passed, failed, skipped. A skip not
# on tests/allowed-skips.txt, or an entry that ran nothing, fails the run.
touch "$work/counts.txt"
if [[ -n "$ctest_tiers" ]]; then
  python3 scripts/lib/test_counts.py --junit "$work/junit.xml" --tests-json "$work/tests.json" \
    --allow tests/allowed-skips.txt --tiers "$ctest_tiers" >"$work/counts.txt" 2>&1 || status=1
fi
echo
echo "== tests per tier =="
for tier in $TIERS; do
  case $tier in
    sanitize) echo "sanitize: $sanitize_result ($(grep -c ' ok$' "$work/sanitize.log" || true) runs clean, $(grep -c ' FAILED$' "$work/sanitize.log" || true) failed)" ;;
    fuzz) echo "fuzz: $fuzz_result ($(grep -c ' ok$' "$work/fuzz.log" || true) targets clean, $(grep -c ' FAILED$' "$work/fuzz.log" || true) failed)" ;;
    mutation) echo "mutation: $mutation_result ($(grep -o '[0-9]* of [0-9]* mutants killed' "$work/mutation.log" || echo 'no count'))" ;;
    *) grep "^$tier: " "$work/counts.txt" || echo "$tier: not counted" ;;
  esac
done
# The notes, allowed and refused skips, entries that ran nothing (and an
# error of the count itself), after the tiers' lines.
grep -v -E "^($(echo "$ctest_tiers" | tr ' ' '|')): " "$work/counts.txt" || true
grep -E '^[0-9]+% tests passed' "$work/ctest.log" | tail -1 | sed 's/^/ctest: /' || true
echo
echo "== time per stage =="
printf '%s\n' "${stages[@]}"
echo "test.sh: took $(( $(date +%s) - start )) s"
[[ -n "$partial" ]] && echo "test.sh: $partial"
exit $status
