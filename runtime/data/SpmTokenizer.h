//===- SpmTokenizer.h - SentencePiece tokenizer.model ----------*- C++ -*-===//
//
// Megatron's SentencePieceTokenizer and Llama2Tokenizer: a SentencePiece
// `tokenizer.model` (the protobuf ModelProto that the `sentencepiece`
// library's trainer writes, as Llama-2, Mistral, Gemma, T5 and ALBERT ship
// it), read and run in C++ so that ids equal the library's own
// `encode(text)` and text its `decode(ids)`:
//
//   normalizer  the precompiled character map (nmt_nfkc and the other rules
//               the trainer compiles into the file, a darts-clone trie of
//               replacements), add_dummy_prefix, remove_extra_whitespaces,
//               escape_whitespaces (" " as U+2581), treat_whitespace_as_suffix;
//               user-defined symbols pass through unnormalized;
//   model       BPE (pieces merged best score first, as the library's
//               encoder, unused pieces split again) and Unigram (the
//               library's Viterbi over the pieces' scores, user-defined
//               symbols preferred, unknown characters as <unk>);
//               byte_fallback turns an unknown character into its <0xNN>
//               pieces, else consecutive unknowns are one <unk>;
//   decoding    U+2581 back to spaces, the dummy prefix's space dropped,
//               <0xNN> runs joined into UTF-8 (U+FFFD for a byte that forms
//               no character), <unk> as the model's unk_surface, control
//               pieces (<s>, </s>) dropped.
//
// SentencePieceTokenizer encodes as `encode(text)` does (no BOS or EOS;
// --append-eod adds </s>); Llama2Tokenizer puts <s> first, as Megatron's and
// Meta's Llama-2 tokenizer. The WORD and CHAR model types, sampling and a
// denormalizer are refused by name, as is any file that is not a complete
// ModelProto (a truncated one lacks its trainer_spec and normalizer_spec).
//
// Why a reader of mlc's own rather than Debian's libsentencepiece: the
// Debian 12 library (0.1.97) carries its own copy of protobuf and exports
// its google::protobuf symbols, which would interpose with the system
// libprotobuf that mlc's ONNX importer links in the same process; it would
// also be one more package on GPU machines that run packages alone. The
// format and algorithms are small (a protobuf of pieces and scores, a
// double-array trie, two encoders), and the parity test holds the reader to
// the `sentencepiece` library's ids and text on the mixed corpus.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_SPMTOKENIZER_H
#define MLC_RUNTIME_SPMTOKENIZER_H

#include "runtime/data/Tokenizer.h"

namespace mlc::rt {

/// `path` is a tokenizer.model, or a directory holding one. `addBos` puts
/// the model's <s> before every encoded text (Llama2Tokenizer). eod() is
/// </s> (the model's eos piece).
std::unique_ptr<Tokenizer> loadSentencePieceTokenizer(const std::string &path, bool addBos);

} // namespace mlc::rt

#endif // MLC_RUNTIME_SPMTOKENIZER_H
