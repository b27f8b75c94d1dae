//===- Error.h - errors that name their file -------------------*- C++ -*-===//
//
// Every failure the runtime and the tensor-file readers report (bad package,
// bad data, missing GPU, a malformed safetensors header) is an mlc::rt::Error
// whose message names the file, tensor or step involved; the tools print it
// and exit non-zero.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_SUPPORT_ERROR_H
#define MLC_SUPPORT_ERROR_H

#include <stdexcept>
#include <string>

namespace mlc::rt {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &msg) : std::runtime_error(msg) {}
};

[[noreturn]] inline void fail(const std::string &msg) { throw Error(msg); }

} // namespace mlc::rt

#endif // MLC_SUPPORT_ERROR_H
