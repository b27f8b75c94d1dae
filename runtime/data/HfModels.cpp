//===- HfModels.cpp - tokenizer.json's models -----------------------------===//
//
// The models of tokenizer.json, as the library runs them: BPE (its merge
// queue, byte fallback, fused unknowns, a per-thread word cache),
// WordPiece (longest match first) and Unigram (the best path, as
// sentencepiece's); and reading `model`, whose vocabulary and merges are
// checked as they are read.
//
//===----------------------------------------------------------------------===//

#ifdef MLC_HAVE_ICU

#include "runtime/data/HfTokenizerParts.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <queue>

namespace mlc::rt::hf {

namespace {

std::string formatNumber(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

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

/// The ids of the <0x00>..<0xFF> tokens byte_fallback uses, -1 for each the
/// vocabulary lacks.
void findByteTokens(Model &m) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = m.vocab.find(name);
    m.byteIds[b] = it == m.vocab.end() ? -1 : it->second;
  }
}

/// A Unigram model: "vocab" is [piece, score] pairs, the id its index (a
/// piece listed twice keeps its last id, as the library's map), "unk_id" an
/// index or null.
void readUnigram(const Fields &f, const Json &j, Model &m, int64_t &size) {
  m.kind = Model::Unigram;
  const Json &v = f.need(j, "vocab", "model");
  if (v.kind != Json::Array)
    f.bad("model.vocab", "expected an array of [piece, score] pairs (a Unigram model)");
  m.minScore = INFINITY;
  for (size_t i = 0; i < v.array.size(); ++i) {
    const Json &e = v.array[i];
    const std::string where = "model.vocab[" + std::to_string(i) + "]";
    if (e.kind != Json::Array || e.array.size() != 2 || e.array[0].kind != Json::String ||
        e.array[1].kind != Json::Number)
      f.bad(where, "expected a [piece, score] pair");
    // A log-probability: NaN or infinite, the best path is no path.
    if (!std::isfinite(e.array[1].number))
      f.bad(where, "the score of '" + e.array[0].string + "' is not a finite number");
    if (i >= size_t(INT32_MAX))
      f.bad("model.vocab", "more than 2^31 - 1 pieces");
    m.vocab[e.array[0].string] = int32_t(i);
    m.scores.push_back(e.array[1].number);
    m.minScore = std::min(m.minScore, e.array[1].number);
  }
  size = int64_t(v.array.size());
  if (const Json *u = f.opt(j, "unk_id"))
    m.unk = int32_t(f.integer(*u, "model.unk_id", 0, std::max<int64_t>(size - 1, 0)));
  if (m.unk >= 0 && size == 0)
    f.bad("model.unk_id", "the vocabulary is empty");
  m.byteFallback = f.flag(j, "byte_fallback", "model", false);
  findByteTokens(m);
  m.trieId.assign(1, -1);
  for (auto &[piece, id] : m.vocab) {
    uint32_t node = 0;
    for (unsigned char c : piece) {
      auto [it, fresh] =
          m.trieNext.emplace((uint64_t(node) << 8) | c, uint32_t(m.trieId.size()));
      if (fresh)
        m.trieId.push_back(-1);
      node = it->second;
    }
    m.trieId[node] = id;
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

} // namespace

//===----------------------------------------------------------------------===//
// Models
//===----------------------------------------------------------------------===//

void Model::tokenize(const std::string &word, std::vector<int32_t> &out) const {
  if (kind == WordPiece)
    return wordPiece(word, out);
  if (kind == Unigram)
    return unigram(word, out);
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
std::vector<int32_t> Model::bpe(const std::string &word) const {
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

void Model::unigram(const std::string &word, std::vector<int32_t> &out) const {
  struct Best {
    int32_t id = 0;
    double score = 0;
    int64_t start = -1;
  };
  const int64_t size = int64_t(word.size());
  if (!size)
    return;
  std::vector<Best> best(size + 1);
  for (int64_t start = 0; start < size;) {
    const double here = best[start].score;
    size_t next = size_t(start);
    nextCp(word, next);
    const int64_t mblen = int64_t(next) - start;
    bool single = false;
    uint32_t node = 0;
    for (int64_t pos = start; pos < size; ++pos) {
      auto it = trieNext.find((uint64_t(node) << 8) | static_cast<unsigned char>(word[pos]));
      if (it == trieNext.end())
        break;
      node = it->second;
      int32_t id = trieId[node];
      if (id < 0)
        continue;
      Best &target = best[pos + 1];
      const double candidate = scores[id] + here;
      if (target.start < 0 || candidate > target.score)
        target = {id, candidate, start};
      if (!single && pos + 1 - start == mblen)
        single = true;
    }
    if (!single) {
      if (unk < 0)
        fail("a character the Unigram vocabulary lacks, and model.unk_id is null");
      Best &target = best[start + mblen];
      const double candidate = (minScore - 10.0) + here;
      if (target.start < 0 || candidate > target.score)
        target = {unk, candidate, start};
    }
    start += mblen;
  }
  std::vector<std::pair<int64_t, int64_t>> pieces; // [start, end), unknown runs fused
  bool inUnk = false;
  for (int64_t end = size; end > 0; end = best[end].start) {
    const Best &b = best[end];
    bool isUnk = b.id == unk;
    if (isUnk && inUnk)
      pieces.back().first = b.start;
    else
      pieces.push_back({b.start, end});
    inUnk = isUnk;
  }
  std::reverse(pieces.begin(), pieces.end());
  for (auto [a, b] : pieces) {
    std::string piece = word.substr(a, b - a);
    auto it = vocab.find(piece);
    if (it != vocab.end()) {
      out.push_back(it->second);
      continue;
    }
    bool bytes = byteFallback;
    for (unsigned char c : piece)
      bytes &= byteIds[c] >= 0;
    if (bytes) {
      for (unsigned char c : piece)
        out.push_back(byteIds[c]);
      continue;
    }
    if (unk < 0)
      fail("a character the Unigram vocabulary lacks, and model.unk_id is null");
    out.push_back(unk);
  }
}

void Model::wordPiece(const std::string &word, std::vector<int32_t> &out) const {
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

Model readModel(const Fields &f, const Json &root, int64_t &size) {
  const Json &j = f.need(root, "model", "tokenizer");
  Model m;
  m.id_ = freshId();
  std::string type = j.find("type") ? f.type(j, "model") : "";
  if (type.empty()) // files of old versions name no type: the fields tell
    type = j.find("merges") ? "BPE" : j.find("continuing_subword_prefix") ? "WordPiece" : "";
  if (type != "BPE" && type != "WordPiece" && type != "Unigram")
    f.unsupported("model.type", type.empty() ? "(none)" : type, "BPE, WordPiece and Unigram");
  if (type == "Unigram")
    readUnigram(f, j, m, size);
  else
    readVocab(f, j, m.vocab, size);
  // HF's BPE drops every character it has no entry for: an empty vocabulary
  // would encode any text to no token at all.
  if (size == 0)
    f.bad("model.vocab", "is empty: the tokenizer would encode every text to no token");
  if (type == "Unigram")
    return m;
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
    findByteTokens(m);
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
  }
  return m;
}

} // namespace mlc::rt::hf

#endif // MLC_HAVE_ICU
