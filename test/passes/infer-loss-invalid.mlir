// RUN: mlc-opt %s -split-input-file --mlc-infer-loss -verify-diagnostics

// No attention recognized: nothing tells a causal from a masked model.
// expected-error @+1 {{mlc-infer-loss: cannot tell which loss the model trains on: no attention was recognized; pass --loss causal-lm (GPT-like) or --loss masked-lm (BERT-like)}}
func.func @forward(%w: tensor<10x10xf32> {mlc.param = "wte"}, %ids: tensor<2x4xi64> {mlc.input = "input_ids"}) -> (tensor<2x4x10xf32> {mlc.output = "logits"}) attributes {mlc.infer_loss = {labels = "labels", logits = "logits"}} {
  %e = mlc.embedding %w, %ids : tensor<10x10xf32>, tensor<2x4xi64>
  return %e : tensor<2x4x10xf32>
}

// -----

// Causal and bidirectional attention in one model.
// expected-error @+1 {{1 causal and 1 bidirectional attentions}}
func.func @forward(%w: tensor<10x10xf32> {mlc.param = "wte"}, %ids: tensor<2x4xi64> {mlc.input = "input_ids"}) -> (tensor<2x4x10xf32> {mlc.output = "logits"}) attributes {mlc.infer_loss = {labels = "labels", logits = "logits"}} {
  %e = mlc.embedding %w, %ids : tensor<10x10xf32>, tensor<2x4xi64>
  %q = mlc.reshape %e : tensor<2x4x10xf32> -> tensor<2x1x4x10xf32>
  %a = mlc.attention %q, %q, %q causal : tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>
  %b = mlc.attention %a, %a, %a : tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>
  %l = mlc.reshape %b : tensor<2x1x4x10xf32> -> tensor<2x4x10xf32>
  return %l : tensor<2x4x10xf32>
}

// -----

// Bidirectional, but 10 logits per position against a table of 12 rows: no
// masked-LM head.
// expected-error @+1 {{the attention is bidirectional but the logits' last dimension (10) is no embedding table's row count}}
func.func @forward(%w: tensor<12x10xf32> {mlc.param = "wte"}, %ids: tensor<2x4xi64> {mlc.input = "input_ids"}) -> (tensor<2x4x10xf32> {mlc.output = "logits"}) attributes {mlc.infer_loss = {labels = "labels", logits = "logits"}} {
  %e = mlc.embedding %w, %ids : tensor<12x10xf32>, tensor<2x4xi64>
  %q = mlc.reshape %e : tensor<2x4x10xf32> -> tensor<2x1x4x10xf32>
  %a = mlc.attention %q, %q, %q : tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>, tensor<2x1x4x10xf32>
  %l = mlc.reshape %a : tensor<2x1x4x10xf32> -> tensor<2x4x10xf32>
  return %l : tensor<2x4x10xf32>
}

// -----

// The named logits are not an output.
// expected-error @+1 {{mlc-infer-loss: @forward has no output 'scores' to compute a loss from}}
func.func @forward(%ids: tensor<2x4xi64> {mlc.input = "input_ids"}) -> (tensor<2x4xi64> {mlc.output = "logits"}) attributes {mlc.infer_loss = {labels = "labels", logits = "scores"}} {
  return %ids : tensor<2x4xi64>
}
