//===- HfTokenizer.h - Hugging Face tokenizer.json -------------*- C++ -*-===//
//
// Megatron's HuggingFaceTokenizer: the `tokenizer.json` that Hugging Face
// `tokenizers` writes (and `tokenizer_config.json` beside it), read and run
// in C++ so that ids equal the library's own:
//
//   added tokens   matched in the raw text first (special/normalized/lstrip/
//                  rstrip/single_word as the library does);
//   normalizer     NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents,
//                  Replace, Prepend, Precompiled (a SentencePiece model's
//                  compiled rules, applied per grapheme cluster as the
//                  library does), BertNormalizer, Sequence;
//   pre_tokenizer  ByteLevel, Split (the model's regex, e.g. Llama-3's or
//                  Qwen2's), Metaspace, BertPreTokenizer, Whitespace,
//                  WhitespaceSplit, Digits, Sequence;
//   model          BPE (byte-level, or byte_fallback with <0xNN> tokens),
//                  WordPiece, Unigram (as transformers converts a
//                  SentencePiece model: the library's Viterbi, unknown runs
//                  fused, byte_fallback);
//   post_processor TemplateProcessing, BertProcessing, RobertaProcessing,
//                  ByteLevel, Sequence; tokenizer_config.json's
//                  add_bos_token/add_eos_token, where present, decide the
//                  BOS/EOS instead (as transformers' Llama/Gemma tokenizers);
//   decoder        ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace,
//                  WordPiece, Sequence.
//
// Whatever else a file names is refused with the field and its value (e.g.
// "pre_tokenizer.type 'CharDelimiterSplit'"), never approximated. Regexes run
// on ICU (whose \s, as Oniguruma's in the library, is Unicode White_Space); a
// build without ICU refuses tokenizer.json. Character classes come from ICU's
// Unicode tables, the library's from its own (older) ones: a character
// assigned in a recent Unicode version (U+061D, say) may be classed
// differently, and its word tokenized differently.

//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_HFTOKENIZER_H
#define MLC_RUNTIME_HFTOKENIZER_H

#include "runtime/data/Tokenizer.h"

namespace mlc::rt {

/// `path` is a tokenizer.json, or a directory holding one (and perhaps
/// tokenizer_config.json). Encoding adds the special tokens that
/// `tokenizer(text).input_ids` adds in transformers; decoding skips special
/// tokens. eod() is tokenizer_config.json's eos_token, else the first of
/// </s>, <|endoftext|>, <|end_of_text|>, <eos>, [SEP] among the added tokens.
std::unique_ptr<Tokenizer> loadHfTokenizer(const std::string &path);

} // namespace mlc::rt

#endif // MLC_RUNTIME_HFTOKENIZER_H
