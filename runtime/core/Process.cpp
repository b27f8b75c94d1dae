//===- Process.cpp - starting another program, without a shell -----------===//

#include "runtime/core/Process.h"
#include "support/Error.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace mlc::rt {

std::vector<std::string> splitCommandWords(const std::string &command) {
  std::istringstream in(command);
  std::vector<std::string> words;
  for (std::string w; in >> w;)
    words.push_back(w);
  return words;
}

namespace {

/// The signal that arrived while a child ran, and the child's process group
/// (0: none yet). The handler may run on any of the process's threads; it
/// only records the signal and ends the group, which wakes the waiting one.
volatile std::sig_atomic_t pendingSignal = 0;
std::atomic<pid_t> childGroup{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "used in a signal handler");

extern "C" void endChildOnSignal(int sig) {
  pendingSignal = sig;
  if (pid_t group = childGroup.load())
    ::kill(-group, SIGTERM);
}

/// endChildOnSignal for SIGINT and SIGTERM while it lives, then the previous
/// handlers. A signal ignored when it is installed stays ignored (a job
/// started with `nohup` or in the background of a script).
class EndChildOnSignal {
public:
  EndChildOnSignal() {
    pendingSignal = 0;
    for (int i = 0; i < 2; ++i) {
      struct sigaction sa {};
      sa.sa_handler = endChildOnSignal;
      sigemptyset(&sa.sa_mask);
      sigaction(kSignals[i], nullptr, &old_[i]);
      if (old_[i].sa_handler != SIG_IGN)
        sigaction(kSignals[i], &sa, nullptr);
    }
  }
  ~EndChildOnSignal() {
    for (int i = 0; i < 2; ++i)
      sigaction(kSignals[i], &old_[i], nullptr);
  }

private:
  static constexpr int kSignals[2] = {SIGINT, SIGTERM};
  struct sigaction old_[2] {};
};

/// Spawn attributes: the child leads a process group of its own (so that
/// one kill ends the compiler driver and everything it started) and begins
/// with no signal blocked and the default action for those mlc changes.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup(int logFd) {
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGINT, SIGTERM, SIGXFSZ, SIGPIPE})
      sigaddset(&defaults, sig);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, logFd, 1);
    posix_spawn_file_actions_adddup2(&actions, logFd, 2);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

} // namespace

int runProcess(const std::vector<std::string> &argv, const std::string &logPath,
               const std::vector<std::string> &partialFiles) {
  if (argv.empty())
    fail("no program to run");
  int logFd = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (logFd < 0)
    fail(logPath + ": cannot write: " + std::strerror(errno));
  if (logFd <= 2) {
    // A standard descriptor was closed: the log took its number, which the
    // child's redirections would overwrite. It moves above them.
    int moved = ::fcntl(logFd, F_DUPFD_CLOEXEC, 3);
    ::close(logFd);
    if (moved < 0)
      fail(logPath + ": cannot write: " + std::strerror(errno));
    logFd = moved;
  }
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  int status = 0;
  {
    EndChildOnSignal guard;
    SpawnSetup setup(logFd);
    pid_t pid = 0;
    int err = posix_spawnp(&pid, args[0], &setup.actions, &setup.attr, args.data(), environ);
    ::close(logFd);
    if (err != 0) {
      for (const std::string &f : partialFiles)
        std::remove(f.c_str());
      fail("cannot start " + argv[0] + ": " + std::strerror(err));
    }
    childGroup = pid;
    if (pendingSignal) // arrived before the group existed
      ::kill(-pid, SIGTERM);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    childGroup = 0;
  }
  // Read once the previous handlers are back: a signal just before is not lost.
  if (int sig = pendingSignal) {
    for (const std::string &f : partialFiles)
      std::remove(f.c_str());
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    fail(argv[0] + " was interrupted by signal " + std::to_string(sig));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace mlc::rt
