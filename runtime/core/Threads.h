//===- Threads.h - thread wait policies for the CPU runtime ----*- C++ -*-===//

#ifndef MLC_RUNTIME_THREADS_H
#define MLC_RUNTIME_THREADS_H

namespace mlc::rt {

/// The runtime's GEMMs and kernels take turns on the same cores. With
/// OpenBLAS's own threads beside the kernels' OpenMP threads, both busy-wait
/// after their work by default and steal the cores from each other (a GPT-2
/// step ran 1.6x slower): OpenMP waits passively then. With oneDNN (f32
/// GEMMs on the same OpenMP pool) nothing competes, and OpenMP threads spin.
/// The policies are read when the libraries load, before main, so a tool
/// that runs the runtime sets them and re-executes itself once; a user's
/// own settings win. Returns only if no re-exec happened.
void configureThreadsAndReexec(char **argv);

} // namespace mlc::rt

#endif // MLC_RUNTIME_THREADS_H
