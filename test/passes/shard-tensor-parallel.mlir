// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=2 | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=2 --mlc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=1 | FileCheck %s --check-prefix=ONE

// GPT-2's attention: one fused c_attn (Conv1D layout [in, out]) split into
// Q, K, V. Each rank keeps half of each of the three blocks (the weight's
// dim 1 and the bias are cut as blocks [8, 8, 8]), one head of two; the
// output projection keeps half of its input rows, its partial sum is
// reduced over the group and its bias added once, after the reduce.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<8x12xf32> {mlc.param = "h.0.attn.c_attn.weight", mlc.tp_split = {blocks = array<i64: 8, 8, 8>, dim = 1 : i64}}
// CHECK-SAME: %arg2: tensor<12xf32> {mlc.param = "h.0.attn.c_attn.bias", mlc.tp_split = {blocks = array<i64: 8, 8, 8>, dim = 0 : i64}}
// CHECK-SAME: %arg3: tensor<4x8xf32> {mlc.param = "h.0.attn.c_proj.weight", mlc.tp_split = {blocks = array<i64: 8>, dim = 0 : i64}}
// CHECK-SAME: %arg4: tensor<8xf32> {mlc.param = "h.0.attn.c_proj.bias"})
// CHECK: %[[X:.*]] = mlc.tp_copy %arg0 : tensor<1x4x8xf32>
// CHECK-NEXT: %[[QKV:.*]] = mlc.matmul %[[X]], %arg1 : tensor<1x4x8xf32>, tensor<8x12xf32>
// CHECK-NEXT: %[[B:.*]] = mlc.add %[[QKV]], %arg2 : tensor<1x4x12xf32>, tensor<12xf32>
// CHECK-NEXT: mlc.split %[[B]] axis = 2 sizes = [4, 4, 4] : tensor<1x4x12xf32>
// CHECK: mlc.reshape %{{.*}} : tensor<1x4x4xf32> -> tensor<1x4x1x4xf32>
// CHECK: mlc.attention %{{.*}} causal : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
// CHECK: %[[A:.*]] = mlc.reshape %{{.*}} : tensor<1x4x1x4xf32> -> tensor<1x4x4xf32>
// CHECK-NEXT: %[[P:.*]] = mlc.matmul %[[A]], %arg3 : tensor<1x4x4xf32>, tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = mlc.tp_reduce sum %[[P]] : tensor<1x4x8xf32>
// CHECK-NEXT: %[[O:.*]] = mlc.add %[[S]], %arg4 : tensor<1x4x8xf32>, tensor<8xf32>
// CHECK-NEXT: mlc.add %arg0, %[[O]]
// CHECK-NOT: mlc.tp_
// CHECK: return
// The backward pass gets the duals: the all-reduce of the input's gradient
// (f's rule) and the identity of the output's (g's rule), once each.
// GRAD-LABEL: func.func @train_step
// GRAD-COUNT-1: mlc.tp_copy
// GRAD-COUNT-1: mlc.tp_reduce sum
// GRAD-COUNT-1: mlc.tp_copy
// GRAD-COUNT-1: mlc.tp_reduce sum
// GRAD-NOT: mlc.tp_
// GRAD: return
// One rank: nothing changes.
// ONE-LABEL: func.func @forward
// ONE-SAME: %arg1: tensor<8x24xf32> {mlc.param = "h.0.attn.c_attn.weight"}
// ONE: mlc.attention %{{.*}} causal : tensor<1x2x4x4xf32>
// ONE-NOT: mlc.tp_
// ONE: return
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
  %9 = mlc.attention %4, %6, %8 causal : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %10 = mlc.transpose %9, [0, 2, 1, 3] : tensor<1x2x4x4xf32>
  %11 = mlc.reshape %10 : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %12 = mlc.matmul %11, %wo : tensor<1x4x8xf32>, tensor<8x8xf32>
  %13 = mlc.add %12, %bo : tensor<1x4x8xf32>, tensor<8xf32>
  %14 = mlc.add %x, %13 : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %l = mlc.reduce_sum %14 axes = [0, 1, 2] : tensor<1x4x8xf32>
  return %l : tensor<f32>
}

// -----

// Llama's attention: separate Q, K, V in HF's [out, in] layout
// (transpose_rhs, so dim 0 is split), rotary on the rows, grouped-query
// attention with 4 heads and 2 KV heads: each rank keeps 2 heads and 1 KV
// head. Q, K and V share one tp_copy, so backward all-reduces the sum of
// their input gradients once. The output projection keeps half of its
// columns (dim 1).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<8x16xf32> {mlc.param = "model.layers.0.self_attn.q_proj.weight", mlc.tp_split = {blocks = array<i64: 16>, dim = 0 : i64}}
// CHECK-SAME: %arg2: tensor<4x16xf32> {mlc.param = "model.layers.0.self_attn.k_proj.weight", mlc.tp_split = {blocks = array<i64: 8>, dim = 0 : i64}}
// CHECK-SAME: %arg3: tensor<4x16xf32> {mlc.param = "model.layers.0.self_attn.v_proj.weight", mlc.tp_split = {blocks = array<i64: 8>, dim = 0 : i64}}
// CHECK-SAME: %arg4: tensor<16x8xf32> {mlc.param = "model.layers.0.self_attn.o_proj.weight", mlc.tp_split = {blocks = array<i64: 16>, dim = 1 : i64}}
// CHECK: %[[X:.*]] = mlc.tp_copy %arg0 : tensor<1x4x16xf32>
// CHECK-NOT: mlc.tp_copy
// CHECK: mlc.matmul %[[X]], %arg1 transpose_rhs : tensor<1x4x16xf32>, tensor<8x16xf32>
// CHECK: mlc.rotary %{{.*}} : tensor<1x4x2x4xf32>, tensor<4x1x4xf32>
// CHECK: mlc.matmul %[[X]], %arg2 transpose_rhs : tensor<1x4x16xf32>, tensor<4x16xf32>
// CHECK: mlc.rotary %{{.*}} : tensor<1x4x1x4xf32>, tensor<4x1x4xf32>
// CHECK: mlc.matmul %[[X]], %arg3 transpose_rhs : tensor<1x4x16xf32>, tensor<4x16xf32>
// CHECK: mlc.attention %{{.*}} causal : tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
// CHECK: %[[P:.*]] = mlc.matmul %{{.*}}, %arg4 transpose_rhs : tensor<1x4x8xf32>, tensor<16x8xf32>
// CHECK-NEXT: %[[S:.*]] = mlc.tp_reduce sum %[[P]] : tensor<1x4x16xf32>
// CHECK-NEXT: mlc.add %arg0, %[[S]]
// CHECK-NOT: mlc.tp_
// GRAD-LABEL: func.func @train_step
// GRAD-COUNT-1: mlc.tp_copy
// GRAD-COUNT-1: mlc.tp_reduce sum
// GRAD-COUNT-1: mlc.tp_copy
// GRAD-COUNT-1: mlc.tp_reduce sum
// GRAD-NOT: mlc.tp_
// GRAD: return
// ONE-LABEL: func.func @forward
// ONE: mlc.attention %{{.*}} causal : tensor<1x4x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
// ONE-NOT: mlc.tp_
func.func @forward(%x: tensor<1x4x16xf32> {mlc.input = "x"},
                   %wq: tensor<16x16xf32> {mlc.param = "model.layers.0.self_attn.q_proj.weight"},
                   %wk: tensor<8x16xf32> {mlc.param = "model.layers.0.self_attn.k_proj.weight"},
                   %wv: tensor<8x16xf32> {mlc.param = "model.layers.0.self_attn.v_proj.weight"},
                   %wo: tensor<16x16xf32> {mlc.param = "model.layers.0.self_attn.o_proj.weight"},
                   %cos: tensor<4x1x4xf32> {mlc.input = "cos"}, %sin: tensor<4x1x4xf32> {mlc.input = "sin"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %0 = mlc.matmul %x, %wq transpose_rhs : tensor<1x4x16xf32>, tensor<16x16xf32>
  %1 = mlc.reshape %0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %2 = mlc.rotary %1, %cos, %sin : tensor<1x4x4x4xf32>, tensor<4x1x4xf32>
  %3 = mlc.transpose %2, [0, 2, 1, 3] : tensor<1x4x4x4xf32>
  %4 = mlc.matmul %x, %wk transpose_rhs : tensor<1x4x16xf32>, tensor<8x16xf32>
  %5 = mlc.reshape %4 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %6 = mlc.rotary %5, %cos, %sin : tensor<1x4x2x4xf32>, tensor<4x1x4xf32>
  %7 = mlc.transpose %6, [0, 2, 1, 3] : tensor<1x4x2x4xf32>
  %8 = mlc.matmul %x, %wv transpose_rhs : tensor<1x4x16xf32>, tensor<8x16xf32>
  %9 = mlc.reshape %8 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %10 = mlc.transpose %9, [0, 2, 1, 3] : tensor<1x4x2x4xf32>
  %11 = mlc.attention %3, %7, %10 causal : tensor<1x4x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %12 = mlc.transpose %11, [0, 2, 1, 3] : tensor<1x4x4x4xf32>
  %13 = mlc.reshape %12 : tensor<1x4x4x4xf32> -> tensor<1x4x16xf32>
  %14 = mlc.matmul %13, %wo transpose_rhs : tensor<1x4x16xf32>, tensor<16x16xf32>
  %15 = mlc.add %x, %14 : tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %l = mlc.reduce_sum %15 axes = [0, 1, 2] : tensor<1x4x16xf32>
  return %l : tensor<f32>
}

// -----

// GPT-2's MLP with its biases in the GEMMs' epilogues (the canonical form):
// c_fc keeps half of its 32 units and of its bias; the GELU runs on the
// shard; c_proj's bias leaves the GEMM and is added once after the reduce.
// The norm before the MLP is replicated: its parameters are not split.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<8xf32> {mlc.param = "h.0.ln_2.weight"}
// CHECK-SAME: %arg2: tensor<8xf32> {mlc.param = "h.0.ln_2.bias"}
// CHECK-SAME: %arg3: tensor<8x16xf32> {mlc.param = "h.0.mlp.c_fc.weight", mlc.tp_split = {blocks = array<i64: 32>, dim = 1 : i64}}
// CHECK-SAME: %arg4: tensor<16xf32> {mlc.param = "h.0.mlp.c_fc.bias", mlc.tp_split = {blocks = array<i64: 32>, dim = 0 : i64}}
// CHECK-SAME: %arg5: tensor<16x8xf32> {mlc.param = "h.0.mlp.c_proj.weight", mlc.tp_split = {blocks = array<i64: 32>, dim = 0 : i64}}
// CHECK-SAME: %arg6: tensor<8xf32> {mlc.param = "h.0.mlp.c_proj.bias"})
// CHECK: %[[N:.*]] = mlc.layer_norm %arg0, %arg1, %arg2 {{.*}} : tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[X:.*]] = mlc.tp_copy %[[N]] : tensor<1x4x8xf32>
// CHECK-NEXT: %[[H:.*]] = mlc.matmul %[[X]], %arg3 bias(%arg4 : tensor<16xf32>) : tensor<1x4x8xf32>, tensor<8x16xf32>
// CHECK-NEXT: %[[G:.*]] = mlc.gelu %[[H]] approximate = tanh : tensor<1x4x16xf32>
// CHECK-NEXT: %[[P:.*]] = mlc.matmul %[[G]], %arg5 : tensor<1x4x16xf32>, tensor<16x8xf32>
// CHECK-NEXT: %[[S:.*]] = mlc.tp_reduce sum %[[P]] : tensor<1x4x8xf32>
// CHECK-NEXT: mlc.add %[[S]], %arg6 : tensor<1x4x8xf32>, tensor<8xf32>
// ONE-LABEL: func.func @forward
// ONE: mlc.matmul %{{.*}}, %arg5 bias(%arg6 : tensor<8xf32>) : tensor<1x4x32xf32>, tensor<32x8xf32>
// ONE-NOT: mlc.tp_
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %g: tensor<8xf32> {mlc.param = "h.0.ln_2.weight"},
                   %b: tensor<8xf32> {mlc.param = "h.0.ln_2.bias"},
                   %w1: tensor<8x32xf32> {mlc.param = "h.0.mlp.c_fc.weight"},
                   %b1: tensor<32xf32> {mlc.param = "h.0.mlp.c_fc.bias"},
                   %w2: tensor<32x8xf32> {mlc.param = "h.0.mlp.c_proj.weight"},
                   %b2: tensor<8xf32> {mlc.param = "h.0.mlp.c_proj.bias"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %n = mlc.layer_norm %x, %g, %b epsilon = 1.0e-05 : tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %h = mlc.matmul %n, %w1 bias(%b1 : tensor<32xf32>) : tensor<1x4x8xf32>, tensor<8x32xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<1x4x32xf32>
  %y = mlc.matmul %a, %w2 bias(%b2 : tensor<8xf32>) : tensor<1x4x32xf32>, tensor<32x8xf32>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<1x4x8xf32>
  return %l : tensor<f32>
}

// -----

// Llama's SwiGLU MLP: gate and up keep half of their rows (HF [out, in]),
// down half of its columns; gate and up share the tp_copy.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<6x8xf32> {mlc.param = "model.layers.0.mlp.gate_proj.weight", mlc.tp_split = {blocks = array<i64: 12>, dim = 0 : i64}}
// CHECK-SAME: %arg2: tensor<6x8xf32> {mlc.param = "model.layers.0.mlp.up_proj.weight", mlc.tp_split = {blocks = array<i64: 12>, dim = 0 : i64}}
// CHECK-SAME: %arg3: tensor<8x6xf32> {mlc.param = "model.layers.0.mlp.down_proj.weight", mlc.tp_split = {blocks = array<i64: 12>, dim = 1 : i64}}
// CHECK: %[[X:.*]] = mlc.tp_copy %arg0 : tensor<1x4x8xf32>
// CHECK-NEXT: %[[GATE:.*]] = mlc.matmul %[[X]], %arg1 transpose_rhs : tensor<1x4x8xf32>, tensor<6x8xf32>
// CHECK-NEXT: %[[UP:.*]] = mlc.matmul %[[X]], %arg2 transpose_rhs : tensor<1x4x8xf32>, tensor<6x8xf32>
// CHECK-NEXT: %[[H:.*]] = mlc.swiglu %[[GATE]], %[[UP]] : tensor<1x4x6xf32>
// CHECK-NEXT: %[[P:.*]] = mlc.matmul %[[H]], %arg3 transpose_rhs : tensor<1x4x6xf32>, tensor<8x6xf32>
// CHECK-NEXT: mlc.tp_reduce sum %[[P]] : tensor<1x4x8xf32>
// CHECK-NOT: mlc.tp_copy
// ONE-LABEL: func.func @forward
// ONE: mlc.swiglu %{{.*}} : tensor<1x4x12xf32>
// ONE-NOT: mlc.tp_
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %wg: tensor<12x8xf32> {mlc.param = "model.layers.0.mlp.gate_proj.weight"},
                   %wu: tensor<12x8xf32> {mlc.param = "model.layers.0.mlp.up_proj.weight"},
                   %wd: tensor<8x12xf32> {mlc.param = "model.layers.0.mlp.down_proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %g = mlc.matmul %x, %wg transpose_rhs : tensor<1x4x8xf32>, tensor<12x8xf32>
  %u = mlc.matmul %x, %wu transpose_rhs : tensor<1x4x8xf32>, tensor<12x8xf32>
  %h = mlc.swiglu %g, %u : tensor<1x4x12xf32>
  %y = mlc.matmul %h, %wd transpose_rhs : tensor<1x4x12xf32>, tensor<8x12xf32>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<1x4x8xf32>
  return %l : tensor<f32>
}

// -----

// A gated MLP spelled out (Gemma's GeGLU, mul(gelu(gate), up)): up's
// projection is column-parallel like gate's, and the product stays split.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<6x8xf32> {mlc.param = "model.layers.0.mlp.gate_proj.weight", mlc.tp_split = {blocks = array<i64: 12>, dim = 0 : i64}}
// CHECK-SAME: %arg2: tensor<6x8xf32> {mlc.param = "model.layers.0.mlp.up_proj.weight", mlc.tp_split = {blocks = array<i64: 12>, dim = 0 : i64}}
// CHECK: %[[X:.*]] = mlc.tp_copy %arg0 : tensor<1x4x8xf32>
// CHECK: %[[A:.*]] = mlc.gelu %{{.*}} approximate = tanh : tensor<1x4x6xf32>
// CHECK: %[[H:.*]] = mlc.mul %[[A]], %{{.*}} : tensor<1x4x6xf32>, tensor<1x4x6xf32>
// CHECK-NEXT: %[[P:.*]] = mlc.matmul %[[H]], %arg3 transpose_rhs : tensor<1x4x6xf32>, tensor<8x6xf32>
// CHECK-NEXT: mlc.tp_reduce sum %[[P]] : tensor<1x4x8xf32>
// ONE-LABEL: func.func @forward
// ONE-NOT: mlc.tp_
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %wg: tensor<12x8xf32> {mlc.param = "model.layers.0.mlp.gate_proj.weight"},
                   %wu: tensor<12x8xf32> {mlc.param = "model.layers.0.mlp.up_proj.weight"},
                   %wd: tensor<8x12xf32> {mlc.param = "model.layers.0.mlp.down_proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %g = mlc.matmul %x, %wg transpose_rhs : tensor<1x4x8xf32>, tensor<12x8xf32>
  %u = mlc.matmul %x, %wu transpose_rhs : tensor<1x4x8xf32>, tensor<12x8xf32>
  %a = mlc.gelu %g approximate = tanh : tensor<1x4x12xf32>
  %h = mlc.mul %a, %u : tensor<1x4x12xf32>, tensor<1x4x12xf32>
  %y = mlc.matmul %h, %wd transpose_rhs : tensor<1x4x12xf32>, tensor<8x12xf32>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<1x4x8xf32>
  return %l : tensor<f32>
}

// -----

// Qwen3's QK norm runs over each head's dims: each rank normalizes its own
// heads, and the norm's weight (over head_dim) stays whole.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg2: tensor<4xf32> {mlc.param = "model.layers.0.self_attn.q_norm.weight"}
// CHECK: mlc.rms_norm %{{.*}}, %arg2 {{.*}} : tensor<1x4x2x4xf32>, tensor<4xf32>
// CHECK: mlc.attention %{{.*}} : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
// ONE-LABEL: func.func @forward
// ONE-NOT: mlc.tp_
func.func @forward(%x: tensor<1x4x16xf32> {mlc.input = "x"},
                   %wq: tensor<16x16xf32> {mlc.param = "model.layers.0.self_attn.q_proj.weight"},
                   %gq: tensor<4xf32> {mlc.param = "model.layers.0.self_attn.q_norm.weight"},
                   %wo: tensor<16x16xf32> {mlc.param = "model.layers.0.self_attn.o_proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %0 = mlc.matmul %x, %wq transpose_rhs : tensor<1x4x16xf32>, tensor<16x16xf32>
  %1 = mlc.reshape %0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %2 = mlc.rms_norm %1, %gq epsilon = 1.0e-06 : tensor<1x4x4x4xf32>, tensor<4xf32>
  %3 = mlc.transpose %2, [0, 2, 1, 3] : tensor<1x4x4x4xf32>
  %4 = mlc.attention %3, %3, %3 causal : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>
  %5 = mlc.transpose %4, [0, 2, 1, 3] : tensor<1x4x4x4xf32>
  %6 = mlc.reshape %5 : tensor<1x4x4x4xf32> -> tensor<1x4x16xf32>
  %7 = mlc.matmul %6, %wo transpose_rhs : tensor<1x4x16xf32>, tensor<16x16xf32>
  %l = mlc.reduce_sum %7 axes = [0, 1, 2] : tensor<1x4x16xf32>
  return %l : tensor<f32>
}
