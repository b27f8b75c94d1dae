//===- HfTokenizer.cpp - Hugging Face tokenizer.json -----------------------===//
//
// The pipeline of Hugging Face `tokenizers`, step by step as the library
// runs it (added tokens, normalizer, pre-tokenizer, model, post-processor;
// decoder), on UTF-8 strings. Every rule that decides an id follows the
// library's own (its split behaviours, its BPE merge queue, its WordPiece
// longest match), so that ids are equal, not merely close.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/HfTokenizer.h"
#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#ifndef MLC_HAVE_ICU

namespace mlc::rt {
std::unique_ptr<Tokenizer> loadHfTokenizer(const std::string &path) {
  fail(path + ": HuggingFaceTokenizer needs ICU (regexes, normalization), and this mlc was "
              "built without it; install libicu-dev and rebuild");
}
} // namespace mlc::rt

#else

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <queue>
#include <sys/stat.h>
#include <unordered_map>
#include <unordered_set>

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/uregex.h>
#include <unicode/ustring.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

namespace mlc::rt {
namespace {

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

/// Invalid UTF-8 becomes U+FFFD, one per maximal ill-formed subpart (as
/// Python's bytes.decode(errors="replace") and Rust's from_utf8_lossy).
std::string validUtf8(const std::string &s) {
  size_t i = 0, n = s.size();
  while (i < n && static_cast<unsigned char>(s[i]) < 0x80)
    ++i;
  if (i == n)
    return s;
  std::string out = s.substr(0, i);
  out.reserve(n + 8);
  int32_t k = int32_t(i), len = int32_t(n);
  while (k < len) {
    int32_t start = k;
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t *>(s.data()), k, len, c);
    if (c < 0)
      out += "\xEF\xBF\xBD";
    else
      out.append(s, start, k - start);
  }
  return out;
}

bool isWhite(int32_t c) { return u_isUWhiteSpace(c); } // Rust's char::is_whitespace
bool isAlnumWord(int32_t c) {                         // regex crate's \w
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) || c == 0x200C ||
         c == 0x200D;
}
bool isNumeric(int32_t c) { return U_GET_GC_MASK(c) & U_GC_N_MASK; } // char::is_numeric
bool isPunct(int32_t c) { // BERT's: ASCII punctuation or a P category
  if (c < 128)
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  return U_GET_GC_MASK(c) & U_GC_P_MASK;
}
/// What BertNormalizer's clean_text drops: Cc, Cf and Co, but not
/// unassigned code points (the library keeps those).
bool isBertControl(int32_t c) {
  if (c == '\t' || c == '\n' || c == '\r')
    return false;
  int8_t t = u_charType(c);
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_PRIVATE_USE_CHAR;
}
bool isChinese(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::string formatNumber(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string cpString(int32_t c) {
  std::string s;
  utf8Append(s, c);
  return s;
}

/// Per-character full lowercase, without context (Rust's char::to_lowercase:
/// a final sigma stays σ).
void appendLower(std::string &out, int32_t c) {
  if (c < 128) {
    out += char(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  UChar src[2], dst[8];
  int32_t n = 0;
  UBool e = false;
  U16_APPEND(src, n, 2, c, e);
  UErrorCode err = U_ZERO_ERROR;
  int32_t len = u_strToLower(dst, 8, src, n, "", &err);
  if (U_FAILURE(err)) {
    utf8Append(out, c);
    return;
  }
  for (int32_t i = 0; i < len;) {
    UChar32 d;
    U16_NEXT(dst, i, len, d);
    utf8Append(out, d);
  }
}

std::string unicodeNormalize(const std::string &s, const char *form) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return (unsigned char)c < 0x80; });
  if (ascii)
    return s;
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2 *n = nullptr;
  if (!std::strcmp(form, "NFC"))
    n = unorm2_getNFCInstance(&err);
  else if (!std::strcmp(form, "NFD"))
    n = unorm2_getNFDInstance(&err);
  else if (!std::strcmp(form, "NFKC"))
    n = unorm2_getNFKCInstance(&err);
  else
    n = unorm2_getNFKDInstance(&err);
  std::vector<UChar> src(s.size() + 1), dst;
  int32_t srcLen = 0;
  u_strFromUTF8(src.data(), int32_t(src.size()), &srcLen, s.data(), int32_t(s.size()), &err);
  dst.resize(size_t(srcLen) * 18 + 16);
  int32_t len = unorm2_normalize(n, src.data(), srcLen, dst.data(), int32_t(dst.size()), &err);
  std::string out(size_t(len) * 3 + 4, '\0');
  int32_t outLen = 0;
  u_strToUTF8(out.data(), int32_t(out.size()), &outLen, dst.data(), len, &err);
  if (U_FAILURE(err))
    fail(std::string("Unicode normalization ") + form + " failed: " + u_errorName(err));
  out.resize(outLen);
  return out;
}

//===----------------------------------------------------------------------===//
// Regexes (ICU over UTF-8, byte offsets)
//===----------------------------------------------------------------------===//

class Regex {
public:
  Regex(const std::string &pattern, const std::string &where) : id_(nextId()) {
    // ICU's \s, like Oniguruma's that the library runs, is Unicode White_Space.
    const std::string &icu = pattern;
    UErrorCode err = U_ZERO_ERROR;
    UParseError pe;
    std::vector<UChar> u16(icu.size() + 1);
    int32_t len = 0;
    u_strFromUTF8(u16.data(), int32_t(u16.size()), &len, icu.data(), int32_t(icu.size()), &err);
    if (U_SUCCESS(err))
      proto_ = uregex_open(u16.data(), len, 0, &pe, &err);
    if (U_FAILURE(err))
      fail(where + ": the regex '" + pattern + "' does not compile (" + u_errorName(err) +
           " at offset " + std::to_string(pe.offset) + ")");
  }
  ~Regex() {
    if (proto_)
      uregex_close(proto_);
  }
  Regex(const Regex &) = delete;

  /// The [start, end) byte ranges of the matches in `s`, left to right.
  void findAll(const std::string &s, std::vector<std::pair<size_t, size_t>> &out) const {
    out.clear();
    // A matcher per thread (ICU's are not shared), closed with the thread;
    // clones share the compiled pattern, counted by ICU.
    struct Clones {
      std::unordered_map<uint64_t, URegularExpression *> byId;
      ~Clones() {
        for (auto &[id, re] : byId)
          uregex_close(re);
      }
    };
    thread_local Clones clones;
    URegularExpression *&re = clones.byId[id_];
    UErrorCode err = U_ZERO_ERROR;
    if (!re)
      re = uregex_clone(proto_, &err);
    if (U_FAILURE(err))
      fail(std::string("regex clone failed: ") + u_errorName(err));
    UText ut = UTEXT_INITIALIZER;
    utext_openUTF8(&ut, s.data(), int64_t(s.size()), &err);
    uregex_setUText(re, &ut, &err);
    while (uregex_findNext(re, &err)) {
      int64_t a = uregex_start64(re, 0, &err), b = uregex_end64(re, 0, &err);
      out.emplace_back(size_t(a), size_t(b));
    }
    if (U_FAILURE(err))
      fail(std::string("regex match failed: ") + u_errorName(err));
    uregex_setText(re, u"", 0, &err); // drop the pointer into `s`
    utext_close(&ut);
  }

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
  void findAll(const std::string &s, std::vector<std::pair<size_t, size_t>> &out) const {
    if (regex)
      return regex->findAll(s, out);
    out.clear();
    if (literal.empty())
      return;
    for (size_t at = s.find(literal); at != std::string::npos;
         at = s.find(literal, at + literal.size()))
      out.emplace_back(at, at + literal.size());
  }
  std::string replaceAll(const std::string &s, const std::string &with) const {
    std::vector<std::pair<size_t, size_t>> m;
    findAll(s, m);
    if (m.empty())
      return s;
    std::string out;
    size_t prev = 0;
    for (auto [a, b] : m) {
      out.append(s, prev, a - prev);
      out += with;
      prev = b;
    }
    out.append(s, prev, std::string::npos);
    return out;
  }
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
                bool invert, Behavior behavior, std::vector<Piece> &out) {
  struct Part {
    size_t a, b;
    bool match;
  };
  std::vector<Part> parts;
  const std::string &s = p.text;
  if (s.empty()) {
    parts.push_back({0, 0, false});
  } else {
    size_t prev = 0;
    for (auto [a, b] : matches) {
      if (prev != a)
        parts.push_back({prev, a, false});
      parts.push_back({a, b, true});
      prev = b;
    }
    if (prev != s.size())
      parts.push_back({prev, s.size(), false});
  }
  if (invert)
    for (Part &q : parts)
      q.match = !q.match;
  std::vector<Part> kept; // `match` now: to remove
  bool previous = false;
  switch (behavior) {
  case Behavior::Removed:
    kept = parts;
    break;
  case Behavior::Isolated:
    for (Part q : parts)
      kept.push_back({q.a, q.b, false});
    break;
  case Behavior::Contiguous:
    for (Part q : parts) {
      if (q.match == previous && !kept.empty())
        kept.back().b = q.b;
      else
        kept.push_back({q.a, q.b, false});
      previous = q.match;
    }
    break;
  case Behavior::MergedWithPrevious:
    for (Part q : parts) {
      if (q.match && !previous && !kept.empty())
        kept.back().b = q.b;
      else
        kept.push_back({q.a, q.b, false});
      previous = q.match;
    }
    break;
  case Behavior::MergedWithNext:
    for (size_t k = parts.size(); k-- > 0;) {
      Part q = parts[k];
      if (q.match && !previous && !kept.empty())
        kept.back().a = q.a;
      else
        kept.push_back({q.a, q.b, false});
      previous = q.match;
    }
    std::reverse(kept.begin(), kept.end());
    break;
  }
  bool first = p.first;
  for (Part q : kept)
    if (!q.match && q.b > q.a) {
      out.push_back({s.substr(q.a, q.b - q.a), first, p.atZero && q.a == 0});
      first = false;
    }
}

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
  enum Kind { NF, Lowercase, Strip, StripAccents, Replace, Prepend, Bert } kind;
  const char *form = "";
  bool left = false, right = false;         // Strip
  Pattern pattern;                          // Replace
  std::string content;                      // Replace, Prepend
  bool cleanText = false, chinese = false, stripAccents = false, lower = false; // Bert

  std::string apply(const std::string &s) const {
    switch (kind) {
    case NF:
      return unicodeNormalize(s, form);
    case Lowercase: {
      std::string out;
      out.reserve(s.size());
      for (size_t i = 0; i < s.size();)
        appendLower(out, nextCp(s, i));
      return out;
    }
    case Strip: {
      size_t a = 0, b = s.size();
      if (left)
        while (a < b) {
          size_t k = a;
          if (!isWhite(nextCp(s, k)))
            break;
          a = k;
        }
      if (right)
        while (b > a) {
          size_t k = b - 1;
          while (k > a && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80)
            --k;
          size_t j = k;
          if (!isWhite(nextCp(s, j)))
            break;
          b = k;
        }
      return s.substr(a, b - a);
    }
    case StripAccents: {
      std::string out;
      for (size_t i = 0; i < s.size();) {
        int32_t c = nextCp(s, i);
        if (!(U_GET_GC_MASK(c) & U_GC_M_MASK))
          utf8Append(out, c);
      }
      return out;
    }
    case Replace:
      return pattern.replaceAll(s, content);
    case Prepend:
      return s.empty() ? s : content + s;
    case Bert: {
      std::string t;
      t.reserve(s.size());
      for (size_t i = 0; i < s.size();) {
        int32_t c = nextCp(s, i);
        if (cleanText) {
          if (c == 0 || c == 0xFFFD || isBertControl(c))
            continue;
          if (c == '\t' || c == '\n' || c == '\r' || isWhite(c))
            c = ' ';
        }
        if (chinese && isChinese(c)) {
          t += ' ';
          utf8Append(t, c);
          t += ' ';
        } else {
          utf8Append(t, c);
        }
      }
      if (stripAccents) {
        std::string nfd = unicodeNormalize(t, "NFD");
        t.clear();
        for (size_t i = 0; i < nfd.size();) {
          int32_t c = nextCp(nfd, i);
          if (u_charType(c) != U_NON_SPACING_MARK)
            utf8Append(t, c);
        }
      }
      if (lower) {
        std::string out;
        out.reserve(t.size());
        for (size_t i = 0; i < t.size();)
          appendLower(out, nextCp(t, i));
        return out;
      }
      return t;
    }
    }
    return s;
  }
};

void readNormalizer(const Fields &f, const Json &j, const std::string &path,
                    std::vector<Normalizer> &out) {
  const std::string &type = f.type(j, path);
  Normalizer n{Normalizer::NF};
  if (type == "Sequence") {
    const Json &list = f.need(j, "normalizers", path);
    if (list.kind != Json::Array)
      f.bad(path + ".normalizers", "expected an array");
    for (size_t i = 0; i < list.array.size(); ++i)
      readNormalizer(f, list.array[i], path + ".normalizers[" + std::to_string(i) + "]", out);
    return;
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    static const char *forms[] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (const char *form : forms)
      if (type == form)
        n.form = form;
  } else if (type == "Lowercase") {
    n.kind = Normalizer::Lowercase;
  } else if (type == "Strip") {
    n.kind = Normalizer::Strip;
    n.left = f.flag(j, "strip_left", path, true);
    n.right = f.flag(j, "strip_right", path, true);
  } else if (type == "StripAccents") {
    n.kind = Normalizer::StripAccents;
  } else if (type == "Replace") {
    n.kind = Normalizer::Replace;
    n.pattern = f.pattern(j, path);
    n.content = f.str(j, "content", path);
  } else if (type == "Prepend") {
    n.kind = Normalizer::Prepend;
    n.content = f.str(j, "prepend", path);
  } else if (type == "BertNormalizer") {
    n.kind = Normalizer::Bert;
    n.cleanText = f.flag(j, "clean_text", path, true);
    n.chinese = f.flag(j, "handle_chinese_chars", path, true);
    n.lower = f.flag(j, "lowercase", path, true);
    n.stripAccents = f.flag(j, "strip_accents", path, n.lower);
  } else {
    f.unsupported(path + ".type", type,
                  "NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, "
                  "BertNormalizer and Sequence");
  }
  out.push_back(std::move(n));
}

//===----------------------------------------------------------------------===//
// Pre-tokenizers
//===----------------------------------------------------------------------===//

/// GPT-2's byte-to-unicode stand-ins, as UTF-8 strings.
const std::vector<std::string> &byteChars() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b)
      t.push_back(cpString(byteToUnicode()[b]));
    return t;
  }();
  return table;
}

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

  void apply(std::vector<Piece> &pieces) const {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 2);
    std::vector<std::pair<size_t, size_t>> m;
    for (Piece &p : pieces) {
      switch (kind) {
      case ByteLevel: {
        if (addPrefixSpace && (p.text.empty() || p.text[0] != ' '))
          p.text.insert(0, " ");
        auto mapBytes = [&](const std::string &w) {
          std::string mapped;
          mapped.reserve(w.size() * 2);
          for (unsigned char b : w)
            mapped += byteChars()[b];
          return mapped;
        };
        if (useRegex) {
          for (std::string &w : gpt2PreTokenize(p.text))
            out.push_back({mapBytes(w), false});
        } else if (!p.text.empty()) {
          out.push_back({mapBytes(p.text), p.first, p.atZero});
        }
        break;
      }
      case Split:
        pattern.findAll(p.text, m);
        splitPiece(p, m, invert, behavior, out);
        break;
      case Metaspace: {
        Piece q{Pattern{" ", nullptr}.replaceAll(p.text, replacement), p.first, p.atZero};
        if (!q.text.empty() && q.text.compare(0, replacement.size(), replacement) != 0 &&
            (prepend == Always || (prepend == First && (firstAtZero ? p.atZero : p.first))))
          q.text.insert(0, replacement);
        if (split) {
          Pattern{replacement, nullptr}.findAll(q.text, m);
          splitPiece(q, m, false, Behavior::MergedWithNext, out);
        } else {
          out.push_back(std::move(q));
        }
        break;
      }
      case Bert: {
        std::vector<Piece> words;
        charMatches(p.text, isWhite, m);
        splitPiece(p, m, false, Behavior::Removed, words);
        for (Piece &w : words) {
          charMatches(w.text, isPunct, m);
          splitPiece(w, m, false, Behavior::Isolated, out);
        }
        break;
      }
      case Whitespace:
        whitespace->findAll(p.text, m);
        splitPiece(p, m, true, Behavior::Removed, out);
        break;
      case WhitespaceSplit:
        charMatches(p.text, isWhite, m);
        splitPiece(p, m, false, Behavior::Removed, out);
        break;
      case Digits:
        charMatches(p.text, isNumeric, m);
        splitPiece(p, m, false, individualDigits ? Behavior::Isolated : Behavior::Contiguous,
                   out);
        break;
      case Punctuation:
        charMatches(p.text, isPunct, m);
        splitPiece(p, m, false, behavior, out);
        break;
      }
    }
    pieces = std::move(out);
  }
};

Behavior readBehavior(const Fields &f, const Json &j, const std::string &path) {
  std::string b = f.str(j, "behavior", path);
  if (b == "Removed" || b == "removed")
    return Behavior::Removed;
  if (b == "Isolated" || b == "isolated")
    return Behavior::Isolated;
  if (b == "MergedWithPrevious" || b == "merged_with_previous")
    return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext" || b == "merged_with_next")
    return Behavior::MergedWithNext;
  if (b == "Contiguous" || b == "contiguous")
    return Behavior::Contiguous;
  f.unsupported(path + ".behavior", b,
                "Removed, Isolated, MergedWithPrevious, MergedWithNext and Contiguous");
}

/// The Metaspace prepend scheme of a pre-tokenizer or decoder: prepend_scheme
/// where given, else add_prefix_space (true: always).
PreTokenizer::Prepend readPrepend(const Fields &f, const Json &j, const std::string &path) {
  bool add = f.flag(j, "add_prefix_space", path, true);
  const Json *scheme = f.opt(j, "prepend_scheme");
  if (!add)
    return PreTokenizer::Never;
  if (!scheme)
    return PreTokenizer::Always;
  std::string s = f.str(*scheme, path + ".prepend_scheme");
  if (s == "always")
    return PreTokenizer::Always;
  if (s == "first")
    return PreTokenizer::First;
  if (s == "never")
    return PreTokenizer::Never;
  f.unsupported(path + ".prepend_scheme", s, "always, first and never");
}

void readPreTokenizer(const Fields &f, const Json &j, const std::string &path,
                      std::vector<PreTokenizer> &out) {
  const std::string &type = f.type(j, path);
  if (type == "Sequence") {
    const Json &list = f.need(j, "pretokenizers", path);
    if (list.kind != Json::Array)
      f.bad(path + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list.array.size(); ++i)
      readPreTokenizer(f, list.array[i], path + ".pretokenizers[" + std::to_string(i) + "]", out);
    return;
  }
  PreTokenizer p{PreTokenizer::ByteLevel};
  if (type == "ByteLevel") {
    p.addPrefixSpace = f.flag(j, "add_prefix_space", path, true);
    p.useRegex = f.flag(j, "use_regex", path, true);
  } else if (type == "Split") {
    p.kind = PreTokenizer::Split;
    p.pattern = f.pattern(j, path);
    p.behavior = readBehavior(f, j, path);
    p.invert = f.flag(j, "invert", path, false);
  } else if (type == "Metaspace") {
    p.kind = PreTokenizer::Metaspace;
    p.replacement = cpString(f.character(j, "replacement", path));
    p.prepend = readPrepend(f, j, path);
    p.split = f.flag(j, "split", path, true);
    p.firstAtZero = j.find("split") != nullptr;
  } else if (type == "BertPreTokenizer") {
    p.kind = PreTokenizer::Bert;
  } else if (type == "Whitespace") {
    p.kind = PreTokenizer::Whitespace;
    p.whitespace = std::make_shared<Regex>("\\w+|[^\\w\\s]+", f.file);
  } else if (type == "WhitespaceSplit") {
    p.kind = PreTokenizer::WhitespaceSplit;
  } else if (type == "Digits") {
    p.kind = PreTokenizer::Digits;
    p.individualDigits = f.flag(j, "individual_digits", path, false);
  } else if (type == "Punctuation") {
    p.kind = PreTokenizer::Punctuation;
    p.behavior = f.opt(j, "behavior") ? readBehavior(f, j, path) : Behavior::Isolated;
  } else {
    f.unsupported(path + ".type", type,
                  "ByteLevel, Split, Metaspace, BertPreTokenizer, Whitespace, "
                  "WhitespaceSplit, Digits, Punctuation and Sequence");
  }
  out.push_back(std::move(p));
}

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
  enum Kind { BPE, WordPiece } kind = BPE;
  Vocab vocab;
  // BPE: (left id, right id) -> (rank, merged id)
  PairTable merges;
  std::vector<int32_t> charIds; // BPE: the id of each one-character token below U+10000, or -1
  int32_t unk = -1;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
  int32_t byteIds[256];
  // WordPiece
  std::string prefix = "##";
  int64_t maxChars = 100;
  uint64_t id_ = 0; // the cache's key

  static uint64_t pairKey(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  void tokenize(const std::string &word, std::vector<int32_t> &out) const {
    if (kind == WordPiece)
      return wordPiece(word, out);
    if (ignoreMerges) {
      auto it = vocab.find(word);
      if (it != vocab.end()) {
        out.push_back(it->second);
        return;
      }
    }
    // Words repeat: a cache per thread, so threads never wait on each other.
    using Cache = std::unordered_map<std::string, std::vector<int32_t>>;
    thread_local std::unordered_map<uint64_t, Cache> caches;
    thread_local std::pair<uint64_t, Cache *> last{0, nullptr};
    if (last.first != id_)
      last = {id_, &caches[id_]};
    Cache &cache = *last.second;
    auto hit = cache.find(word);
    if (hit != cache.end()) {
      out.insert(out.end(), hit->second.begin(), hit->second.end());
      return;
    }
    std::vector<int32_t> ids = bpe(word);
    out.insert(out.end(), ids.begin(), ids.end());
    if (word.size() < 256) {
      if (cache.size() > 200000)
        cache.clear();
      cache.emplace(word, std::move(ids));
    }
  }

  /// The library's BPE: one symbol per character (unknown ones as their
  /// <0xNN> bytes with byte_fallback, else [unk], fused with fuse_unk), then
  /// the lowest-ranked adjacent pair merged first, leftmost on ties.
  std::vector<int32_t> bpe(const std::string &word) const {
    struct Sym {
      int32_t id;
      int32_t prev, next;
      bool gone;
    };
    std::vector<Sym> syms;
    syms.reserve(word.size());
    int32_t pendingUnk = -1;
    auto add = [&](int32_t id) {
      int32_t k = int32_t(syms.size());
      syms.push_back({id, k - 1, k + 1, false});
    };
    auto flushUnk = [&] {
      if (pendingUnk >= 0)
        add(pendingUnk);
      pendingUnk = -1;
    };
    std::string ch;
    for (size_t i = 0; i < word.size();) {
      size_t a = i;
      int32_t cp = nextCp(word, i), id = -1;
      if (cp < int32_t(charIds.size())) {
        id = charIds[cp];
      } else {
        ch.assign(word, a, i - a);
        auto it = vocab.find(ch);
        id = it == vocab.end() ? -1 : it->second;
      }
      if (id >= 0) {
        flushUnk();
        add(id);
        continue;
      }
      if (byteFallback) {
        bool all = true;
        for (size_t k = a; k < i; ++k)
          all &= byteIds[static_cast<unsigned char>(word[k])] >= 0;
        if (all) {
          flushUnk();
          for (size_t k = a; k < i; ++k)
            add(byteIds[static_cast<unsigned char>(word[k])]);
          continue;
        }
      }
      if (unk >= 0) {
        if (!fuseUnk)
          flushUnk();
        pendingUnk = unk;
      }
    }
    flushUnk();
    if (!syms.empty())
      syms.back().next = -1;
    struct Merge {
      int32_t pos, rank, id;
      bool operator<(const Merge &o) const { // a min-heap on (rank, pos)
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<Merge> queue;
    for (size_t k = 0; k + 1 < syms.size(); ++k) {
      if (auto *m = merges.find(pairKey(syms[k].id, syms[k + 1].id)))
        queue.push({int32_t(k), m->rank, m->id});
    }
    while (!queue.empty()) {
      Merge top = queue.top();
      queue.pop();
      Sym &cur = syms[top.pos];
      if (cur.gone || cur.next < 0)
        continue;
      Sym &right = syms[cur.next];
      auto *m = merges.find(pairKey(cur.id, right.id));
      if (!m || m->id != top.id)
        continue;
      cur.id = top.id;
      right.gone = true;
      cur.next = right.next;
      if (right.next >= 0)
        syms[right.next].prev = top.pos;
      if (cur.prev >= 0) {
        if (auto *p = merges.find(pairKey(syms[cur.prev].id, cur.id)))
          queue.push({cur.prev, p->rank, p->id});
      }
      if (cur.next >= 0) {
        if (auto *n = merges.find(pairKey(cur.id, syms[cur.next].id)))
          queue.push({top.pos, n->rank, n->id});
      }
    }
    std::vector<int32_t> ids;
    for (const Sym &s : syms)
      if (!s.gone)
        ids.push_back(s.id);
    return ids;
  }

  /// Longest match first; a word with a piece not in the vocabulary, or
  /// longer than max_input_chars_per_word, is [UNK].
  void wordPiece(const std::string &word, std::vector<int32_t> &out) const {
    int64_t chars = 0;
    for (unsigned char c : word)
      chars += (c & 0xC0) != 0x80;
    if (chars > maxChars) {
      out.push_back(unk);
      return;
    }
    size_t mark = out.size(), start = 0;
    std::string sub;
    while (start < word.size()) {
      size_t end = word.size();
      int32_t found = -1;
      while (start < end) {
        sub.assign(start > 0 ? prefix : std::string());
        sub.append(word, start, end - start);
        auto it = vocab.find(sub);
        if (it != vocab.end()) {
          found = it->second;
          break;
        }
        do
          --end;
        while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
      }
      if (found < 0) {
        out.resize(mark);
        out.push_back(unk);
        return;
      }
      out.push_back(found);
      start = end;
    }
  }
};

uint64_t freshId() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

void readVocab(const Fields &f, const Json &model, Vocab &vocab, int64_t &size) {
  const Json &v = f.need(model, "vocab", "model");
  if (v.kind != Json::Object)
    f.bad("model.vocab", "expected an object of token -> id");
  std::unordered_map<int32_t, const std::string *> tokenOf;
  tokenOf.reserve(v.object.size());
  vocab.reserve(v.object.size());
  for (auto &[token, id] : v.object) {
    int32_t k = int32_t(f.integer(id, "model.vocab['" + token + "']", 0, INT32_MAX - 1));
    auto [other, fresh] = tokenOf.emplace(k, &token);
    if (!fresh)
      f.bad("model.vocab", "tokens '" + *other->second + "' and '" + token + "' share id " +
                               std::to_string(k) + "; every token needs an id of its own");
    vocab.emplace(token, k);
    size = std::max<int64_t>(size, int64_t(k) + 1);
  }
}

int32_t readUnk(const Fields &f, const Json &model, const Vocab &vocab, bool required) {
  const Json *u = f.opt(model, "unk_token");
  if (!u) {
    if (required)
      f.bad("model.unk_token", "missing");
    return -1;
  }
  std::string token = f.str(*u, "model.unk_token");
  auto it = vocab.find(token);
  if (it == vocab.end())
    f.bad("model.unk_token", "'" + token + "' is not in model.vocab");
  return it->second;
}

Model readModel(const Fields &f, const Json &root, int64_t &size) {
  const Json &j = f.need(root, "model", "tokenizer");
  Model m;
  m.id_ = freshId();
  std::string type = j.find("type") ? f.type(j, "model") : "";
  if (type.empty()) // files of old versions name no type: the fields tell
    type = j.find("merges") ? "BPE" : j.find("continuing_subword_prefix") ? "WordPiece" : "";
  readVocab(f, j, m.vocab, size);
  if (type == "BPE") {
    if (const Json *d = f.opt(j, "dropout"))
      if (!(d->kind == Json::Number && d->number == 0))
        f.unsupported("model.dropout", d->kind == Json::Number ? formatNumber(d->number) : "?",
                      "BPE without dropout: ids must not be random");
    for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (const Json *v = f.opt(j, key))
        if (!(v->kind == Json::String && v->string.empty()))
          f.unsupported(std::string("model.") + key, f.str(*v, std::string("model.") + key),
                        "BPE without subword prefixes or suffixes");
    m.unk = readUnk(f, j, m.vocab, false);
    m.fuseUnk = f.flag(j, "fuse_unk", "model", false);
    m.byteFallback = f.flag(j, "byte_fallback", "model", false);
    m.ignoreMerges = f.flag(j, "ignore_merges", "model", false);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      auto it = m.vocab.find(name);
      m.byteIds[b] = it == m.vocab.end() ? -1 : it->second;
    }
    const Json &merges = f.need(j, "merges", "model");
    if (merges.kind != Json::Array)
      f.bad("model.merges", "expected an array");
    m.merges.reserve(merges.array.size());
    m.charIds.assign(0x10000, -1);
    for (auto &[token, id] : m.vocab) {
      size_t i = 0;
      if (!token.empty() && validUtf8(token) == token) {
        int32_t cp = nextCp(token, i);
        if (i == token.size() && cp < 0x10000)
          m.charIds[cp] = id;
      }
    }
    std::string left, right, merged;
    for (size_t r = 0; r < merges.array.size(); ++r) {
      const Json &e = merges.array[r];
      auto where = [&] { return "model.merges[" + std::to_string(r) + "]"; };
      if (e.kind == Json::String) {
        size_t space = e.string.find(' ');
        if (space == 0 || space == std::string::npos || space + 1 == e.string.size() ||
            e.string.find(' ', space + 1) != std::string::npos)
          f.bad(where(), "expected two tokens 'left right', got '" + e.string + "'");
        left.assign(e.string, 0, space);
        right.assign(e.string, space + 1);
      } else if (e.kind == Json::Array && e.array.size() == 2 &&
                 e.array[0].kind == Json::String && e.array[1].kind == Json::String) {
        left = e.array[0].string;
        right = e.array[1].string;
      } else {
        f.bad(where(), "expected 'left right' or [left, right]");
      }
      merged.assign(left).append(right);
      int32_t ids[3];
      const std::string *parts[3] = {&left, &right, &merged};
      for (int k = 0; k < 3; ++k) {
        auto it = m.vocab.find(*parts[k]);
        if (it == m.vocab.end())
          f.bad(where(), "'" + *parts[k] + "' is not in model.vocab");
        ids[k] = it->second;
      }
      m.merges.put(Model::pairKey(ids[0], ids[1]), int32_t(r), ids[2]);
    }
  } else if (type == "WordPiece") {
    m.kind = Model::WordPiece;
    m.unk = readUnk(f, j, m.vocab, true);
    if (const Json *p = f.opt(j, "continuing_subword_prefix"))
      m.prefix = f.str(*p, "model.continuing_subword_prefix");
    if (const Json *c = f.opt(j, "max_input_chars_per_word"))
      m.maxChars = f.integer(*c, "model.max_input_chars_per_word", 0, INT64_MAX / 2);
  } else {
    f.unsupported("model.type", type.empty() ? "(none)" : type, "BPE and WordPiece");
  }
  return m;
}

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

  void apply(std::vector<std::string> &tokens) const {
    switch (kind) {
    case ByteLevel: {
      static const std::unordered_map<int32_t, char> bytes = [] {
        std::unordered_map<int32_t, char> t;
        for (int b = 0; b < 256; ++b)
          t[byteToUnicode()[b]] = char(b);
        return t;
      }();
      std::string all;
      for (const std::string &t : tokens) {
        std::string mine;
        bool ok = true;
        for (size_t i = 0; i < t.size() && ok;) {
          auto it = bytes.find(nextCp(t, i));
          if (it == bytes.end())
            ok = false;
          else
            mine += it->second;
        }
        all += ok ? mine : t;
      }
      tokens.assign(1, validUtf8(all));
      return;
    }
    case ByteFallback: {
      std::vector<std::string> out;
      std::string pending;
      size_t pendingCount = 0;
      auto flush = [&] {
        if (!pendingCount)
          return;
        if (validUtf8(pending) == pending)
          out.push_back(pending);
        else
          for (size_t k = 0; k < pendingCount; ++k)
            out.push_back("\xEF\xBF\xBD");
        pending.clear();
        pendingCount = 0;
      };
      for (const std::string &t : tokens) {
        unsigned v;
        char tail;
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
            std::isxdigit(static_cast<unsigned char>(t[3])) &&
            std::isxdigit(static_cast<unsigned char>(t[4])) &&
            std::sscanf(t.c_str() + 3, "%2x%c", &v, &tail) == 2) {
          pending += char(v);
          ++pendingCount;
        } else {
          flush();
          out.push_back(t);
        }
      }
      flush();
      tokens = std::move(out);
      return;
    }
    case Fuse: {
      std::string all;
      for (const std::string &t : tokens)
        all += t;
      tokens.assign(1, all);
      return;
    }
    case Strip:
      for (std::string &t : tokens) {
        std::vector<int32_t> cps = utf8Decode(t);
        int64_t startCut = 0, stopCut = 0;
        for (int64_t i = 0; i < int64_t(cps.size()) && i < start && cps[i] == content; ++i)
          ++startCut;
        for (int64_t i = 0; i < int64_t(cps.size()) && i < stop &&
                            cps[cps.size() - 1 - i] == content;
             ++i)
          ++stopCut;
        // The library takes (bytes - cuts) characters after the start cut.
        int64_t take = std::min<int64_t>(int64_t(cps.size()) - startCut,
                                         int64_t(t.size()) - startCut - stopCut);
        std::string s;
        for (int64_t i = startCut; i < startCut + take; ++i)
          utf8Append(s, cps[i]);
        t = std::move(s);
      }
      return;
    case Replace:
      for (std::string &t : tokens)
        t = pattern.replaceAll(t, with);
      return;
    case Metaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string s;
        const std::string &t = tokens[i];
        for (size_t k = 0; k < t.size();) {
          if (t.compare(k, replacement.size(), replacement) == 0) {
            if (!(i == 0 && prepend))
              s += ' ';
            k += replacement.size();
          } else {
            s += t[k++];
          }
        }
        tokens[i] = std::move(s);
      }
      return;
    case WordPiece:
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string &t = tokens[i];
        if (i != 0) {
          if (t.compare(0, prefix.size(), prefix) == 0)
            t.erase(0, prefix.size());
          else
            t.insert(0, " ");
        }
        if (cleanup) {
          static const std::pair<const char *, const char *> rules[] = {
              {" .", "."},     {" ?", "?"},     {" !", "!"},         {" ,", ","},
              {" ' ", "'"},    {" n't", "n't"}, {" 'm", "'m"},       {" do not", " don't"},
              {" 's", "'s"},   {" 've", "'ve"}, {" 're", "'re"}};
          for (auto [from, to] : rules)
            t = Pattern{from, nullptr}.replaceAll(t, to);
        }
      }
      return;
    }
  }
};

void readDecoder(const Fields &f, const Json &j, const std::string &path,
                 std::vector<Decoder> &out) {
  const std::string &type = f.type(j, path);
  if (type == "Sequence") {
    const Json &list = f.need(j, "decoders", path);
    if (list.kind != Json::Array)
      f.bad(path + ".decoders", "expected an array");
    for (size_t i = 0; i < list.array.size(); ++i)
      readDecoder(f, list.array[i], path + ".decoders[" + std::to_string(i) + "]", out);
    return;
  }
  Decoder d{Decoder::ByteLevel};
  if (type == "ByteLevel") {
  } else if (type == "ByteFallback") {
    d.kind = Decoder::ByteFallback;
  } else if (type == "Fuse") {
    d.kind = Decoder::Fuse;
  } else if (type == "Strip") {
    d.kind = Decoder::Strip;
    d.content = f.character(j, "content", path);
    d.start = f.integer(f.need(j, "start", path), path + ".start", 0, INT32_MAX);
    d.stop = f.integer(f.need(j, "stop", path), path + ".stop", 0, INT32_MAX);
  } else if (type == "Replace") {
    d.kind = Decoder::Replace;
    d.pattern = f.pattern(j, path);
    d.with = f.str(j, "content", path);
  } else if (type == "Metaspace") {
    d.kind = Decoder::Metaspace;
    d.replacement = cpString(f.character(j, "replacement", path));
    d.prepend = readPrepend(f, j, path) != PreTokenizer::Never;
  } else if (type == "WordPiece") {
    d.kind = Decoder::WordPiece;
    if (const Json *p = f.opt(j, "prefix"))
      d.prefix = f.str(*p, path + ".prefix");
    d.cleanup = f.flag(j, "cleanup", path, true);
  } else {
    f.unsupported(path + ".type", type,
                  "ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, WordPiece and "
                  "Sequence");
  }
  out.push_back(std::move(d));
}

//===----------------------------------------------------------------------===//
// Added tokens
//===----------------------------------------------------------------------===//

struct AddedToken {
  int32_t id;
  std::string content;
  bool special, normalized, lstrip, rstrip, singleWord;
};

/// Leftmost-longest matching of added tokens, with the library's lstrip/
/// rstrip/single_word rules. A byte trie: texts are scanned byte by byte.
class AddedMatcher {
public:
  void add(const AddedToken *t) {
    if (t->content.empty())
      return;
    int32_t node = 0;
    for (unsigned char c : t->content) {
      auto it = nodes_[node].next.find(c);
      if (it == nodes_[node].next.end()) {
        nodes_.push_back({});
        it = nodes_[node].next.emplace(c, int32_t(nodes_.size() - 1)).first;
      }
      node = it->second;
    }
    nodes_[node].token = t;
    first_[static_cast<unsigned char>(t->content[0])] = true;
    any_ = true;
  }
  bool empty() const { return !any_; }

  /// Splits `s` into pieces: (token or null, text).
  void split(const std::string &s,
             std::vector<std::pair<const AddedToken *, std::string>> &out) const {
    size_t startOffset = 0;
    for (size_t i = 0; i < s.size();) {
      if (!first_[static_cast<unsigned char>(s[i])]) {
        ++i;
        continue;
      }
      const AddedToken *best = nullptr;
      size_t bestEnd = 0;
      int32_t node = 0;
      for (size_t k = i; k < s.size(); ++k) {
        auto it = nodes_[node].next.find(static_cast<unsigned char>(s[k]));
        if (it == nodes_[node].next.end())
          break;
        node = it->second;
        if (nodes_[node].token) {
          best = nodes_[node].token;
          bestEnd = k + 1;
        }
      }
      if (!best) {
        ++i;
        continue;
      }
      size_t start = i, stop = bestEnd;
      if (best->singleWord) {
        bool startSpace = start == 0 || !endsWithWord(s, start);
        bool stopSpace = stop == s.size() || !startsWithWord(s, stop);
        if (!startSpace || !stopSpace) {
          i = bestEnd; // the matches do not overlap, taken or not
          continue;
        }
      }
      if (best->lstrip)
        start = std::max(leftmostSpace(s, start), startOffset);
      if (best->rstrip)
        stop = rightmostSpace(s, stop);
      if (startOffset < start)
        out.push_back({nullptr, s.substr(startOffset, start - startOffset)});
      out.push_back({best, std::string()});
      startOffset = stop;
      i = bestEnd;
    }
    if (startOffset < s.size() || s.empty())
      out.push_back({nullptr, s.substr(startOffset)});
  }

private:
  static bool endsWithWord(const std::string &s, size_t at) {
    size_t k = at - 1;
    while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80)
      --k;
    return isAlnumWord(nextCp(s, k));
  }
  static bool startsWithWord(const std::string &s, size_t at) {
    return isAlnumWord(nextCp(s, at));
  }
  static size_t leftmostSpace(const std::string &s, size_t at) {
    while (at > 0) {
      size_t k = at - 1;
      while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80)
        --k;
      size_t j = k;
      if (!isWhite(nextCp(s, j)))
        break;
      at = k;
    }
    return at;
  }
  static size_t rightmostSpace(const std::string &s, size_t at) {
    while (at < s.size()) {
      size_t k = at;
      if (!isWhite(nextCp(s, k)))
        break;
      at = k;
    }
    return at;
  }
  struct Node {
    std::unordered_map<unsigned char, int32_t> next;
    const AddedToken *token = nullptr;
  };
  std::vector<Node> nodes_{Node{}};
  bool first_[256] = {};
  bool any_ = false;
};

//===----------------------------------------------------------------------===//
// The tokenizer
//===----------------------------------------------------------------------===//

bool isDirectory(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

class HfTokenizer : public Tokenizer {
public:
  explicit HfTokenizer(const std::string &path) {
    std::string file = path, config;
    if (isDirectory(path)) {
      file = path + "/tokenizer.json";
      if (!exists(file))
        fail(path + ": the directory holds no tokenizer.json (HuggingFaceTokenizer reads a "
                    "tokenizer.json or a directory with one" +
             (exists(path + "/tokenizer.model")
                  ? std::string("; its SentencePiece tokenizer.model is not read by mlc)")
                  : std::string(")")));
      if (exists(path + "/tokenizer_config.json"))
        config = path + "/tokenizer_config.json";
    } else {
      size_t slash = path.rfind('/');
      std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
      if (exists(dir + "/tokenizer_config.json"))
        config = dir + "/tokenizer_config.json";
    }
    Fields f{file};
    Json root = Json::parse(readFile(file), file);
    if (root.kind != Json::Object)
      fail(file + ": expected a JSON object (a Hugging Face tokenizer.json)");
    model_ = readModel(f, root, size_);
    if (const Json *n = f.opt(root, "normalizer"))
      readNormalizer(f, *n, "normalizer", normalizers_);
    if (const Json *p = f.opt(root, "pre_tokenizer"))
      readPreTokenizer(f, *p, "pre_tokenizer", preTokenizers_);
    if (const Json *d = f.opt(root, "decoder"))
      readDecoder(f, *d, "decoder", decoders_);
    readAdded(f, root);
    tokens_.assign(size_, std::string());
    present_.assign(size_, false);
    for (auto &[token, id] : model_.vocab)
      tokens_[id] = token, present_[id] = true;
    for (const AddedToken &t : added_)
      tokens_[t.id] = t.content, present_[t.id] = true;
    if (const Json *p = f.opt(root, "post_processor"))
      readPostProcessor(f, *p, "post_processor");
    if (!config.empty())
      readConfig(config);
    if (!hasEod_)
      for (const char *name : {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "[SEP]"})
        if (int32_t id = idOf(name); id >= 0) {
          eod_ = id;
          hasEod_ = true;
          break;
        }
    if (!hasEod_)
      eod_ = int32_t(size_ - 1);
  }

  std::vector<int32_t> encode(const std::string &raw) const override {
    std::string text = validUtf8(raw);
    std::vector<int32_t> ids;
    std::vector<std::pair<const AddedToken *, std::string>> segments, inner;
    raw_.split(text, segments);
    bool atStart = true; // no piece has met the pre-tokenizers yet
    bool atZero = true;  // nothing precedes in the text
    std::vector<Piece> pieces;
    for (auto &[token, segment] : segments) {
      if (token) {
        ids.push_back(token->id);
        atZero = false;
        continue;
      }
      std::string s = segment;
      for (const Normalizer &n : normalizers_)
        s = n.apply(s);
      inner.clear();
      if (normalized_.empty())
        inner.push_back({nullptr, std::move(s)});
      else
        normalized_.split(s, inner);
      for (auto &[t, piece] : inner) {
        if (t) {
          ids.push_back(t->id);
          atZero = false;
          continue;
        }
        pieces.assign(1, Piece{std::move(piece), atStart, atZero});
        for (const PreTokenizer &p : preTokenizers_)
          p.apply(pieces);
        for (const Piece &p : pieces)
          model_.tokenize(p.text, ids);
        atStart = atZero = false;
      }
    }
    if (prefix_.empty() && suffix_.empty())
      return ids;
    std::vector<int32_t> out(prefix_);
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), suffix_.begin(), suffix_.end());
    return out;
  }

  std::string decode(const std::vector<int32_t> &ids) const override {
    std::vector<std::string> tokens;
    for (int32_t id : ids) {
      if (id < 0 || id >= size_ || !present_[id] || special_.count(id))
        continue;
      tokens.push_back(tokens_[id]);
    }
    if (decoders_.empty()) {
      std::string s;
      for (size_t i = 0; i < tokens.size(); ++i)
        s += (i ? " " : "") + tokens[i];
      return s;
    }
    for (const Decoder &d : decoders_)
      d.apply(tokens);
    std::string s;
    for (const std::string &t : tokens)
      s += t;
    return s;
  }
  bool decodesInContext() const override { return true; }
  int64_t vocabSize() const override { return size_; }
  int32_t eod() const override { return eod_; }
  bool hasEod() const override { return hasEod_; }

private:
  int32_t idOf(const std::string &token) const {
    for (const AddedToken &t : added_)
      if (t.content == token)
        return t.id;
    auto it = model_.vocab.find(token);
    return it == model_.vocab.end() ? -1 : it->second;
  }

  void readAdded(const Fields &f, const Json &root) {
    const Json *list = f.opt(root, "added_tokens");
    if (!list)
      return;
    if (list->kind != Json::Array)
      f.bad("added_tokens", "expected an array");
    added_.reserve(list->array.size()); // the matchers point into it
    for (size_t i = 0; i < list->array.size(); ++i) {
      const Json &e = list->array[i];
      std::string path = "added_tokens[" + std::to_string(i) + "]";
      AddedToken t;
      t.id = int32_t(f.integer(f.need(e, "id", path), path + ".id", 0, INT32_MAX - 1));
      t.content = f.str(e, "content", path);
      t.special = f.flag(e, "special", path, false);
      t.normalized = f.flag(e, "normalized", path, !t.special);
      t.lstrip = f.flag(e, "lstrip", path, false);
      t.rstrip = f.flag(e, "rstrip", path, false);
      t.singleWord = f.flag(e, "single_word", path, false);
      auto inVocab = model_.vocab.find(t.content);
      if (inVocab != model_.vocab.end() && inVocab->second != t.id)
        f.bad(path, "'" + t.content + "' has id " + std::to_string(t.id) +
                        " but model.vocab gives it " + std::to_string(inVocab->second));
      size_ = std::max<int64_t>(size_, int64_t(t.id) + 1);
      added_.push_back(t);
    }
    for (const AddedToken &t : added_) {
      (t.normalized ? normalized_ : raw_).add(&t);
      if (t.special)
        special_.insert(t.id);
    }
  }

  /// The ids of a post-processor's special tokens: [prefix] ids [suffix].
  void readPostProcessor(const Fields &f, const Json &j, const std::string &path) {
    const std::string &type = f.type(j, path);
    auto checkedId = [&](const Json &v, const std::string &where) {
      return int32_t(f.integer(v, where, 0, size_ - 1));
    };
    if (type == "Sequence") {
      const Json &list = f.need(j, "processors", path);
      if (list.kind != Json::Array)
        f.bad(path + ".processors", "expected an array");
      for (size_t i = 0; i < list.array.size(); ++i)
        readPostProcessor(f, list.array[i], path + ".processors[" + std::to_string(i) + "]");
    } else if (type == "ByteLevel") {
      // Offsets only; ids are unchanged.
    } else if (type == "TemplateProcessing") {
      const Json &single = f.need(j, "single", path);
      const Json &specials = f.need(j, "special_tokens", path);
      if (single.kind != Json::Array)
        f.bad(path + ".single", "expected an array");
      bool seenA = false;
      for (size_t i = 0; i < single.array.size(); ++i) {
        const Json &item = single.array[i];
        std::string where = path + ".single[" + std::to_string(i) + "]";
        if (item.find("Sequence")) {
          seenA = true;
        } else if (const Json *s = item.find("SpecialToken")) {
          std::string name = f.str(*s, "id", where + ".SpecialToken");
          const Json &entry = f.need(specials, name, path + ".special_tokens");
          const Json &ids = f.need(entry, "ids", path + ".special_tokens." + name);
          if (ids.kind != Json::Array)
            f.bad(path + ".special_tokens." + name + ".ids", "expected an array");
          for (size_t k = 0; k < ids.array.size(); ++k)
            (seenA ? suffix_ : prefix_)
                .push_back(checkedId(ids.array[k], path + ".special_tokens." + name + ".ids[" +
                                                       std::to_string(k) + "]"));
        } else {
          f.bad(where, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
        }
      }
    } else if (type == "BertProcessing" || type == "RobertaProcessing") {
      auto pair = [&](const char *key) {
        const Json &p = f.need(j, key, path);
        if (p.kind != Json::Array || p.array.size() != 2)
          f.bad(path + "." + key, "expected [token, id]");
        return checkedId(p.array[1], path + "." + key + "[1]");
      };
      prefix_.push_back(pair("cls"));
      suffix_.push_back(pair("sep"));
    } else {
      f.unsupported(path + ".type", type,
                    "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel and "
                    "Sequence");
    }
  }

  /// tokenizer_config.json: the eos token, and, for the tokenizer classes
  /// that read them (transformers' Llama and Gemma tokenizers),
  /// add_bos_token/add_eos_token in place of the post-processor.
  void readConfig(const std::string &file) {
    Fields f{file};
    Json c = Json::parse(readFile(file), file);
    if (c.kind != Json::Object)
      fail(file + ": expected a JSON object");
    auto tokenName = [&](const char *key) -> std::string {
      const Json *v = f.opt(c, key);
      if (!v)
        return "";
      if (v->kind == Json::Object)
        return f.str(*v, "content", key);
      return f.str(*v, key);
    };
    auto resolve = [&](const char *key, const std::string &name) {
      int32_t id = idOf(name);
      if (id < 0)
        f.bad(key, "'" + name + "' is neither in the vocabulary nor an added token");
      return id;
    };
    std::string eos = tokenName("eos_token"), bos = tokenName("bos_token");
    if (!eos.empty()) {
      eod_ = resolve("eos_token", eos);
      hasEod_ = true;
    }
    std::string cls;
    if (const Json *k = f.opt(c, "tokenizer_class"))
      cls = f.str(*k, "tokenizer_class");
    static const char *readers[] = {"LlamaTokenizer",     "LlamaTokenizerFast",
                                    "CodeLlamaTokenizer", "CodeLlamaTokenizerFast",
                                    "GemmaTokenizer",     "GemmaTokenizerFast"};
    if (std::find(std::begin(readers), std::end(readers), cls) == std::end(readers))
      return;
    bool addBos = f.flag(c, "add_bos_token", "", true);
    bool addEos = f.flag(c, "add_eos_token", "", false);
    prefix_.clear();
    suffix_.clear();
    if (addBos)
      prefix_.push_back(resolve("bos_token", bos.empty() ? "<s>" : bos));
    if (addEos)
      suffix_.push_back(resolve("eos_token", eos.empty() ? "</s>" : eos));
  }

  Model model_;
  std::vector<Normalizer> normalizers_;
  std::vector<PreTokenizer> preTokenizers_;
  std::vector<Decoder> decoders_;
  std::vector<AddedToken> added_;
  AddedMatcher raw_, normalized_;
  std::unordered_set<int32_t> special_;
  std::vector<int32_t> prefix_, suffix_;
  std::vector<std::string> tokens_; // by id: the added token's content, else the model's
  std::vector<bool> present_;
  int64_t size_ = 0;
  int32_t eod_ = 0;
  bool hasEod_ = false;
};

} // namespace

std::unique_ptr<Tokenizer> loadHfTokenizer(const std::string &path) {
  if (path.empty())
    fail("HuggingFaceTokenizer needs --tokenizer-model (a tokenizer.json or a directory with "
         "one)");
  if (!exists(path))
    fail(path + ": no such file or directory (--tokenizer-model)");
  return std::make_unique<HfTokenizer>(path);
}

} // namespace mlc::rt

#endif // MLC_HAVE_ICU
