//===- Threads.cpp - thread wait policies for the CPU runtime
//--------------===//

#include "runtime/core/Threads.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace mlc::rt {

std::vector<std::pair<std::string, std::string>>
threadEnvironment(long localRanks, long cores) {
  // Never a policy that spins without end (Threads.h): passive in every
  // build, with oneDNN as with OpenBLAS.
  std::vector<std::pair<std::string, std::string>> env = {
      {"OMP_WAIT_POLICY", "passive"}};
  // Ranks that mpirun starts on one machine share its cores.
  if (localRanks > 1 && cores > 0) {
    std::string threads = std::to_string(std::max(1L, cores / localRanks));
    env.push_back({"OMP_NUM_THREADS", threads});
    env.push_back({"OPENBLAS_NUM_THREADS", threads});
  }
  env.push_back({"OPENBLAS_THREAD_TIMEOUT", "4"});
  return env;
}

void configureThreadsAndReexec(char **argv) {
  if (std::getenv("MLC_THREADS_CONFIGURED"))
    return;
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  for (const auto &[name, value] :
       threadEnvironment(local ? std::strtol(local, nullptr, 10) : 0,
                         sysconf(_SC_NPROCESSORS_ONLN)))
    setenv(name.c_str(), value.c_str(), /*overwrite=*/0);
  setenv("MLC_THREADS_CONFIGURED", "1", 1);
  execv("/proc/self/exe", argv);
  // If the re-exec fails, run as we are: only speed differs.
}

} // namespace mlc::rt
