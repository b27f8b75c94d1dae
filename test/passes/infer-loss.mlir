// RUN: mlc-opt %s -split-input-file --mlc-infer-loss | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-infer-loss | mlc-opt -split-input-file | FileCheck %s

// Causal attention: the next-token loss, logits[:, :-1] against
// labels[:, 1:]; the labels are a new last input, the loss the first result.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x4xi64> {mlc.input = "input_ids"}, %[[LABELS:[a-z0-9]+]]: tensor<2x4xi64> {mlc.input = "labels"})
// CHECK-SAME: -> (tensor<f32> {mlc.output = "loss"}, tensor<2x4x10xf32> {mlc.output = "logits"})
// CHECK-SAME: attributes {mlc.inferred_loss = "causal-lm"}
// CHECK: %[[L:[0-9]+]] = mlc.reshape %{{.*}} : tensor<2x1x4x10xf32> -> tensor<2x4x10xf32>
// CHECK: %[[X:.*]] = mlc.slice %[[L]] starts = [0, 0, 0] ends = [2, 3, 10] steps = [1, 1, 1]
// CHECK: %[[Y:.*]] = mlc.slice %[[LABELS]] starts = [0, 1] ends = [2, 4] steps = [1, 1]
// CHECK-DAG: %[[YF:.*]] = mlc.reshape %[[Y]] : tensor<2x3xi64> -> tensor<6xi64>
// CHECK-DAG: %[[XF:.*]] = mlc.reshape %[[X]] : tensor<2x3x10xf32> -> tensor<6x10xf32>
// CHECK: %[[CE:.*]] = mlc.cross_entropy %[[XF]], %[[YF]] ignore_index = -100
// CHECK: return %[[CE]], %[[L]]
func.func @forward(%w: tensor<10x10xf32> {mlc.param = "wte"}, %ids: tensor<2x4xi64> {mlc.input = "input_ids"}) -> (tensor<2x4x10xf32> {mlc.output = "logits"}) attributes {mlc.infer_loss = {labels = "labels", logits = "logits"}} {
  %e = mlc.embedding %w, %ids : tensor<10x10xf32>, tensor<2x4xi64>
  %q = mlc.reshape %e : tensor<2x4x10xf32> -> tensor<2x1x4x10xf32>
  %a = mlc.attention %q, %q, %q causal : tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>
  %l = mlc.reshape %a : tensor<2x1x4x10xf32> -> tensor<2x4x10xf32>
  return %l : tensor<2x4x10xf32>
}

// -----

// Bidirectional attention and vocabulary-sized logits (the embedding table
// has 10 rows): the masked-LM loss over every position.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: attributes {mlc.inferred_loss = "masked-lm"}
// CHECK-NOT: mlc.slice
// CHECK-DAG: mlc.reshape %{{.*}} : tensor<2x4x10xf32> -> tensor<8x10xf32>
// CHECK-DAG: mlc.reshape %{{.*}} : tensor<2x4xi64> -> tensor<8xi64>
// CHECK: mlc.cross_entropy
func.func @forward(%w: tensor<10x10xf32> {mlc.param = "wte"}, %ids: tensor<2x4xi64> {mlc.input = "input_ids"}, %m: tensor<2x1x1x4xf32> {mlc.input = "mask"}) -> (tensor<2x4x10xf32> {mlc.output = "logits"}) attributes {mlc.infer_loss = {labels = "labels", logits = "logits"}} {
  %e = mlc.embedding %w, %ids : tensor<10x10xf32>, tensor<2x4xi64>
  %q = mlc.reshape %e : tensor<2x4x10xf32> -> tensor<2x1x4x10xf32>
  %a = mlc.attention %q, %q, %q mask %m : tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>, tensor<2x1x1x4xf32>
  %l = mlc.reshape %a : tensor<2x1x4x10xf32> -> tensor<2x4x10xf32>
  return %l : tensor<2x4x10xf32>
}

// -----

// Not marked (the model returns its loss, or --loss chose one): untouched.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<2x4x10xf32> {mlc.output = "logits"})
// CHECK-NOT: mlc.cross_entropy
// CHECK-NOT: mlc.inferred_loss
func.func @forward(%w: tensor<10x10xf32> {mlc.param = "wte"}, %ids: tensor<2x4xi64> {mlc.input = "input_ids"}) -> (tensor<2x4x10xf32> {mlc.output = "logits"}) {
  %e = mlc.embedding %w, %ids : tensor<10x10xf32>, tensor<2x4xi64>
  %q = mlc.reshape %e : tensor<2x4x10xf32> -> tensor<2x1x4x10xf32>
  %a = mlc.attention %q, %q, %q causal : tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>
  %l = mlc.reshape %a : tensor<2x1x4x10xf32> -> tensor<2x4x10xf32>
  return %l : tensor<2x4x10xf32>
}
