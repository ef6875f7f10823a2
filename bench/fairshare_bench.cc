// Issue 16 benchmark (being written): see bench/CMakeLists.txt.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
