// The environment integration tests give the vramd/vramctl they start
// (integration/clean_env.h): nothing of the caller's VRAMD_* (issue 18, point 4).
#include "integration/clean_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vramd::itest {
namespace {

using ::testing::ElementsAre;

TEST(CleanEnv, KeepsOnlyWhatAProcessNeedsAndDropsTheCallersVramdVariables) {
  char* caller[] = {const_cast<char*>("VRAMD_POLICY=binpack"),
                    const_cast<char*>("VRAMD_RESERVE_PERCENT=50"),
                    const_cast<char*>("PATH=/usr/bin:/bin"),
                    const_cast<char*>("HOME=/home/dev"),
                    const_cast<char*>("LC_ALL=C.UTF-8"),
                    const_cast<char*>("ASAN_OPTIONS=log_path=/tmp/r/asan"),
                    const_cast<char*>("GTEST_FILTER=Nothing*"),
                    const_cast<char*>("SOME_SECRET=x"),
                    const_cast<char*>("MALFORMED"),
                    nullptr};
  CleanEnv env({}, caller);
  EXPECT_THAT(env.entries(), ElementsAre("ASAN_OPTIONS=log_path=/tmp/r/asan", "HOME=/home/dev", "LC_ALL=C.UTF-8",
                                         "PATH=/usr/bin:/bin"));
  EXPECT_EQ(env.envp()[4], nullptr);
}

TEST(CleanEnv, WhatTheTestSetsExplicitlyArrivesAndWins) {
  char* caller[] = {const_cast<char*>("VRAMD_POLICY=binpack"), const_cast<char*>("PATH=/bin"), nullptr};
  CleanEnv env({{"VRAMD_RESERVE_PERCENT", "25"}, {"PATH", "/opt/bin"}}, caller);
  EXPECT_THAT(env.entries(), ElementsAre("PATH=/opt/bin", "VRAMD_RESERVE_PERCENT=25"));
}

}  // namespace
}  // namespace vramd::itest
