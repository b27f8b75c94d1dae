// RUN: mlc-opt %s -split-input-file --mlc-fuse-optimizer -verify-diagnostics

// Two parameters whose updates differ cannot share one kernel.
// expected-error @+1 {{mlc-fuse-optimizer: the update of parameter #1 differs from the others}}
func.func @optimizer(%p0: tensor<3xf32>, %p1: tensor<3xf32>, %g0: tensor<3xf32>, %g1: tensor<3xf32>, %m0: tensor<3xf32>, %m1: tensor<3xf32>, %v0: tensor<3xf32>, %v1: tensor<3xf32>, %h: tensor<9xf64>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) attributes {mlc.optimizer = "adamw"} {
  %0 = mlc.sub %p0, %g0 : tensor<3xf32>, tensor<3xf32>
  %1 = mlc.add %m0, %g0 : tensor<3xf32>, tensor<3xf32>
  %2 = mlc.add %v0, %g0 : tensor<3xf32>, tensor<3xf32>
  %3 = mlc.add %p1, %g1 : tensor<3xf32>, tensor<3xf32>
  %4 = mlc.add %m1, %g1 : tensor<3xf32>, tensor<3xf32>
  %5 = mlc.add %v1, %g1 : tensor<3xf32>, tensor<3xf32>
  return %0, %3, %1, %4, %2, %5 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// expected-error @+1 {{mlc-fuse-optimizer: @optimizer must take 4 tensors per parameter and the scalars}}
func.func @optimizer(%p0: tensor<3xf32>, %g0: tensor<3xf32>) -> tensor<3xf32> attributes {mlc.optimizer = "adamw"} {
  return %p0 : tensor<3xf32>
}
