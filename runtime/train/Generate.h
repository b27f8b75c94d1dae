//===- Generate.h - text from a trained GPT-style model --------*- C++ -*-===//
//
// Autoregressive sampling with a package's @evaluate (the forward pass
// without dropout): the tokens so far, the last seq-len of them, fill the
// first row of input_ids; the logits at the last position give the next
// token, by argmax at temperature 0, else sampled from softmax(logits / T)
// (over the top-k, then the top-p, when given: transformers' order) with a
// seeded generator, so a seed repeats a sample; a repetition penalty, when
// given, applies to the logits first (greedy too, as in transformers).
// Generation stops at the end-of-document token (or the eos ids a model
// directory's generation_config.json names) or after max-tokens.
// Logits that are not finite (NaN or infinite weights, an overflow) are an
// error, never a token. The text is written as it is sampled.
// Under tensor parallelism every rank of the group generates in lockstep:
// @evaluate's vocabulary-parallel head leaves each rank its columns
// ("vocab_parallel_logits"), the ranks gather the last position's over the
// group, and with the same seed each chooses the same token.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_GENERATE_H
#define MLC_RUNTIME_TRAIN_GENERATE_H

#include "runtime/backend/Backend.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/train/Options.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace mlc::rt {

struct GenerateOptions {
  std::string prompt;
  std::string tokenizerType = "ByteTokenizer", vocabFile, mergeFile;
  int64_t maxTokens = 64;
  double temperature = 1.0;
  int64_t topK = 0;   // 0: the whole vocabulary
  double topP = 1.0;  // sample from the most likely tokens that hold this much probability
  /// transformers' repetition_penalty: the logit x of a token already in the
  /// sequence (prompt included) becomes x / p if x > 0, else x * p.
  double repetitionPenalty = 1.0;
  /// When >= 0 (a generation_config.json's max_length without
  /// max_new_tokens): the prompt and the generated tokens in all, which
  /// replaces maxTokens.
  int64_t maxLength = -1;
  /// The ids generation stops at; empty: the tokenizer's end of document.
  std::vector<int32_t> eosIds;
  /// The id an empty prompt starts with (-1: the tokenizer's end of document).
  int32_t bosId = -1;
  uint64_t seed = 1234;
  /// The flags given on the command line (by their names): a model
  /// directory's generation_config.json does not override them.
  std::set<std::string> given;
  /// When set: the token ids (the prompt's, the generated ones and the
  /// end-of-sequence id that stopped them, as transformers' generate()
  /// returns them) are written to this file as one line of ids separated by spaces, the input
  /// `mlc tokenizer decode` reads.
  std::string outputIds;
  /// A Hugging Face model directory (`--config DIR`) whose tokenizer and
  /// generation_config.json give the defaults, when --init is not one.
  std::string modelDirectory;
  /// Where the parameters came from, for messages (a file, the seeded
  /// initialization, a training step).
  std::string weights = "the parameters";
};

/// Sets the generate flag `name` (prompt, max-tokens, temperature, top-k,
/// top-p, repetition-penalty, output-ids, tokenizer-type, tokenizer-model, vocab-file,
/// merge-file) from its text and records it in `given`; false if `name` is
/// none of them. A number must be all of its text, finite and >= 0 (an
/// integer for max-tokens and top-k; top-p in (0, 1], repetition-penalty
/// > 0); anything else is an Error naming the flag.
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
/// sees each as it is sampled, and then an eos id of options.eosIds that
/// stopped the generation (as transformers' sequence holds it). An Error if the package is not a GPT-style
/// model (input_ids [batch, seq] and logits [batch, seq, vocab] from
/// @evaluate), the tokenizer's vocabulary is larger than the model's, or the
/// logits of a step are not finite; and if the package is one rank of a
/// tensor-parallel group and the backend lacks that group (every rank of
/// which must call it together).
/// `sequence`, when given, receives the whole sequence as transformers'
/// generate() returns it: the ids it started from, the generated ones, and
/// the end-of-sequence id that stopped it, if one did.
std::vector<int32_t> generate(Backend &backend, const Tokenizer &tokenizer,
                              const GenerateOptions &options,
                              const std::function<void(int32_t)> &onToken = {},
                              std::vector<int32_t> *sequence = nullptr);

/// What `generate` (mlc and mlc-runtime) does: load `weights.init` (or the
/// seeded initialization), take the defaults of a model directory (--init
/// DIR, else options.modelDirectory; see GenerationConfig.h), make the
/// tokenizer, and pass the prompt and then its continuation, piece by piece
/// as it is sampled, to `write`.
void generateText(Backend &backend, const TrainOptions &weights, const GenerateOptions &options,
                  const std::function<void(const std::string &)> &write);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_GENERATE_H
