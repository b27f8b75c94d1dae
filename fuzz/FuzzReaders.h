//===- FuzzReaders.h - shared pieces of the readers' fuzz targets -*- C++ -*-===//
//
// Each target feeds libFuzzer's bytes to one reader and accepts exactly two
// outcomes: a value, or an mlc::rt::Error (a clear message). Anything else —
// a crash, a sanitizer report, another exception type, a hang — is a bug.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FUZZ_FUZZREADERS_H
#define MLC_FUZZ_FUZZREADERS_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace mlc::fuzz {

/// A file of this process holding `bytes` (readers take paths).
inline std::string writeTemp(const std::string &suffix, const uint8_t *data, size_t size) {
  std::string path = "/tmp/mlc-fuzz-" + std::to_string(getpid()) + suffix;
  FILE *f = std::fopen(path.c_str(), "wb");
  if (f) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

} // namespace mlc::fuzz

#endif // MLC_FUZZ_FUZZREADERS_H
