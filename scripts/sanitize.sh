#!/usr/bin/env bash
# The unit and integration tiers under sanitizers, with zero reports allowed:
#   asan  AddressSanitizer (+ LeakSanitizer) and UndefinedBehaviorSanitizer
#         (build-asan/, clang; the same tree holds the fuzz targets)
#   tsan  ThreadSanitizer (build-tsan/, clang)
# Each runs every unit test (TSan: but the pure core's ledger_tests, which
# start no thread), every integration test and the system tests
# (tests/system: the real vramd binary against redis-server), and e2e files
# against the real kube-apiserver and kube-scheduler (tests/e2e: vramd's
# threads as only a real cluster drives them: reconcile passes, the pod/node
# watches, binds under a store restart, the agent's pushes, the watchdog's
# and reclaim's evictions; E2E_UNDER_ASAN and E2E_UNDER_TSAN; needs the
# testbed of tests/e2e/testbed/build-k8s.sh). The integration, system and e2e tests
# spawn vramd and vramctl from the same sanitized build, so the daemon runs
# under the sanitizer too. Every process writes its reports to files
# (log_path); the run fails on any report and on any failed test.
# Before the tests, three proofs that "0 reports" means something:
#   - canaries (scripts/lib/sanitizer-canary.cc, built with the tree's flags
#     and run with the tests' options): a heap overflow, a signed overflow, a
#     misaligned load and a leak (asan), a data race (tsan) must each leave
#     their report where the tests' reports are looked for;
#   - clang's thread-safety analysis is on as an error for every source and
#     refuses its canary (scripts/lib/thread-safety-canary.cc);
#   - the tree's own binaries are instrumented: vramd, vramctl and the test
#     binaries link the sanitizer runtime, and every object file of vramd's
#     code calls into it (nm).
#   scripts/sanitize.sh                      both
#   SANITIZERS=tsan scripts/sanitize.sh      one of them (said loudly: not the full tier)
#   SANITIZE_GTEST_FILTER='*Concurrent*' scripts/sanitize.sh
#                                            a subset of the GoogleTest cases (said loudly)
#   SANITIZE_JOBS=1 scripts/sanitize.sh     the runs one at a time (default: 3 at once)
#   scripts/sanitize.sh --build-only         only build the trees, tests nothing
#                                            (scripts/test.sh runs it in the
#                                            background, niced, from CTest on; the
#                                            TSan tree builds while the ASan tests
#                                            run, which leave the cores mostly idle)
# The options of the sanitizers are this script's own: ASAN_OPTIONS,
# UBSAN_OPTIONS, LSAN_OPTIONS, TSAN_OPTIONS and GTEST_FILTER (and GoogleTest's
# sharding) from the caller's environment are ignored, with a warning, so an
# exported detect_leaks=0 or filter of a debugging session never weakens the
# tier unnoticed; a subset must be asked for by SANITIZE_GTEST_FILTER.
# Needs a Valkey-compatible server at VRAMD_TEST_VALKEY_URL (scripts/test.sh
# exports it); when unset, a redis-server is started on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
case "${1:-}" in
  "") ;;
  --build-only) build_only=1 ;;
  *) echo "sanitize.sh: unknown argument $1 (--build-only)"; exit 2 ;;
esac
start=$(date +%s)
for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS MSAN_OPTIONS \
         GTEST_FILTER GTEST_TOTAL_SHARDS GTEST_SHARD_INDEX; do
  if [[ -n "${!v+x}" ]]; then
    echo "sanitize.sh: WARNING: ignoring $v=${!v} from the environment (this tier sets its own options;" \
      "a subset of the GoogleTest cases: SANITIZE_GTEST_FILTER)"
    unset "$v"
  fi
done
SANITIZERS=${SANITIZERS:-"asan tsan"}
GTEST_FILTER_ARG=${SANITIZE_GTEST_FILTER:-"*"}
# The e2e files run under each sanitizer: reconcile passes over hostile pod
# and node metadata (asan), and under both the newest files, which drive the
# threads the unit tests only simulate: binds through a store flush and
# restart (store_loss_test), the agent pushing to vramd (agent_test), the
# watchdog's and idle evictions (protection_test), queue admission and
# reclaim (queues_test).
# (Longest first: each file is a run of its own in the pool below.)
E2E_UNDER_BOTH="queues_test protection_test store_loss_test agent_test"
E2E_UNDER_ASAN="$E2E_UNDER_BOTH hostile_metadata_test"
E2E_UNDER_TSAN="$E2E_UNDER_BOTH"
# The GoogleTest programs each tree builds and runs. ledger_tests (the pure
# core: fit, placement, queues, protection rules) starts no thread, so TSan
# has nothing to watch there: only the ASan tree builds and runs it.
TESTS_UNDER_ASAN="integration_tests unit_tests ledger_tests"
TESTS_UNDER_TSAN="integration_tests unit_tests"
# test_programs SAN: the GoogleTest programs of that sanitizer's tree.
test_programs() { if [[ $1 == tsan || $1 == thread ]]; then echo "$TESTS_UNDER_TSAN"; else echo "$TESTS_UNDER_ASAN"; fi; }
partial=()
[[ "$GTEST_FILTER_ARG" != "*" ]] &&
  partial+=("only the GoogleTest cases matching SANITIZE_GTEST_FILTER='$GTEST_FILTER_ARG'")
[[ " $SANITIZERS " != *" asan "* || " $SANITIZERS " != *" tsan "* ]] && partial+=("only SANITIZERS='$SANITIZERS'")
if ((${#partial[@]})); then
  printf '\n!!! sanitize.sh: PARTIAL RUN: %s; this is not the full sanitizer tier\n\n' "${partial[*]}"
fi
# shellcheck source=scripts/lib/sanitized-tree.sh
source scripts/lib/sanitized-tree.sh
TEST_TIMEOUT=${SANITIZE_TEST_TIMEOUT:-1200}

work=$(mktemp -d /tmp/vramd-sanitize.XXXXXX)
# Some system tests run vramd-agent as an unprivileged user: it must read the
# suppressions and may write its reports, wherever the checkout lies (a
# checkout in a mode-0700 directory would make TSan fail to start it).
chmod 0755 "$work"
install -m 0644 scripts/lib/tsan.supp "$work/tsan.supp"
cleanup() {
  local j
  for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done  # runs of the pool still going (an early exit)
  stop_test_redis "$work"
  rm -rf "$work"
}
# shellcheck source=scripts/lib/test-redis.sh
source scripts/lib/test-redis.sh
trap cleanup EXIT
if [[ -z "${VRAMD_TEST_VALKEY_URL:-}" ]] && ((!build_only)); then
  start_test_redis "$work" sanitize.sh || exit 1
fi

# build DIR SANITIZE: configure once (cached), build only the tiers' binaries.
build() {
  local dir=$1 san=$2 lock b
  local -a progs
  read -r -a progs <<<"$(test_programs "$san")"
  # One build of a tree at a time: scripts/test.sh builds both trees in the
  # background (--build-only) while CTest runs, and this run may reach a tree
  # before that build is done: it waits for it here, then finds little or
  # nothing left to build. (The lock is released when this shell exits.)
  lock=/tmp/vramd-$(id -u)-$(printf '%s' "$PWD/$dir" | md5sum | cut -c1-12).lock
  exec 9>"$lock"
  flock 9
  configure_sanitized "$dir" "$san"
  # vramd-agent and the fake NVML libraries: the system tests run the agent.
  if ! cmake --build "$dir" -j"$(nproc)" --target "${progs[@]}" vramd vramctl vramd-agent \
      fake_nvml fake_nvml_legacy fake_nvml_r615 >"$dir/sanitize-build.log" 2>&1; then
    grep -v -e '^\[' -e '^gmake' -e '^-- ' "$dir/sanitize-build.log" | tail -60
    echo "sanitize.sh: building $dir failed (log: $dir/sanitize-build.log)"
    return 1
  fi
  for b in "${progs[@]}" vramd vramctl vramd-agent; do
    [[ -x "$dir/bin/$b" ]] || { echo "sanitize.sh: $dir/bin/$b did not build"; return 1; }
  done
  exec 9>&-
}

# canary SAN OPTIONS...: the deliberate bugs of scripts/lib/sanitizer-canary.cc,
# built with the tree's flags and run with the options the tests get (@R@:
# the report directory), must each leave their report where the tests'
# reports are looked for; otherwise "0 reports" would prove nothing.
canary() {
  local san=$1
  shift
  local dir="$work/canary-$san" flags b bug want r o rc=0 seen=()
  local -a bugs opts
  case $san in
    asan)
      flags=address,undefined
      bugs=("heap-overflow=ERROR: AddressSanitizer: heap-buffer-overflow"
            "signed-overflow=runtime error: signed integer overflow"
            "misaligned=runtime error: load of misaligned address"
            "leak=ERROR: LeakSanitizer: detected memory leaks") ;;
    tsan)
      flags=thread
      bugs=("race=WARNING: ThreadSanitizer: data race") ;;
  esac
  mkdir -p "$dir"
  clang++ -std=c++20 -O1 -gline-tables-only -fsanitize="$flags" -fno-omit-frame-pointer -fno-sanitize-recover=all \
    scripts/lib/sanitizer-canary.cc -o "$dir/canary" -lpthread
  for b in "${bugs[@]}"; do
    bug=${b%%=*} want=${b#*=} r="$dir/reports-$bug"
    mkdir -p "$r"
    opts=()
    for o in "$@"; do opts+=("${o//@R@/$r}"); done
    env "${opts[@]}" "$dir/canary" "$bug" >/dev/null 2>&1 || true
    if grep -qsF -- "$want" "$r"/*; then
      seen+=("$bug")
    else
      echo "sanitize.sh: the $san canary '$bug' left no '$want' report in $r: that sanitizer is not reporting"
      rc=1
    fi
  done
  ((rc == 0)) && echo "sanitize.sh: $san canaries reported their bugs: ${seen[*]}"
  return $rc
}

# thread_safety_canary DIR: every vramd source of the tree compiles with
# clang's -Werror=thread-safety, and that flag does refuse a field guarded by
# a vramd::Mutex written without it (scripts/lib/thread-safety-canary.cc must
# fail to compile with the analysis' message); otherwise a clean build would
# prove nothing about the GUARDED_BY annotations.
thread_safety_canary() {
  local dir=$1 out missing
  missing=$(python3 -c '
import json, sys
cmds = json.load(open(sys.argv[1] + "/compile_commands.json"))
bad = [c["file"] for c in cmds if "/src/" in c["file"] and "-Werror=thread-safety" not in c.get("command", " ".join(c.get("arguments", [])))]
print("\n".join(bad))' "$dir")
  if [[ -n "$missing" ]]; then
    echo "sanitize.sh: $dir compiles these without -Werror=thread-safety:"; echo "$missing"; return 1
  fi
  if out=$(clang++ -std=c++20 -Iinclude -fsyntax-only -Wthread-safety -Werror=thread-safety \
      scripts/lib/thread-safety-canary.cc 2>&1); then
    echo "sanitize.sh: the thread-safety canary compiled: the analysis is not checking vramd::Mutex"; return 1
  fi
  if ! grep -q "requires holding mutex 'mu_'" <<<"$out"; then
    echo "sanitize.sh: the thread-safety canary failed without the analysis' message:"; echo "$out"; return 1
  fi
  echo "sanitize.sh: $dir builds with -Werror=thread-safety; its canary was refused (writing a guarded field without its mutex)"
}

# instrumented DIR SAN: the tree's own binaries carry the sanitizer. Each
# binary links its runtime, and every object file of vramd's own code (the
# daemon and its two libraries) calls into it: a tree built without the
# flags, or with them dropped for some files, fails here instead of passing
# with "0 reports".
instrumented() {
  local dir=$1 san=$2 b o w missing=()
  local -a want objs
  case $san in
    asan) want=(__asan_ __ubsan_handle_) ;;
    tsan) want=(__tsan_) ;;
  esac
  # "FILE PREFIX" for every sanitizer prefix (__asan_, __ubsan_handle_,
  # __tsan_) a symbol of FILE starts with; nm -A NM-ARGS FILES... (awk reads
  # all of nm's output: no SIGPIPE under pipefail).
  prefixes() {
    nm -A "$@" 2>/dev/null | awk '{ f = $1; sub(/:[^:]*$/, "", f); s = $NF
      if (s ~ /^__asan_/) print f, "__asan_"; else if (s ~ /^__ubsan_handle_/) print f, "__ubsan_handle_"
      else if (s ~ /^__tsan_/) print f, "__tsan_" }' | sort -u
  }
  local -A has=()
  local f p
  local -a bins=()
  for b in vramd vramctl vramd-agent $(test_programs "$san"); do
    if [[ -x "$dir/bin/$b" ]]; then bins+=("$dir/bin/$b"); else missing+=("$dir/bin/$b is missing"); fi
  done
  while read -r f p; do has["$f $p"]=1; done < <(((${#bins[@]})) && prefixes --defined-only "${bins[@]}")
  for b in "${bins[@]}"; do
    for w in "${want[@]}"; do
      [[ -n "${has["$b $w"]:-}" ]] || missing+=("$b defines no ${w}* symbols: the $san runtime is not linked")
    done
  done
  # The daemon's own objects and those of every component library (vramd_<name>).
  mapfile -t objs < <(find "$dir/CMakeFiles/vramd.dir" "$dir"/CMakeFiles/vramd_*.dir \
    -name '*.o' 2>/dev/null | sort)
  ((${#objs[@]} > 0)) || missing+=("$dir has no object files of vramd (CMakeFiles/vramd*.dir)")
  while read -r f p; do has["$f $p"]=1; done < <(((${#objs[@]})) && prefixes --undefined-only "${objs[@]}")
  for o in "${objs[@]}"; do
    for w in "${want[@]}"; do
      [[ -n "${has["$o $w"]:-}" ]] || missing+=("${o#"$dir"/} is not instrumented: it calls no ${w}*")
    done
  done
  if ((${#missing[@]})); then
    printf 'sanitize.sh: %s\n' "${missing[@]:0:20}"
    echo "sanitize.sh: $dir fails the $san instrumentation check (${#missing[@]} problem(s)): its tests would prove nothing"
    return 1
  fi
  echo "sanitize.sh: $dir is instrumented for $san: vramd, vramctl, vramd-agent, $(test_programs "$san" | sed 's/ /, /g')" \
    "link the runtime; all ${#objs[@]} object files of vramd call ${want[*]}"
}

# run NAME REPORT_DIR BINARY [gtest args]: the tests must pass and no process
# (the test binary, or a vramd/vramctl it started) may leave a report. Runs as
# a job of the pool below: its summary line goes to $work/NAME.sum, a failure
# leaves $work/NAME.failed, what it prints (a failure's details) is printed
# after every job is done; one line goes to the terminal (fd 3) when it ends.
run() {
  local name=$1 reports=$2
  shift 2
  local t0 rc=0 log="$work/$name.log" summary=() status=0
  t0=$(date +%s)
  timeout "$TEST_TIMEOUT" "$@" >"$log" 2>&1 || rc=$?
  local n
  n=$(find "$reports" -type f | wc -l)
  local passed
  passed=$(sed -n -e 's/^\[  PASSED  \] \([0-9]*\) tests\?.*/\1/p' -e 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -1)
  if ((rc != 0 || n != 0)); then
    status=1
    echo "== $name FAILED (exit $rc, $n sanitizer report(s))"
    if grep -q -E 'Failure$|^(FAIL|ERROR): ' "$log"; then
      grep -A12 -E 'Failure$|^(FAIL|ERROR): ' "$log" | head -80
    elif ((rc != 0 && n == 0)); then
      tail -30 "$log"  # no test failed: a crash, a hang (exit 124) or a bad exit
    fi
    grep -E '^\[  FAILED  \]' "$log" | sort -u | head -20 || true
    for f in $(find "$reports" -type f | head -5); do
      echo "--- $f"
      head -60 "$f"
    done
    summary+=("$(printf '%-30s %6s tests  %4ss  exit %s, %s report(s)  FAILED' "$name" "${passed:-?}" \
      "$(( $(date +%s) - t0 ))" "$rc" "$n")")
  else
    summary+=("$(printf '%-30s %6s tests  %4ss  0 reports  ok' "$name" "${passed:-?}" "$(( $(date +%s) - t0 ))")")
  fi
  printf '%s\n' "${summary[@]}" >"$work/$name.sum"
  ((status == 0)) || touch "$work/$name.failed"
  echo "sanitize.sh: $name finished in $(( $(date +%s) - t0 )) s ($( ((status == 0)) && echo clean || echo 'failed, details at the end'))" >&3
}

# The pool: the runs are mostly waiting (the e2e files on their testbeds,
# the system tests on vramd; one after the other the runs took 942 s and
# 5 CPU-minutes), so SANITIZE_JOBS of them (default 3) run at once (332 s),
# each e2e file a run of its own. Each run has its own report directory, log
# and testbed; the integration runs share the tier's Valkey as CTest's
# parallel entries do.
SANITIZE_JOBS=${SANITIZE_JOBS:-3}
[[ "$SANITIZE_JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "sanitize.sh: SANITIZE_JOBS=$SANITIZE_JOBS is not a positive number"; exit 2; }
exec 3>&1
jobs_started=()
submit() {
  while (($(jobs -rp | wc -l) >= SANITIZE_JOBS)); do wait -n || true; done
  jobs_started+=("$1")
  run "$@" >"$work/$1.out" 2>&1 &
}

# tiers SAN DIR OPTIONS...: submits the runs of DIR to the pool: each e2e
# file of E2E_UNDER_ASAN or E2E_UNDER_TSAN (the longest first), the
# integration, system and unit tests (TESTS_UNDER_ASAN or _TSAN), each with its
# own report directory.
tiers() {
  local san=$1 dir=$2
  shift 2
  local job r opts e2e_files=$E2E_UNDER_ASAN
  [[ $san == tsan ]] && e2e_files=$E2E_UNDER_TSAN
  # The longest first: the e2e files, integration, system, unit (ledger).
  for job in $(printf 'e2e.%s ' $e2e_files) $(test_programs "$san" | sed 's/_tests//g; s/^integration /integration system /'); do
    r="$work/reports-$san.$job"
    mkdir -p "$r"
    chmod 1777 "$r"
    opts=()
    for o in "$@"; do opts+=("${o//@R@/$r}"); done
    case $job in
      system)
        submit "$san.$job" "$r" env "${opts[@]}" VRAMD_BIN_DIR="$PWD/$dir/bin" PYTHONUNBUFFERED=1 \
          bash -c 'cd tests/system && python3 -m unittest discover -p "*_test.py" -v' ;;
      e2e.*)
        # The testbed passes the sanitizer options on to the vramd it starts
        # (tests/e2e/testbed.py clean_env); its Go servers ignore them.
        submit "$san.$job" "$r" env "${opts[@]}" VRAMD_BIN_DIR="$PWD/$dir/bin" PYTHONUNBUFFERED=1 \
          bash -c "cd tests/e2e && python3 -m unittest -v ${job#e2e.}" ;;
      *) submit "$san.$job" "$r" env "${opts[@]}" "$dir/bin/${job}_tests" --gtest_filter="$GTEST_FILTER_ARG" ;;
    esac
  done
}

# The options every process of a tier runs with (@R@: its report directory).
asan_opts=("ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:log_path=@R@/asan"
           "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=@R@/ubsan" "LSAN_OPTIONS=log_path=@R@/lsan")
# scripts/lib/tsan.supp (copied to $work): false positives of uninstrumented libraries, each with its reason.
tsan_opts=("TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:log_path=@R@/tsan:suppressions=$work/tsan.supp")

status=0
for s in $SANITIZERS; do
  t0=$(date +%s)
  case $s in
    asan)
      build build-asan address,undefined
      echo "sanitize.sh: build-asan built in $(( $(date +%s) - t0 )) s"
      ((build_only)) && continue
      canary asan "${asan_opts[@]}" || status=1
      thread_safety_canary build-asan || status=1
      instrumented build-asan asan || status=1
      tiers asan build-asan "${asan_opts[@]}"
      ;;
    tsan)
      build build-tsan thread
      echo "sanitize.sh: build-tsan built in $(( $(date +%s) - t0 )) s"
      ((build_only)) && continue
      canary tsan "${tsan_opts[@]}" || status=1
      thread_safety_canary build-tsan || status=1
      instrumented build-tsan tsan || status=1
      tiers tsan build-tsan "${tsan_opts[@]}"
      ;;
    *) echo "sanitize.sh: unknown sanitizer $s (asan, tsan)"; exit 2 ;;
  esac
done

if ((build_only)); then
  echo "sanitize.sh: --build-only: the trees are built, nothing was tested; took $(( $(date +%s) - start )) s"
  exit 0
fi

wait  # every run of the pool
summary=()
for name in "${jobs_started[@]}"; do
  if [[ -s "$work/$name.out" ]]; then echo; echo "== $name"; cat "$work/$name.out"; fi
  if [[ -s "$work/$name.sum" ]]; then
    mapfile -t -O "${#summary[@]}" summary <"$work/$name.sum"
  else
    summary+=("$(printf '%-30s  no result (the run itself failed)  FAILED' "$name")")
    status=1
  fi
  [[ -e "$work/$name.failed" ]] && status=1
done

echo
echo "== sanitizers (runs side by side: SANITIZE_JOBS=$SANITIZE_JOBS) =="
printf '%s\n' "${summary[@]}"
if ((${#partial[@]})); then
  echo "!!! sanitize.sh: PARTIAL RUN: ${partial[*]}; this is not the full sanitizer tier"
fi
echo "sanitize.sh: took $(( $(date +%s) - start )) s"
exit $status
