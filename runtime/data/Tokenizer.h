//===- Tokenizer.h - text to token ids -------------------------*- C++ -*-===//
//
// Tokenizers are named as Megatron-LM names them (--tokenizer-type):
// ByteLevelTokenizer, GPT2BPETokenizer, BertWordPieceLowerCase/Case,
// HuggingFaceTokenizer, SentencePieceTokenizer, Llama2Tokenizer.
// ByteLevelTokenizer: the UTF-8 bytes themselves, ids 0..255, no vocabulary
// file; its end-of-document id is 0 (NUL, which text does not contain) and
// its vocabulary 512, as Megatron's (room for special tokens mlc does not
// use). ByteTokenizer, mlc's own name, is the same with a vocabulary of 256,
// so models can keep 256 embedding rows.
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
  /// Token ids back to text (for samples); ids outside the vocabulary are
  /// skipped.
  virtual std::string decode(const std::vector<int32_t> &ids) const = 0;
  virtual int64_t vocabSize() const = 0;
  /// One past the largest id encode() returns (with eod()): the vocabulary,
  /// or less where it reserves ids no text encodes to (Megatron's
  /// ByteLevelTokenizer: 512 ids, of which bytes use 256).
  virtual int64_t idsBelow() const { return vocabSize(); }
  virtual int32_t eod() const = 0;
  /// False when the vocabulary has no end-of-document token of its own (a
  /// GPT-2 vocab.json without <|endoftext|>: eod() is then its last id).
  virtual bool hasEod() const { return true; }
  /// True when a token's text depends on its neighbours (a decoder that
  /// strips the first token's leading space, or joins <0xNN> bytes): a
  /// stream then decodes the ids so far as a whole, not one by one.
  virtual bool decodesInContext() const { return false; }
};

/// The tokenizer of a --tokenizer-type; files as Megatron takes them. For
/// HuggingFaceTokenizer, `vocabFile` is its --tokenizer-model (a
/// tokenizer.json or a directory holding one; see HfTokenizer.h); for
/// SentencePieceTokenizer and Llama2Tokenizer, a tokenizer.model or a
/// directory holding one (SpmTokenizer.h).
std::unique_ptr<Tokenizer> makeTokenizer(const std::string &type, const std::string &vocabFile,
                                         const std::string &mergeFile);

/// True for the tokenizers whose one file (or directory) is --tokenizer-model:
/// HuggingFaceTokenizer, SentencePieceTokenizer and Llama2Tokenizer.
bool readsTokenizerModel(const std::string &type);

/// GPT-2's pre-tokenization: the words its regex splits text into,
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<std::string> gpt2PreTokenize(const std::string &text);
/// GPT-2's byte-to-unicode table (byte -> code point of its visible stand-in).
const std::vector<int32_t> &byteToUnicode();
std::vector<int32_t> utf8Decode(const std::string &s);
void utf8Append(std::string &out, int32_t codePoint);
/// Invalid UTF-8 becomes U+FFFD, one per maximal ill-formed subpart (Unicode's
/// table 3-7), as Python's bytes.decode(errors="replace") and Rust's
/// from_utf8_lossy give it: the text every tokenizer reads (SpmTokenizer.cpp).
std::string validUtf8(const std::string &s);

/// Learns a byte-level BPE (GPT-2's pre-tokenization, 256 byte symbols, then
/// the most frequent adjacent pair merged until `vocabSize` entries, the last
/// being <|endoftext|>) from the given texts; writes DIR/vocab.json and
/// DIR/merges.txt in GPT-2's formats. Returns the entries written: fewer than
/// `vocabSize` when the texts run out of pairs to merge.
int64_t trainBpe(const std::vector<std::string> &texts, int64_t vocabSize,
              const std::string &outputDir);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TOKENIZER_H
