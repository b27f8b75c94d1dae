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

// torch's padding_idx (nn.Embedding(padding_idx=1)): the scatter of the
// lookup's gradient carries it (its kernel skips the lookups of row 1), so
// that row gets no gradient from the lookup; the tied projection's gradient
// still reaches every row (added after). No select, compare or copy of the
// adjoint is built for it. Without padding_idx (the test above) the scatter
// has none.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<6x4xf32> {mlc.grad = "wte"}
// CHECK-NOT: mlc.select
// CHECK: %[[E:.*]] = mlc.embedding_grad %{{.*}}, %arg1 {padding_idx = 1 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<6x4xf32>
// CHECK: mlc.add %{{.*}}, %[[E]] : tensor<6x4xf32>, tensor<6x4xf32>
// CANON-LABEL: func.func @train_step
// CANON-NOT: mlc.select
// CANON: mlc.embedding_grad {{.*}} {padding_idx = 1 : i64}
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


// -----

// Megatron's f: mlc.tp_copy is the identity forward, and its gradient is the
// all-reduce (g) of its adjoint, the only collective of the backward pass.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[C:.*]] = mlc.tp_copy %arg0 : tensor<4xf32>
// CHECK: mlc.mul %[[C]], %arg1
// CHECK: %[[DW:.*]] = mlc.tp_reduce sum %{{.*}} : tensor<4xf32>
// CHECK-NOT: mlc.tp_
// CHECK: return %{{.*}}, %[[DW]]
func.func @forward(%w: tensor<4xf32> {mlc.param = "w"}, %x: tensor<4xf32> {mlc.input = "x"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %c = mlc.tp_copy %w : tensor<4xf32>
  %y = mlc.mul %c, %x : tensor<4xf32>, tensor<4xf32>
  %l = mlc.reduce_sum %y axes = [0] : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// Megatron's g: mlc.tp_reduce sum's gradient is the identity of f, mlc.tp_copy
// (its consumers are replicated: every rank holds the whole adjoint).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[R:.*]] = mlc.tp_reduce sum %arg0 : tensor<4xf32>
// CHECK: mlc.mul %[[R]], %arg1
// CHECK: %[[DW:.*]] = mlc.tp_copy %{{.*}} : tensor<4xf32>
// CHECK-NOT: mlc.tp_
// CHECK: return %{{.*}}, %[[DW]]
func.func @forward(%w: tensor<4xf32> {mlc.param = "w"}, %x: tensor<4xf32> {mlc.input = "x"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %r = mlc.tp_reduce sum %w : tensor<4xf32>
  %y = mlc.mul %r, %x : tensor<4xf32>, tensor<4xf32>
  %l = mlc.reduce_sum %y axes = [0] : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// The group's maximum passes its adjoint to the elements that attain it, and
// is no collective in backward.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[M:.*]] = mlc.tp_reduce max %arg0 : tensor<4xf32>
// CHECK: %[[HIT:.*]] = mlc.compare eq %arg0, %[[M]]
// CHECK: %[[DW:.*]] = mlc.select %[[HIT]], %{{.*}}, %{{.*}}
// CHECK-NOT: mlc.tp_
// CHECK: return %{{.*}}, %[[DW]]
func.func @forward(%w: tensor<4xf32> {mlc.param = "w"}, %x: tensor<4xf32> {mlc.input = "x"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %m = mlc.tp_reduce max %w : tensor<4xf32>
  %y = mlc.mul %m, %x : tensor<4xf32>, tensor<4xf32>
  %l = mlc.reduce_sum %y axes = [0] : tensor<4xf32>
  return %l : tensor<f32>
}
