//===- Threads.cpp - thread wait policies for the CPU runtime
//--------------===//

#include "runtime/core/Threads.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
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

std::string capThreadCounts(const std::string &value, long cores) {
  if (cores < 1)
    return "";
  std::string out;
  bool capped = false;
  size_t start = 0;
  while (true) {
    size_t comma = value.find(',', start);
    std::string item = value.substr(start, comma == std::string::npos ? std::string::npos
                                                                       : comma - start);
    char *end = nullptr;
    errno = 0;
    long long n = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || n < 1) // not a count: OpenMP's to report
      return "";
    if (n > cores || errno == ERANGE) {
      n = cores;
      capped = true;
    }
    out += (out.empty() ? "" : ",") + std::to_string(n);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return capped ? out : "";
}

void configureThreadsAndReexec(char **argv) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const char *threads = std::getenv("OMP_NUM_THREADS");
  const std::string capped = threads ? capThreadCounts(threads, cores) : "";
  // Configured already (this process is the re-exec, or a user set the
  // variable): only a thread count past the cores, which libgomp would
  // crash on, is still to cap.
  const bool configured = std::getenv("MLC_THREADS_CONFIGURED") != nullptr;
  if (configured && capped.empty())
    return;
  if (!capped.empty()) {
    std::fprintf(stderr, "mlc: note: OMP_NUM_THREADS=%s is more threads than the %ld cores "
                         "of this machine: using %s\n",
                 threads, cores, capped.c_str());
    setenv("OMP_NUM_THREADS", capped.c_str(), 1);
  }
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!configured)
    for (const auto &[name, value] :
         threadEnvironment(local ? std::strtol(local, nullptr, 10) : 0, cores))
      setenv(name.c_str(), value.c_str(), /*overwrite=*/0);
  setenv("MLC_THREADS_CONFIGURED", "1", 1);
  execv("/proc/self/exe", argv);
  // If the re-exec fails, run as we are: only speed differs.
}

} // namespace mlc::rt
