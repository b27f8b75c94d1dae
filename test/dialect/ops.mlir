// RUN: mlc-opt %s -split-input-file | mlc-opt -split-input-file | FileCheck %s
// Every op prints and parses back to itself, with inferred result types.

// CHECK-LABEL: func.func @constant_iota
// CHECK: mlc.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK: mlc.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK: mlc.iota dim = 1 : tensor<2x?xi64>
func.func @constant_iota() -> (tensor<4x8xf32>, tensor<3xi64>, tensor<2x?xi64>) {
  %0 = mlc.constant dense<1.0> : tensor<4x8xf32>
  %1 = mlc.constant dense<[1, 2, 3]> : tensor<3xi64>
  %2 = mlc.iota dim = 1 : tensor<2x?xi64>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<3xi64>, tensor<2x?xi64>
}

// -----

// CHECK-LABEL: func.func @embedding
// CHECK: %[[E:.*]] = mlc.embedding %{{.*}}, %{{.*}} : tensor<100x16xf32>, tensor<2x?xi64>
// CHECK: return %[[E]] : tensor<2x?x16xf32>
func.func @embedding(%w: tensor<100x16xf32>, %ids: tensor<2x?xi64>) -> tensor<2x?x16xf32> {
  %0 = mlc.embedding %w, %ids : tensor<100x16xf32>, tensor<2x?xi64>
  return %0 : tensor<2x?x16xf32>
}

// -----

// CHECK-LABEL: func.func @matmul
// CHECK: mlc.matmul %{{.*}}, %{{.*}} : tensor<2x3x4xf32>, tensor<4x5xf32>
// CHECK: mlc.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<2x1x4x3xf32>, tensor<7x5x4xf32>
// CHECK: mlc.matmul %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<5xf32>) acc(%[[P:.*]] : tensor<2x3x5xf32>) : tensor<2x3x4xf32>, tensor<4x5xf32>
// CHECK: return %{{.*}}, %{{.*}} : tensor<2x3x5xf32>, tensor<2x7x3x5xf32>
func.func @matmul(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<2x1x4x3xf32>,
                  %d: tensor<7x5x4xf32>) -> (tensor<2x3x5xf32>, tensor<2x7x3x5xf32>) {
  %0 = mlc.matmul %a, %b : tensor<2x3x4xf32>, tensor<4x5xf32>
  %1 = mlc.matmul %c, %d transpose_lhs transpose_rhs : tensor<2x1x4x3xf32>, tensor<7x5x4xf32>
  %bias = mlc.constant dense<1.0> : tensor<5xf32>
  %2 = mlc.matmul %a, %b bias(%bias : tensor<5xf32>) acc(%0 : tensor<2x3x5xf32>) : tensor<2x3x4xf32>, tensor<4x5xf32>
  return %2, %1 : tensor<2x3x5xf32>, tensor<2x7x3x5xf32>
}

// -----

// CHECK-LABEL: func.func @binary
// CHECK: mlc.add %{{.*}}, %{{.*}} : tensor<8x?x4xf32>, tensor<4xf32>
// CHECK: mlc.sub %{{.*}}, %{{.*}} : tensor<8x?x4xf32>, tensor<8x1x1xf32>
// CHECK: mlc.mul %{{.*}}, %{{.*}} : tensor<8x?x4xf32>, tensor<f32>
// CHECK: mlc.div %{{.*}}, %{{.*}} : tensor<8x?x4xf32>, tensor<4xf32>
// CHECK: mlc.pow %{{.*}}, %{{.*}} : tensor<8x?x4xf32>, tensor<f32>
// CHECK: mlc.add %{{.*}}, %{{.*}} : tensor<3xi64>, tensor<3xi64>
func.func @binary(%x: tensor<8x?x4xf32>, %b: tensor<4xf32>, %c: tensor<8x1x1xf32>,
                  %s: tensor<f32>, %i: tensor<3xi64>) -> tensor<8x?x4xf32> {
  %0 = mlc.add %x, %b : tensor<8x?x4xf32>, tensor<4xf32>
  %1 = mlc.sub %0, %c : tensor<8x?x4xf32>, tensor<8x1x1xf32>
  %2 = mlc.mul %1, %s : tensor<8x?x4xf32>, tensor<f32>
  %3 = mlc.div %2, %b : tensor<8x?x4xf32>, tensor<4xf32>
  %4 = mlc.pow %3, %s : tensor<8x?x4xf32>, tensor<f32>
  %5 = mlc.add %i, %i : tensor<3xi64>, tensor<3xi64>
  return %4 : tensor<8x?x4xf32>
}

// -----

// CHECK-LABEL: func.func @unary
// CHECK: mlc.neg %{{.*}} : tensor<4x?xf32>
// CHECK: mlc.exp %{{.*}} : tensor<4x?xf32>
// CHECK: mlc.log %{{.*}} : tensor<4x?xf32>
// CHECK: mlc.tanh %{{.*}} : tensor<4x?xf32>
// CHECK: mlc.erf %{{.*}} : tensor<4x?xf32>
// CHECK: mlc.sqrt %{{.*}} : tensor<4x?xf32>
// CHECK: mlc.rsqrt %{{.*}} : tensor<4x?xf32>
// CHECK: mlc.gelu %{{.*}} approximate = tanh : tensor<4x?xf32>
// CHECK: mlc.gelu %{{.*}} : tensor<4x?xf32>
// CHECK: mlc.silu %{{.*}} : tensor<4x?xf32>
func.func @unary(%x: tensor<4x?xf32>) -> tensor<4x?xf32> {
  %0 = mlc.neg %x : tensor<4x?xf32>
  %1 = mlc.exp %0 : tensor<4x?xf32>
  %2 = mlc.log %1 : tensor<4x?xf32>
  %3 = mlc.tanh %2 : tensor<4x?xf32>
  %4 = mlc.erf %3 : tensor<4x?xf32>
  %5 = mlc.sqrt %4 : tensor<4x?xf32>
  %6 = mlc.rsqrt %5 : tensor<4x?xf32>
  %7 = mlc.gelu %6 approximate = tanh : tensor<4x?xf32>
  %8 = mlc.gelu %7 : tensor<4x?xf32>
  %9 = mlc.silu %8 : tensor<4x?xf32>
  return %9 : tensor<4x?xf32>
}

// -----

// Rotary embeddings over [B, H, S, D] with [S, D] or per-sequence
// [B, 1, S, D] tables, both conventions, and the transposed op; SwiGLU.
// CHECK-LABEL: func.func @rotary_swiglu
// CHECK: mlc.rotary %arg0, %arg1, %arg1 : tensor<2x4x8x16xf32>, tensor<8x16xf32>
// CHECK: mlc.rotary %{{.*}}, %arg2, %arg2 interleaved transpose : tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>
// CHECK: mlc.swiglu %{{.*}}, %{{.*}} : tensor<2x4x8x16xf32>
func.func @rotary_swiglu(%x: tensor<2x4x8x16xf32>, %t: tensor<8x16xf32>, %p: tensor<2x1x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %0 = mlc.rotary %x, %t, %t : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %1 = mlc.rotary %0, %p, %p interleaved transpose : tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>
  %2 = mlc.swiglu %0, %1 : tensor<2x4x8x16xf32>
  return %2 : tensor<2x4x8x16xf32>
}

// -----

// CHECK-LABEL: func.func @compare_select_cast
// CHECK: %[[C:.*]] = mlc.compare ne %{{.*}}, %{{.*}} : tensor<2x8xi64>, tensor<i64>
// CHECK: mlc.select %[[C]], %{{.*}}, %{{.*}} : tensor<2x8xi1>, tensor<2x8xf32>, tensor<f32>
// CHECK: mlc.cast %{{.*}} : tensor<2x8xi64> -> tensor<2x8xf32>
func.func @compare_select_cast(%l: tensor<2x8xi64>, %ig: tensor<i64>, %x: tensor<2x8xf32>,
                               %z: tensor<f32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %0 = mlc.compare ne %l, %ig : tensor<2x8xi64>, tensor<i64>
  %1 = mlc.select %0, %x, %z : tensor<2x8xi1>, tensor<2x8xf32>, tensor<f32>
  %2 = mlc.cast %l : tensor<2x8xi64> -> tensor<2x8xf32>
  return %1, %2 : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @shapes
// CHECK: mlc.reshape %{{.*}} : tensor<2x8x12xf32> -> tensor<2x8x3x4xf32>
// CHECK: mlc.transpose %{{.*}}, [0, 2, 1, 3] : tensor<2x8x3x4xf32>
// CHECK: mlc.broadcast %{{.*}} : tensor<4xf32> -> tensor<2x3x8x4xf32>
// CHECK: mlc.slice %{{.*}} starts = [0, 0, 1, 0] ends = [2, 3, 8, 4] steps = [1, 1, 2, 1] : tensor<2x3x8x4xf32>
// CHECK: return %{{.*}}, %{{.*}} : tensor<2x3x8x4xf32>, tensor<2x3x4x4xf32>
func.func @shapes(%x: tensor<2x8x12xf32>, %b: tensor<4xf32>)
    -> (tensor<2x3x8x4xf32>, tensor<2x3x4x4xf32>) {
  %0 = mlc.reshape %x : tensor<2x8x12xf32> -> tensor<2x8x3x4xf32>
  %1 = mlc.transpose %0, [0, 2, 1, 3] : tensor<2x8x3x4xf32>
  %2 = mlc.broadcast %b : tensor<4xf32> -> tensor<2x3x8x4xf32>
  %3 = mlc.add %1, %2 : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>
  %4 = mlc.slice %3 starts = [0, 0, 1, 0] ends = [2, 3, 8, 4] steps = [1, 1, 2, 1] : tensor<2x3x8x4xf32>
  return %3, %4 : tensor<2x3x8x4xf32>, tensor<2x3x4x4xf32>
}

// -----

// A dynamic leading dimension carries through a reshape; one more is solved
// from the element count.
// CHECK-LABEL: func.func @dynamic_reshape
// CHECK: mlc.reshape %{{.*}} : tensor<?x16x12xf32> -> tensor<?x192xf32>
// CHECK: mlc.reshape %{{.*}} : tensor<?x192xf32> -> tensor<?x16x3x4xf32>
func.func @dynamic_reshape(%x: tensor<?x16x12xf32>) -> tensor<?x16x3x4xf32> {
  %0 = mlc.reshape %x : tensor<?x16x12xf32> -> tensor<?x192xf32>
  %1 = mlc.reshape %0 : tensor<?x192xf32> -> tensor<?x16x3x4xf32>
  return %1 : tensor<?x16x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @concat_split
// CHECK: mlc.concat(%{{.*}}, %{{.*}}) axis = -1 : tensor<2x4xf32>, tensor<2x6xf32>
// CHECK: %{{.*}}:3 = mlc.split %{{.*}} axis = 1 sizes = [2, 3, 5] : tensor<2x10xf32>
// CHECK: return %{{.*}}#0, %{{.*}}#2 : tensor<2x2xf32>, tensor<2x5xf32>
func.func @concat_split(%a: tensor<2x4xf32>, %b: tensor<2x6xf32>)
    -> (tensor<2x2xf32>, tensor<2x5xf32>) {
  %0 = mlc.concat(%a, %b) axis = -1 : tensor<2x4xf32>, tensor<2x6xf32>
  %1:3 = mlc.split %0 axis = 1 sizes = [2, 3, 5] : tensor<2x10xf32>
  return %1#0, %1#2 : tensor<2x2xf32>, tensor<2x5xf32>
}

// -----

// CHECK-LABEL: func.func @reductions
// CHECK: mlc.reduce_sum %{{.*}} axes = [-1] keepdims : tensor<2x?x8xf32>
// CHECK: mlc.reduce_mean %{{.*}} axes = [0, 2] : tensor<2x?x8xf32>
// CHECK: mlc.reduce_max %{{.*}} axes = [1] : tensor<2x?x8xf32>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x?x1xf32>, tensor<?xf32>, tensor<2x8xf32>
func.func @reductions(%x: tensor<2x?x8xf32>)
    -> (tensor<2x?x1xf32>, tensor<?xf32>, tensor<2x8xf32>) {
  %0 = mlc.reduce_sum %x axes = [-1] keepdims : tensor<2x?x8xf32>
  %1 = mlc.reduce_mean %x axes = [0, 2] : tensor<2x?x8xf32>
  %2 = mlc.reduce_max %x axes = [1] : tensor<2x?x8xf32>
  return %0, %1, %2 : tensor<2x?x1xf32>, tensor<?xf32>, tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @normalizations
// CHECK: mlc.softmax %{{.*}} axis = -1 : tensor<2x8xf32>
// CHECK: mlc.log_softmax %{{.*}} axis = 1 : tensor<2x8xf32>
// CHECK: mlc.layer_norm %{{.*}}, %{{.*}}, %{{.*}} epsilon = 1.000000e-05 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
// CHECK: mlc.cross_entropy %{{.*}}, %{{.*}} ignore_index = -100 : tensor<2x8xf32>, tensor<2xi64>
// CHECK: mlc.dropout %{{.*}} ratio = 1.000000e-01 seed = 3 : tensor<2x8xf32>
// CHECK: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x8xf32>
func.func @normalizations(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>,
                          %l: tensor<2xi64>) -> (tensor<f32>, tensor<2x8xf32>) {
  %0 = mlc.softmax %x axis = -1 : tensor<2x8xf32>
  %1 = mlc.log_softmax %0 axis = 1 : tensor<2x8xf32>
  %2 = mlc.layer_norm %1, %w, %b epsilon = 1.0e-05 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  %3 = mlc.cross_entropy %2, %l ignore_index = -100 : tensor<2x8xf32>, tensor<2xi64>
  %4 = mlc.dropout %2 ratio = 0.1 seed = 3 : tensor<2x8xf32>
  return %3, %4 : tensor<f32>, tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @attention
// CHECK: mlc.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
// CHECK: mlc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale = 5.000000e-01 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x1x1x16xf32>
// CHECK: mlc.attention %{{.*}}, %{{.*}}, %{{.*}} cu_seqlens %{{.*}} : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<3xi32>
// CHECK: mlc.attention %{{.*}}, %{{.*}}, %{{.*}} causal dropout = 1.000000e-01 seed = 4 : tensor<2x4x16x8xf32>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<?x4x8xf32>
func.func @attention(%q: tensor<2x4x16x8xf32>, %m: tensor<2x1x1x16xf32>,
                     %t: tensor<?x4x8xf32>, %cu: tensor<3xi32>)
    -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<?x4x8xf32>) {
  %0 = mlc.attention %q, %q, %q causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
  %1 = mlc.attention %q, %q, %q mask %m scale = 0.5 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x1x1x16xf32>
  %2 = mlc.attention %t, %t, %t cu_seqlens %cu : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<3xi32>
  %3 = mlc.attention %q, %q, %q causal dropout = 0.1 seed = 4 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
  return %0, %1, %2 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<?x4x8xf32>
}

// -----

// Rotary tables read inside attention (rotate-half, interleaved and
// partial, padded and variable-length), and the gradient op's.
// CHECK-LABEL: func.func @attention_rotary
// CHECK: mlc.attention %{{.*}}, %{{.*}}, %{{.*}} rotary %{{.*}}, %{{.*}} causal : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>
// CHECK: mlc.attention %{{.*}}, %{{.*}}, %{{.*}} cu_seqlens %{{.*}} rotary %{{.*}}, %{{.*}} interleaved : tensor<6x4x8xf32>, tensor<6x4x8xf32>, tensor<6x4x8xf32>, tensor<3xi32>, tensor<6x1x4xf32>, tensor<6x1x4xf32>
// CHECK: mlc.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} rotary %{{.*}}, %{{.*}} causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>
func.func @attention_rotary(%q: tensor<2x4x16x8xf32>, %k: tensor<2x2x16x8xf32>, %c: tensor<1x1x16x8xf32>,
                            %t: tensor<6x4x8xf32>, %cu: tensor<3xi32>, %p: tensor<6x1x4xf32>)
    -> (tensor<2x4x16x8xf32>, tensor<6x4x8xf32>, tensor<2x4x16x8xf32>) {
  %0 = mlc.attention %q, %k, %k rotary %c, %c causal : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>
  %1 = mlc.attention %t, %t, %t cu_seqlens %cu rotary %p, %p interleaved : tensor<6x4x8xf32>, tensor<6x4x8xf32>, tensor<6x4x8xf32>, tensor<3xi32>, tensor<6x1x4xf32>, tensor<6x1x4xf32>
  %2:3 = mlc.attention_grad %0, %q, %k, %k rotary %c, %c causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>
  return %0, %1, %2#0 : tensor<2x4x16x8xf32>, tensor<6x4x8xf32>, tensor<2x4x16x8xf32>
}

// -----

// Grouped-query attention: 4 query heads over 2 kv heads, padded and
// variable-length; the output has the query's heads and the value's size.
// CHECK-LABEL: func.func @attention_gqa
// CHECK: mlc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} causal : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x1x1x16xf32>
// CHECK: mlc.attention %{{.*}}, %{{.*}}, %{{.*}} cu_seqlens %{{.*}} : tensor<?x4x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<3xi32>
// CHECK: return %{{.*}}, %{{.*}} : tensor<2x4x16x8xf32>, tensor<?x4x8xf32>
func.func @attention_gqa(%q: tensor<2x4x16x8xf32>, %k: tensor<2x2x16x8xf32>, %m: tensor<2x1x1x16xf32>,
                         %t: tensor<?x4x8xf32>, %u: tensor<?x1x8xf32>, %cu: tensor<3xi32>)
    -> (tensor<2x4x16x8xf32>, tensor<?x4x8xf32>) {
  %0 = mlc.attention %q, %k, %k mask %m causal : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x1x1x16xf32>
  %1 = mlc.attention %t, %u, %u cu_seqlens %cu : tensor<?x4x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<3xi32>
  return %0, %1 : tensor<2x4x16x8xf32>, tensor<?x4x8xf32>
}

// -----

// The backward ops that mlc-autodiff emits.
// CHECK-LABEL: func.func @backward_ops
// CHECK: mlc.pad %{{.*}} low = [0, 1] high = [2, 0] : tensor<2x3xf32>
// CHECK: mlc.gelu_grad %{{.*}}, %{{.*}} approximate = tanh : tensor<2x3xf32>
// CHECK: mlc.softmax_grad %{{.*}}, %{{.*}} axis = -1 : tensor<2x3xf32>
// CHECK: mlc.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} epsilon = 1.000000e-05 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>
// CHECK: mlc.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index = -100 : tensor<f32>, tensor<2x3xf32>, tensor<2xi64>
// CHECK: mlc.embedding_grad %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2xi64> -> tensor<10x3xf32>
// CHECK: mlc.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
// CHECK: return %{{.*}} : tensor<4x4xf32>
func.func @backward_ops(%g: tensor<2x3xf32>, %x: tensor<2x3xf32>, %w: tensor<3xf32>,
                        %s: tensor<f32>, %l: tensor<2xi64>, %q: tensor<1x2x4x8xf32>)
    -> tensor<4x4xf32> {
  %0 = mlc.pad %g low = [0, 1] high = [2, 0] : tensor<2x3xf32>
  %1 = mlc.gelu_grad %g, %x approximate = tanh : tensor<2x3xf32>
  %2 = mlc.softmax_grad %g, %x axis = -1 : tensor<2x3xf32>
  %3:3 = mlc.layer_norm_grad %g, %x, %w epsilon = 1.0e-5 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>
  %4 = mlc.cross_entropy_grad %s, %x, %l ignore_index = -100 : tensor<f32>, tensor<2x3xf32>, tensor<2xi64>
  %5 = mlc.embedding_grad %g, %l : tensor<2x3xf32>, tensor<2xi64> -> tensor<10x3xf32>
  %6:3 = mlc.attention_grad %q, %q, %q, %q causal : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// RMSNorm and its gradient (Llama's norm: no mean, no bias).
// CHECK-LABEL: func.func @rms_norm
// CHECK: %[[Y:.*]] = mlc.rms_norm %arg0, %arg1 epsilon = 9.9999999999999995E-7 : tensor<2x?x8xf32>, tensor<8xf32>
// CHECK: %[[DX:.*]], %{{.*}} = mlc.rms_norm_grad %arg2, %arg3, %arg1 epsilon = 9.9999999999999995E-7 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>{{$}}
// CHECK: mlc.rms_norm_grad %arg2, %arg3, %arg1 plus %[[DX]] epsilon = 9.9999999999999995E-7 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>{{$}}
func.func @rms_norm(%x: tensor<2x?x8xf32>, %w: tensor<8xf32>, %g: tensor<4x8xf32>,
                    %y: tensor<4x8xf32>) -> (tensor<2x?x8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %0 = mlc.rms_norm %x, %w epsilon = 1.0e-06 : tensor<2x?x8xf32>, tensor<8xf32>
  %1:2 = mlc.rms_norm_grad %g, %y, %w epsilon = 1.0e-06 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %2:2 = mlc.rms_norm_grad %g, %y, %w plus %1#0 epsilon = 1.0e-06 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>
  return %0, %2#0, %1#1 : tensor<2x?x8xf32>, tensor<4x8xf32>, tensor<8xf32>
}

// -----

// The tensor-parallel collectives: f, g and the group's maximum.
// CHECK-LABEL: func.func @tensor_parallel
// CHECK: %[[C:.*]] = mlc.tp_copy %arg0 : tensor<2x?x8xf32>
// CHECK: %[[S:.*]] = mlc.tp_reduce sum %[[C]] : tensor<2x?x8xf32>
// CHECK: mlc.tp_reduce max %[[S]] : tensor<2x?x8xf32>
func.func @tensor_parallel(%x: tensor<2x?x8xf32>) -> tensor<2x?x8xf32> {
  %0 = mlc.tp_copy %x : tensor<2x?x8xf32>
  %1 = mlc.tp_reduce sum %0 : tensor<2x?x8xf32>
  %2 = mlc.tp_reduce max %1 : tensor<2x?x8xf32>
  return %2 : tensor<2x?x8xf32>
}
