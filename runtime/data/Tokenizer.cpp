//===- Tokenizer.cpp - text to token ids -----------------------------------===//
//
// GPT2BPETokenizer and the BERT WordPiece tokenizers follow HuggingFace
// `tokenizers` (ByteLevel pre-tokenizer + BPE; BertNormalizer +
// BertPreTokenizer + WordPiece) so that ids match it exactly; Unicode
// classes, case mapping and NFD come from ICU.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Tokenizer.h"
#include "runtime/data/HfTokenizer.h"
#include "runtime/data/SpmTokenizer.h"
#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#ifdef MLC_HAVE_ICU
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>
#else
#include "runtime/data/UnicodeFallback.h"
#endif

namespace mlc::rt {

//===----------------------------------------------------------------------===//
// UTF-8 and Unicode classes
//===----------------------------------------------------------------------===//

std::vector<int32_t> utf8Decode(const std::string &s) {
  std::vector<int32_t> out;
  out.reserve(s.size());
  int32_t i = 0, n = int32_t(s.size());
  while (i < n) {
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t *>(s.data()), i, n, c);
    out.push_back(c < 0 ? 0xFFFD : c);
  }
  return out;
}

void utf8Append(std::string &out, int32_t c) {
  char buf[4];
  int32_t len = 0;
  UBool error = false;
  U8_APPEND(reinterpret_cast<uint8_t *>(buf), len, 4, c, error);
  if (!error)
    out.append(buf, len);
}

static bool isLetter(int32_t c) { return U_GET_GC_MASK(c) & U_GC_L_MASK; }
static bool isNumber(int32_t c) { return U_GET_GC_MASK(c) & U_GC_N_MASK; }
static bool isSpace(int32_t c) { return u_isUWhiteSpace(c); }

/// GPT-2's byte-to-unicode table: printable bytes map to themselves, the rest
/// to code points from 256 up, so every byte is a visible character.
const std::vector<int32_t> &byteToUnicode() {
  static const std::vector<int32_t> table = [] {
    std::vector<int32_t> t(256, -1);
    for (int b = 0; b < 256; ++b)
      if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        t[b] = b;
    int next = 256;
    for (int b = 0; b < 256; ++b)
      if (t[b] < 0)
        t[b] = next++;
    return t;
  }();
  return table;
}

std::vector<std::string> gpt2PreTokenize(const std::string &text) {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  std::vector<int32_t> cps = utf8Decode(text);
  std::vector<std::string> words;
  size_t i = 0, n = cps.size();
  auto emit = [&](size_t from, size_t to) {
    std::string w;
    for (size_t k = from; k < to; ++k)
      utf8Append(w, cps[k]);
    words.push_back(std::move(w));
  };
  auto other = [](int32_t c) { return !isSpace(c) && !isLetter(c) && !isNumber(c); };
  while (i < n) {
    if (cps[i] == '\'' && i + 1 < n) {
      static const char *suffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
      size_t matched = 0;
      for (const char *s : suffixes) {
        size_t len = std::strlen(s), k = 0;
        while (k < len && i + 1 + k < n && cps[i + 1 + k] == s[k])
          ++k;
        if (k == len) {
          matched = len;
          break;
        }
      }
      if (matched) {
        emit(i, i + 1 + matched);
        i += 1 + matched;
        continue;
      }
    }
    size_t start = i, j = i;
    if (cps[j] == ' ' && j + 1 < n && !isSpace(cps[j + 1]))
      ++j; // the optional leading space of the next three alternatives
    bool (*cls)(int32_t) = nullptr;
    if (j < n && isLetter(cps[j]))
      cls = isLetter;
    else if (j < n && isNumber(cps[j]))
      cls = isNumber;
    else if (j < n && other(cps[j]))
      cls = +[](int32_t c) { return !isSpace(c) && !isLetter(c) && !isNumber(c); };
    if (cls) {
      while (j < n && cls(cps[j]))
        ++j;
      emit(start, j);
      i = j;
      continue;
    }
    // Whitespace: a run, leaving its last character to a following word.
    j = i;
    while (j < n && isSpace(cps[j]))
      ++j;
    if (j < n && j - i > 1)
      --j;
    emit(i, j);
    i = j;
  }
  return words;
}

namespace {

/// The inverse of a vocabulary: each id's token ("" where none).
std::vector<std::string> tokensById(const std::unordered_map<std::string, int32_t> &ids,
                                    int64_t size) {
  std::vector<std::string> tokens(size);
  for (auto &[token, id] : ids)
    if (id >= 0 && id < size)
      tokens[id] = token;
  return tokens;
}

class ByteTokenizer : public Tokenizer {
public:
  explicit ByteTokenizer(int64_t vocabSize) : vocabSize_(vocabSize) {}
  std::vector<int32_t> encode(const std::string &text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text)
      ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<int32_t> &ids) const override {
    std::string text;
    for (int32_t id : ids)
      if (id > 0 && id < 256) // 0 is the end-of-document mark
        text += char(id);
    return text;
  }
  int64_t vocabSize() const override { return vocabSize_; }
  int64_t idsBelow() const override { return 256; }
  int32_t eod() const override { return 0; }

private:
  int64_t vocabSize_;
};

//===----------------------------------------------------------------------===//
// GPT-2 byte-level BPE
//===----------------------------------------------------------------------===//

/// A vocab.json id: an integer that a dataset's int32 tokens (and the
/// vocabulary size, one past the largest id) can hold.
int32_t vocabId(const std::string &file, const std::string &token, const Json &id) {
  static const char *kinds[] = {"null", "a boolean", "", "a string", "an array", "an object"};
  char number[32];
  std::snprintf(number, sizeof number, "%.17g", id.number);
  std::string found = id.kind == Json::Number ? std::string("id ") + number
                                              : std::string(kinds[id.kind]) + " as its id";
  if (id.kind != Json::Number || !(id.number >= 0 && id.number < INT32_MAX) ||
      id.number != std::floor(id.number))
    fail(file + ": token '" + token + "' has " + found +
         "; ids are integers from 0 to " + std::to_string(INT32_MAX - 1));
  return int32_t(id.number);
}

class Gpt2Bpe : public Tokenizer {
public:
  Gpt2Bpe(const std::string &vocabFile, const std::string &mergeFile) {
    if (vocabFile.empty() || mergeFile.empty())
      fail("GPT2BPETokenizer needs --vocab-file vocab.json and --merge-file merges.txt");
    Json vocab = Json::parse(readFile(vocabFile), vocabFile, /*uniqueKeys=*/true);
    if (vocab.kind != Json::Object)
      fail(vocabFile + ": expected a JSON object of token -> id");
    std::unordered_map<int32_t, const std::string *> tokenOf;
    for (auto &[token, id] : vocab.object) {
      int32_t v = vocabId(vocabFile, token, id);
      auto [other, fresh] = tokenOf.emplace(v, &token);
      if (!fresh)
        fail(vocabFile + ": tokens '" + *other->second + "' and '" + token + "' share id " +
             std::to_string(v) + "; every token needs an id of its own");
      ids_[token] = v;
      size_ = std::max<int64_t>(size_, int64_t(v) + 1);
    }
    std::ifstream merges(mergeFile);
    if (!merges)
      fail(mergeFile + ": cannot open");
    std::string line;
    int rank = 0, lineNo = 0;
    while (std::getline(merges, line)) {
      ++lineNo;
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      if (line.empty() || line.rfind("#version", 0) == 0)
        continue;
      std::string where = mergeFile + ":" + std::to_string(lineNo) + ": ";
      size_t space = line.find(' ');
      if (space == 0 || space == std::string::npos || space + 1 == line.size() ||
          line.find(' ', space + 1) != std::string::npos)
        fail(where + "expected two tokens 'left right', got '" + line + "'");
      std::string left = line.substr(0, space), right = line.substr(space + 1);
      for (const std::string &t : {left, right, left + right})
        if (!ids_.count(t))
          fail(where + "'" + t + "' is not in the vocabulary " + vocabFile);
      ranks_[line] = rank++;
    }
    auto eod = ids_.find("<|endoftext|>");
    eod_ = eod != ids_.end() ? eod->second : int32_t(size_ - 1);
    hasEod_ = eod != ids_.end();
  }

  std::vector<int32_t> encode(const std::string &text) const override {
    std::vector<int32_t> out;
    for (const std::string &word : gpt2PreTokenize(text))
      for (int32_t id : encodeWord(word))
        out.push_back(id);
    return out;
  }
  /// Each token's visible characters mapped back to the bytes they stand for.
  std::string decode(const std::vector<int32_t> &ids) const override {
    if (tokens_.empty()) {
      tokens_ = tokensById(ids_, size_);
      for (int b = 0; b < 256; ++b)
        bytes_[byteToUnicode()[b]] = char(b);
    }
    std::string text;
    for (int32_t id : ids) {
      if (id < 0 || id >= size_ || id == eod_)
        continue;
      for (int32_t cp : utf8Decode(tokens_[id])) {
        auto it = bytes_.find(cp);
        if (it != bytes_.end())
          text += it->second;
      }
    }
    return text;
  }
  int64_t vocabSize() const override { return size_; }
  int32_t eod() const override { return eod_; }
  bool hasEod() const override { return hasEod_; }

private:
  mutable std::vector<std::string> tokens_;
  mutable std::unordered_map<int32_t, char> bytes_;
  std::vector<int32_t> encodeWord(const std::string &word) const {
    // A cache per thread: words repeat, and threads never wait on each other.
    thread_local std::unordered_map<const void *, std::unordered_map<std::string, std::vector<int32_t>>>
        caches;
    auto &cache = caches[this];
    auto hit = cache.find(word);
    if (hit != cache.end())
      return hit->second;
    std::vector<std::string> symbols;
    for (unsigned char b : word) {
      std::string s;
      utf8Append(s, byteToUnicode()[b]);
      symbols.push_back(s);
    }
    // Merge the lowest-ranked adjacent pair until none is in the merges.
    while (symbols.size() > 1) {
      int best = -1, bestRank = INT32_MAX;
      for (size_t k = 0; k + 1 < symbols.size(); ++k) {
        auto it = ranks_.find(symbols[k] + " " + symbols[k + 1]);
        if (it != ranks_.end() && it->second < bestRank) {
          bestRank = it->second;
          best = int(k);
        }
      }
      if (best < 0)
        break;
      std::string left = symbols[best], right = symbols[best + 1];
      std::vector<std::string> merged;
      for (size_t k = 0; k < symbols.size(); ++k) {
        if (k + 1 < symbols.size() && symbols[k] == left && symbols[k + 1] == right) {
          merged.push_back(left + right);
          ++k;
        } else {
          merged.push_back(symbols[k]);
        }
      }
      symbols = std::move(merged);
    }
    std::vector<int32_t> ids;
    for (const std::string &s : symbols) {
      auto it = ids_.find(s);
      if (it == ids_.end())
        fail("GPT2BPETokenizer: symbol '" + s + "' is not in the vocabulary");
      ids.push_back(it->second);
    }
    if (cache.size() < 1000000)
      cache[word] = ids;
    return ids;
  }

  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int> ranks_;
  int64_t size_ = 0;
  int32_t eod_ = 0;
  bool hasEod_ = false;
};

//===----------------------------------------------------------------------===//
// BERT WordPiece
//===----------------------------------------------------------------------===//

bool isBertWhitespace(int32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_isUWhiteSpace(c);
}
bool isBertControl(int32_t c) {
  if (c == '\t' || c == '\n' || c == '\r')
    return false;
  // Cc, Cf and Co; unassigned code points stay, as in HF's BertNormalizer.
  int8_t t = u_charType(c);
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_PRIVATE_USE_CHAR;
}
bool isBertPunctuation(int32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;
  return U_GET_GC_MASK(c) & U_GC_P_MASK;
}
bool isChinese(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/// NFD, then drop nonspacing marks (accents).
std::vector<int32_t> stripAccents(const std::vector<int32_t> &cps) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2 *nfd = unorm2_getNFDInstance(&err);
  std::vector<UChar> src;
  for (int32_t c : cps) {
    UChar buf[2];
    int32_t len = 0;
    UBool e = false;
    U16_APPEND(buf, len, 2, c, e);
    src.insert(src.end(), buf, buf + len);
  }
  std::vector<UChar> dst(src.size() * 4 + 16);
  int32_t len = unorm2_normalize(nfd, src.data(), src.size(), dst.data(), dst.size(), &err);
  if (U_FAILURE(err))
    fail("Unicode normalization failed");
  std::vector<int32_t> out;
  for (int32_t i = 0; i < len;) {
    UChar32 c;
    U16_NEXT(dst.data(), i, len, c);
    if (u_charType(c) != U_NON_SPACING_MARK)
      out.push_back(c);
  }
  return out;
}

/// Full Unicode lowercase of a code point sequence.
std::vector<int32_t> lowercase(const std::vector<int32_t> &cps) {
  std::string utf8;
  for (int32_t c : cps)
    utf8Append(utf8, c);
  UErrorCode err = U_ZERO_ERROR;
  std::vector<UChar> src(utf8.size() * 2 + 2), dst;
  int32_t srcLen = 0;
  u_strFromUTF8(src.data(), src.size(), &srcLen, utf8.data(), utf8.size(), &err);
  dst.resize(srcLen * 3 + 16);
  int32_t len = u_strToLower(dst.data(), dst.size(), src.data(), srcLen, "", &err);
  if (U_FAILURE(err))
    fail("Unicode case mapping failed");
  std::vector<int32_t> out;
  for (int32_t i = 0; i < len;) {
    UChar32 c;
    U16_NEXT(dst.data(), i, len, c);
    out.push_back(c);
  }
  return out;
}

class WordPiece : public Tokenizer {
public:
  WordPiece(const std::string &vocabFile, bool lower) : lower_(lower) {
    if (vocabFile.empty())
      fail("the BERT WordPiece tokenizers need --vocab-file vocab.txt");
    std::ifstream in(vocabFile);
    if (!in)
      fail(vocabFile + ": cannot open");
    std::string line;
    int32_t id = 0;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      // A repeated token would leave an id that no text encodes to.
      auto [first, fresh] = ids_.emplace(line, id++);
      if (!fresh)
        fail(vocabFile + ":" + std::to_string(id) + ": token '" + line +
             "' repeats line " + std::to_string(first->second + 1));
    }
    size_ = id;
    auto unk = ids_.find("[UNK]");
    if (unk == ids_.end())
      fail(vocabFile + ": has no [UNK] token");
    unk_ = unk->second;
    auto sep = ids_.find("[SEP]");
    sep_ = sep != ids_.end() ? sep->second : unk_;
  }

  std::vector<int32_t> encode(const std::string &text) const override {
    // BertNormalizer: clean, space out CJK, strip accents and lowercase.
    std::vector<int32_t> cps;
    for (int32_t c : utf8Decode(text)) {
      if (c == 0 || c == 0xFFFD || isBertControl(c))
        continue;
      if (isBertWhitespace(c)) {
        cps.push_back(' ');
      } else if (isChinese(c)) {
        cps.insert(cps.end(), {' ', c, ' '});
      } else {
        cps.push_back(c);
      }
    }
    if (lower_)
      cps = lowercase(stripAccents(cps));
    // BertPreTokenizer: split on whitespace, punctuation is its own word.
    std::vector<int32_t> out;
    std::vector<int32_t> word;
    auto flush = [&] {
      if (!word.empty())
        wordPiece(word, out);
      word.clear();
    };
    for (int32_t c : cps) {
      if (isBertWhitespace(c)) {
        flush();
      } else if (isBertPunctuation(c)) {
        flush();
        word.push_back(c);
        flush();
      } else {
        word.push_back(c);
      }
    }
    flush();
    return out;
  }
  /// Word pieces joined: "##" continues the previous word, specials dropped.
  std::string decode(const std::vector<int32_t> &ids) const override {
    if (tokens_.empty())
      tokens_ = tokensById(ids_, size_);
    std::string text;
    for (int32_t id : ids) {
      if (id < 0 || id >= size_)
        continue;
      const std::string &t = tokens_[id];
      if (t.size() > 2 && t.front() == '[' && t.back() == ']')
        continue;
      if (t.rfind("##", 0) == 0)
        text += t.substr(2);
      else
        text += (text.empty() ? "" : " ") + t;
    }
    return text;
  }
  int64_t vocabSize() const override { return size_; }
  int32_t eod() const override { return sep_; }

private:
  void wordPiece(const std::vector<int32_t> &word, std::vector<int32_t> &out) const {
    if (word.size() > 100) {
      out.push_back(unk_);
      return;
    }
    std::vector<int32_t> pieces;
    size_t start = 0;
    while (start < word.size()) {
      size_t end = word.size();
      int32_t found = -1;
      while (end > start) {
        std::string sub = start > 0 ? "##" : "";
        for (size_t k = start; k < end; ++k)
          utf8Append(sub, word[k]);
        auto it = ids_.find(sub);
        if (it != ids_.end()) {
          found = it->second;
          break;
        }
        --end;
      }
      if (found < 0) {
        out.push_back(unk_);
        return;
      }
      pieces.push_back(found);
      start = end;
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
  }

  std::unordered_map<std::string, int32_t> ids_;
  bool lower_;
  mutable std::vector<std::string> tokens_;
  int64_t size_ = 0;
  int32_t unk_ = 0, sep_ = 0;
};

} // namespace

bool readsTokenizerModel(const std::string &type) {
  return type == "HuggingFaceTokenizer" || type == "SentencePieceTokenizer" ||
         type == "Llama2Tokenizer";
}

std::unique_ptr<Tokenizer> makeTokenizer(const std::string &type, const std::string &vocabFile,
                                         const std::string &mergeFile) {
  if (type == "ByteTokenizer")
    return std::make_unique<ByteTokenizer>(256);
  if (type == "ByteLevelTokenizer") // Megatron's: the same ids, room for specials
    return std::make_unique<ByteTokenizer>(512);
  if (type == "GPT2BPETokenizer")
    return std::make_unique<Gpt2Bpe>(vocabFile, mergeFile);
  if (type == "BertWordPieceLowerCase")
    return std::make_unique<WordPiece>(vocabFile, true);
  if (type == "BertWordPieceCase")
    return std::make_unique<WordPiece>(vocabFile, false);
  if (type == "HuggingFaceTokenizer")
    return loadHfTokenizer(vocabFile);
  if (type == "SentencePieceTokenizer" || type == "Llama2Tokenizer")
    return loadSentencePieceTokenizer(vocabFile, type == "Llama2Tokenizer");
  fail("unknown --tokenizer-type '" + type +
       "' (expected ByteLevelTokenizer, GPT2BPETokenizer, BertWordPieceLowerCase, "
       "BertWordPieceCase, HuggingFaceTokenizer, SentencePieceTokenizer, Llama2Tokenizer or "
       "mlc's ByteTokenizer)");
}

} // namespace mlc::rt
