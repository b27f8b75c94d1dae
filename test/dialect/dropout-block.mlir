// RUN: mlc-opt %s -split-input-file | mlc-opt -split-input-file | FileCheck %s --check-prefix=PRINT
// RUN: mlc-opt %s -split-input-file --mlc-autodiff | FileCheck %s --check-prefix=GRAD
// A dropout of block %rank of N of a whole tensor (mlc.dropout: `span S`,
// the block's dims from the split one on; attention: `along A` of its
// probabilities): it prints and parses back, and its gradient is the same
// block's dropout (the same mask) with no gradient for the rank.

// PRINT-LABEL: func.func @forward
// PRINT: mlc.dropout %{{.*}} ratio = 1.000000e-01 seed = 7 block %arg2 of 2 span 64 : tensor<2x4x64xf32>, tensor<1xf64>
// PRINT: mlc.attention %{{.*}}, %{{.*}}, %{{.*}} causal dropout = 1.000000e-01 seed = 3 block %arg2 of 2 along 1 : tensor<2x2x4x32xf32>, tensor<2x2x4x32xf32>, tensor<2x2x4x32xf32>, tensor<1xf64>
// GRAD-LABEL: func.func @train_step
// GRAD: mlc.attention_grad {{.*}} causal dropout = 1.000000e-01 seed = 3 block %arg2 of 2 along 1 :
// GRAD: mlc.dropout %{{.*}} ratio = 1.000000e-01 seed = 7 block %arg2 of 2 span 64 : tensor<2x4x64xf32>, tensor<1xf64>
func.func @forward(%x: tensor<2x4x64xf32> {mlc.input = "x"}, %w: tensor<64x64xf32> {mlc.param = "w"},
                   %rank: tensor<1xf64> {mlc.scalars = "tp_rank"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %h = mlc.matmul %x, %w : tensor<2x4x64xf32>, tensor<64x64xf32>
  %d = mlc.dropout %h ratio = 0.1 seed = 7 block %rank of 2 span 64 : tensor<2x4x64xf32>, tensor<1xf64>
  %r = mlc.reshape %d : tensor<2x4x64xf32> -> tensor<2x4x2x32xf32>
  %t = mlc.transpose %r, [0, 2, 1, 3] : tensor<2x4x2x32xf32>
  %a = mlc.attention %t, %t, %t causal dropout = 0.1 seed = 3 block %rank of 2 along 1 : tensor<2x2x4x32xf32>, tensor<2x2x4x32xf32>, tensor<2x2x4x32xf32>, tensor<1xf64>
  %s = mlc.reduce_sum %a axes = [0, 1, 2, 3] : tensor<2x2x4x32xf32>
  return %s : tensor<f32>
}
