//===- SpmTokenizer.cpp - SentencePiece tokenizer.model -------------------===//
//
// The reader follows the `sentencepiece` library (src/normalizer.cc,
// bpe_model.cc, unigram_model.cc, sentencepiece_processor.cc) step for step,
// down to its float arithmetic and its priority queue's ties, so that ids
// are the library's own; see SpmTokenizer.h for what is read and refused.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/SpmTokenizer.h"
#include "runtime/data/CharsMap.h"
#include "runtime/data/SpmModel.h"
#include "support/Error.h"
#include "support/TensorIO.h"

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <deque>
#include <functional>
#include <queue>
#include <string_view>
#include <unordered_map>

namespace mlc::rt {
namespace {

using namespace spm;

//===----------------------------------------------------------------------===//
// UTF-8 as the library reads it
//===----------------------------------------------------------------------===//

/// The length of the character a lead byte starts (the library's OneCharLen:
/// it does not look at the bytes that follow).
inline size_t oneCharLen(const char *s) {
  return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(*s & 0xFF) >> 4];
}
inline bool isTrail(char c) { return static_cast<signed char>(c) < -0x40; }
inline bool isValidCodepoint(uint32_t c) { return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF); }

/// The library's IsValidDecodeUTF8: the length of the valid character at
/// `s`, or 0 for a byte that starts none (U+FFFD itself is valid).
size_t validCharLen(const char *s, size_t len) {
  unsigned char b = s[0];
  if (b < 0x80)
    return 1;
  if (len >= 2 && (b & 0xE0) == 0xC0) {
    uint32_t cp = ((b & 0x1F) << 6) | (s[1] & 0x3F);
    if (isTrail(s[1]) && cp >= 0x80 && isValidCodepoint(cp))
      return 2;
  } else if (len >= 3 && (b & 0xF0) == 0xE0) {
    uint32_t cp = ((b & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    if (isTrail(s[1]) && isTrail(s[2]) && cp >= 0x800 && isValidCodepoint(cp))
      return 3;
  } else if (len >= 4 && (b & 0xF8) == 0xF0) {
    uint32_t cp = ((b & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) |
                  (s[3] & 0x3F);
    if (isTrail(s[1]) && isTrail(s[2]) && isTrail(s[3]) && cp >= 0x10000 &&
        isValidCodepoint(cp))
      return 4;
  }
  return 0;
}

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81"; // U+2581
constexpr std::string_view kReplacement = "\xEF\xBF\xBD"; // U+FFFD

//===----------------------------------------------------------------------===//
// The tokenizer
//===----------------------------------------------------------------------===//

class SpmTokenizer : public Tokenizer {
public:
  SpmTokenizer(const std::string &path, bool addBos) {
    file_ = isDirectoryPath(path) ? path + "/tokenizer.model" : path;
    if (isDirectoryPath(path) && !fileExists(file_))
      fail(path + ": the directory holds no tokenizer.model (SentencePieceTokenizer reads a "
                  "tokenizer.model or a directory with one)");
    ModelFile m = readModelFile(file_);
    if (m.modelType != 1 && m.modelType != 2)
      fail(file_ + ": trainer_spec.model_type " +
           (m.modelType == 3 ? std::string("WORD") : m.modelType == 4 ? "CHAR"
                                                                       : std::to_string(m.modelType)) +
           " is not supported by mlc (it reads UNIGRAM and BPE)");
    bpe_ = m.modelType == 2;
    byteFallback_ = m.byteFallback;
    whitespaceAsSuffix_ = m.whitespaceAsSuffix;
    addDummyPrefix_ = m.addDummyPrefix;
    removeExtraWhitespaces_ = m.removeExtraWhitespaces;
    escapeWhitespaces_ = m.escapeWhitespaces;
    unkSurface_ = m.unkSurface;
    if (!m.charsmap.empty())
      charsMap_ = CharsMap(m.charsmap, file_ + ": normalizer_spec.precompiled_charsmap");
    pieces_ = std::move(m.pieces);

    // As the library's InitializePieces: normal, user-defined and unused
    // pieces are the model's; the others (unknown, control, byte) reserved.
    minScore_ = FLT_MAX;
    maxScore_ = FLT_MIN;
    std::vector<bool> byteFound(256, false);
    for (size_t i = 0; i < pieces_.size(); ++i) {
      const Piece &p = pieces_[i];
      std::string where = file_ + ": pieces[" + std::to_string(i) + "] '" + p.text + "'";
      bool normal = p.type == Normal || p.type == UserDefined || p.type == Unused;
      auto &map = normal ? model_ : reserved_;
      if (!map.emplace(p.text, int32_t(i)).second)
        fail(where + ": defined twice");
      if (p.type == Normal) {
        minScore_ = std::min(minScore_, p.score);
        maxScore_ = std::max(maxScore_, p.score);
      }
      if (p.type == UserDefined)
        userDefined_.push_back(p.text);
      if (p.type == Unknown) {
        if (unk_ >= 0)
          fail(where + ": a second unknown piece (the first is " + std::to_string(unk_) + ")");
        unk_ = int32_t(i);
      }
      if (p.type == Byte) {
        int b = pieceToByte(p.text);
        if (!byteFallback_)
          fail(where + ": a byte piece, but trainer_spec.byte_fallback is false");
        if (b < 0)
          fail(where + ": a byte piece must be <0xNN>");
        byteFound[b] = true;
        byteIds_[b] = int32_t(i);
      }
    }
    if (unk_ < 0)
      fail(file_ + ": no piece has the unknown type (<unk>)");
    if (byteFallback_ && std::find(byteFound.begin(), byteFound.end(), false) != byteFound.end())
      fail(file_ + ": trainer_spec.byte_fallback is true, but the pieces lack <0x" +
           hexByte(int(std::find(byteFound.begin(), byteFound.end(), false) - byteFound.begin())) +
           ">");
    // Longest first: the first match is the longest.
    std::sort(userDefined_.begin(), userDefined_.end(),
              [](const std::string &a, const std::string &b) { return a.size() > b.size(); });
    auto control = [&](const std::string &piece) {
      auto it = reserved_.find(piece);
      return it != reserved_.end() && pieces_[it->second].type == Control ? it->second : -1;
    };
    bos_ = control(m.bosPiece);
    eos_ = control(m.eosPiece);
    if (addBos && bos_ < 0)
      fail(file_ + ": Llama2Tokenizer puts the model's BOS first, and '" + m.bosPiece +
           "' (trainer_spec.bos_piece) is no control piece of it");
    addBos_ = addBos;
    if (!bpe_)
      buildTrie();
  }

  std::vector<int32_t> encode(const std::string &raw) const override {
    std::string normalized = normalize(validUtf8(raw));
    std::vector<std::pair<std::string_view, int32_t>> result;
    if (!normalized.empty()) {
      if (bpe_)
        encodeBpe(normalized, result);
      else
        encodeUnigram(normalized, result);
    }
    // As the library's PopulateSentencePieceText: an unknown piece is its
    // bytes with byte_fallback, else one <unk> for a run of them.
    std::vector<int32_t> ids;
    if (addBos_)
      ids.push_back(bos_);
    bool prevUnk = false;
    for (auto &[piece, id] : result) {
      bool unk = id == unk_;
      if (unk && byteFallback_) {
        for (unsigned char c : piece)
          ids.push_back(byteIds_[c]);
      } else if (!(unk && prevUnk)) {
        ids.push_back(id);
      }
      prevUnk = unk;
    }
    return ids;
  }

  std::string decode(const std::vector<int32_t> &ids) const override {
    std::string text, bytes;
    // <0xNN> runs become UTF-8, a byte that starts no character U+FFFD.
    auto flushBytes = [&]() {
      size_t i = 0;
      while (i < bytes.size()) {
        size_t k = validCharLen(bytes.data() + i, bytes.size() - i);
        if (k) {
          text.append(bytes, i, k);
          i += k;
        } else {
          text += kReplacement;
          ++i;
        }
      }
      bytes.clear();
    };
    bool bosWhitespace = true, bosWhitespaceSeen = false;
    for (int32_t id : ids) {
      if (id < 0 || id >= int64_t(pieces_.size()))
        continue;
      const Piece &p = pieces_[id];
      if (p.type == Byte) {
        bytes += char(pieceToByte(p.text));
        continue;
      }
      flushBytes();
      if (bosWhitespaceSeen || !text.empty())
        bosWhitespace = false;
      bosWhitespaceSeen = false;
      if (p.type == Control)
        continue;
      if (p.type == Unknown) {
        text += unkSurface_;
        continue;
      }
      std::string_view piece = p.text;
      if (bosWhitespace && (addDummyPrefix_ || removeExtraWhitespaces_)) {
        bool consumed = piece.substr(0, kSpaceSymbol.size()) == kSpaceSymbol;
        if (consumed)
          piece.remove_prefix(kSpaceSymbol.size());
        bosWhitespaceSeen = consumed && !removeExtraWhitespaces_;
      }
      for (size_t i = 0; i < piece.size();) {
        if (piece.substr(i, kSpaceSymbol.size()) == kSpaceSymbol) {
          text += ' ';
          i += kSpaceSymbol.size();
        } else {
          text += piece[i++];
        }
      }
    }
    flushBytes();
    return text;
  }

  int64_t vocabSize() const override { return int64_t(pieces_.size()); }
  int32_t eod() const override { return eos_ >= 0 ? eos_ : int32_t(pieces_.size() - 1); }
  bool hasEod() const override { return eos_ >= 0; }
  bool decodesInContext() const override { return true; }

private:
  static int pieceToByte(const std::string &p) {
    if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>')
      return -1;
    auto hex = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    };
    int hi = hex(p[3]), lo = hex(p[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
  static std::string hexByte(int b) {
    const char *digits = "0123456789ABCDEF";
    return {digits[b >> 4], digits[b & 15]};
  }
  static bool fileExists(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (f)
      std::fclose(f);
    return f != nullptr;
  }

  /// The longest user-defined symbol `s` starts with, or 0.
  size_t userDefinedPrefix(std::string_view s) const {
    for (const std::string &u : userDefined_)
      if (s.size() >= u.size() && s.compare(0, u.size(), u) == 0)
        return u.size();
    return 0;
  }

  /// The library's Normalizer::NormalizePrefix: the replacement of the
  /// text's first character (or rule, or user-defined symbol) and the bytes
  /// it consumes.
  std::pair<std::string_view, size_t> normalizePrefix(std::string_view s) const {
    if (size_t n = userDefinedPrefix(s))
      return {s.substr(0, n), n};
    std::string_view replacement;
    if (!charsMap_.empty())
      if (size_t n = charsMap_.longestPrefix(s, replacement))
        return {replacement, n};
    size_t n = validCharLen(s.data(), s.size());
    if (!n)
      return {kReplacement, 1};
    return {s.substr(0, n), n};
  }

  /// The library's Normalizer::Normalize.
  std::string normalize(std::string_view input) const {
    std::string out;
    if (removeExtraWhitespaces_)
      while (!input.empty()) {
        auto [sp, n] = normalizePrefix(input);
        if (sp != " ")
          break;
        input.remove_prefix(n);
      }
    if (input.empty())
      return out;
    out.reserve(input.size() * 3);
    auto addSpace = [&]() {
      if (escapeWhitespaces_)
        out += kSpaceSymbol;
      else
        out += ' ';
    };
    if (!whitespaceAsSuffix_ && addDummyPrefix_)
      addSpace();
    bool prevSpace = removeExtraWhitespaces_;
    while (!input.empty()) {
      auto [sp, n] = normalizePrefix(input);
      while (prevSpace && !sp.empty() && sp[0] == ' ')
        sp.remove_prefix(1);
      if (!sp.empty()) {
        for (char c : sp) {
          if (escapeWhitespaces_ && c == ' ')
            out += kSpaceSymbol;
          else
            out += c;
        }
        prevSpace = sp.back() == ' ';
      }
      input.remove_prefix(n);
      if (!removeExtraWhitespaces_)
        prevSpace = false;
    }
    if (removeExtraWhitespaces_) {
      std::string_view space = escapeWhitespaces_ ? kSpaceSymbol : " ";
      while (out.size() >= space.size() &&
             std::string_view(out).substr(out.size() - space.size()) == space)
        out.resize(out.size() - space.size());
    }
    if (whitespaceAsSuffix_ && addDummyPrefix_)
      addSpace();
    return out;
  }

  /// The library's PieceToId: reserved pieces first, then the model's, else
  /// <unk>.
  int32_t pieceToId(std::string_view piece) const {
    if (auto it = reserved_.find(piece); it != reserved_.end())
      return it->second;
    if (auto it = model_.find(piece); it != model_.end())
      return it->second;
    return unk_;
  }

  /// bpe_model.cc's Model::SampleEncode without dropout: characters (a
  /// user-defined symbol is one, and never merges), then the adjacent pair
  /// whose merged piece scores best merged first (ties: the leftmost), with
  /// the library's priority queue so that stale pairs pop in its order;
  /// unused pieces are split back into the pieces they were merged from.
  void encodeBpe(std::string_view text,
                 std::vector<std::pair<std::string_view, int32_t>> &out) const {
    struct Pair {
      int left, right;
      float score;
      size_t size;
    };
    struct Order {
      bool operator()(const Pair *a, const Pair *b) const {
        return a->score < b->score || (a->score == b->score && a->left > b->left);
      }
    };
    struct Symbol {
      int prev, next;
      bool freeze;
      std::string_view piece;
    };
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    std::deque<Pair> storage; // stable addresses, few allocations
    std::priority_queue<Pair *, std::vector<Pair *>, Order> agenda;
    std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> revMerge;
    auto maybeAdd = [&](int left, int right) {
      if (left == -1 || right == -1 || symbols[left].freeze || symbols[right].freeze)
        return;
      std::string_view piece(symbols[left].piece.data(),
                             symbols[left].piece.size() + symbols[right].piece.size());
      auto it = model_.find(piece);
      if (it == model_.end())
        return;
      storage.push_back(Pair{left, right, pieces_[it->second].score, piece.size()});
      agenda.push(&storage.back());
      if (pieces_[it->second].type == Unused)
        revMerge[piece] = {symbols[left].piece, symbols[right].piece};
    };
    int index = 0;
    std::string_view rest = text;
    while (!rest.empty()) {
      Symbol s;
      size_t n = userDefinedPrefix(rest);
      s.freeze = n > 0;
      if (!n)
        n = std::min(rest.size(), oneCharLen(rest.data()));
      s.piece = rest.substr(0, n);
      s.prev = index == 0 ? -1 : index - 1;
      rest.remove_prefix(n);
      s.next = rest.empty() ? -1 : index + 1;
      ++index;
      symbols.push_back(s);
    }
    for (size_t i = 1; i < symbols.size(); ++i)
      maybeAdd(int(i) - 1, int(i));
    while (!agenda.empty()) {
      Pair *top = agenda.top();
      agenda.pop();
      Symbol &l = symbols[top->left], &r = symbols[top->right];
      if (l.piece.empty() || r.piece.empty() || l.piece.size() + r.piece.size() != top->size)
        continue;
      l.piece = std::string_view(l.piece.data(), l.piece.size() + r.piece.size());
      l.next = r.next;
      if (r.next >= 0)
        symbols[r.next].prev = top->left;
      r.piece = std::string_view();
      maybeAdd(l.prev, top->left);
      maybeAdd(top->left, l.next);
    }
    std::function<void(std::string_view)> resegment = [&](std::string_view w) {
      int32_t id = pieceToId(w);
      if (id < 0 || pieces_[id].type != Unused) {
        out.push_back({w, id});
        return;
      }
      auto it = revMerge.find(w);
      if (it == revMerge.end()) {
        out.push_back({w, id});
        return;
      }
      resegment(it->second.first);
      resegment(it->second.second);
    };
    for (int i = 0; i != -1; i = symbols[i].next)
      resegment(symbols[i].piece);
  }

  /// A byte trie of the model's pieces (Unigram): node 0 is the root.
  void buildTrie() {
    trieValue_.assign(1, -1);
    for (auto &[piece, id] : model_) {
      uint32_t node = 0;
      for (unsigned char c : piece) {
        uint64_t key = (uint64_t(node) << 8) | c;
        auto it = trieNext_.find(key);
        if (it == trieNext_.end()) {
          it = trieNext_.emplace(key, uint32_t(trieValue_.size())).first;
          trieValue_.push_back(-1);
        }
        node = it->second;
      }
      trieValue_[node] = id;
    }
  }

  /// unigram_model.cc's Model::EncodeOptimized: the best path through the
  /// pieces that start at each character, a piece's score its log
  /// probability (a user-defined symbol length * max score - 0.1, an
  /// unknown character min score - 10), in the library's float and double
  /// arithmetic.
  void encodeUnigram(std::string_view text,
                     std::vector<std::pair<std::string_view, int32_t>> &out) const {
    struct Best {
      int id = -1;
      float score = 0;
      int start = -1;
    };
    const int size = int(text.size());
    const float unkScore = minScore_ - 10.0f;
    std::vector<Best> best(size + 1);
    int start = 0;
    while (start < size) {
      const float here = best[start].score;
      bool single = false;
      const int mblen = std::min<int>(int(oneCharLen(text.data() + start)), size - start);
      uint32_t node = 0;
      for (int pos = start; pos < size; ++pos) {
        auto it = trieNext_.find((uint64_t(node) << 8) | static_cast<unsigned char>(text[pos]));
        if (it == trieNext_.end())
          break;
        node = it->second;
        int32_t id = trieValue_[node];
        if (id < 0 || pieces_[id].type == Unused)
          continue;
        Best &target = best[pos + 1];
        const size_t length = size_t(pos + 1 - start);
        const double score = pieces_[id].type == UserDefined ? length * maxScore_ - 0.1
                                                             : double(pieces_[id].score);
        const double candidate = score + here;
        if (target.start == -1 || candidate > target.score) {
          target.score = float(candidate);
          target.start = start;
          target.id = id;
        }
        if (!single && int(length) == mblen)
          single = true;
      }
      if (!single) {
        Best &target = best[start + mblen];
        const float candidate = unkScore + here;
        if (target.start == -1 || candidate > target.score) {
          target.score = candidate;
          target.start = start;
          target.id = unk_;
        }
      }
      start += mblen;
    }
    size_t first = out.size();
    for (int end = size; end > 0; end = best[end].start)
      out.push_back({text.substr(best[end].start, end - best[end].start), best[end].id});
    std::reverse(out.begin() + first, out.end());
  }

  std::string file_;
  std::vector<Piece> pieces_;
  std::unordered_map<std::string_view, int32_t> model_, reserved_;
  std::vector<std::string> userDefined_;
  CharsMap charsMap_;
  std::unordered_map<uint64_t, uint32_t> trieNext_;
  std::vector<int32_t> trieValue_;
  int32_t byteIds_[256] = {};
  int32_t unk_ = -1, bos_ = -1, eos_ = -1;
  float minScore_ = 0, maxScore_ = 0;
  bool bpe_ = false, byteFallback_ = false, whitespaceAsSuffix_ = false, addBos_ = false;
  bool addDummyPrefix_ = true, removeExtraWhitespaces_ = true, escapeWhitespaces_ = true;
  std::string unkSurface_;
};

} // namespace

// Python's bytes.decode(errors="replace") gives the library its str: one
// U+FFFD per maximal ill-formed subpart (the library alone would replace each
// byte). The HF tokenizers read their text through the same function.
std::string validUtf8(const std::string &s) {
  size_t i = 0, n = s.size();
  while (i < n && static_cast<unsigned char>(s[i]) < 0x80)
    ++i;
  if (i == n)
    return s;
  std::string out = s.substr(0, i);
  while (i < n) {
    size_t k = validCharLen(s.data() + i, n - i);
    if (k) {
      out.append(s, i, k);
      i += k;
      continue;
    }
    // A maximal subpart: a lead byte and the trail bytes that could still
    // continue it (the bounds of Unicode's table 3-7).
    unsigned char b = s[i];
    size_t need = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2
                  : b >= 0xF0 && b <= 0xF4                             ? 3
                                                                       : 0;
    size_t j = i + 1;
    for (size_t t = 0; t < need && j < n; ++t, ++j) {
      unsigned char c = s[j];
      unsigned char lo = 0x80, hi = 0xBF;
      if (t == 0) {
        if (b == 0xE0)
          lo = 0xA0;
        else if (b == 0xED)
          hi = 0x9F;
        else if (b == 0xF0)
          lo = 0x90;
        else if (b == 0xF4)
          hi = 0x8F;
      }
      if (c < lo || c > hi)
        break;
    }
    out += kReplacement;
    i = j;
  }
  return out;
}

std::unique_ptr<Tokenizer> loadSentencePieceTokenizer(const std::string &path, bool addBos) {
  const char *type = addBos ? "Llama2Tokenizer" : "SentencePieceTokenizer";
  if (path.empty())
    fail(std::string(type) + " needs --tokenizer-model (a tokenizer.model or a directory "
                             "holding one)");
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    fail(path + ": no such file or directory (--tokenizer-model)");
  std::fclose(f);
  return std::make_unique<SpmTokenizer>(path, addBos);
}

} // namespace mlc::rt
