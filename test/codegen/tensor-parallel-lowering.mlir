// RUN: mlc-opt %s -split-input-file --mlc-assign-buffers --mlc-lower-to-plan | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-assign-buffers --mlc-lower-to-plan | mlc-opt -split-input-file | FileCheck %s

// mlc.tp_copy (Megatron's f) is the identity forward: no step, its readers
// read its input's buffer. mlc.tp_reduce (g) is a blocking sum over the
// tensor-parallel group, in place over the partial products that only it
// reads. A split parameter keeps its mlc.tp_split for the package writer.
// CHECK-LABEL: plan.param "w" : f32 [8, 4] decay init "normal:0.02" {mlc.tp_split = {blocks = array<i64: 8>, dim = 0 : i64}}
// CHECK: plan.func "forward"
// CHECK-NEXT: %[[X:.*]] = plan.bind input "x" : memref<16xf32>
// CHECK-NEXT: %[[W:.*]] = plan.bind param "w" : memref<32xf32>
// CHECK-NEXT: %[[C:.*]] = plan.view %[[X]][0] : memref<16xf32> to memref<16xf32>
// CHECK-NEXT: %[[P:.*]] = plan.arena -1 : memref<8xf32>
// CHECK-NEXT: plan.gemm %[[P]], %[[C]], %[[W]] m 2 n 4 k 8
// CHECK-NEXT: plan.tp_all_reduce %[[P]] : memref<8xf32>
// CHECK-NEXT: plan.output "y" %[[P]] [2, 4]
module attributes {mlc.tensor_parallel = 2 : i64} {
func.func @forward(%x: tensor<2x8xf32> {mlc.input = "x"}, %w: tensor<8x4xf32> {mlc.param = "w", mlc.tp_split = {dim = 0 : i64, blocks = array<i64: 8>}}) -> (tensor<2x4xf32> {mlc.output = "y"}) {
  %c = mlc.tp_copy %x : tensor<2x8xf32>
  %p = mlc.matmul %c, %w : tensor<2x8xf32>, tensor<8x4xf32>
  %y = mlc.tp_reduce sum %p : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
}

// -----

// Partial maxima that another op still reads are copied first: the reduce
// must not overwrite them. max reduces to the largest over the group.
// CHECK-LABEL: plan.param "w" : f32 [8, 4] decay init "normal:0.02"{{$}}
// CHECK: plan.func "forward"
// CHECK:      plan.gemm %[[P:[^,]*]], {{.*}} m 2 n 4 k 8
// CHECK-NEXT: plan.launch @{{k[0-9]+}}(%[[M:[^,]*]], %[[P]])
// CHECK-NEXT: plan.tp_all_reduce %[[M]] max : memref<8xf32>
// CHECK-NOT:  plan.tp_all_reduce
module attributes {mlc.tensor_parallel = 2 : i64} {
func.func @forward(%x: tensor<2x8xf32> {mlc.input = "x"}, %w: tensor<8x4xf32> {mlc.param = "w"}) -> (tensor<2x4xf32> {mlc.output = "m"}, tensor<2x4xf32> {mlc.output = "p"}) {
  %p = mlc.matmul %x, %w : tensor<2x8xf32>, tensor<8x4xf32>
  %m = mlc.tp_reduce max %p : tensor<2x4xf32>
  return %m, %p : tensor<2x4xf32>, tensor<2x4xf32>
}
}
