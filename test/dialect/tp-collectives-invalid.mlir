// RUN: mlc-opt %s -split-input-file -verify-diagnostics
// One case per verifier rule of mlc.tp_all_gather and mlc.tp_reduce_scatter.

func.func @gather_not_multiple(%x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'mlc.tp_all_gather' op the whole axis (8) is not a multiple of a slice (3)}}
  %g = mlc.tp_all_gather %x axis = 1 : tensor<2x3x8xf32> -> tensor<2x8x8xf32>
  return
}

// -----

func.func @scatter_other_dim(%x: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'mlc.tp_reduce_scatter' op dim 2 differs (4 and 8); only the axis 1 is sliced}}
  %s = mlc.tp_reduce_scatter %x axis = 1 : tensor<2x8x8xf32> -> tensor<2x4x4xf32>
  return
}

// -----

func.func @axis_range(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'mlc.tp_all_gather' op axis 2 is outside the rank 2}}
  %g = mlc.tp_all_gather %x axis = 2 : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

// The module says the group has 2 ranks: a gather of 4 slices is wrong.
module attributes {mlc.tensor_parallel = 2 : i64} {
func.func @group_size(%x: tensor<2x2x8xf32>) {
  // expected-error @+1 {{'mlc.tp_all_gather' op joins 4 slices, but the tensor-parallel group has 2 ranks}}
  %g = mlc.tp_all_gather %x axis = 1 : tensor<2x2x8xf32> -> tensor<2x8x8xf32>
  return
}
}

// -----

func.func @dynamic_one_side(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'mlc.tp_reduce_scatter' op the axis is dynamic on one side only}}
  %s = mlc.tp_reduce_scatter %x axis = 0 : tensor<?x8xf32> -> tensor<4x8xf32>
  return
}
