//===- Tokenizer.cpp - text to token ids -----------------------------------===//

#include "runtime/Tokenizer.h"
#include "runtime/Error.h"

namespace mlc::rt {

namespace {

class ByteTokenizer : public Tokenizer {
public:
  std::vector<int32_t> encode(const std::string &text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text)
      ids.push_back(c);
    return ids;
  }
  int64_t vocabSize() const override { return 256; }
  int32_t eod() const override { return 0; }
};

} // namespace

std::unique_ptr<Tokenizer> makeTokenizer(const std::string &type, const std::string &vocabFile,
                                         const std::string &mergeFile) {
  if (type == "ByteTokenizer")
    return std::make_unique<ByteTokenizer>();
  if (type == "GPT2BPETokenizer" || type == "BertWordPieceLowerCase" ||
      type == "BertWordPieceCase")
    fail("--tokenizer-type " + type + " is not available in this build yet (ByteTokenizer is)");
  fail("unknown --tokenizer-type '" + type +
       "' (expected ByteTokenizer, GPT2BPETokenizer, BertWordPieceLowerCase or "
       "BertWordPieceCase)");
}

} // namespace mlc::rt
