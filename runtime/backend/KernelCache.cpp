//===- KernelCache.cpp - compiled kernels, cached on disk by content --------===//

#include "runtime/backend/KernelCache.h"
#include "support/Error.h"
#include "runtime/core/Hash.h"
#include "runtime/core/Process.h"
#include "support/TensorIO.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mlc::rt {

std::string cacheRoot() {
  std::string dir;
  if (const char *d = std::getenv("MLC_CACHE_DIR"); d && *d)
    dir = d;
  else {
    const char *home = std::getenv("HOME");
    dir = std::string(home && *home ? home : "/tmp") + "/.cache/mlc";
  }
  // Paths under it are compiler arguments: never one that reads as an option.
  if (dir[0] == '-')
    dir = "./" + dir;
  makeDirectories(dir);
  return dir;
}

namespace {

/// Whether the artifact at `path` is complete. Beside each artifact, its size
/// as written: an artifact truncated or replaced since (a full disk, a copy
/// gone wrong) no longer matches and is rebuilt instead of being loaded.
bool artifactComplete(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || st.st_size <= 0)
    return false;
  std::ifstream in(path + ".size");
  long long recorded = -1;
  return in >> recorded && recorded == (long long)st.st_size;
}

/// Seconds a process waits for another's build (a big model's NVRTC compile
/// takes minutes under load).
constexpr double kLockPatience = 1800;

/// An exclusive flock on PATH.lock while one process builds the artifact:
/// the others that need it at the same time (the ranks of an mpirun, runs
/// started together) wait, then load what it built instead of compiling the
/// same source each. The kernel releases it when the process ends, however
/// it ends. Where no lock can be taken (a read-only or full cache, a file
/// system without flock), each process builds as if it were alone.
/// A wait past kLockPatience (a builder stopped or hung, a lock server
/// gone) is given up with a note: this process then builds alone.
class BuildLock {
public:
  explicit BuildLock(const std::string &path) {
    const std::string lock = path + ".lock";
    fd_ = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) // another user's lock file: flock needs no write access
      fd_ = open(lock.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      return;
    const auto start = std::chrono::steady_clock::now();
    while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if ((errno != EWOULDBLOCK && errno != EINTR) || waited > kLockPatience) {
        if (waited > kLockPatience)
          std::fprintf(stderr, "mlc: note: %s is still held after %.0f s; building alone\n",
                       lock.c_str(), waited);
        close(fd_);
        fd_ = -1;
        return;
      }
      usleep(20000);
    }
  }
  ~BuildLock() {
    if (fd_ >= 0)
      close(fd_);
  }
  BuildLock(const BuildLock &) = delete;
  BuildLock &operator=(const BuildLock &) = delete;

private:
  int fd_ = -1;
};

} // namespace

std::string cachedArtifact(const std::string &key, const std::string &suffix,
                           const std::function<void(const std::string &tmp)> &build) {
  std::string path = cacheRoot() + "/" + key + "." + suffix;
  std::string sizeFile = path + ".size";
  if (artifactComplete(path))
    return path;
  BuildLock lock(path);
  if (artifactComplete(path)) // another process built it while this one waited
    return path;
  struct stat st;
  std::remove(path.c_str());
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  try {
    build(tmp);
    if (stat(tmp.c_str(), &st) != 0 || st.st_size == 0)
      fail(path + ": the compiled kernels are missing or empty");
    writeFileAtomically(sizeFile, std::to_string((long long)st.st_size) + "\n");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(path + ": cannot move the compiled kernels into the cache");
  }
  return path;
}

ArtifactId artifactId(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return {};
  return {(unsigned long long)st.st_dev, (unsigned long long)st.st_ino};
}

void evictArtifact(const std::string &path, ArtifactId loaded) {
  BuildLock lock(path);
  const ArtifactId now = artifactId(path);
  if (now.ino != 0 && (now.dev != loaded.dev || now.ino != loaded.ino))
    return; // rebuilt by another process since this one read it
  std::remove(path.c_str());
  std::remove((path + ".size").c_str());
}

void *loadHostKernelLibrary(const std::string &source, bool verbose) {
  // $CXX may hold words ("ccache g++"): they become arguments, never shell text.
  const char *cxxEnv = std::getenv("CXX");
  std::string cxx = cxxEnv && *cxxEnv ? cxxEnv : "c++";
  std::vector<std::string> cxxWords = splitCommandWords(cxx);
  if (cxxWords.empty())
    cxxWords = {"c++"};
  // -fno-trapping-math lets the vectorizer if-convert float compares (clamps,
  // max reductions); kernels never rely on floating-point exceptions.
  // -fno-math-errno lets sqrt vectorize (the optimizer kernel, LayerNorm);
  // nothing reads errno. Neither changes a result.
  // -ffp-contract=off: no product and sum contracted into one fused
  // multiply-add (std::fma still is one). The compiler contracts only where
  // the product is not also stored, and how depends on the vectorization
  // -march=native picks, so a value would round differently in a kernel
  // that writes it and in one that computes it for a neighbour alone:
  // fusion or --recompute would change results on some CPUs and not others
  // (BERT's post-norm residual sum, written by forward's LayerNorm kernel
  // and recomputed by a pointwise one in backward, on an AVX-512 machine).
  // A step's time is its GEMMs' (compiled apart) and its memory-bound
  // kernels' traffic: the cost is within a step's noise (docs/scaling.md).
  const std::string flags = "-std=c++17 -O3 -march=native -fno-trapping-math -fno-math-errno "
                            "-ffp-contract=off -fopenmp -fPIC -shared -w";
  std::string key = "kernels-" + contentHash(cxx + "\n" + flags + "\n" + source);
  auto build = [&](const std::string &tmp) {
    std::string dir = cacheRoot();
    std::string cpp = dir + "/" + key + ".cpp", log = dir + "/" + key + ".log";
    writeFileAtomically(cpp, source);
    std::vector<std::string> argv = cxxWords;
    for (const std::string &w : splitCommandWords(flags))
      argv.push_back(w);
    argv.insert(argv.end(), {"-o", tmp, cpp});
    auto t0 = std::chrono::steady_clock::now();
    if (verbose)
      std::fprintf(stderr, "mlc: compiling kernels (%s)\n", cpp.c_str());
    int status;
    try {
      status = runProcess(argv, log, {tmp, log});
    } catch (const Error &e) {
      fail(std::string("the host compiler ($CXX, else c++): ") + e.what());
    }
    if (status != 0)
      fail("the host compiler (" + cxx + ") failed on the generated kernels " + cpp + ":\n" +
           readFile(log).substr(0, 4000));
    if (verbose)
      std::fprintf(stderr, "mlc: kernels compiled in %.1f s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  std::string so = cachedArtifact(key, "so", build);
  const ArtifactId loaded = artifactId(so);
  void *handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    // Rebuilt once; a second failure is reported.
    std::string first = dlerror();
    evictArtifact(so, loaded);
    so = cachedArtifact(key, "so", build);
    handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      fail(so + ": cannot load the compiled kernels: " + dlerror() + " (before rebuilding: " +
           first + ")");
  }
  return handle;
}

} // namespace mlc::rt
