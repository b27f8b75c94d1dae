//===- FilesTest.cpp - programs started without a shell, checked writes ----===//

#include "support/Error.h"
#include "runtime/backend/KernelCache.h"
#include "runtime/core/Process.h"
#include "support/TensorIO.h"
#include "runtime/train/ModelDirectory.h"

#include <csignal>
#include <cstdlib>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlc::rt;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/mlc-filestest-XXXXXX";
  return mkdtemp(tmpl);
}

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(Process, SplitsCommandWordsAtWhitespaceOnly) {
  EXPECT_EQ(splitCommandWords("  ccache\tg++  -O2 "),
            (std::vector<std::string>{"ccache", "g++", "-O2"}));
  EXPECT_EQ(splitCommandWords("c++ -DX='a;b'$(id)"),
            (std::vector<std::string>{"c++", "-DX='a;b'$(id)"}));
  EXPECT_TRUE(splitCommandWords(" \n").empty());
}

TEST(Process, ArgumentsArriveVerbatimAndOutputGoesToTheLog) {
  std::string dir = tempDir(), log = dir + "/log";
  std::string nasty = "a'b;touch " + dir + "/PWNED;$(touch " + dir + "/PWNED)`x`\nz";
  EXPECT_EQ(runProcess({"printf", "%s|", nasty, "two words"}, log, {}), 0);
  EXPECT_EQ(readFile(log), nasty + "|two words|");
  EXPECT_FALSE(exists(dir + "/PWNED"));
}

TEST(Process, ReportsTheExitStatusAndAProgramThatCannotStart) {
  std::string dir = tempDir();
  EXPECT_EQ(runProcess({"sh", "-c", "exit 3"}, dir + "/log", {}), 3);
  EXPECT_EQ(runProcess({"sh", "-c", "kill -TERM $$"}, dir + "/log", {}), 128 + SIGTERM);
  try {
    runProcess({"no-such-program-mlc", "-x"}, dir + "/log", {dir + "/log"});
    FAIL() << "started a missing program";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("cannot start no-such-program-mlc"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(exists(dir + "/log"));
}

// A process that failed to load a cached artifact evicts it, but not the
// artifact another process has rebuilt meanwhile (which it may be loading);
// the lookup after an eviction builds it again.
TEST(KernelCache, EvictsOnlyTheArtifactThatFailedToLoad) {
  std::string dir = tempDir();
  setenv("MLC_CACHE_DIR", dir.c_str(), 1);
  int builds = 0;
  auto build = [&](const std::string &tmp) {
    ++builds;
    writeFileAtomically(tmp, "artifact " + std::to_string(builds));
  };
  std::string path = cachedArtifact("k", "bin", build);
  EXPECT_EQ(cachedArtifact("k", "bin", build), path);
  EXPECT_EQ(builds, 1);
  const ArtifactId first = artifactId(path);
  // Another process replaced it (a rename: a new file): kept.
  writeFileAtomically(path + ".new", "artifact 2");
  ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
  evictArtifact(path, first);
  EXPECT_TRUE(exists(path));
  EXPECT_EQ(readFile(path), "artifact 2");
  // The file that failed is still the one there: evicted, then rebuilt.
  evictArtifact(path, artifactId(path));
  EXPECT_FALSE(exists(path));
  EXPECT_EQ(cachedArtifact("k", "bin", build), path);
  EXPECT_EQ(builds, 2);
  unsetenv("MLC_CACHE_DIR");
}

TEST(Files, AFailedWriteKeepsEveryPreviousFile) {
  std::string dir = tempDir();
  writeFileAtomically(dir + "/a", "old a");
  writeFileAtomically(dir + "/b", "old b");
  // The second destination cannot be written: neither file is replaced.
  EXPECT_THROW(writeFilesAtomically({{dir + "/a", "new a"}, {dir + "/missing/b", "new b"}}),
               Error);
  EXPECT_EQ(readFile(dir + "/a"), "old a");
  EXPECT_FALSE(exists(dir + "/a.tmp." + std::to_string(getpid())));
  writeFilesAtomically({{dir + "/a", "new a"}, {dir + "/b", "new b"}});
  EXPECT_EQ(readFile(dir + "/a") + readFile(dir + "/b"), "new anew b");
}

TEST(Files, PastTheFileSizeLimitTheErrorNamesTheFile) {
  std::string dir = tempDir(), path = dir + "/w.bin";
  writeFileAtomically(path, "previous");
  struct rlimit old;
  getrlimit(RLIMIT_FSIZE, &old);
  auto previous = std::signal(SIGXFSZ, SIG_IGN); // as the tools do
  struct rlimit small = old;
  small.rlim_cur = 4096;
  setrlimit(RLIMIT_FSIZE, &small);
  std::string error;
  try {
    writeFileAtomically(path, std::string(100000, 'x'));
  } catch (const Error &e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  EXPECT_EQ(error, path + ": write failed: File too large");
  EXPECT_EQ(readFile(path), "previous");
  EXPECT_FALSE(exists(path + ".tmp." + std::to_string(getpid())));
}

// --max-shard-size reads sizes as transformers' convert_file_size_to_int.
TEST(ModelDirectory, ShardSizesAreReadAsTransformersReadsThem) {
  EXPECT_EQ(parseShardSize("5GB"), 5000000000);
  EXPECT_EQ(parseShardSize("500KB"), 500000);
  EXPECT_EQ(parseShardSize("2MiB"), 2 * 1024 * 1024);
  EXPECT_EQ(parseShardSize("1GiB"), 1024 * 1024 * 1024);
  EXPECT_EQ(parseShardSize("8Mb"), 1000000); // bits
  EXPECT_EQ(parseShardSize("1234"), 1234);
  EXPECT_EQ(parseShardSize("3gB"), 3000000000);
  EXPECT_EQ(parseShardSize("2kb"), 250);
  for (const char *bad : {"", "GB", "5 GB", "5TB", "-5GB", "0", "5GBs", "1e3"})
    EXPECT_THROW(parseShardSize(bad), Error) << bad;
}

// save_pretrained's rule: a tensor opens a new shard when it would take
// the current one past the size, unless that shard is still empty (a tensor
// larger than the size has a shard of its own).
TEST(ModelDirectory, ShardsFollowSavePretrained) {
  using Shards = std::vector<std::vector<size_t>>;
  EXPECT_EQ(planShards({40, 40, 40}, 100), (Shards{{0, 1}, {2}}));
  EXPECT_EQ(planShards({50, 50, 10}, 100), (Shards{{0, 1}, {2}}));
  EXPECT_EQ(planShards({250, 10, 10}, 100), (Shards{{0}, {1, 2}}));
  EXPECT_EQ(planShards({10, 250, 10}, 100), (Shards{{0}, {1}, {2}}));
  EXPECT_EQ(planShards({10, 20}, 5000000000), (Shards{{0, 1}}));
}

} // namespace
