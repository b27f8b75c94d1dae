// RUN: mlc-opt %s -split-input-file --mlc-optimizer -verify-diagnostics

// expected-error @+1 {{mlc-optimizer: no function @train_step (run mlc-autodiff first)}}
module {
  func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{mlc-optimizer: parameters mix element types}}
  func.func @train_step(%a: tensor<3xf32> {mlc.param = "a"}, %b: tensor<3xf64> {mlc.param = "b"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3xf32> {mlc.grad = "a"}, tensor<3xf64> {mlc.grad = "b"}) {
    %l = mlc.constant dense<1.0> : tensor<f32>
    %ga = mlc.constant dense<1.0> : tensor<3xf32>
    %gb = mlc.constant dense<1.0> : tensor<3xf64>
    return %l, %ga, %gb : tensor<f32>, tensor<3xf32>, tensor<3xf64>
  }
}
