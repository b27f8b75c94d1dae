//===- GenerationConfig.h - a model directory's generation defaults -*- C++ -*-===//
//
// `mlc generate MODEL --init DIR` (or `--config DIR`) takes from a Hugging
// Face model directory what transformers' `generate()` takes from it:
//
//   tokenizer.json          the tokenizer (HuggingFaceTokenizer), unless a
//                           --tokenizer-type, --tokenizer-model, --vocab-file
//                           or --merge-file is given;
//   generation_config.json  the defaults of the generate flags, read as
//                           transformers' GenerationConfig reads it: a key
//                           the file leaves out takes GenerationConfig's
//                           default (greedy decoding, max_length 20, top_k
//                           50, ...). A flag given on the command line wins
//                           over the file.
//
// Each key of GenerationConfig is modeled, refused unless it has its
// neutral value, or accepted because it cannot change the generated tokens
// (kGenerationKeys in the .cpp says which and why; docs/models.md lists
// them). A key that GenerationConfig does not know is refused by name: mlc
// cannot tell whether it changes the tokens.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_GENERATIONCONFIG_H
#define MLC_RUNTIME_TRAIN_GENERATIONCONFIG_H

#include "runtime/train/Generate.h"

#include <string>

namespace mlc::rt {

/// Sets in `o` what the model directory `dir` holds (see above), except
/// what o.given records as given on the command line. An Error names the
/// file and the key (a value of the wrong type, out of range, or a setting
/// mlc does not implement).
void applyModelDirectory(GenerateOptions &o, const std::string &dir);

/// Reads `text`, the generation_config.json at `path`, into `o` (the part
/// of applyModelDirectory that reads the file).
void applyGenerationConfig(GenerateOptions &o, const std::string &text, const std::string &path);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_GENERATIONCONFIG_H
