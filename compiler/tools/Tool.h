//===- Tool.h - the mlc tool's subcommands and shared flags ----*- C++ -*-===//
//
// `mlc` is one main (compiler/mlc.cpp) and one file per subcommand or small
// family of them:
//
//   Compile.cpp    compile, import (the graph, the plan, the kernels, reports)
//   Roofline.cpp   --roofline: a plan's step at a GPU's limits (RooflineReport.cpp prints it)
//   Train.cpp      train, run, generate (compile if needed, then the runtime)
//   Data.cpp       preprocess, tokenizer, data, plot
//   ExportOnnx.cpp export-onnx (trained weights back into the ONNX model)
//
// Flags that several subcommands take are one table (Options.cpp, with the
// subcommands themselves): the model and its shape, the ONNX import's flags,
// data parallelism, and the runtime's training flags (runtime/train/Options.h).
// A subcommand's own flags live in its file. Model.cpp builds MODEL's graph
// and runs the pipeline on it for every subcommand that takes a MODEL.
//
// A new subcommand: its SubCommand function in Options.cpp, its flags and
// body in its file, its line in mlc.cpp's dispatch and HideUnrelatedOptions
// list.
//
// Static initialization: a cl::opt registers itself with the SubCommands it
// names when it is constructed, and objects in different files are
// constructed in no set order. So the SubCommands and the category are
// function-local statics (constructed on first use, by whichever option
// names them first), never globals another file's options might reach
// before they exist.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_TOOLS_TOOL_H
#define MLC_COMPILER_TOOLS_TOOL_H

#include "runtime/train/Options.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"

#include <string>

namespace mlc::tool {

/// The one category every mlc flag is in (--help shows only it).
llvm::cl::OptionCategory &category();

/// The subcommands, constructed on first use.
llvm::cl::SubCommand &compileCmd();
llvm::cl::SubCommand &trainCmd();
llvm::cl::SubCommand &runCmd();
llvm::cl::SubCommand &preprocessCmd();
llvm::cl::SubCommand &tokenizerCmd();
llvm::cl::SubCommand &dataCmd();
llvm::cl::SubCommand &generateCmd();
llvm::cl::SubCommand &plotCmd();
llvm::cl::SubCommand &importCmd();
llvm::cl::SubCommand &exportOnnxCmd();

/// The shared table (Options.cpp). MODEL and what shapes it, for compile,
/// train, run, generate and import (each takes the subset it names).
extern llvm::cl::opt<std::string> model;
extern llvm::cl::opt<std::string> config;
extern llvm::cl::opt<int64_t> microBatch;
extern llvm::cl::opt<int64_t> seqLen;
/// --seq-len was taken from the run's input arrays (mlc run/train --batches):
/// the user's, though no flag gave it.
extern bool seqLenFromInputs;
extern llvm::cl::opt<std::string> dtype;
extern llvm::cl::opt<bool> varlen;
extern llvm::cl::opt<bool> resetAttentionMask, resetPositionIds;
extern llvm::cl::opt<bool> fuse;
extern llvm::cl::opt<bool> noFuse;
/// --recompute (--recompute-granularity): full | selective | none.
extern llvm::cl::opt<std::string> recompute;
extern llvm::cl::opt<int64_t> recomputeNumLayers;
/// ONNX models.
extern llvm::cl::opt<std::string> lossSpec;
extern llvm::cl::opt<std::string> labelsName;
extern llvm::cl::list<std::string> dimSpecs;
/// Data parallelism (mlc-bucket-gradients), compile and train.
extern llvm::cl::opt<int64_t> ranksFlag;
extern llvm::cl::opt<int64_t> tensorParallelFlag;
extern llvm::cl::opt<bool> sequenceParallelFlag;
extern llvm::cl::opt<double> bucketCapMb;
extern llvm::cl::opt<double> firstBucketMb;
extern llvm::cl::opt<bool> useDistributedOptimizer;
/// compile's --clip (train's is the training table's).
extern llvm::cl::opt<std::string> compileClip;
/// train, run, generate: where a compiled package goes.
extern llvm::cl::opt<std::string> packageDir;

/// Registers the runtime's training flags (runtime/train/Options.h) with
/// train, and those that apply to run with run and generate. Called once by
/// main, before parsing.
void registerTrainFlags();
/// The training options the command line gave, over the table's defaults.
mlc::rt::TrainOptions trainOptions();
/// The value of a table flag as given, or "" (for checks before compiling).
std::string givenFlag(const std::string &name);

/// Prints "mlc: error: MSG" and returns 1.
int fail(const llvm::Twine &msg);
/// True when `path` is a compiled package directory.
bool isPackage(const std::string &path);
/// True when MODEL is an ONNX file (not a package).
bool isOnnxModel();

/// The subcommands' bodies, each returning the exit status.
int runCompile();
int runImport();
int runTrain();
int runForward();
int runGenerate();
int runPreprocess();
int runTokenizer();
int runData();
int runPlot();
int runExportOnnx();

} // namespace mlc::tool

#endif // MLC_COMPILER_TOOLS_TOOL_H
