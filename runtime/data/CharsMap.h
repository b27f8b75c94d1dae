//===- CharsMap.h - SentencePiece's precompiled character map --*- C++ -*-===//
//
// The normalization rules the sentencepiece trainer compiles into a model
// (normalizer_spec.precompiled_charsmap; Hugging Face's Precompiled
// normalizer carries the same bytes in base64): a darts-clone double-array
// trie from UTF-8 sequences to offsets of NUL-ended replacements.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_CHARSMAP_H
#define MLC_RUNTIME_CHARSMAP_H

#include "support/Error.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace mlc::rt {

/// A darts-clone double array as the library's precompiled character map
/// stores it: u32 size of the trie in bytes, the trie's u32 units, then the
/// replacement strings, each ended by NUL. Every index is checked, so a
/// corrupt map is an error naming the file, never a read out of bounds.
class CharsMap {
public:
  CharsMap() = default;
  /// `where` names the map in errors: the file and the field.
  CharsMap(const std::string &blob, const std::string &where) : where_(where) {
    uint32_t trieBytes = 0;
    if (blob.size() <= 4)
      broken("shorter than its header");
    std::memcpy(&trieBytes, blob.data(), 4);
    if (trieBytes > blob.size() - 4 || trieBytes % 4 || trieBytes == 0)
      broken("its trie of " + std::to_string(trieBytes) + " bytes does not fit its " +
             std::to_string(blob.size()) + " bytes");
    units_.resize(trieBytes / 4);
    std::memcpy(units_.data(), blob.data() + 4, trieBytes);
    normalized_ = blob.substr(4 + trieBytes);
  }
  bool empty() const { return units_.empty(); }

  /// The longest rule that `s` starts with (among the first 32 matches, as
  /// the sentencepiece library keeps): its length and replacement, or
  /// length 0. With `shortest`, the shortest rule instead (the first match,
  /// which Hugging Face's Precompiled normalizer takes).
  size_t longestPrefix(std::string_view s, std::string_view &replacement,
                       bool shortest = false) const {
    size_t node = 0, best = 0, found = 0;
    uint32_t bestValue = 0;
    node ^= offset(unit(node));
    for (size_t i = 0; i < s.size(); ++i) {
      unsigned char c = s[i];
      node ^= c;
      uint32_t u = unit(node);
      if ((u & ((1U << 31) | 0xFF)) != c)
        break;
      node ^= offset(u);
      if ((u >> 8) & 1) {
        if (found++ < 32 && (best == 0 || i + 1 > best)) {
          best = i + 1;
          bestValue = unit(node) & ((1U << 31) - 1);
        }
        if (shortest)
          break;
      }
    }
    if (best) {
      if (bestValue >= normalized_.size())
        broken("a rule's replacement at " + std::to_string(bestValue) + " is past its end");
      size_t end = normalized_.find('\0', bestValue);
      replacement = std::string_view(normalized_).substr(
          bestValue, end == std::string::npos ? std::string::npos : end - bestValue);
    }
    return best;
  }

private:
  static uint32_t offset(uint32_t u) { return (u >> 10) << ((u & (1U << 9)) >> 6); }
  uint32_t unit(size_t i) const {
    if (i >= units_.size())
      broken("its trie reaches unit " + std::to_string(i) + " of " +
             std::to_string(units_.size()));
    return units_[i];
  }
  [[noreturn]] void broken(const std::string &why) const {
    fail(where_ + " is corrupt: " + why);
  }
  std::string where_;
  std::vector<uint32_t> units_;
  std::string normalized_;
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_CHARSMAP_H
