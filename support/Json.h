//===- Json.h - a small JSON reader and writer -----------------*- C++ -*-===//
//
// Enough JSON for package manifests and safetensors headers: objects,
// arrays, strings (with \u escapes), numbers, booleans and null.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_SUPPORT_JSON_H
#define MLC_SUPPORT_JSON_H

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlc::rt {

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  const Json *find(const std::string &key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &it->second;
  }

  /// Parses `text`; a syntax error throws rt::Error naming `what` and the
  /// offset. Nesting deeper than kMaxDepth is an error (the parser recurses).
  /// With `uniqueKeys` (manifests, safetensors headers, as HF's reader), an
  /// object that repeats a key is an error; otherwise the last one wins (as
  /// Python's json, for JSONL corpora).
  static Json parse(const std::string &text, const std::string &what, bool uniqueKeys = false);
  static constexpr int kMaxDepth = 64;
};

/// `"text"` with JSON escapes.
std::string jsonQuote(const std::string &text);

} // namespace mlc::rt

#endif // MLC_SUPPORT_JSON_H
