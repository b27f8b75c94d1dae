//===- Threads.h - thread wait policies for the CPU runtime ----*- C++ -*-===//

#ifndef MLC_RUNTIME_THREADS_H
#define MLC_RUNTIME_THREADS_H

#include <string>
#include <utility>
#include <vector>

namespace mlc::rt {

/// The runtime's GEMMs (oneDNN on the kernels' OpenMP pool, or OpenBLAS's
/// own threads) and kernels take turns on the same cores: some 160 launches
/// a step, most of them parallel regions. OpenMP waits passively between them:
/// a thread that spins instead (OMP_WAIT_POLICY=active spins without end) holds
/// its core while the thread it waits for is runnable on that same core, where
/// the scheduler may leave both while other processes keep the other cores
/// busy. Each region then costs a scheduler time slice (~3 ms): a tiny
/// llama step took 430 ms instead of 0.5, a GPT-2 tiny step 610 ms instead
/// of 33 (bench/wait_policy.sh). Spinning wins only while every thread has a
/// core to itself (0.36 against 0.5 ms a tiny llama step, 18 against 22-24
/// ms a GPT-2 tiny step of 8 x 128 tokens): a run on a machine of its own
/// may set OMP_WAIT_POLICY=active.
///
/// The policies are read when the libraries load, before main, so a tool
/// that runs the runtime sets them and re-executes itself once; a user's
/// own settings win, except an OMP_NUM_THREADS above the machine's cores,
/// which is capped at them (capThreadCounts; a note says so). Returns only if
/// no re-exec happened.
void configureThreadsAndReexec(char **argv);

/// OMP_NUM_THREADS `value` (a count, or a comma-separated count per nesting
/// level) with every count above `cores` lowered to it; "" when nothing is
/// above (or the value is not a list of counts: OpenMP reports and ignores
/// that itself). libgomp makes every thread it is told to, each with its
/// own stack: 100000 of them ran out of memory and crashed in the first
/// kernel, and more threads than cores only take turns on them.
std::string capThreadCounts(const std::string &value, long cores);

/// The variables configureThreadsAndReexec sets, each only where the
/// environment lacks it: `localRanks` processes (mpirun's local size, 0 for
/// none) share `cores` cores.
std::vector<std::pair<std::string, std::string>>
threadEnvironment(long localRanks, long cores);

} // namespace mlc::rt

#endif // MLC_RUNTIME_THREADS_H
