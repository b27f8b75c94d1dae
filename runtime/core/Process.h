//===- Process.h - starting another program, without a shell ---*- C++ -*-===//
//
// The runtime starts one kind of program: the host C++ compiler that builds
// the CPU target's kernels. It is started from an argument vector
// (posix_spawnp), never through a shell, so a path that holds quotes, `;`,
// `$(...)`, backticks, spaces or a newline (a cache directory, a home
// directory) is only a path. While it runs, SIGINT and SIGTERM end it (and
// the programs it started), remove the files it was writing, and then end
// this process as the signal would have.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_CORE_PROCESS_H
#define MLC_RUNTIME_CORE_PROCESS_H

#include <string>
#include <vector>

namespace mlc::rt {

/// The words of a command variable such as $CXX ("ccache g++", "g++ -m64"),
/// split at whitespace: no quotes, no expansion, no shell.
std::vector<std::string> splitCommandWords(const std::string &command);

/// Runs `argv` (argv[0] searched in PATH) with standard input from /dev/null
/// and standard output and error into `logPath`, and returns its exit status
/// (128 + N when signal N ended it). An Error names argv[0] when it cannot be
/// started. If SIGINT or SIGTERM arrives meanwhile, the program is ended,
/// `partialFiles` are removed and this process ends by that signal. One
/// program at a time: the signal handlers are the process's.
int runProcess(const std::vector<std::string> &argv, const std::string &logPath,
               const std::vector<std::string> &partialFiles);

} // namespace mlc::rt

#endif // MLC_RUNTIME_CORE_PROCESS_H
