//===- KernelCache.h - compiled kernels, cached on disk by content -*- C++ -*-===//
//
// Every target compiles its package's kernel source once per machine: the
// CPU target with the host C++ compiler (a shared library), the CUDA target
// with NVRTC (a cubin). The artifact's name is a content hash of everything
// that determines it (compiler, flags or architecture, source), so a warm
// start compiles nothing and a changed input never reuses a stale artifact.
// Artifacts appear under their final name only when complete (a temporary
// file, then a rename). Processes that need the same missing artifact at once
// (the ranks of an mpirun) build it once: one holds KEY.SUFFIX.lock (flock)
// while it builds, the others wait and load what it built.
//
// The cache lives in $MLC_CACHE_DIR, else ~/.cache/mlc.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_KERNELCACHE_H
#define MLC_RUNTIME_BACKEND_KERNELCACHE_H

#include <functional>
#include <string>

namespace mlc::rt {

/// The cache's root directory (created if missing).
std::string cacheRoot();

/// The path of the artifact `KEY.SUFFIX` under the cache root. When it is
/// missing, `build(tmp)` is called to write it to a temporary path, which then
/// becomes the artifact; `build` reports its own failures as Errors. An
/// artifact whose size differs from the one recorded when it was written is
/// rebuilt.
std::string cachedArtifact(const std::string &key, const std::string &suffix,
                           const std::function<void(const std::string &tmp)> &build);

/// Which file an artifact's path names (device, inode): {0, 0} if none.
struct ArtifactId {
  unsigned long long dev = 0, ino = 0;
};
ArtifactId artifactId(const std::string &path);

/// Removes an artifact that failed to load (`loaded`: the file that was
/// read), so that the next lookup builds it; not where another process has
/// replaced it since (its rebuild, which that process may be loading).
void evictArtifact(const std::string &path, ArtifactId loaded);

/// The CPU target: compiles `source` (kernels.cpp) with the host C++ compiler
/// ($CXX, else c++; its words, such as "ccache g++", become arguments, never
/// shell text), or reuses the library an earlier run built from the same
/// source and flags. A SIGINT or SIGTERM during the compile leaves no
/// temporary file in the cache (runProcess). Returns a dlopen handle. No
/// product and sum are contracted into one FMA: a value rounds alike in
/// every kernel that computes it, fused or not, recomputed or not.
void *loadHostKernelLibrary(const std::string &source, bool verbose);

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_KERNELCACHE_H
