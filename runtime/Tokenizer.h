//===- Tokenizer.h - text to token ids -------------------------*- C++ -*-===//
//
// Tokenizers are named as Megatron-LM names them (--tokenizer-type).
// ByteTokenizer: the UTF-8 bytes themselves, ids 0..255, no vocabulary file;
// its end-of-document id is 0 (NUL, which text does not contain), so models
// keep a vocabulary of 256.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TOKENIZER_H
#define MLC_RUNTIME_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mlc::rt {

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(const std::string &text) const = 0;
  virtual int64_t vocabSize() const = 0;
  virtual int32_t eod() const = 0;
};

/// The tokenizer of a --tokenizer-type; files as Megatron takes them.
std::unique_ptr<Tokenizer> makeTokenizer(const std::string &type, const std::string &vocabFile,
                                         const std::string &mergeFile);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TOKENIZER_H
