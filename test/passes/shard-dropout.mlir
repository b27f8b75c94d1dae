// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=2 -verify-diagnostics | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=2 --mlc-autodiff -verify-diagnostics | FileCheck %s --check-prefix=GRAD
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=1 -verify-diagnostics | FileCheck %s --check-prefix=ONE
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=2 --mlc-assign-buffers --mlc-lower-to-plan --mlc-cuda-vectorize --mlc-print-kernels=target=cpu -verify-diagnostics -o /dev/null | FileCheck %s --check-prefix=CPU
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=2 --mlc-assign-buffers --mlc-lower-to-plan --mlc-cuda-vectorize --mlc-cuda-launch --mlc-print-kernels=target=cuda -verify-diagnostics -o /dev/null | FileCheck %s --check-prefix=CUDA
// Run on this machine, each rank's dropout kernel gives the whole tensor's
// kernel's output for its block, bit for bit, at two steps (about 5 s: two
// kernel files compiled).
// RUN: rm -rf %t && mkdir -p %t
// RUN: mlc-opt %s --mlc-shard-tensor-parallel=size=1 --mlc-assign-buffers --mlc-lower-to-plan --mlc-cuda-vectorize --mlc-print-kernels=target=cpu -o /dev/null > %t/whole.cpp
// RUN: mlc-opt %s --mlc-shard-tensor-parallel=size=2 --mlc-assign-buffers --mlc-lower-to-plan --mlc-cuda-vectorize --mlc-print-kernels=target=cpu -o /dev/null > %t/block.cpp
// RUN: %python %S/Inputs/dropout_blocks.py %t/whole.cpp %t/block.cpp %mlc_src/compiler/codegen/prelude %t 4 2 | FileCheck %s --check-prefix=EXEC
// EXEC: step 1: 2 blocks equal the whole tensor's, {{[1-9][0-9]*}} of 32 dropped
// EXEC: step 7: 2 blocks equal the whole tensor's, {{[1-9][0-9]*}} of 32 dropped

// Dropouts under tensor parallelism (passes/ShardDropout.cpp): attention's
// dropout on its heads, split, and a dropout of the split attention output
// each become a block of one process's tensor, read from the "tp_rank"
// scalars the pass adds (no vocabulary here to add it); the residual
// stream's dropout after the row-parallel sum is replicated and stays.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[RANK:arg[0-9]+]]: tensor<1xf64> {mlc.scalars = "tp_rank"}
// CHECK: mlc.attention %{{.*}} causal dropout = 1.000000e-01 seed = 3 block %[[RANK]] of 2 along 1 : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1xf64>
// One head of 4 x 4 per rank: a span of 16 elements.
// CHECK: mlc.dropout %{{.*}} ratio = 1.000000e-01 seed = 4 block %[[RANK]] of 2 span 16 : tensor<1x1x4x4xf32>, tensor<1xf64>
// CHECK: mlc.tp_reduce sum
// CHECK: mlc.dropout %{{.*}} ratio = 1.000000e-01 seed = 5 : tensor<1x4x8xf32>
// CHECK: return
// Backward regenerates the same blocks' masks.
// GRAD-LABEL: func.func @train_step
// GRAD: mlc.dropout %{{.*}} ratio = 1.000000e-01 seed = 5 : tensor<1x4x8xf32>
// GRAD: mlc.dropout %{{.*}} ratio = 1.000000e-01 seed = 4 block %{{.*}} of 2 span 16
// GRAD: mlc.attention_grad {{.*}} dropout = 1.000000e-01 seed = 3 block %{{.*}} of 2 along 1
// One rank: whole tensors, no block, no rank.
// ONE-LABEL: func.func @forward
// ONE-NOT: tp_rank
// ONE-NOT: block
// ONE: return
// Both targets draw at the whole tensor's index: the pointwise kernel maps
// its flat index through mlc_block_index with the rank it loads, the
// attention kernel gets the span of its probabilities' block (one head of
// 4 x 4 queries and keys), the count and the rank.
// CPU: {16ull, 2ull, (uint64_t)p{{[0-9]+}}[0]}};
// CPU: mlc_attention_forward<float, MLC_ATTN_CAUSAL | MLC_ATTN_DROPOUT | MLC_ATTN_BLOCK,
// CPU: mlc_uniform(key4, mlc_block_index((uint64_t)flat, 16ull, 2ull, (uint64_t)x{{[0-9]+}}))
// CPU: mlc_uniform(key5, flat)
// CUDA: {16ull, 2ull, (uint64_t)p{{[0-9]+}}[0]}};
// CUDA: mlc_attention_forward<float, {{.*}}MLC_ATTN_CAUSAL | MLC_ATTN_DROPOUT | MLC_ATTN_BLOCK>
// CUDA: mlc_uniform(key4, mlc_block_index((uint64_t)flat, 16ull, 2ull, (uint64_t)x{{[0-9]+}}))
// CUDA: mlc_uniform(key5, flat)
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %wqkv: tensor<8x24xf32> {mlc.param = "h.0.attn.c_attn.weight"},
                   %bqkv: tensor<24xf32> {mlc.param = "h.0.attn.c_attn.bias"},
                   %wo: tensor<8x8xf32> {mlc.param = "h.0.attn.c_proj.weight"},
                   %bo: tensor<8xf32> {mlc.param = "h.0.attn.c_proj.bias"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %0 = mlc.matmul %x, %wqkv : tensor<1x4x8xf32>, tensor<8x24xf32>
  %1 = mlc.add %0, %bqkv : tensor<1x4x24xf32>, tensor<24xf32>
  %2:3 = mlc.split %1 axis = 2 sizes = [8, 8, 8] : tensor<1x4x24xf32>
  %3 = mlc.reshape %2#0 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %4 = mlc.transpose %3, [0, 2, 1, 3] : tensor<1x4x2x4xf32>
  %5 = mlc.reshape %2#1 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %6 = mlc.transpose %5, [0, 2, 1, 3] : tensor<1x4x2x4xf32>
  %7 = mlc.reshape %2#2 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %8 = mlc.transpose %7, [0, 2, 1, 3] : tensor<1x4x2x4xf32>
  %9 = mlc.attention %4, %6, %8 causal dropout = 0.1 seed = 3 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %d = mlc.dropout %9 ratio = 0.1 seed = 4 : tensor<1x2x4x4xf32>
  %10 = mlc.transpose %d, [0, 2, 1, 3] : tensor<1x2x4x4xf32>
  %11 = mlc.reshape %10 : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %12 = mlc.matmul %11, %wo : tensor<1x4x8xf32>, tensor<8x8xf32>
  %13 = mlc.add %12, %bo : tensor<1x4x8xf32>, tensor<8xf32>
  %r = mlc.dropout %13 ratio = 0.1 seed = 5 : tensor<1x4x8xf32>
  %14 = mlc.add %x, %r : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %l = mlc.reduce_sum %14 axes = [0, 1, 2] : tensor<1x4x8xf32>
  return %l : tensor<f32>
}

