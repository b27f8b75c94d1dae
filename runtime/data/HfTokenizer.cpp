//===- HfTokenizer.cpp - Hugging Face tokenizer.json -----------------------===//
//
// The pipeline of Hugging Face `tokenizers`, step by step as the library
// runs it (added tokens, normalizer, pre-tokenizer, model, post-processor;
// decoder), on UTF-8 strings. Every rule that decides an id follows the
// library's own (its split behaviours, its BPE merge queue, its WordPiece
// longest match), so that ids are equal, not merely close.
//
// This file holds the added tokens, the post-processors, tokenizer_config.json
// and the tokenizer that runs the steps; the steps themselves are in
// HfNormalizers.cpp, HfPreTokenizers.cpp, HfModels.cpp and HfDecoders.cpp
// (HfTokenizerParts.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/data/HfTokenizer.h"
#include "support/Error.h"
#include "support/TensorIO.h"
#include "support/Json.h"

#ifndef MLC_HAVE_ICU

namespace mlc::rt {
std::unique_ptr<Tokenizer> loadHfTokenizer(const std::string &path) {
  fail(path + ": HuggingFaceTokenizer needs ICU (regexes, normalization), and this mlc was "
              "built without it; install libicu-dev and rebuild");
}
} // namespace mlc::rt

#else

#include "runtime/data/HfTokenizerParts.h"

#include <algorithm>
#include <sys/stat.h>
#include <unordered_set>

namespace mlc::rt {
namespace hf {
namespace {

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
                  ? std::string("; its SentencePiece tokenizer.model reads with "
                                "--tokenizer-type SentencePieceTokenizer)")
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
} // namespace hf

std::unique_ptr<Tokenizer> loadHfTokenizer(const std::string &path) {
  if (path.empty())
    fail("HuggingFaceTokenizer needs --tokenizer-model (a tokenizer.json or a directory with "
         "one)");
  if (!hf::exists(path))
    fail(path + ": no such file or directory (--tokenizer-model)");
  return std::make_unique<hf::HfTokenizer>(path);
}

} // namespace mlc::rt

#endif // MLC_HAVE_ICU
