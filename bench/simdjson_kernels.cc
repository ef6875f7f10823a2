// Does it matter that simdjson's on-demand code is compiled for the
// "fallback" kernel? (issue 6). simdjson's on-demand API is header-inline and
// compiled once, for the implementation the compile flags allow: without
// -march flags that is simdjson::fallback. Its stage 1 (finding the
// structure of the document, the SIMD-heavy part) is not: parser::iterate
// runs it through get_active_implementation(), chosen at run time
// (icelake/haswell on current x86). This program is built three times
// (bench/CMakeLists.txt: fallback, westmere, haswell flags) and decodes the
// same 5,000-name filter body the way ArgsDecoder does, so the three builds
// show what compiling the on-demand part for a SIMD kernel would change.
//
//   build/bin/simdjson_kernels_fallback; build/bin/simdjson_kernels_haswell
#include <simdjson.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "bench_data.h"

#ifndef VRAMD_KERNEL_FLAGS
#define VRAMD_KERNEL_FLAGS "none"
#endif

namespace {

double CpuUs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

}  // namespace

int main() {
#if defined(__x86_64__)
  if (std::string_view(VRAMD_KERNEL_FLAGS).find("avx2") != std::string_view::npos &&
      !__builtin_cpu_supports("avx2")) {
    std::printf("this CPU has no AVX2; the haswell build cannot run here\n");
    return 0;
  }
#endif
  const std::string body = vramd::bench::FixtureBody("filter-multicontainer-initcontainer.json", 5000);
  simdjson::padded_string padded(body);
  simdjson::ondemand::parser parser;
  std::vector<std::string_view> names;
  names.reserve(5000);
  bool ok = true;
  // stage1_only: iterate() alone (stage 1); otherwise also walk to the names.
  auto run = [&](bool stage1_only) {
    names.clear();
    simdjson::ondemand::document doc;
    if (parser.iterate(padded).get(doc)) {
      ok = false;
      return;
    }
    if (stage1_only) return;
    simdjson::ondemand::object top;
    if (doc.get_object().get(top)) {
      ok = false;
      return;
    }
    for (auto field : top) {
      std::string_view key;
      if (field.unescaped_key().get(key)) ok = false;
      if (key != "NodeNames") continue;
      simdjson::ondemand::array arr;
      if (field.value().get_array().get(arr)) ok = false;
      for (auto e : arr) {
        std::string_view s;
        if (e.get_string().get(s)) ok = false;
        names.push_back(s);
      }
    }
  };
  auto best_of = [&](bool stage1_only) {
    for (int i = 0; i < 200; ++i) run(stage1_only);
    double best = 1e18;
    for (int r = 0; r < 30; ++r) {
      const double t0 = CpuUs();
      for (int i = 0; i < 500; ++i) run(stage1_only);
      best = std::min(best, (CpuUs() - t0) / 500);
    }
    return best;
  };
  const double stage1 = best_of(true);
  const double full = best_of(false);
  if (!ok || names.size() != 5000) {
    std::printf("decode failed\n");
    return 1;
  }
  std::printf("on-demand compiled with flags [%s] (ondemand = %s), stage 1 at run time = %s: "
              "%zu-byte body, 5000 names: stage 1 %.1f us, decode %.1f us (best CPU time of 30 x 500)\n",
              VRAMD_KERNEL_FLAGS, SIMDJSON_STRINGIFY(SIMDJSON_BUILTIN_IMPLEMENTATION),
              simdjson::get_active_implementation()->name().c_str(), body.size(), stage1, full);
  return 0;
}
