//===- Error.h - runtime errors --------------------------------*- C++ -*-===//
//
// The runtime reports every failure (bad package, bad data, missing GPU) as an
// mlc::rt::Error whose message names the file, tensor or step involved; the
// tools print it and exit non-zero.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_ERROR_H
#define MLC_RUNTIME_ERROR_H

#include <stdexcept>
#include <string>

namespace mlc::rt {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &msg) : std::runtime_error(msg) {}
};

[[noreturn]] inline void fail(const std::string &msg) { throw Error(msg); }

} // namespace mlc::rt

#endif // MLC_RUNTIME_ERROR_H
