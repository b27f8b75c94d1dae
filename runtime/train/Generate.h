//===- Generate.h - text from a trained GPT-style model --------*- C++ -*-===//
//
// Autoregressive sampling with a package's @evaluate (the forward pass
// without dropout): the tokens so far, the last seq-len of them, fill the
// first row of input_ids; the logits at the last position give the next
// token, by argmax at temperature 0, else sampled from softmax(logits / T)
// (over the top-k when given) with a seeded generator, so a seed repeats a
// sample. Generation stops at the end-of-document token or after max-tokens.
// Logits that are not finite (NaN or infinite weights, an overflow) are an
// error, never a token. The text is written as it is sampled.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_GENERATE_H
#define MLC_RUNTIME_TRAIN_GENERATE_H

#include "runtime/backend/Backend.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/train/Options.h"

#include <functional>
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
  /// Where the parameters came from, for messages (a file, the seeded
  /// initialization, a training step).
  std::string weights = "the parameters";
};

/// Sets the generate flag `name` (prompt, max-tokens, temperature, top-k,
/// tokenizer-type, vocab-file, merge-file) from its text; false if `name` is
/// none of them. A number must be all of its text, finite and >= 0 (an
/// integer for max-tokens and top-k); anything else is an Error naming the
/// flag.
bool setGenerateFlag(GenerateOptions &options, const std::string &name, const std::string &value);

/// Token ids to text as they are sampled. The GPT tokenizers decode token by
/// token, but a byte-level token may end inside a UTF-8 character: its bytes
/// wait until the character is whole, so every piece is text a terminal can
/// show, and the pieces together are the decoded whole.
class TextStream {
public:
  explicit TextStream(const Tokenizer &tokenizer) : tokenizer(tokenizer) {}
  /// The text that `id` completes (may be empty).
  std::string push(int32_t id);
  /// What is still held back (an unfinished character at the end).
  std::string finish();

private:
  const Tokenizer &tokenizer;
  std::string pending;
  std::vector<int32_t> ids; // a tokenizer that decodes in context: all so far
  size_t emitted = 0;       // and the bytes of their text already returned
};

/// The generated token ids (the prompt not included); `onToken`, when given,
/// sees each as it is sampled. An Error if the package is not a GPT-style
/// model (input_ids [batch, seq] and logits [batch, seq, vocab] from
/// @evaluate), the tokenizer's vocabulary is larger than the model's, or the
/// logits of a step are not finite.
std::vector<int32_t> generate(Backend &backend, const Tokenizer &tokenizer,
                              const GenerateOptions &options,
                              const std::function<void(int32_t)> &onToken = {});

/// What `generate` (mlc and mlc-runtime) does: load `weights.init` (or the
/// seeded initialization), make the tokenizer, and pass the prompt and then
/// its continuation, piece by piece as it is sampled, to `write`.
void generateText(Backend &backend, const TrainOptions &weights, const GenerateOptions &options,
                  const std::function<void(const std::string &)> &write);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_GENERATE_H
