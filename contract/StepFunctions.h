//===- StepFunctions.h - the functions of a package's plan -----*- C++ -*-===//
//
// The compiler builds a training step as a few functions that the runtime
// runs by name: the frontends write @forward, the graph passes add the
// others, the lowering turns each into a `plan.func` and the trainer runs
// them in this order each optimizer step:
//
//   @train_step   forward + loss + backward of one micro-batch (mlc-autodiff)
//   @accumulate   gradients summed over micro-batches    (mlc-optimizer)
//   @merge        the sum averaged into the last one's    (mlc-optimizer)
//   @grad_norm    the gradients' L2 norm                  (mlc-optimizer)
//   @optimizer    one AdamW update                        (mlc-optimizer)
//
// and @evaluate (the forward pass without dropout, mlc-eval-mode) for
// validation, `mlc run` and generation. The names are spelled here only.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_CONTRACT_STEPFUNCTIONS_H
#define MLC_CONTRACT_STEPFUNCTIONS_H

namespace mlc {

inline constexpr const char *kForwardFn = "forward";
inline constexpr const char *kEvaluateFn = "evaluate";
inline constexpr const char *kTrainStepFn = "train_step";
inline constexpr const char *kAccumulateFn = "accumulate";
inline constexpr const char *kMergeFn = "merge";
inline constexpr const char *kGradNormFn = "grad_norm";
inline constexpr const char *kOptimizerFn = "optimizer";

} // namespace mlc

#endif // MLC_CONTRACT_STEPFUNCTIONS_H
