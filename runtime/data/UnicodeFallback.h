//===- UnicodeFallback.h - the ICU the tokenizers use, without ICU -*- C++ -*-===//
//
// The tokenizers take Unicode classes, case mapping and NFD from ICU. A
// runtime-only build on a machine without ICU's headers (a GPU machine that
// runs packages compiled elsewhere, fed pre-tokenized batches) gets these
// stand-ins instead: exact UTF-8/UTF-16 coding and ASCII classes; outside
// ASCII every code point is a letter, lowercasing and NFD leave it as it
// is. Tokenizing non-ASCII text there can differ from the full build.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_DATA_UNICODEFALLBACK_H
#define MLC_RUNTIME_DATA_UNICODEFALLBACK_H

#include <cstdint>

typedef int8_t UBool;
typedef uint16_t UChar;
typedef int32_t UChar32;
enum UErrorCode { U_ZERO_ERROR = 0, U_BUFFER_OVERFLOW_ERROR = 15 };
inline bool U_FAILURE(UErrorCode e) { return e > U_ZERO_ERROR; }

enum UCharCategory {
  U_UNASSIGNED = 0,
  U_UPPERCASE_LETTER = 1,
  U_LOWERCASE_LETTER = 2,
  U_OTHER_LETTER = 5,
  U_NON_SPACING_MARK = 6,
  U_DECIMAL_DIGIT_NUMBER = 9,
  U_SPACE_SEPARATOR = 12,
  U_CONTROL_CHAR = 15,
  U_FORMAT_CHAR = 16,
  U_PRIVATE_USE_CHAR = 17,
  U_OTHER_PUNCTUATION = 23,
  U_MATH_SYMBOL = 25,
};
#define U_MASK(x) ((uint32_t)1 << (x))
#define U_GC_L_MASK (U_MASK(U_UPPERCASE_LETTER) | U_MASK(U_LOWERCASE_LETTER) | U_MASK(U_OTHER_LETTER))
#define U_GC_N_MASK U_MASK(U_DECIMAL_DIGIT_NUMBER)
#define U_GC_P_MASK U_MASK(U_OTHER_PUNCTUATION)

inline int8_t u_charType(UChar32 c) {
  if (c < 0 || c > 0x10FFFF)
    return U_UNASSIGNED;
  if (c >= 0x80)
    return U_OTHER_LETTER;
  if (c < 0x20 || c == 0x7F)
    return U_CONTROL_CHAR;
  if (c == ' ')
    return U_SPACE_SEPARATOR;
  if (c >= '0' && c <= '9')
    return U_DECIMAL_DIGIT_NUMBER;
  if (c >= 'A' && c <= 'Z')
    return U_UPPERCASE_LETTER;
  if (c >= 'a' && c <= 'z')
    return U_LOWERCASE_LETTER;
  if (c == '+' || c == '<' || c == '=' || c == '>' || c == '|' || c == '~' || c == '^' ||
      c == '`' || c == '$')
    return U_MATH_SYMBOL;
  return U_OTHER_PUNCTUATION;
}
#define U_GET_GC_MASK(c) U_MASK(u_charType(c))
inline UBool u_isUWhiteSpace(UChar32 c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// UTF-8: i is the index into s of length n; a malformed sequence yields c < 0.
#define U8_NEXT(s, i, n, c)                                                                   \
  do {                                                                                        \
    uint32_t b0_ = (s)[(i)++];                                                                \
    int more_ = b0_ < 0x80 ? 0 : b0_ >= 0xF0 ? 3 : b0_ >= 0xE0 ? 2 : b0_ >= 0xC0 ? 1 : -1;   \
    (c) = more_ < 0 ? -1 : int32_t(more_ == 0 ? b0_ : b0_ & (0x3F >> more_));                 \
    for (int k_ = 0; k_ < more_ && (c) >= 0; ++k_) {                                          \
      if ((i) >= (n) || ((s)[(i)] & 0xC0) != 0x80) {                                          \
        (c) = -1;                                                                             \
        break;                                                                                \
      }                                                                                       \
      (c) = ((c) << 6) | ((s)[(i)++] & 0x3F);                                                 \
    }                                                                                         \
  } while (0)
#define U8_APPEND(s, i, cap, c, err)                                                          \
  do {                                                                                        \
    uint32_t c_ = uint32_t(c);                                                                \
    if (c_ < 0x80 && (i) < (cap)) {                                                           \
      (s)[(i)++] = uint8_t(c_);                                                               \
    } else if (c_ < 0x800 && (i) + 1 < (cap)) {                                               \
      (s)[(i)++] = uint8_t(0xC0 | (c_ >> 6));                                                 \
      (s)[(i)++] = uint8_t(0x80 | (c_ & 0x3F));                                               \
    } else if (c_ < 0x10000 && (i) + 2 < (cap)) {                                             \
      (s)[(i)++] = uint8_t(0xE0 | (c_ >> 12));                                                \
      (s)[(i)++] = uint8_t(0x80 | ((c_ >> 6) & 0x3F));                                        \
      (s)[(i)++] = uint8_t(0x80 | (c_ & 0x3F));                                               \
    } else if (c_ <= 0x10FFFF && (i) + 3 < (cap)) {                                           \
      (s)[(i)++] = uint8_t(0xF0 | (c_ >> 18));                                                \
      (s)[(i)++] = uint8_t(0x80 | ((c_ >> 12) & 0x3F));                                       \
      (s)[(i)++] = uint8_t(0x80 | ((c_ >> 6) & 0x3F));                                        \
      (s)[(i)++] = uint8_t(0x80 | (c_ & 0x3F));                                               \
    } else {                                                                                  \
      (err) = true;                                                                           \
    }                                                                                         \
  } while (0)
#define U16_APPEND(s, i, cap, c, err)                                                         \
  do {                                                                                        \
    uint32_t c_ = uint32_t(c);                                                                \
    if (c_ < 0x10000 && (i) < (cap)) {                                                        \
      (s)[(i)++] = UChar(c_);                                                                 \
    } else if (c_ <= 0x10FFFF && (i) + 1 < (cap)) {                                           \
      (s)[(i)++] = UChar(0xD7C0 + (c_ >> 10));                                                \
      (s)[(i)++] = UChar(0xDC00 | (c_ & 0x3FF));                                              \
    } else {                                                                                  \
      (err) = true;                                                                           \
    }                                                                                         \
  } while (0)
#define U16_NEXT(s, i, n, c)                                                                  \
  do {                                                                                        \
    (c) = (s)[(i)++];                                                                         \
    if ((c) >= 0xD800 && (c) < 0xDC00 && (i) < (n) && (s)[(i)] >= 0xDC00 &&                   \
        (s)[(i)] < 0xE000)                                                                    \
      (c) = (((c) - 0xD800) << 10) + ((s)[(i)++] - 0xDC00) + 0x10000;                         \
  } while (0)

// NFD leaves text as it is; lowercasing maps ASCII only.
struct UNormalizer2;
inline const UNormalizer2 *unorm2_getNFDInstance(UErrorCode *) { return nullptr; }
inline int32_t unorm2_normalize(const UNormalizer2 *, const UChar *src, int32_t n, UChar *dst,
                                int32_t cap, UErrorCode *err) {
  if (n > cap) {
    *err = U_BUFFER_OVERFLOW_ERROR;
    return n;
  }
  for (int32_t i = 0; i < n; ++i)
    dst[i] = src[i];
  return n;
}
inline void u_strFromUTF8(UChar *dst, int32_t cap, int32_t *len, const char *src, int32_t n,
                          UErrorCode *err) {
  int32_t i = 0, out = 0;
  bool overflow = false;
  while (i < n) {
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t *>(src), i, n, c);
    if (c < 0)
      c = 0xFFFD;
    U16_APPEND(dst, out, cap, c, overflow);
  }
  if (overflow)
    *err = U_BUFFER_OVERFLOW_ERROR;
  *len = out;
}
inline int32_t u_strToLower(UChar *dst, int32_t cap, const UChar *src, int32_t n, const char *,
                            UErrorCode *err) {
  if (n > cap) {
    *err = U_BUFFER_OVERFLOW_ERROR;
    return n;
  }
  for (int32_t i = 0; i < n; ++i)
    dst[i] = src[i] >= 'A' && src[i] <= 'Z' ? UChar(src[i] + 32) : src[i];
  return n;
}

#endif // MLC_RUNTIME_DATA_UNICODEFALLBACK_H
