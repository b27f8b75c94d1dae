//===- Hash.h - content hashes of package files -----------------*- C++ -*-===//

#ifndef MLC_RUNTIME_HASH_H
#define MLC_RUNTIME_HASH_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace mlc {

/// FNV-1a, 64-bit, as 16 hex digits: names cached kernel libraries and lets
/// the runtime detect a package file that changed after compilation.
inline std::string contentHash(const std::string &bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

} // namespace mlc

#endif // MLC_RUNTIME_HASH_H
