// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute=mode=full | FileCheck %s --check-prefix=FULL
// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute=mode=full | FileCheck %s --check-prefix=DEAD
// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute="mode=full num-layers=1" | FileCheck %s --check-prefix=BLOCK
// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute=mode=selective | FileCheck %s --check-prefix=SEL
// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute="mode=full+selective num-layers=1" | FileCheck %s --check-prefix=MIX
// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute | FileCheck %s --check-prefix=NONE
// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute=mode=none | FileCheck %s --check-prefix=NONE

// Two layers (h.0: LayerNorm, product, GELU, dropout, residual; h.1:
// product, tanh, residual) and a head outside the layers.
//
// full: each layer keeps only its input (the residual stream entering it,
// %x and %[[R0]]); what backward reads of the layer is computed again right
// before backward reads it, products included, and the layer's output
// %[[R1]] (read by the head) is kept.
// FULL-LABEL: func.func @train_step
// FULL:       %[[N0:.*]] = mlc.layer_norm %arg0, %arg1, %arg2
// FULL-NEXT:  %[[M0:.*]] = mlc.matmul %[[N0]], %arg3
// FULL-NEXT:  %[[A0:.*]] = mlc.gelu %[[M0]]
// FULL-NEXT:  %[[D0:.*]] = mlc.dropout %[[A0]] ratio = 1.000000e-01 seed = 3
// FULL-NEXT:  %[[R0:.*]] = mlc.add %arg0, %[[D0]]
// FULL-NEXT:  %[[M1:.*]] = mlc.matmul %[[R0]], %arg4
// FULL-NEXT:  %[[T1:.*]] = mlc.tanh %[[M1]]
// FULL-NEXT:  %[[R1:.*]] = mlc.add %[[R0]], %[[T1]]
// FULL-NEXT:  %[[H:.*]] = mlc.matmul %[[R1]], %arg5
// FULL-NEXT:  %[[L:.*]] = mlc.reduce_sum %[[H]]
// FULL:       mlc.matmul %[[R1]], %{{.*}} transpose_lhs
// FULL-NEXT:  %[[M1B:.*]] = mlc.matmul %[[R0]], %arg4
// FULL-NEXT:  %[[T1B:.*]] = mlc.tanh %[[M1B]]
// FULL-NEXT:  mlc.mul %[[T1B]], %[[T1B]]
// FULL:       mlc.matmul %[[R0]], %{{.*}} transpose_lhs
// FULL:       %[[N0B:.*]] = mlc.layer_norm %arg0, %arg1, %arg2
// FULL-NEXT:  %[[M0B:.*]] = mlc.matmul %[[N0B]], %arg3
// FULL-NEXT:  mlc.gelu_grad %{{.*}}, %[[M0B]]
// FULL:       mlc.matmul %[[N0B]], %{{.*}} transpose_lhs
// FULL:       return %[[L]]
//
// No forward value of a layer but its input and output is read after the
// loss.
// DEAD-LABEL: func.func @train_step
// DEAD:       %[[N0:.*]] = mlc.layer_norm %arg0
// DEAD-NEXT:  %[[M0:.*]] = mlc.matmul %[[N0]]
// DEAD-NEXT:  %[[A0:.*]] = mlc.gelu %[[M0]]
// DEAD-NEXT:  %[[D0:.*]] = mlc.dropout %[[A0]]
// DEAD-NEXT:  %[[R0:.*]] = mlc.add %arg0, %[[D0]]
// DEAD-NEXT:  %[[M1:.*]] = mlc.matmul %[[R0]]
// DEAD-NEXT:  %[[T1:.*]] = mlc.tanh %[[M1]]
// DEAD:       mlc.reduce_sum
// DEAD-NOT:   %[[N0]]{{[^0-9_]}}
// DEAD-NOT:   %[[M0]]{{[^0-9_]}}
// DEAD-NOT:   %[[A0]]{{[^0-9_]}}
// DEAD-NOT:   %[[D0]]{{[^0-9_]}}
// DEAD-NOT:   %[[M1]]{{[^0-9_]}}
// DEAD-NOT:   %[[T1]]{{[^0-9_]}}
// DEAD:       return
//
// full with num-layers=1: layer 0 is recomputed, layer 1 keeps its tanh.
// BLOCK-LABEL: func.func @train_step
// BLOCK:       %[[T1:.*]] = mlc.tanh
// BLOCK:       mlc.reduce_sum
// BLOCK-NOT:   mlc.tanh
// BLOCK:       mlc.mul %[[T1]], %[[T1]]
// BLOCK:       %[[N0B:.*]] = mlc.layer_norm %arg0, %arg1, %arg2
// BLOCK-NEXT:  %[[M0B:.*]] = mlc.matmul %[[N0B]], %arg3
// BLOCK-NEXT:  mlc.gelu_grad %{{.*}}, %[[M0B]]
//
// selective: the cheap values are computed again from kept ones: the
// LayerNorm's output from %x, the GELU's (and the dropout's, the same mask
// from its seed) from the saved product %[[M0]], the residual sums. The
// tanh of a product nothing else keeps stays saved: recomputing it would
// need the product. No GEMM runs twice.
// SEL-LABEL:  func.func @train_step
// SEL:        %[[M0:.*]] = mlc.matmul
// SEL:        %[[T1:.*]] = mlc.tanh
// SEL:        mlc.reduce_sum
// SEL:        %[[A0B:.*]] = mlc.gelu %[[M0]]
// SEL-NEXT:   %[[D0B:.*]] = mlc.dropout %[[A0B]] ratio = 1.000000e-01 seed = 3
// SEL-NEXT:   %[[R0B:.*]] = mlc.add %arg0, %[[D0B]]
// SEL-NEXT:   %[[R1B:.*]] = mlc.add %[[R0B]], %[[T1]]
// SEL-NEXT:   mlc.matmul %[[R1B]], %{{.*}} transpose_lhs
// SEL-NEXT:   mlc.mul %[[T1]], %[[T1]]
// SEL:        mlc.gelu_grad %{{.*}}, %[[M0]]
// SEL:        %[[N0B:.*]] = mlc.layer_norm %arg0, %arg1, %arg2
// SEL-NEXT:   mlc.matmul %[[N0B]], %{{.*}} transpose_lhs
// SEL-COUNT-2: mlc.matmul
// SEL-NOT:     mlc.matmul
// SEL:        return
//
// full+selective with num-layers=1 (what --recompute auto chooses between):
// layer 0 as under full (its LayerNorm and product computed again), layer
// 1 as under selective: its residual sum %[[R1B]] is computed again from
// the kept %[[R0]] and tanh, which stays saved (not as under BLOCK, which
// keeps the sum; not as under SEL, which keeps layer 0's product).
// MIX-LABEL:  func.func @train_step
// MIX:        %[[R0:.*]] = mlc.add %arg0
// MIX:        %[[T1:.*]] = mlc.tanh
// MIX:        mlc.reduce_sum
// MIX:        %[[R1B:.*]] = mlc.add %[[R0]], %[[T1]]
// MIX-NEXT:   mlc.matmul %[[R1B]], %{{.*}} transpose_lhs
// MIX-NEXT:   mlc.mul %[[T1]], %[[T1]]
// MIX:        %[[N0B:.*]] = mlc.layer_norm %arg0, %arg1, %arg2
// MIX-NEXT:   %[[M0B:.*]] = mlc.matmul %[[N0B]], %arg3
// MIX-NEXT:   mlc.gelu_grad %{{.*}}, %[[M0B]]
//
// Without a mode (or none) backward reads the forward's values.
// NONE-LABEL: func.func @train_step
// NONE:       %[[N0:.*]] = mlc.layer_norm
// NONE-NEXT:  %[[M0:.*]] = mlc.matmul %[[N0]]
// NONE:       mlc.reduce_sum
// NONE-NOT:   mlc.layer_norm
// NONE:       mlc.gelu_grad %{{.*}}, %[[M0]]
// NONE-NEXT:  mlc.matmul
// NONE-NEXT:  mlc.matmul %[[N0]]
func.func @forward(%x: tensor<4x8xf32> {mlc.input = "x"},
                   %g0: tensor<8xf32> {mlc.param = "h.0.ln.weight"},
                   %b0: tensor<8xf32> {mlc.param = "h.0.ln.bias"},
                   %w0: tensor<8x8xf32> {mlc.param = "h.0.fc.weight"},
                   %w1: tensor<8x8xf32> {mlc.param = "h.1.fc.weight"},
                   %wh: tensor<8x8xf32> {mlc.param = "head.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %n0 = mlc.layer_norm %x, %g0, %b0 epsilon = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %m0 = mlc.matmul %n0, %w0 : tensor<4x8xf32>, tensor<8x8xf32>
  %a0 = mlc.gelu %m0 : tensor<4x8xf32>
  %d0 = mlc.dropout %a0 ratio = 1.0e-01 seed = 3 : tensor<4x8xf32>
  %r0 = mlc.add %x, %d0 : tensor<4x8xf32>, tensor<4x8xf32>
  %m1 = mlc.matmul %r0, %w1 : tensor<4x8xf32>, tensor<8x8xf32>
  %a1 = mlc.tanh %m1 : tensor<4x8xf32>
  %r1 = mlc.add %r0, %a1 : tensor<4x8xf32>, tensor<4x8xf32>
  %h = mlc.matmul %r1, %wh : tensor<4x8xf32>, tensor<8x8xf32>
  %l = mlc.reduce_sum %h axes = [0, 1] : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// A tanh GELU of a product is the GEMM's epilogue (cuBLASLt's on a GPU,
// rounded its own way): selective keeps it, full recomputes it with its
// product.
// FULL-LABEL: func.func @train_step
// FULL:       mlc.reduce_sum
// FULL:       %[[MB:.*]] = mlc.matmul %arg0, %arg1
// FULL-NEXT:  mlc.gelu %[[MB]] approximate = tanh
// BLOCK-LABEL: func.func @train_step
// MIX-LABEL:  func.func @train_step
// MIX:        mlc.reduce_sum
// MIX:        %[[MB:.*]] = mlc.matmul %arg0, %arg1
// MIX-NEXT:   mlc.gelu %[[MB]] approximate = tanh
// SEL-LABEL:  func.func @train_step
// SEL:        %[[A:.*]] = mlc.gelu %{{.*}} approximate = tanh
// SEL:        mlc.reduce_sum
// SEL-NOT:    mlc.gelu {{.*}}approximate
// SEL:        mlc.matmul %[[A]], %{{.*}} transpose_lhs
// NONE-LABEL: func.func @train_step
func.func @forward(%x: tensor<4x8xf32> {mlc.input = "x"},
                   %w0: tensor<8x8xf32> {mlc.param = "h.0.fc.weight"},
                   %w1: tensor<8x8xf32> {mlc.param = "h.0.proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %m = mlc.matmul %x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>
  %a = mlc.gelu %m approximate = tanh : tensor<4x8xf32>
  %p = mlc.matmul %a, %w1 : tensor<4x8xf32>, tensor<8x8xf32>
  %l = mlc.reduce_sum %p axes = [0, 1] : tensor<4x8xf32>
  return %l : tensor<f32>
}


// -----

// What a cross-entropy reads is never recomputed: the labels' reshape (a view
// of an input) and the logits (a cheap product of a saved one) stay the
// forward's, so the cross-entropy's gradient
// reads the very values the cross-entropy does and the lowering fuses the two
// (recomputing them would free nothing). A reshape of a recomputed value is
// recomputed with it: selective computes the LayerNorm's output again and
// reshapes the clone.
// SEL-LABEL:  func.func @train_step
// SEL:        %[[V:.*]] = mlc.reshape %{{.*}} : tensor<2x4x8xf32> -> tensor<8x8xf32>
// SEL:        %[[H:.*]] = mlc.matmul %[[V]], %arg4
// SEL:        %[[S:.*]] = mlc.mul %[[H]], %[[H]]
// SEL:        %[[YL:.*]] = mlc.reshape %arg1 : tensor<2x4xi64> -> tensor<8xi64>
// SEL:        mlc.cross_entropy %[[S]], %[[YL]]
// SEL-NOT:    mlc.reshape %arg1
// SEL-NOT:    mlc.mul %[[H]], %[[H]]
// SEL:        mlc.cross_entropy_grad %{{.*}}, %[[S]], %[[YL]]
// SEL:        %[[NB:.*]] = mlc.layer_norm %arg0, %arg2, %arg3 epsilon = {{.*}} {mlc.recomputed}
// SEL-NEXT:   %[[VB:.*]] = mlc.reshape %[[NB]] {mlc.recomputed} : tensor<2x4x8xf32> -> tensor<8x8xf32>
// SEL-NEXT:   mlc.matmul %{{.*}}, %[[VB]]
// SEL:        return
// FULL-LABEL: func.func @train_step
// FULL:       %[[YL:.*]] = mlc.reshape %arg1
// FULL:       mlc.cross_entropy_grad %{{.*}}, %{{.*}}, %[[YL]]
// BLOCK-LABEL: func.func @train_step
// MIX-LABEL:  func.func @train_step
// MIX:        %[[YL:.*]] = mlc.reshape %arg1
// MIX-NOT:    mlc.reshape %arg1
// MIX:        mlc.cross_entropy_grad %{{.*}}, %{{.*}}, %[[YL]]
// NONE-LABEL: func.func @train_step
func.func @forward(%x: tensor<2x4x8xf32> {mlc.input = "x"},
                   %y: tensor<2x4xi64> {mlc.input = "labels"},
                   %g: tensor<8xf32> {mlc.param = "h.0.ln.weight"},
                   %b: tensor<8xf32> {mlc.param = "h.0.ln.bias"},
                   %w: tensor<16x8xf32> {mlc.param = "head.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %n = mlc.layer_norm %x, %g, %b epsilon = 1.0e-05 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %v = mlc.reshape %n : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %h = mlc.matmul %v, %w transpose_rhs : tensor<8x8xf32>, tensor<16x8xf32>
  %s = mlc.mul %h, %h : tensor<8x16xf32>, tensor<8x16xf32>
  %yl = mlc.reshape %y : tensor<2x4xi64> -> tensor<8xi64>
  %l = mlc.cross_entropy %s, %yl ignore_index = -100 : tensor<8x16xf32>, tensor<8xi64>
  return %l : tensor<f32>
}

// -----

// A reshape is a view of its operand: when the operand is kept (here an
// input), recomputing the reshape frees nothing, and backward reads the
// forward's.
// SEL-LABEL:  func.func @train_step
// SEL:        %[[XR:.*]] = mlc.reshape %arg0
// SEL:        mlc.reduce_sum
// SEL-NOT:    mlc.reshape %arg0
// SEL:        mlc.matmul %[[XR]], %{{.*}} transpose_lhs
// FULL-LABEL: func.func @train_step
// BLOCK-LABEL: func.func @train_step
// MIX-LABEL:  func.func @train_step
// MIX:        %[[XR:.*]] = mlc.reshape %arg0
// MIX:        mlc.reduce_sum
// MIX-NOT:    mlc.reshape %arg0
// MIX:        mlc.matmul %[[XR]], %{{.*}} transpose_lhs
// NONE-LABEL: func.func @train_step
func.func @forward(%x: tensor<2x4x8xf32> {mlc.input = "x"},
                   %w: tensor<8x8xf32> {mlc.param = "h.0.fc.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %xr = mlc.reshape %x : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %m = mlc.matmul %xr, %w : tensor<8x8xf32>, tensor<8x8xf32>
  %l = mlc.reduce_sum %m axes = [0, 1] : tensor<8x8xf32>
  return %l : tensor<f32>
}
