// RUN: mlc-opt %s -split-input-file --mlc-autodiff --verify-diagnostics
// What mlc-autodiff refuses, and how it says so.

// An op without a rule on the path from a parameter to the loss.
func.func @forward(%w: tensor<3xf32> {mlc.param = "w"}, %x: tensor<3xf32> {mlc.input = "x"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  // expected-error @+1 {{'mlc.gelu_grad' op has no gradient rule, but it lies between the parameters and the loss}}
  %g = mlc.gelu_grad %x, %w : tensor<3xf32>
  %l = mlc.reduce_sum %g axes = [0] : tensor<3xf32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{mlc-autodiff: the loss must be a 0-d float tensor, got 'tensor<3xf32>'}}
func.func @forward(%w: tensor<3xf32> {mlc.param = "w"}) -> (tensor<3xf32> {mlc.output = "loss"}) {
  return %w : tensor<3xf32>
}

// -----

// expected-error @+1 {{mlc-autodiff: no function @forward}}
module {
  func.func @main(%w: tensor<3xf32>) -> tensor<3xf32> {
    return %w : tensor<3xf32>
  }
}
