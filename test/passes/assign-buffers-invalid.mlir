// RUN: mlc-opt %s -split-input-file --mlc-assign-buffers -verify-diagnostics
// What mlc-assign-buffers refuses, on the op: marks of mlc-in-place that it
// cannot turn into a buffer.

func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}) -> (tensor<4xf32> {mlc.output = "y"}) {
  // expected-error @+1 {{mlc-assign-buffers: marked mlc.in_reader_layout for result 1, but it has 1 result(s)}}
  %y = mlc.exp %x {mlc.in_reader_layout = array<i64: 1>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}) -> (tensor<4xf32> {mlc.output = "y"}) {
  // expected-error @+1 {{mlc-assign-buffers: marked mlc.in_place, but only a cross_entropy_grad overwrites an operand (its logits)}}
  %y = mlc.exp %x {mlc.in_place} : tensor<4xf32>
  return %y : tensor<4xf32>
}
