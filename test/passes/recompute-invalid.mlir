// RUN: mlc-opt %s -split-input-file -verify-diagnostics --mlc-recompute=mode=full
// RUN: not mlc-opt %s --mlc-recompute=mode=everything 2>&1 | FileCheck %s --check-prefix=MODE
// MODE: mlc-recompute: mode must be full, selective, full+selective or none, got 'everything'

// full needs layers: the parameters' names number none.
// expected-error @+1 {{mlc-recompute: full recomputation keeps each layer's input, but no parameter of @train_step names a layer (a numbered component, like h.3. or layers.3.)}}
func.func @train_step(%x: tensor<4x8xf32> {mlc.input = "x"},
                      %w: tensor<8x8xf32> {mlc.param = "fc.weight"})
    -> (tensor<f32> {mlc.output = "loss"}, tensor<8x8xf32> {mlc.grad = "fc.weight"}) {
  %one = mlc.constant dense<1.000000e+00> : tensor<f32>
  %m = mlc.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %t = mlc.tanh %m : tensor<4x8xf32>
  %l = mlc.reduce_sum %t axes = [0, 1] : tensor<4x8xf32>
  %tt = mlc.mul %t, %t : tensor<4x8xf32>, tensor<4x8xf32>
  %g = mlc.sub %one, %tt : tensor<f32>, tensor<4x8xf32>
  %dw = mlc.matmul %x, %g transpose_lhs : tensor<4x8xf32>, tensor<4x8xf32>
  return %l, %dw : tensor<f32>, tensor<8x8xf32>
}
