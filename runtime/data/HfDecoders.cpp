//===- HfDecoders.cpp - tokenizer.json's decoders -------------------------===//
//
// The decoders of tokenizer.json, ids' tokens back to text: ByteLevel,
// ByteFallback, Fuse, Strip, Replace, Metaspace and WordPiece.
//
//===----------------------------------------------------------------------===//

#ifdef MLC_HAVE_ICU

#include "runtime/data/HfTokenizerParts.h"

#include <algorithm>
#include <cctype>

namespace mlc::rt::hf {

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

void Decoder::apply(std::vector<std::string> &tokens) const {
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

} // namespace mlc::rt::hf

#endif // MLC_HAVE_ICU
