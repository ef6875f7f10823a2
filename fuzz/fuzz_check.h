// A property check for fuzz targets: a violated property aborts, which
// libFuzzer reports as a crash and saves the input (crash-<sha1>).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond) FUZZ_CHECK_MSG(cond, std::string())

#define FUZZ_CHECK_MSG(cond, msg)                                                                       \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      std::fprintf(stderr, "%s:%d: property violated: %s\n  %s\n", __FILE__, __LINE__, #cond,         \
                   std::string(msg).c_str());                                                         \
      std::abort();                                                                                   \
    }                                                                                                 \
  } while (0)
