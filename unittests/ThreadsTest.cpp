//===- ThreadsTest.cpp - the OpenMP settings the runtime re-executes with
//--===//
//
// OMP_WAIT_POLICY=active made every parallel region cost a scheduler time
// slice whenever two of mlc's threads shared a core (a 0.4 ms step took
// 430 ms; bench/wait_policy.sh measures it). These check the invariant
// instead of a time: the runtime never asks OpenMP to spin without end.
//
//===----------------------------------------------------------------------===//

#include "runtime/core/Threads.h"

#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <map>
#include <sys/wait.h>
#include <unistd.h>

using namespace mlc::rt;

namespace {

std::map<std::string, std::string> asMap(long ranks, long cores) {
  std::map<std::string, std::string> m;
  for (auto &[name, value] : threadEnvironment(ranks, cores))
    EXPECT_TRUE(m.emplace(name, value).second) << name << " set twice";
  return m;
}

TEST(Threads, OpenMPWaitsPassivelyAndNeverSpinsWithoutEnd) {
  for (long ranks : {0L, 1L, 2L, 8L}) {
    auto env = asMap(ranks, 2);
    EXPECT_EQ(env["OMP_WAIT_POLICY"], "passive") << ranks << " local ranks";
    EXPECT_EQ(env.count("GOMP_SPINCOUNT"), 0u);
    EXPECT_EQ(env.count("KMP_BLOCKTIME"), 0u);
  }
}

TEST(Threads, LocalRanksShareTheCores) {
  auto one = asMap(0, 16);
  EXPECT_EQ(one.count("OMP_NUM_THREADS"), 0u);
  auto four = asMap(4, 16);
  EXPECT_EQ(four["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(four["OPENBLAS_NUM_THREADS"], "4");
  EXPECT_EQ(asMap(3, 2)["OMP_NUM_THREADS"], "1");
}

TEST(Threads, CountsAboveTheCoresAreCapped) {
  EXPECT_EQ(capThreadCounts("100000", 16), "16");
  EXPECT_EQ(capThreadCounts("99999999999999999999999", 4), "4"); // past int64: capped too
  EXPECT_EQ(capThreadCounts("8,100", 16), "8,16");               // per nesting level
  // Within the cores, or not a count (libgomp reports those itself): unchanged.
  EXPECT_EQ(capThreadCounts("16", 16), "");
  EXPECT_EQ(capThreadCounts("1", 16), "");
  for (const char *odd : {"", "abc", "0", "-3", "4,", "4x"})
    EXPECT_EQ(capThreadCounts(odd, 16), "") << odd;
}

// Run in a process that configureThreadsAndReexec started (below): what it
// sees is what libgomp read when it loaded.
TEST(Threads, ReexecChild) {
  const char *expect = std::getenv("MLC_THREADS_TEST_EXPECT");
  if (!expect)
    GTEST_SKIP() << "run by ReexecsWithPassiveWaitsAndKeepsTheUsersChoice";
  ASSERT_NE(std::getenv("MLC_THREADS_CONFIGURED"), nullptr);
  const char *policy = std::getenv("OMP_WAIT_POLICY");
  ASSERT_NE(policy, nullptr);
  EXPECT_STREQ(policy, expect);
}

/// Forks; the child clears the runtime's marker, sets OMP_WAIT_POLICY to
/// `preset` (null: unset) and re-executes this binary into ReexecChild
/// (`quiet`: its report to /dev/null).
int reexecChild(const char *preset, const char *expect, bool quiet = false) {
  pid_t pid = fork();
  if (pid == 0) {
    if (quiet && !freopen("/dev/null", "w", stdout))
      _exit(4);
    unsetenv("MLC_THREADS_CONFIGURED");
    if (preset)
      setenv("OMP_WAIT_POLICY", preset, 1);
    else
      unsetenv("OMP_WAIT_POLICY");
    setenv("MLC_THREADS_TEST_EXPECT", expect, 1);
    char self[] = "mlc-unittests",
         filter[] = "--gtest_filter=Threads.ReexecChild";
    char *argv[] = {self, filter, nullptr};
    configureThreadsAndReexec(argv);
    _exit(3); // the re-exec failed
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(Threads, ReexecsWithPassiveWaitsAndKeepsTheUsersChoice) {
  EXPECT_EQ(reexecChild(nullptr, "passive"), 0);
  EXPECT_EQ(reexecChild("active", "active"), 0);
  // A wrong expectation fails in the child: the check can fail.
  EXPECT_NE(reexecChild(nullptr, "active", /*quiet=*/true), 0);
}

} // namespace
