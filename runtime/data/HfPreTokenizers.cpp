//===- HfPreTokenizers.cpp - tokenizer.json's pre-tokenizers --------------===//
//
// Regexes (ICU over UTF-8, byte offsets) and `pattern` fields, the library's
// split behaviours (NormalizedString::split), and the pre-tokenizers of
// tokenizer.json: ByteLevel, Split, Metaspace, BertPreTokenizer,
// Whitespace, WhitespaceSplit, Digits and Punctuation.
//
//===----------------------------------------------------------------------===//

#ifdef MLC_HAVE_ICU

#include "runtime/data/HfTokenizerParts.h"

#include <algorithm>

#include <unicode/ustring.h>
#include <unicode/utext.h>

namespace mlc::rt::hf {

namespace {

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

} // namespace

//===----------------------------------------------------------------------===//
// Regexes (ICU over UTF-8, byte offsets)
//===----------------------------------------------------------------------===//

Regex::Regex(const std::string &pattern, const std::string &where) : id_(nextId()) {
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

Regex::~Regex() {
  if (proto_)
    uregex_close(proto_);
}

/// The [start, end) byte ranges of the matches in `s`, left to right.
void Regex::findAll(const std::string &s, std::vector<std::pair<size_t, size_t>> &out) const {
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

void Pattern::findAll(const std::string &s, std::vector<std::pair<size_t, size_t>> &out) const {
  if (regex)
    return regex->findAll(s, out);
  out.clear();
  if (literal.empty())
    return;
  for (size_t at = s.find(literal); at != std::string::npos;
       at = s.find(literal, at + literal.size()))
    out.emplace_back(at, at + literal.size());
}

std::string Pattern::replaceAll(const std::string &s, const std::string &with) const {
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

//===----------------------------------------------------------------------===//
// Splitting (the library's SplitDelimiterBehavior)
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Pre-tokenizers
//===----------------------------------------------------------------------===//

void PreTokenizer::apply(std::vector<Piece> &pieces) const {
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

} // namespace mlc::rt::hf

#endif // MLC_HAVE_ICU
