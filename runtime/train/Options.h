//===- Options.h - training options and the one table of their flags -*- C++ -*-===//
//
// `mlc train` and `mlc-runtime train` take the same flags with the same
// defaults: both read them from trainFlags(), whose defaults are the
// TrainOptions initializers below (the one place they are written).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_OPTIONS_H
#define MLC_RUNTIME_TRAIN_OPTIONS_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mlc::rt {

struct TrainOptions {
  int64_t steps = 100;
  double lr = 3e-4, minLr = 0.0;
  int64_t warmup = 0;
  std::string schedule = "cosine"; // constant | cosine
  double weightDecay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double clipGrad = 1.0; // global L2 norm; 0 disables
  std::string clip = "global"; // global | bucket | none
  std::string balance = "presort"; // unpadded BERT over ranks: presort | zigzag | random
  uint64_t seed = 1234;
  std::string init;       // safetensors with HF names
  std::string save;       // safetensors, or a model directory, written at the end
  std::string maxShardSize = "5GB"; // --save DIR: the largest safetensors shard
  std::string tokenizerModel;       // --save DIR: tokenizer files to copy into it
  /// --save DIR: the --config directory of a builtin model (set by mlc train,
  /// not a flag), whose tokenizer files are copied when it has them.
  std::string configDir;
  std::string batchesDir; // NAME.npy per input, leading dim = step
  std::string data;       // indexed dataset PREFIX, a blend "W1 P1 W2 P2", or a token file
  std::string bind;       // NAME=ROLE,... : which --data field feeds each model input
  std::string split = "969,30,1"; // Megatron's train/validation/test split
  std::string vocabFile;          // BERT data: the WordPiece vocab.txt (special ids)
  int64_t evalInterval = 0, evalIters = 10; // validation loss every N steps
  std::string logJson;
  std::string memoryReport;   // the backend's allocations by item, as JSON, at the end
  std::string dumpBatches;    // every training input fed, as DIR/NAME.npy [micro-batches, ...]
  std::string tensorboardDir; // TensorBoard event files (scalars of the JSON log's rows)
  double peakTflops = 0;      // the peak MFU is measured against (0: the device's own)
  int64_t logEvery = 1;
  std::string progress = "auto"; // auto | live | plain: one updating line on a terminal
  int64_t sampleEvery = 0;        // print a generated sample every N steps (GPT-style models)
  std::string mergeFile;          // samples from GPT-2 BPE data: merges.txt (with --vocab-file)
  bool eodMaskLoss = false;       // GPT data: no loss on predictions made from an EOD token
  int64_t eodToken = -1;          // GPT data's EOD id (-1: the tokenizer's)
  /// How a step's micro-batches weigh (their losses are each a mean over its
  /// labels not ignored): false, equally (Megatron-LM's default); true, by
  /// those labels, so the step's loss is the mean over all of them, over
  /// every micro-batch and rank (Megatron-LM's --calculate-per-token-loss).
  bool perTokenLoss = false;
  std::string saveDir;           // checkpoints: one directory per step
  bool saveDirHf = false;        // each checkpoint also holds hf/, a Hugging Face model directory
  int64_t saveInterval = 0;      // a checkpoint every N steps (0: at the end only)
  int64_t keep = 0;              // checkpoints kept (0: all)
  std::string resume;            // a checkpoint directory, or "latest" in saveDir
  std::string resumeWithChanges; // settings a resume may change: "lr,ranks,...", or "all"
  int64_t maxBadSteps = 0;       // non-finite steps skipped before the run stops
  int64_t globalBatch = 0;       // sequences per optimizer step (0: one micro-batch)
  std::string lrScaling = "none"; // none | linear | sqrt: --lr is for --base-batch
  int64_t baseBatch = 0;
  std::string device = "auto"; // auto | cpu | cuda | cuda-emulator
  std::string tf32 = "off";     // on: f32 GEMMs on tensor cores in TF32 (CUDA)
  bool quiet = false;
  double commTimeout = 300; // seconds a rank waits for the others
  /// Data parallelism, from the communicator (not flags): this process's
  /// rank and the number of ranks. Each rank feeds its share of every
  /// global batch; rank 0 alone logs and saves.
  int rank = 0, ranks = 1;
  /// The run's identity in its checkpoints (set by train(): new, or the
  /// resumed checkpoint's): keep-rotation removes only this run's.
  std::string runId;
};

/// One training flag: --NAME VALUE. `set` parses VALUE strictly (a number
/// flag takes a whole number, not a prefix) and throws an Error that names
/// the flag. `forRun` marks flags `run` takes too (weights and seed).
struct TrainFlag {
  std::string name, valueName, help;
  std::function<std::string(const TrainOptions &)> value; // current value, as text
  std::function<void(TrainOptions &, const std::string &)> set;
  bool forRun = false;
  /// A switch: --NAME alone means --NAME=true (the value is optional).
  bool isSwitch = false;
};
const std::vector<TrainFlag> &trainFlags();

/// Checks the options together (ranges, known names); throws an Error naming
/// the flag at fault.
void validate(const TrainOptions &o);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_OPTIONS_H
