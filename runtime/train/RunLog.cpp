//===- RunLog.cpp - the JSON log and TensorBoard's event files --------------===//

#include "runtime/train/RunLog.h"
#include "runtime/core/Hash.h"
#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#ifdef MLC_HAVE_TENSORBOARD
#include "runtime/train/tensorboard/event.pb.h"
#endif

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace mlc::rt {

std::string jsonNumber(double x) {
  if (!std::isfinite(x))
    return "null";
  std::ostringstream os;
  os << std::setprecision(10) << x;
  return os.str();
}

std::string jsonLine(const LogRow &row) {
  std::string line = "{\"step\": " + std::to_string(row.step);
  for (const auto &[key, value] : row.values)
    line += ", " + jsonQuote(key) + ": " + jsonNumber(value);
  if (row.skipped)
    line += ", \"skipped\": true";
  return line + "}\n";
}

namespace {

/// The process holding an flock on the file open at `fd`, from
/// /proc/locks ("1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> ..."),
/// or "" where it cannot be told.
std::string lockHolder(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return "";
  std::ostringstream file;
  file << std::hex << std::setfill('0') << std::setw(2) << major(st.st_dev) << ':'
       << std::setw(2) << minor(st.st_dev) << ':' << std::dec << st.st_ino;
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string id, kind, mode, access, pid, where;
    if (fields >> id >> kind >> mode >> access >> pid >> where && kind == "FLOCK" &&
        where == file.str())
      return pid;
  }
  return "";
}

/// Takes the run's exclusive hold on `fd`; a file or directory another live
/// run holds is refused, naming that run's process.
void holdExclusively(int fd, const std::string &path, const std::string &what) {
  if (flock(fd, LOCK_EX | LOCK_NB) == 0)
    return;
  if (errno != EWOULDBLOCK)
    fail(path + ": cannot lock the " + what + ": " + std::strerror(errno));
  std::string pid = lockHolder(fd);
  fail(path + ": another run" + (pid.empty() ? "" : " (process " + pid + ")") +
       " is writing this " + what + "; give each run its own");
}

/// Appends `data` whole: a write that fails (a full disk, a file-size limit)
/// is cut back off, so the file keeps whole records, and is an Error naming
/// the file.
void appendAll(int fd, const std::string &data, const std::string &path,
               const std::string &what) {
  struct stat st;
  const off_t before = fstat(fd, &st) == 0 ? st.st_size : -1;
  if (int err = writeAll(fd, data)) {
    // Best effort: where the cut fails too, the error still says so.
    [[maybe_unused]] int cut = before >= 0 ? ftruncate(fd, before) : 0;
    fail(path + ": cannot write the " + what + ": " + std::strerror(err));
  }
}

void closeChecked(int &fd, const std::string &path, const std::string &what) {
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0)
    fail(path + ": cannot write the " + what + ": " + std::strerror(errno));
}

/// --log-json: one JSON object per line, a line per write() (so that each
/// reaches the file whole), under the run's flock.
class JsonLog final : public RunLog::Sink {
public:
  /// `resumeAt` > 0: a resumed run, whose log continues from that step.
  JsonLog(const std::string &path, int64_t resumeAt) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0)
      fail(path + ": cannot open the JSON log (--log-json): " + std::strerror(errno));
    try {
      holdExclusively(fd_, path, kWhat);
      // A new run starts the log afresh, a resumed one from its first step
      // (rows the interrupted run wrote after its checkpoint are cut, not
      // repeated); only once it holds the log, so that it never truncates
      // another run's.
      if (ftruncate(fd_, resumeAt > 0 ? offsetOfStep(resumeAt) : 0) != 0)
        fail(path + ": cannot write the " + std::string(kWhat) + ": " + std::strerror(errno));
    } catch (...) {
      ::close(fd_); // and with it the lock
      throw;
    }
  }
  ~JsonLog() override {
    if (fd_ >= 0)
      ::close(fd_);
  }
  void write(const LogRow &row) override { appendAll(fd_, jsonLine(row), path_, kWhat); }
  void close() override { closeChecked(fd_, path_, kWhat); }

private:
  /// The byte offset of the log's first row of step >= `step` (or of a torn
  /// or unreadable line): the rows before it are the run's up to there.
  off_t offsetOfStep(int64_t step) const {
    std::string text = readFile(path_);
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos)
        break; // a torn last line
      try {
        const Json *s = Json::parse(text.substr(at, end - at), path_).find("step");
        if (!s || s->kind != Json::Number || s->number >= double(step))
          break;
      } catch (const Error &) {
        break;
      }
      at = end + 1;
    }
    return off_t(at);
  }

  static constexpr const char *kWhat = "JSON log (--log-json)";
  std::string path_;
  int fd_ = -1;
};

#ifdef MLC_HAVE_TENSORBOARD
/// TFRecord's masked CRC (a CRC of data that holds CRCs is not itself).
std::string maskedCrc(const std::string &data) {
  uint32_t crc = crc32<kCrc32c>(data);
  uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
  return std::string(reinterpret_cast<const char *>(&masked), 4); // little-endian hosts
}

double wallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// --tensorboard-dir: a new event file per run, `events.out.tfevents.<time>.<host>.<pid>`,
/// of TFRecords (length, its masked CRC, an Event, its masked CRC), opened
/// by a file_version event; a record per row, written as it comes. The
/// directory is the run's while it writes (its flock).
class TensorBoardLog final : public RunLog::Sink {
public:
  explicit TensorBoardLog(const std::string &dir) {
    makeDirectories(dir);
    dirFd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirFd_ < 0)
      fail(dir + ": cannot open the TensorBoard directory (--tensorboard-dir): " +
           std::strerror(errno));
    try {
      holdExclusively(dirFd_, dir, "TensorBoard directory (--tensorboard-dir)");
      openEventFile(dir);
    } catch (...) {
      if (fd_ >= 0)
        ::close(fd_);
      ::close(dirFd_); // and with it the lock
      throw;
    }
  }
  ~TensorBoardLog() override {
    if (fd_ >= 0)
      ::close(fd_);
    if (dirFd_ >= 0)
      ::close(dirFd_);
  }
  void write(const LogRow &row) override {
    tensorboard::Event event;
    event.set_wall_time(wallTime());
    event.set_step(row.step);
    for (const auto &[key, value] : row.values)
      if (std::isfinite(value)) {
        tensorboard::Summary::Value *v = event.mutable_summary()->add_value();
        v->set_tag(key);
        v->set_simple_value(float(value));
      }
    append(event);
  }
  void close() override {
    closeChecked(fd_, path_, kWhat);
    ::close(dirFd_);
    dirFd_ = -1;
  }

private:
  /// The run's event file, opened by its file_version event.
  void openEventFile(const std::string &dir) {
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    path_ = dir + "/events.out.tfevents." + std::to_string(int64_t(wallTime())) + "." + host +
            "." + std::to_string(getpid());
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0)
      fail(path_ + ": cannot create the TensorBoard event file: " + std::strerror(errno));
    tensorboard::Event first;
    first.set_wall_time(wallTime());
    first.set_file_version("brain.Event:2");
    append(first);
  }

  void append(const tensorboard::Event &event) {
    std::string data = event.SerializeAsString();
    uint64_t length = data.size();
    std::string header(reinterpret_cast<const char *>(&length), 8);
    appendAll(fd_, header + maskedCrc(header) + data + maskedCrc(data), path_, kWhat);
  }

  static constexpr const char *kWhat = "TensorBoard event file";
  std::string path_;
  int fd_ = -1, dirFd_ = -1;
};
#endif

} // namespace

void checkTensorBoardDir(const std::string &dir) {
#ifndef MLC_HAVE_TENSORBOARD
  fail("--tensorboard-dir " + dir + ": this build of mlc has no TensorBoard writer (it was "
       "built without protobuf); use --log-json");
#endif
  struct stat st;
  if (stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    fail("--tensorboard-dir " + dir + ": is not a directory");
}

RunLog::RunLog(const TrainOptions &o, int64_t firstStep) {
  if (!o.logJson.empty())
    sinks_.push_back(std::make_unique<JsonLog>(o.logJson, o.resume.empty() ? 0 : firstStep));
  if (!o.tensorboardDir.empty()) {
    checkTensorBoardDir(o.tensorboardDir);
#ifdef MLC_HAVE_TENSORBOARD
    sinks_.push_back(std::make_unique<TensorBoardLog>(o.tensorboardDir));
#endif
  }
}

RunLog::~RunLog() = default;

void RunLog::write(const LogRow &row) {
  for (auto &sink : sinks_)
    sink->write(row);
}

void RunLog::close() {
  for (auto &sink : sinks_)
    sink->close();
  sinks_.clear();
}

} // namespace mlc::rt
