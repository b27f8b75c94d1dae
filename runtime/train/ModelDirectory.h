//===- ModelDirectory.h - Hugging Face model directories -------*- C++ -*-===//
//
// `--save DIR` writes what transformers' save_pretrained writes, so that
// from_pretrained(DIR) loads the trained model with no edits:
//   config.json                      the builtin model's config (hf_config.json
//                                    of the package, compiled from --config)
//   model.safetensors                the weights, when they fit one shard; else
//   model-00001-of-0000N.safetensors shards of at most --max-shard-size, and
//   model.safetensors.index.json     {"metadata": {"total_size"}, "weight_map"}
//   tokenizer.json, ...              the tokenizer files of the run, if any
// (--init DIR reads such a directory back: readModelWeights in TensorIO.h).
// With --save-dir-hf, each checkpoint of --save-dir holds one too, as hf/.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_MODELDIRECTORY_H
#define MLC_RUNTIME_TRAIN_MODELDIRECTORY_H

#include "runtime/backend/Backend.h"
#include "runtime/train/Options.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlc::rt {

/// Bytes in a --max-shard-size, read as transformers reads it: a number of
/// bytes, or a number with a unit in any case: KB, MB, GB (powers of
/// 1000), KiB, MiB, GiB (of 1024); KB, MB, GB ending in a lower-case b
/// (Kb, mb) count bits. An Error names the flag.
int64_t parseShardSize(const std::string &text);
/// How save_pretrained splits tensors of `bytes` (in order) into shards:
/// a tensor starts a new shard when it would take the current one, which
/// already holds a tensor, past `maxShardSize`. Each shard lists its
/// tensors' positions.
std::vector<std::vector<size_t>> planShards(const std::vector<int64_t> &bytes,
                                            int64_t maxShardSize);
/// The files of a model directory that mlc writes or copies: an existing
/// directory holding anything else is not replaced by --save.
bool isModelDirectoryFile(const std::string &name);
/// Refuses, before training, a --save DIR that cannot be written or that
/// holds files other than a model directory's.
void checkModelDirectory(const std::string &dir, const std::string &flag);
/// Refuses, before training, a model directory that the run cannot fill: a
/// package without the model's Hugging Face config, a bad --max-shard-size,
/// a --tokenizer-model with no tokenizer file. `what` names the destination
/// in messages ("--save out/", "--save-dir-hf").
void checkModelDirectorySource(const Package &pkg, const TrainOptions &o,
                               const std::string &what);
/// Writes the trained parameters as a model directory (see above): into a
/// temporary sibling, flushed, then renamed over `dir`. `flag` names the
/// option that asked for it in messages. Collective over the first
/// data-parallel replica's tensor-parallel group (the other replicas return
/// at once): the writer (isWriter(), world rank 0) checks `dir` before any
/// tensor moves, then the parameters are gathered to it a tensor at a time
/// and streamed into the shards (WholeTensors.h), and it alone writes. A
/// writer called with `go` false writes nothing and stops the group at the
/// agreement (a checkpoint that already failed).
void saveModelDirectory(Backend &backend, const TrainOptions &o, const std::string &dir,
                        const std::string &flag = "--save", bool go = true);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_MODELDIRECTORY_H
