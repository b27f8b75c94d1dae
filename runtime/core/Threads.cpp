//===- Threads.cpp - thread wait policies for the CPU runtime --------------===//

#include "runtime/core/Threads.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace mlc::rt {

void configureThreadsAndReexec(char **argv) {
  if (std::getenv("MLC_THREADS_CONFIGURED"))
    return;
#ifdef MLC_HAVE_DNNL
  // f32 GEMMs run on the kernels' own OpenMP pool (oneDNN): threads that
  // spin between launches pick the next one up sooner (3-5% a GPT-2 step).
  setenv("OMP_WAIT_POLICY", "active", /*overwrite=*/0);
#else
  setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/0);
#endif
  // Ranks that mpirun starts on one machine share its cores.
  if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) {
    long ranks = std::strtol(local, nullptr, 10), cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (ranks > 1 && cores > 0) {
      std::string threads = std::to_string(std::max(1L, cores / ranks));
      setenv("OMP_NUM_THREADS", threads.c_str(), /*overwrite=*/0);
      setenv("OPENBLAS_NUM_THREADS", threads.c_str(), /*overwrite=*/0);
    }
  }
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", /*overwrite=*/0);
  setenv("MLC_THREADS_CONFIGURED", "1", 1);
  execv("/proc/self/exe", argv);
  // If the re-exec fails, run as we are: only speed differs.
}

} // namespace mlc::rt
