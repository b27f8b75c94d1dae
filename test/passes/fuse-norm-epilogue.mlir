// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise | mlc-opt -split-input-file | FileCheck %s

// A post-norm's residual add h + norm(y) (OLMo2's after the attention and
// the MLP): the add joins the norm's row kernel, which stores the sum; the
// normalized row is never stored.
// CHECK-LABEL: func.func @post_norm
// CHECK: %[[F:.*]] = mlc.fusion rows ins(%arg1, %arg2, %arg0 : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[H:.*]]: tensor<4x8xf32>):
// CHECK-NEXT:   %[[N:.*]] = mlc.rms_norm %[[Y]], %[[W]]
// CHECK-NEXT:   %[[S:.*]] = mlc.add %[[H]], %[[N]]
// CHECK-NEXT:   mlc.yield %[[S]]
// CHECK: return %[[F]]
func.func @post_norm(%h: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %n = mlc.rms_norm %y, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  %s = mlc.add %h, %n : tensor<4x8xf32>, tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// A LayerNorm with a prologue (a bias) and the add after it: one row
// kernel, prologue and epilogue; h, a product computed after the norm, is
// read where the fusion moves to (the add's place).
// CHECK-LABEL: func.func @prologue_and_epilogue
// CHECK: %[[H:.*]] = mlc.matmul %arg0, %arg1
// CHECK-NEXT: %[[F:.*]] = mlc.fusion rows ins(%arg1, %arg2, %arg3, %arg4, %[[H]] :
// CHECK: mlc.add
// CHECK: %[[N:.*]] = mlc.layer_norm
// CHECK-NEXT: %[[S:.*]] = mlc.add %[[N]],
// CHECK-NEXT: mlc.yield %[[S]]
// CHECK: return %[[F]]
func.func @prologue_and_epilogue(%x: tensor<4x4xf32>, %y: tensor<4x8xf32>, %b: tensor<8xf32>,
                                 %w: tensor<8xf32>, %c: tensor<8xf32>) -> tensor<4x8xf32> {
  %u = mlc.add %y, %b : tensor<4x8xf32>, tensor<8xf32>
  %n = mlc.layer_norm %u, %w, %c epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %h = mlc.matmul %x, %y : tensor<4x4xf32>, tensor<4x8xf32>
  %s = mlc.add %n, %h : tensor<4x8xf32>, tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// The norm's result read elsewhere too (BERT's post-LN stream: the next
// layer's products read it): the norm stores it, the add is its own.
// CHECK-LABEL: func.func @norm_read_twice
// CHECK: %[[N:.*]] = mlc.rms_norm %arg1
// CHECK-NEXT: %[[S:.*]] = mlc.add %arg0, %[[N]]
// CHECK-NOT: mlc.fusion
func.func @norm_read_twice(%h: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %n = mlc.rms_norm %y, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  %s = mlc.add %h, %n : tensor<4x8xf32>, tensor<4x8xf32>
  return %s, %n : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// An add that broadcasts (a bias after the norm) is not the residual's: the
// row kernel stores the normalized row as it is.
// CHECK-LABEL: func.func @broadcast_add
// CHECK: %[[N:.*]] = mlc.rms_norm %arg0
// CHECK-NEXT: mlc.add %[[N]], %arg2
// CHECK-NOT: mlc.fusion
func.func @broadcast_add(%y: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %n = mlc.rms_norm %y, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  %s = mlc.add %n, %b : tensor<4x8xf32>, tensor<8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// A rows fusion whose prologue value is read before the add, and h computed
// after the norm: the fusion can neither move to the add nor read h where it
// is; the add stays a kernel of its own.
// CHECK-LABEL: func.func @cannot_move
// CHECK: %[[F:.*]]:2 = mlc.fusion rows
// CHECK: mlc.exp %[[F]]#0
// CHECK: mlc.add %[[F]]#1,
// CHECK-NOT: mlc.fusion
func.func @cannot_move(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x4xf32>) {
  %u = mlc.add %x, %y : tensor<4x8xf32>, tensor<4x8xf32>
  %n = mlc.rms_norm %u, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  %h = mlc.exp %u : tensor<4x8xf32>
  %r = mlc.matmul %h, %h transpose_rhs : tensor<4x8xf32>, tensor<4x8xf32>
  %s = mlc.add %n, %h : tensor<4x8xf32>, tensor<4x8xf32>
  return %s, %r : tensor<4x8xf32>, tensor<4x4xf32>
}
