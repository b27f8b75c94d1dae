// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s --check-prefix=FUSE
// RUN: mlc-opt %s -split-input-file --mlc-gemm-epilogues --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s --check-prefix=EPI
// RUN: mlc-opt %s -split-input-file --mlc-fuse-cross-entropy --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s --check-prefix=CE
// An op that absorbs others is located at each of their locations, once
// (MLIR's fused location), so that a verifier or lowering error on it, and
// the plan steps lowered from it, name where its parts came from; ops of
// one location leave it plain.

// A pointwise chain over two layers' parts is one fusion located at both.
// FUSE-LABEL: func.func @two_parts
// FUSE: mlc.fusion pointwise
// FUSE: } : tensor<8xf32> loc(fused["block.0.attn", "block.0.mlp"])
func.func @two_parts(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %a = mlc.exp %x : tensor<8xf32> loc("block.0.attn")
  %b = mlc.add %a, %y : tensor<8xf32>, tensor<8xf32> loc("block.0.attn")
  %c = mlc.tanh %b : tensor<8xf32> loc("block.0.mlp")
  return %c : tensor<8xf32>
}

// -----

// One over a single part keeps that part's location.
// FUSE-LABEL: func.func @one_part
// FUSE: mlc.fusion pointwise
// FUSE: } : tensor<8xf32> loc("block.1.mlp")
func.func @one_part(%y: tensor<8xf32>) -> tensor<8xf32> {
  %d = mlc.exp %y : tensor<8xf32> loc("block.1.mlp")
  %e = mlc.tanh %d : tensor<8xf32> loc("block.1.mlp")
  return %e : tensor<8xf32>
}

// -----

// A GEMM that computes its GELU as the epilogue is located at both.
// EPI-LABEL: func.func @mlp
// EPI: mlc.matmul {{.*}} loc(fused["block.0.fc", "block.0.act"])
// EPI: mlc.gelu {{.*}} {mlc.gemm_epilogue} {{.*}} loc("block.0.act")
func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %h = mlc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> loc("block.0.fc")
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xf32> loc("block.0.act")
  return %g : tensor<4x16xf32>
}

// -----

// A loss gradient computed with its loss: located at both.
// CE-LABEL: func.func @loss
// CE: mlc.cross_entropy_grad {{.*}} {mlc.with_loss} {{.*}} loc(fused["head.grad", "head.loss"])
func.func @loss(%logits: tensor<4x10xf32>, %labels: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>) {
  %l = mlc.cross_entropy %logits, %labels ignore_index = -100 : tensor<4x10xf32>, tensor<4xi64> loc("head.loss")
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %logits, %labels ignore_index = -100 : tensor<f32>, tensor<4x10xf32>, tensor<4xi64> loc("head.grad")
  return %l, %g : tensor<f32>, tensor<4x10xf32>
}
