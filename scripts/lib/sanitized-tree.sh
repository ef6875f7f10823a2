# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: configures a clang build
# tree with sanitizers, at -O1 with line tables (about half the compile time
# of -O2 -g, the optimisation level the sanitizers are meant for; assertions on).
#   configure_sanitized DIR address,undefined   the ASan+UBSan tree; it also
#       holds the libFuzzer targets (the libraries are instrumented for
#       coverage, which the ASan runtime accepts in ordinary programs), so
#       the sanitizer and fuzz tiers compile the sources once between them
#   configure_sanitized DIR thread              the TSan tree
# Both are Ninja trees where ninja is installed (install-deps installs it; and
# lld, which CMakeLists.txt links with): Ninja starts no make per directory.
configure_sanitized() {
  local dir=$1 san=$2 fuzz=OFF gen="Unix Makefiles"
  command -v clang++ >/dev/null || { echo "clang++ is missing (scripts/install-deps.sh --test)"; return 1; }
  [[ "$san" == address,undefined ]] && fuzz=ON
  if command -v ninja >/dev/null 2>&1; then gen=Ninja; fi
  if [[ -f "$dir/CMakeCache.txt" ]] && grep -q "^VRAMD_SANITIZE:STRING=$san\$" "$dir/CMakeCache.txt" &&
     grep -q '^CMAKE_CXX_COMPILER:.*clang' "$dir/CMakeCache.txt" &&
     grep -qx "CMAKE_GENERATOR:INTERNAL=$gen" "$dir/CMakeCache.txt"; then
    # Configured before: regenerate (a target added since would be unknown
    # to the old build files), then only what changed is rebuilt.
    cmake -S . -B "$dir" >/dev/null
    return 0
  fi
  [[ -f "$dir/CMakeCache.txt" ]] && rm -rf "$dir"  # another configuration: start over
  cmake -S . -B "$dir" -G "$gen" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
    "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only" -DVRAMD_SANITIZE="$san" \
    -DVRAMD_BUILD_FUZZ=$fuzz -DVRAMD_BUILD_BENCH=OFF -DVRAMD_BUILD_TESTS=ON >/dev/null
}
