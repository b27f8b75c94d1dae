// RUN: mlc-opt %s -split-input-file --mlc-autodiff | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --verify-each | FileCheck %s --check-prefix=CANON

// A linear layer: the weight's gradient is one GEMM over all rows; the bias
// gradient sums over the broadcast dimensions; the input gets none.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {mlc.output = "loss"}, tensor<4x3xf32> {mlc.grad = "w"}, tensor<3xf32> {mlc.grad = "b"})
// CHECK: %[[Y:.*]] = mlc.matmul %arg2, %arg0
// CHECK: %[[Z:.*]] = mlc.add %[[Y]], %arg1
// CHECK: %[[T:.*]] = mlc.tanh %[[Z]]
// CHECK: %[[L:.*]] = mlc.reduce_sum %[[T]] axes = [0, 1, 2]
// CHECK: %[[ONE:.*]] = mlc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: mlc.sub
// CHECK: %[[DT:.*]] = mlc.mul %{{.*}}, %{{.*}} : tensor<2x5x3xf32>, tensor<2x5x3xf32>
// CHECK: %[[DB:.*]] = mlc.reduce_sum %[[DT]] axes = [0, 1] : tensor<2x5x3xf32>
// CHECK: %[[X2:.*]] = mlc.reshape %arg2 : tensor<2x5x4xf32> -> tensor<10x4xf32>
// CHECK: %[[G2:.*]] = mlc.reshape %[[DT]] : tensor<2x5x3xf32> -> tensor<10x3xf32>
// CHECK: %[[DW:.*]] = mlc.matmul %[[X2]], %[[G2]] transpose_lhs : tensor<10x4xf32>, tensor<10x3xf32>
// CHECK-NOT: mlc.matmul
// CHECK: return %[[L]], %[[DW]], %[[DB]]
// After canonicalization the logits-only ops are gone and the train step
// still verifies.
// CANON-LABEL: func.func @train_step
// CANON-COUNT-2: mlc.matmul
// CANON-NOT: mlc.matmul
// CANON: return
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %b: tensor<3xf32> {mlc.param = "b"},
                   %x: tensor<2x5x4xf32> {mlc.input = "x"})
    -> (tensor<f32> {mlc.output = "loss"}, tensor<2x5x3xf32> {mlc.output = "logits"}) {
  %y = mlc.matmul %x, %w : tensor<2x5x4xf32>, tensor<4x3xf32>
  %z = mlc.add %y, %b : tensor<2x5x3xf32>, tensor<3xf32>
  %t = mlc.tanh %z : tensor<2x5x3xf32>
  %l = mlc.reduce_sum %t axes = [0, 1, 2] : tensor<2x5x3xf32>
  return %l, %z : tensor<f32>, tensor<2x5x3xf32>
}

// -----

// A tied weight used twice sums its two adjoints; an unused parameter gets
// zeros; the forward function stays.
// CHECK-LABEL: func.func @forward
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<6x4xf32> {mlc.grad = "wte"}, tensor<4xf32> {mlc.grad = "unused"}
// CHECK: %[[E:.*]] = mlc.embedding_grad %{{.*}}, %arg2 : tensor<3x4xf32>, tensor<3xi64> -> tensor<6x4xf32>
// CHECK: %[[SUM:.*]] = mlc.add %{{.*}}, %[[E]] : tensor<6x4xf32>, tensor<6x4xf32>
// CHECK: %[[Z:.*]] = mlc.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: return %{{.*}}, %[[SUM]], %[[Z]]
func.func @forward(%wte: tensor<6x4xf32> {mlc.param = "wte"}, %u: tensor<4xf32> {mlc.param = "unused"},
                   %ids: tensor<3xi64> {mlc.input = "input_ids"}, %labels: tensor<3xi64> {mlc.input = "labels"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %x = mlc.embedding %wte, %ids : tensor<6x4xf32>, tensor<3xi64>
  %logits = mlc.matmul %x, %wte transpose_rhs : tensor<3x4xf32>, tensor<6x4xf32>
  %l = mlc.cross_entropy %logits, %labels ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  return %l : tensor<f32>
}

// -----

// torch's padding_idx (nn.Embedding(padding_idx=1)): the lookups of row 1
// are zeroed in the adjoint before the scatter-add, so that row gets no
// gradient from the lookup; the tied projection's gradient still reaches
// every row (added after). Without padding_idx (the test above) no select.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<6x4xf32> {mlc.grad = "wte"}
// CHECK: %[[COL:.*]] = mlc.reshape %arg1 : tensor<2x3xi64> -> tensor<2x3x1xi64>
// CHECK: %[[PAD:.*]] = mlc.constant dense<1> : tensor<i64>
// CHECK: %[[IS:.*]] = mlc.compare eq %[[COL]], %[[PAD]] : tensor<2x3x1xi64>, tensor<i64>
// CHECK: %[[KEPT:.*]] = mlc.select %[[IS]], %{{[0-9]+}}, %{{[0-9]+}} : tensor<2x3x1xi1>, tensor<f32>, tensor<2x3x4xf32>
// CHECK: %[[E:.*]] = mlc.embedding_grad %[[KEPT]], %arg1 : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<6x4xf32>
// CHECK: mlc.add %{{.*}}, %[[E]] : tensor<6x4xf32>, tensor<6x4xf32>
// CANON-LABEL: func.func @train_step
// CANON: mlc.compare eq
// CANON: mlc.select
// CANON: mlc.embedding_grad
func.func @forward(%wte: tensor<6x4xf32> {mlc.param = "wte"}, %ids: tensor<2x3xi64> {mlc.input = "input_ids"},
                   %labels: tensor<6xi64> {mlc.input = "labels"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %x = mlc.embedding %wte, %ids {padding_idx = 1 : i64} : tensor<6x4xf32>, tensor<2x3xi64>
  %rows = mlc.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %logits = mlc.matmul %rows, %wte transpose_rhs : tensor<6x4xf32>, tensor<6x4xf32>
  %l = mlc.cross_entropy %logits, %labels ignore_index = -100 : tensor<6x6xf32>, tensor<6xi64>
  return %l : tensor<f32>
}

// -----

// Only ops between parameters and loss are differentiated: the mask path
// (from an input) gets no backward ops.
// CHECK-LABEL: func.func @train_step
// CHECK: mlc.softmax_grad
// CHECK-NOT: mlc.cast
// CHECK: return
func.func @forward(%w: tensor<2x3xf32> {mlc.param = "w"}, %m: tensor<2x3xi64> {mlc.input = "mask"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %mf = mlc.cast %m : tensor<2x3xi64> -> tensor<2x3xf32>
  %a = mlc.add %w, %mf : tensor<2x3xf32>, tensor<2x3xf32>
  %s = mlc.softmax %a axis = -1 : tensor<2x3xf32>
  %p = mlc.mul %s, %s : tensor<2x3xf32>, tensor<2x3xf32>
  %l = mlc.reduce_mean %p axes = [0, 1] : tensor<2x3xf32>
  return %l : tensor<f32>
}

