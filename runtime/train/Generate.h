//===- Generate.h - text from a trained GPT-style model --------*- C++ -*-===//
//
// Autoregressive sampling with a package's @evaluate (the forward pass
// without dropout): the tokens so far, the last seq-len of them, fill the
// first row of input_ids; the logits at the last position give the next
// token, by argmax at temperature 0, else sampled from softmax(logits / T)
// (over the top-k when given) with a seeded generator, so a seed repeats a
// sample. Generation stops at the end-of-document token or after max-tokens.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_GENERATE_H
#define MLC_RUNTIME_TRAIN_GENERATE_H

#include "runtime/backend/Backend.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/train/Options.h"

#include <string>
#include <vector>

namespace mlc::rt {

struct GenerateOptions {
  std::string prompt;
  std::string tokenizerType = "ByteTokenizer", vocabFile, mergeFile;
  int64_t maxTokens = 64;
  double temperature = 1.0;
  int64_t topK = 0; // 0: the whole vocabulary
  uint64_t seed = 1234;
};

/// The generated token ids (the prompt not included). An Error if the
/// package is not a GPT-style model (input_ids [batch, seq] and logits
/// [batch, seq, vocab] from @evaluate) or the tokenizer's vocabulary is
/// larger than the model's.
std::vector<int32_t> generate(Backend &backend, const Tokenizer &tokenizer,
                              const GenerateOptions &options);

/// What `generate` (mlc and mlc-runtime) does: load `weights.init` (or the
/// seeded initialization), make the tokenizer, and return the prompt and
/// its continuation as text.
std::string generateText(Backend &backend, const TrainOptions &weights,
                         const GenerateOptions &options);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_GENERATE_H
