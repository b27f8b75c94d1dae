//===- PlanFormat.h - plan.txt, the serialized plan ------------*- C++ -*-===//
//
// The one owner of plan.txt's grammar: the compiler writes it with
// writePlan() from the plan dialect, the runtime reads it with parsePlan(),
// both through the structs below.
//
// plan.txt, one directive per line:
//
//   mlc-plan 2
//   tokens CAPACITY                      optional: most tokens of a batch whose
//                                        token dimension ("?" in shapes) is dynamic
//   tensor_parallel T                    optional: the plan of one rank of a
//                                        tensor-parallel group of T ranks
//   param NAME DTYPE SHAPE DECAY INIT [tp DIM BLOCKS]
//                                        flat parameter order; DECAY is 0/1,
//                                        INIT normal:STD | zeros | ones; tp: this
//                                        rank's slice of the HF tensor, split
//                                        along DIM, made of the blocks BLOCKS
//                                        ("768,768,768": GPT-2's c_attn; rank r
//                                        holds the r-th 1/T of each block)
//   input NAME DTYPE SHAPE
//   scalars NAME DTYPE SIZE              per-step scalars the runtime fills
//                                        (the optimizer's: contract/OptimizerScalars.h)
//   func NAME ARENA_BYTES
//   buf %ID param NAME | grad NAME | moment1 NAME | moment2 NAME | grad_sum NAME
//                                        a parameter's slice of a flat buffer,
//                                        or the whole buffer for NAME "*"
//       | input NAME | scalars NAME | arena OFFSET DTYPE NUMEL
//       | alias %ID BYTE_OFFSET DTYPE NUMEL  a view inside another buffer
//   kernel NAME %ID...                   outputs first, then inputs
//   gemm TA TB M N K NB DIMS.. LSTRIDES.. RSTRIDES.. [accumulate] [bias] [gelu]
//        %OUT %LHS %RHS [%BIAS] [%PRE]
//                                        accumulate: OUT += the product (beta 1)
//   allreduce_start TAG OFFSET COUNT %GRADS [clip]
//                                        sum COUNT gradients at element OFFSET
//                                        over the ranks (async); %GRADS is the
//                                        whole gradient buffer; clip: clip the
//                                        slice by its own norm first
//   allreduce_wait TAG                   until that sum has arrived
//   reducescatter_start TAG OFFSET COUNT %GRADS [clip]
//                                        the distributed optimizer's sum: rank
//                                        r of R keeps elements [OFFSET +
//                                        floor(r COUNT / R), OFFSET +
//                                        floor((r + 1) COUNT / R)) of it
//   reducescatter_wait TAG
//   allgather_start TAG OFFSET COUNT %PARAMS
//                                        every rank's shard of the slice (as
//                                        reducescatter deals them) to all
//   allgather_wait TAG
//   allreduce_norm %ID                   %ID (one f64) = sqrt(sum over ranks
//                                        of %ID^2)
//   kernel NAME %ID... shard TAG|*       the optimizer or norm kernel over
//                                        this rank's shard of bucket TAG (*:
//                                        of every bucket)
//   tp_allreduce sum|max %ID             %ID summed (or maxed) in place over
//                                        the tensor-parallel group, blocking
//   tp_allgather %OUT %IN                %OUT = the group's %INs in rank order
//                                        (sequence parallelism), blocking
//   tp_reducescatter %OUT %IN            %OUT = rank r's r-th of T blocks of
//                                        the sum over the group of %IN
//   output NAME %ID SHAPE
//   end
//
// SHAPE is "2x8x128", "?x768" (dynamic token dimension) or "scalar"; in a
// gemm, M or K is "T" when it is the token count.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_CORE_PLANFORMAT_H
#define MLC_RUNTIME_CORE_PLANFORMAT_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlc::rt {

// 3: GEMM epilogue flags (bias, gelu); 4: accumulate; 5: the distributed
// optimizer's steps (reducescatter, allgather, allreduce_norm, kernel shard)
constexpr int kPlanVersion = 5;

struct ParamInfo {
  std::string name, dtype, init;
  std::vector<int64_t> shape;
  int64_t numel = 0, offset = 0; // elements into the flat buffers
  bool decay = false;
  /// Tensor parallelism: the HF tensor's dim this rank holds a slice of
  /// (-1: the whole tensor), and the blocks along it (HF sizes) each of
  /// which is split into T equal slices.
  int64_t tpDim = -1;
  std::vector<int64_t> tpBlocks;
};

struct InputInfo {
  std::string name, dtype;
  std::vector<int64_t> shape; // -1: the dynamic token dimension
  int64_t numel = 0;          // at the token capacity
  bool dynamic() const { return !shape.empty() && shape[0] < 0; }
};

struct BufferDecl {
  /// Param, Grad, Moment1, Moment2: the named parameter's slice of that flat
  /// buffer, or all of it for the name "*".
  enum Kind { Param, Grad, Input, Arena, Alias, Moment1, Moment2, Scalars, GradSum } kind;
  std::string name, dtype;
  int64_t offset = 0, numel = 0;
  int alias = -1;
  /// Its size, checked at load: inside its flat buffer, input, arena or (a
  /// view) the buffer it views.
  int64_t bytes = 0;
};

struct StepDecl {
  enum Kind {
    Kernel,
    Gemm,
    AllReduceStart,
    AllReduceWait,
    ReduceScatterStart,
    ReduceScatterWait,
    AllGatherStart,
    AllGatherWait,
    AllReduceNorm,
    TpAllReduce,
    TpAllGather,
    TpReduceScatter,
    TpWait
  } kind;
  /// TpAllReduce: the largest over the group instead of the sum.
  bool max = false;
  /// TpAllReduce: asynchronous, started here and waited for by the TpWait
  /// of the same tag (plan.txt `tp_allreduce sum %B tag T`, `tp_wait T %B`).
  bool async = false;
  /// The collectives' starts and waits: the tag; the slice is [offset,
  /// offset + count); clip: bucket-wise clipping before the sum starts.
  int64_t tag = 0, offset = 0, count = 0;
  /// Kernel: kNoShard, or the bucket (its reducescatter's tag) whose shard
  /// on this rank the kernel covers, kAllShards for every bucket's.
  static constexpr int64_t kNoShard = -2, kAllShards = -1;
  int64_t shard = kNoShard;
  bool clip = false;
  std::string kernel;
  /// Gemm: out, lhs, rhs, then the bias (n elements of out's type) where
  /// the product adds one to every row, then (gelu) the pre-activation:
  /// the product (+ bias) goes there and its tanh GELU to out.
  /// accumulate: out is read too, out += the product (+ bias); no gelu.
  std::vector<int> buffers;
  bool transA = false, transB = false, bias = false, gelu = false, accumulate = false;
  int64_t m = 0, n = 0, k = 0;
  std::vector<int64_t> batch, lhsStrides, rhsStrides;
};

struct FunctionPlan {
  std::string name;
  int64_t arenaBytes = 0;
  std::vector<BufferDecl> buffers;
  std::vector<StepDecl> steps;
  struct Output {
    std::string name;
    int buffer;
    std::vector<int64_t> shape;
  };
  std::vector<Output> outputs;
};

/// Per-step scalars the runtime fills (the optimizer's).
struct ScalarsInfo {
  std::string name, dtype;
  int64_t size = 0;
};

/// A whole plan: what plan.txt holds.
struct PlanData {
  std::vector<ScalarsInfo> scalars;
  int64_t tokenCapacity = 0; // > 0 when inputs have a dynamic token dimension
  int64_t tensorParallel = 1; // ranks of a tensor-parallel group
  /// Sequence parallelism: the residual stream holds 1/T of the tokens
  /// (plan.txt: a "sequence_parallel" line after tensor_parallel).
  bool sequenceParallel = false;
  std::vector<ParamInfo> params; // offsets: running sums in this order
  std::vector<InputInfo> inputs;
  std::vector<FunctionPlan> functions;
};

/// "2x8x128", "?x768" (-1: the token dimension) or "scalar".
std::string shapeText(const std::vector<int64_t> &shape);
std::vector<int64_t> parseShape(const std::string &text);

/// The distributed optimizer's layout rule: rank `rank` of `ranks` holds
/// elements [first, first + count) of a bucket of `n` (first =
/// floor(rank n / ranks)): shards differ by at most one element.
struct ShardRange {
  int64_t first = 0, count = 0;
};
inline ShardRange shardOf(int64_t n, int rank, int ranks) {
  const int64_t a = n * rank / ranks, b = n * (rank + 1) / ranks;
  return {a, b - a};
}

/// A collective step's directive in plan.txt (allreduce_start, ...).
const char *collectiveName(StepDecl::Kind kind);

std::string writePlan(const PlanData &plan); // PlanWrite.cpp
/// Parses and checks plan.txt; errors name `path` and the line.
PlanData parsePlan(const std::string &text, const std::string &path);

} // namespace mlc::rt

#endif // MLC_RUNTIME_CORE_PLANFORMAT_H
