//===- HfNormalizers.cpp - tokenizer.json's normalizers -------------------===//
//
// The character classes the pipeline shares, and the
// normalizers of tokenizer.json: Unicode forms, case, strip, replace,
// prepend, BertNormalizer, and Precompiled (a SentencePiece charsmap, applied
// as the spm_precompiled crate does).
//
//===----------------------------------------------------------------------===//

#ifdef MLC_HAVE_ICU

#include "runtime/data/HfTokenizerParts.h"

#include <algorithm>
#include <cstring>

#include <unicode/ubrk.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utext.h>

namespace mlc::rt::hf {

//===----------------------------------------------------------------------===//
// UTF-8 and character classes (as Rust's char methods, which the library uses)
//===----------------------------------------------------------------------===//

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

std::string cpString(int32_t c) {
  std::string s;
  utf8Append(s, c);
  return s;
}

namespace {

//===----------------------------------------------------------------------===//
// Normalizers
//===----------------------------------------------------------------------===//

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

/// Base64 (RFC 4648, with padding) to bytes; an invalid character is an
/// error naming the field.
std::string base64Decode(const std::string &in, const std::string &where) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
            : c == '/'             ? 63
                                   : -1;
    if (c == '=')
      break;
    if (v < 0)
      fail(where + ": not base64 (the character '" + std::string(1, c) + "')");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  return out;
}

} // namespace

std::string Normalizer::apply(const std::string &s) const {
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
  case Precompiled:
    return precompiled(s);
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

/// Hugging Face's Precompiled normalizer (the spm_precompiled crate), not
/// sentencepiece's own walk: per extended grapheme cluster, the
/// replacement of the shortest rule the cluster starts with, when it is
/// under 6 bytes and has one; else each character's own replacement, or
/// the character.
std::string Normalizer::precompiled(const std::string &s) const {
  if (charsMap->empty() || s.empty())
    return s;
  struct Close {
    void operator()(UBreakIterator *b) const { ubrk_close(b); }
  };
  thread_local std::unique_ptr<UBreakIterator, Close> breaks;
  UErrorCode err = U_ZERO_ERROR;
  if (!breaks) {
    breaks.reset(ubrk_open(UBRK_CHARACTER, "", nullptr, 0, &err));
    if (U_FAILURE(err))
      fail(std::string("grapheme break iterator: ") + u_errorName(err));
  }
  UText *text = utext_openUTF8(nullptr, s.data(), int64_t(s.size()), &err);
  ubrk_setUText(breaks.get(), text, &err);
  if (U_FAILURE(err))
    fail(std::string("grapheme breaks: ") + u_errorName(err));
  std::string out;
  out.reserve(s.size());
  std::string_view all(s), replacement;
  for (int32_t a = ubrk_first(breaks.get()), b = ubrk_next(breaks.get()); b != UBRK_DONE;
       a = b, b = ubrk_next(breaks.get())) {
    std::string_view g = all.substr(a, b - a);
    if (g.size() < 6 && charsMap->longestPrefix(g, replacement, /*shortest=*/true)) {
      out += replacement;
      continue;
    }
    for (size_t i = 0; i < g.size();) {
      size_t k = i;
      nextCp(std::string(g), k); // one character
      std::string_view c = g.substr(i, k - i);
      if (charsMap->longestPrefix(c, replacement, /*shortest=*/true))
        out += replacement;
      else
        out += c;
      i = k;
    }
  }
  utext_close(text);
  return out;
}

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
  } else if (type == "Precompiled") {
    n.kind = Normalizer::Precompiled;
    const Json *m = f.opt(j, "precompiled_charsmap");
    std::string where = f.file + ": " + path + ".precompiled_charsmap";
    std::string blob = m ? base64Decode(f.str(*m, path + ".precompiled_charsmap"), where) : "";
    n.charsMap = std::make_shared<const CharsMap>(
        blob.empty() ? CharsMap() : CharsMap(blob, where));
  } else if (type == "BertNormalizer") {
    n.kind = Normalizer::Bert;
    n.cleanText = f.flag(j, "clean_text", path, true);
    n.chinese = f.flag(j, "handle_chinese_chars", path, true);
    n.lower = f.flag(j, "lowercase", path, true);
    n.stripAccents = f.flag(j, "strip_accents", path, n.lower);
  } else {
    f.unsupported(path + ".type", type,
                  "NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, "
                  "Precompiled, BertNormalizer and Sequence");
  }
  out.push_back(std::move(n));
}

} // namespace mlc::rt::hf

#endif // MLC_HAVE_ICU
