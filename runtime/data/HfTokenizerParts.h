//===- HfTokenizerParts.h - tokenizer.json's pipeline, piece by piece -*- C++ -*-===//
//
// Internal to the Hugging Face tokenizer (HfTokenizer.cpp and its Hf*.cpp
// pieces; built with ICU only): the steps of the library's pipeline as
// values read from tokenizer.json (normalizers, pre-tokenizers, the model,
// decoders), the UTF-8 helpers and regexes they share, and `Fields`, which
// reads the file's fields and names the file and field in every error.
//
//   HfNormalizers.cpp    UTF-8 and character classes; normalizers, with
//                        Precompiled's charsmap
//   HfPreTokenizers.cpp  regexes, the library's split behaviours;
//                        pre-tokenizers
//   HfModels.cpp         BPE, WordPiece and Unigram, and reading model
//   HfDecoders.cpp       decoders
//   HfTokenizer.cpp      added tokens, post-processors, tokenizer_config.json,
//                        and the pipeline that runs the steps
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_HFTOKENIZERPARTS_H
#define MLC_RUNTIME_HFTOKENIZERPARTS_H

#include "support/Error.h"
#include "support/Json.h"
#include "runtime/data/CharsMap.h"
#include "runtime/data/Tokenizer.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <unicode/uregex.h>
#include <unicode/utf8.h>

namespace mlc::rt::hf {

//===----------------------------------------------------------------------===//
// UTF-8 and character classes (as Rust's char methods, which the library uses)
//===----------------------------------------------------------------------===//

/// The next code point of valid UTF-8 at `i` (advancing `i`).
inline int32_t nextCp(const std::string &s, size_t &i) {
  UChar32 c;
  int32_t k = int32_t(i);
  U8_NEXT_UNSAFE(reinterpret_cast<const uint8_t *>(s.data()), k, c);
  i = size_t(k);
  return c;
}

bool isWhite(int32_t c);     // Rust's char::is_whitespace
bool isAlnumWord(int32_t c); // regex crate's \w
bool isNumeric(int32_t c);   // char::is_numeric
bool isPunct(int32_t c);     // BERT's: ASCII punctuation or a P category
std::string cpString(int32_t c);

//===----------------------------------------------------------------------===//
// Regexes (ICU over UTF-8, byte offsets)
//===----------------------------------------------------------------------===//

class Regex {
public:
  Regex(const std::string &pattern, const std::string &where);
  ~Regex();
  Regex(const Regex &) = delete;

  /// The [start, end) byte ranges of the matches in `s`, left to right.
  void findAll(const std::string &s, std::vector<std::pair<size_t, size_t>> &out) const;

private:
  static uint64_t nextId() {
    static std::atomic<uint64_t> next{1};
    return next++;
  }
  uint64_t id_;
  URegularExpression *proto_ = nullptr;
};

/// A `pattern` field: {"String": "..."} (a literal) or {"Regex": "..."}.
struct Pattern {
  std::string literal;
  std::shared_ptr<Regex> regex;
  void findAll(const std::string &s, std::vector<std::pair<size_t, size_t>> &out) const;
  std::string replaceAll(const std::string &s, const std::string &with) const;
};

//===----------------------------------------------------------------------===//
// Splitting (the library's SplitDelimiterBehavior)
//===----------------------------------------------------------------------===//

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

/// A pre-tokenized piece. Metaspace's prepend_scheme "first" prepends to
/// the piece that is `first` as the library version that wrote the file
/// decides: up to 0.18 (transformers 4.38 runs 0.15), the first piece the
/// pre-tokenizers see, even after a special token; from 0.19 (whose files
/// give Metaspace a `split` field), only a piece that starts the text
/// (`atZero`).
struct Piece {
  std::string text;
  bool first = false, atZero = false;
};

/// Splits `p` at the [start, end) `matches` (the delimiters; with `invert`,
/// the parts kept) as the library's NormalizedString::split.
void splitPiece(const Piece &p, const std::vector<std::pair<size_t, size_t>> &matches,
                bool invert, Behavior behavior, std::vector<Piece> &out);

/// The one-character delimiters where `pred` holds.
template <typename Pred>
void charMatches(const std::string &s, Pred pred, std::vector<std::pair<size_t, size_t>> &out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    size_t a = i;
    int32_t c = nextCp(s, i);
    if (pred(c))
      out.emplace_back(a, i);
  }
}

//===----------------------------------------------------------------------===//
// The file's fields
//===----------------------------------------------------------------------===//

/// Reads fields of one file, naming the file and the field in every error.
struct Fields {
  std::string file;

  [[noreturn]] void bad(const std::string &path, const std::string &msg) const {
    fail(file + ": " + path + ": " + msg);
  }
  [[noreturn]] void unsupported(const std::string &path, const std::string &value,
                                const std::string &supported) const {
    fail(file + ": " + path + " '" + value + "' is not supported by mlc (it reads " + supported +
         ")");
  }
  const Json *opt(const Json &obj, const std::string &key) const {
    const Json *v = obj.find(key);
    return v && v->kind != Json::Null ? v : nullptr;
  }
  const Json &need(const Json &obj, const std::string &key, const std::string &path) const {
    if (obj.kind != Json::Object)
      bad(path, "expected an object");
    const Json *v = obj.find(key);
    if (!v)
      bad(path + "." + key, "missing");
    return *v;
  }
  std::string str(const Json &v, const std::string &path) const {
    if (v.kind != Json::String)
      bad(path, "expected a string");
    return v.string;
  }
  std::string str(const Json &obj, const std::string &key, const std::string &path) const {
    return str(need(obj, key, path), path + "." + key);
  }
  bool flag(const Json &obj, const std::string &key, const std::string &path, bool dflt) const {
    const Json *v = opt(obj, key);
    if (!v)
      return dflt;
    if (v->kind != Json::Bool)
      bad(path + "." + key, "expected true or false");
    return v->boolean;
  }
  int64_t integer(const Json &v, const std::string &path, int64_t lo, int64_t hi) const {
    if (v.kind != Json::Number || v.number != std::floor(v.number) || v.number < double(lo) ||
        v.number > double(hi)) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", v.number);
      bad(path, (v.kind == Json::Number ? std::string("id ") + buf : std::string("a non-number")) +
                    " is out of range; expected an integer from " + std::to_string(lo) + " to " +
                    std::to_string(hi));
    }
    return int64_t(v.number);
  }
  const std::string &type(const Json &obj, const std::string &path) const {
    const Json &t = need(obj, "type", path);
    if (t.kind != Json::String)
      bad(path + ".type", "expected a string");
    return t.string;
  }
  /// A single character (Metaspace's replacement, Strip's content).
  int32_t character(const Json &obj, const std::string &key, const std::string &path) const {
    std::string s = str(obj, key, path);
    std::vector<int32_t> cps = utf8Decode(s);
    if (cps.size() != 1)
      bad(path + "." + key, "expected one character, got '" + s + "'");
    return cps[0];
  }
  Pattern pattern(const Json &obj, const std::string &path) const {
    const Json &p = need(obj, "pattern", path);
    Pattern out;
    if (const Json *s = p.find("String"))
      out.literal = str(*s, path + ".pattern.String");
    else if (const Json *r = p.find("Regex"))
      out.regex = std::make_shared<Regex>(str(*r, path + ".pattern.Regex"),
                                          file + ": " + path + ".pattern.Regex");
    else
      bad(path + ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
    return out;
  }
};

//===----------------------------------------------------------------------===//
// Normalizers
//===----------------------------------------------------------------------===//

struct Normalizer {
  enum Kind { NF, Lowercase, Strip, StripAccents, Replace, Prepend, Bert, Precompiled } kind;
  const char *form = "";
  bool left = false, right = false;         // Strip
  Pattern pattern;                          // Replace
  std::string content;                      // Replace, Prepend
  bool cleanText = false, chinese = false, stripAccents = false, lower = false; // Bert
  std::shared_ptr<const CharsMap> charsMap;                                     // Precompiled

  std::string apply(const std::string &s) const;

  /// Hugging Face's Precompiled normalizer (the spm_precompiled crate), not
  /// sentencepiece's own walk: per extended grapheme cluster, the
  /// replacement of the shortest rule the cluster starts with, when it is
  /// under 6 bytes and has one; else each character's own replacement, or
  /// the character.
  std::string precompiled(const std::string &s) const;
};

void readNormalizer(const Fields &f, const Json &j, const std::string &path,
                    std::vector<Normalizer> &out);

//===----------------------------------------------------------------------===//
// Pre-tokenizers
//===----------------------------------------------------------------------===//

struct PreTokenizer {
  enum Kind { ByteLevel, Split, Metaspace, Bert, Whitespace, WhitespaceSplit, Digits, Punctuation }
      kind;
  bool addPrefixSpace = false, useRegex = false;  // ByteLevel
  Pattern pattern;                                // Split
  Behavior behavior = Behavior::Isolated;         // Split, Punctuation
  bool invert = false;                            // Split
  std::string replacement;                        // Metaspace
  enum Prepend { Always, First, Never } prepend = Always;
  bool split = true;                              // Metaspace
  bool firstAtZero = false;                       // Metaspace: a file of 0.19 on
  bool individualDigits = false;                  // Digits
  std::shared_ptr<Regex> whitespace;              // Whitespace

  void apply(std::vector<Piece> &pieces) const;
};

/// The Metaspace prepend scheme of a pre-tokenizer or decoder: prepend_scheme
/// where given, else add_prefix_space (true: always).
PreTokenizer::Prepend readPrepend(const Fields &f, const Json &j, const std::string &path);
void readPreTokenizer(const Fields &f, const Json &j, const std::string &path,
                      std::vector<PreTokenizer> &out);

//===----------------------------------------------------------------------===//
// Models
//===----------------------------------------------------------------------===//

using Vocab = std::unordered_map<std::string, int32_t>;

/// BPE's merges, (left id, right id) -> (rank, merged id), by open
/// addressing: the merge loop's every step looks one up.
class PairTable {
public:
  struct Slot {
    uint64_t key;
    int32_t rank, id;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 2)
      cap <<= 1;
    slots_.assign(cap, Slot{kEmpty, 0, 0});
    mask_ = cap - 1;
  }
  /// A pair listed twice keeps its last rank, as the library's map does.
  void put(uint64_t key, int32_t rank, int32_t id) {
    Slot *s = slot(key);
    *s = Slot{key, rank, id};
  }
  const Slot *find(uint64_t key) const {
    const Slot *s = const_cast<PairTable *>(this)->slot(key);
    return s->key == key ? s : nullptr;
  }

private:
  static constexpr uint64_t kEmpty = ~uint64_t(0); // ids are below INT32_MAX
  Slot *slot(uint64_t key) {
    size_t i = size_t((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_;
    while (slots_[i].key != kEmpty && slots_[i].key != key)
      i = (i + 1) & mask_;
    return &slots_[i];
  }
  std::vector<Slot> slots_{16, Slot{kEmpty, 0, 0}};
  size_t mask_ = 15;
};

struct Model {
  enum Kind { BPE, WordPiece, Unigram } kind = BPE;
  Vocab vocab;
  // BPE: (left id, right id) -> (rank, merged id)
  PairTable merges;
  std::vector<int32_t> charIds; // BPE: the id of each one-character token below U+10000, or -1
  int32_t unk = -1;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
  int32_t byteIds[256];
  // Unigram: each id's score, and a byte trie of the pieces
  std::vector<double> scores;
  double minScore = 0;
  std::unordered_map<uint64_t, uint32_t> trieNext; // (node << 8 | byte) -> node
  std::vector<int32_t> trieId;                     // the piece a node ends, or -1
  // WordPiece
  std::string prefix = "##";
  int64_t maxChars = 100;
  uint64_t id_ = 0; // the cache's key

  static uint64_t pairKey(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  void tokenize(const std::string &word, std::vector<int32_t> &out) const;

  /// The library's BPE: one symbol per character (unknown ones as their
  /// <0xNN> bytes with byte_fallback, else [unk], fused with fuse_unk), then
  /// the lowest-ranked adjacent pair merged first, leftmost on ties.
  std::vector<int32_t> bpe(const std::string &word) const;
  /// The library's Unigram::encode_optimized (as sentencepiece's): the best
  /// path through the pieces that start at each character, scores added in
  /// f64, an uncovered character <unk> at min score - 10; a run of unknown
  /// pieces becomes one string, which is its id if the vocabulary has it,
  /// else its <0xNN> bytes with byte_fallback, else <unk>.
  void unigram(const std::string &word, std::vector<int32_t> &out) const;
  /// Longest match first; a word with a piece not in the vocabulary, or
  /// longer than max_input_chars_per_word, is [UNK].
  void wordPiece(const std::string &word, std::vector<int32_t> &out) const;
};

/// The model of tokenizer.json (`model`); `size` grows to cover its ids.
Model readModel(const Fields &f, const Json &root, int64_t &size);

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

struct Decoder {
  enum Kind { ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, WordPiece } kind;
  int32_t content = 0;
  int64_t start = 0, stop = 0;  // Strip
  Pattern pattern;              // Replace
  std::string with;             // Replace
  std::string replacement;      // Metaspace
  bool prepend = true;          // Metaspace
  std::string prefix = "##";    // WordPiece
  bool cleanup = true;          // WordPiece

  void apply(std::vector<std::string> &tokens) const;
};

void readDecoder(const Fields &f, const Json &j, const std::string &path,
                 std::vector<Decoder> &out);

} // namespace mlc::rt::hf

#endif // MLC_RUNTIME_HFTOKENIZERPARTS_H
