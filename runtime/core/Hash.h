//===- Hash.h - content hashes of package files -----------------*- C++ -*-===//

#ifndef MLC_RUNTIME_HASH_H
#define MLC_RUNTIME_HASH_H

#include <array>
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

/// Reflected CRC-32 polynomials: zlib's and PNG's, and Castagnoli's
/// (CRC-32C, which TFRecord files frame their records with).
inline constexpr uint32_t kCrc32 = 0xEDB88320u, kCrc32c = 0x82F63B78u;

/// The CRC of `bytes` over reflected `Polynomial` (initial value and final
/// xor ~0), a byte at a time through a table of the 256 byte values.
template <uint32_t Polynomial> uint32_t crc32(const std::string &bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? (c >> 1) ^ Polynomial : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes)
    crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

} // namespace mlc

#endif // MLC_RUNTIME_HASH_H
