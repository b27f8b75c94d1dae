//===- Threads.cpp - thread wait policies for the CPU runtime --------------===//

#include "runtime/core/Threads.h"

#include <cstdlib>
#include <unistd.h>

namespace mlc::rt {

void configureThreadsAndReexec(char **argv) {
  if (std::getenv("MLC_THREADS_CONFIGURED"))
    return;
  setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/0);
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", /*overwrite=*/0);
  setenv("MLC_THREADS_CONFIGURED", "1", 1);
  execv("/proc/self/exe", argv);
  // If the re-exec fails, run as we are: only speed differs.
}

} // namespace mlc::rt
