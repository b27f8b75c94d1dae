// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise | FileCheck %s

// GeGLU's forward and backward: d up = g * gelu(gate) reads the forward's
// gelu, d gate = gelu_grad(g * up, gate) reads g, up and gate. d up computes
// gelu(gate) again from gate, which d gate reads anyway: the two are one
// kernel, and the forward's kernel stores only the product (not the gelu).
// CHECK-LABEL: func.func @geglu
// CHECK:      %[[FWD:.*]] = mlc.fusion pointwise ins(%arg0, %arg1 :
// CHECK:        mlc.gelu
// CHECK:        mlc.yield %{{[0-9]+}} :
// CHECK:      %[[M:.*]] = mlc.matmul %[[FWD]], %[[FWD]]
// CHECK:      %[[BWD:.*]]:2 = mlc.fusion pointwise ins(%[[M]], %arg1, %arg0 :
// CHECK:        mlc.gelu_grad
// CHECK:        mlc.gelu %arg
// CHECK:        mlc.yield
// CHECK-NOT:  mlc.fusion
// CHECK:      return %[[BWD]]#{{[01]}}, %[[BWD]]#{{[01]}}
func.func @geglu(%gate: tensor<4x4xf32>, %up: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = mlc.gelu %gate approximate = tanh : tensor<4x4xf32>
  %h = mlc.mul %a, %up : tensor<4x4xf32>, tensor<4x4xf32>
  %g = mlc.matmul %h, %h : tensor<4x4xf32>, tensor<4x4xf32>
  %gu = mlc.mul %g, %up : tensor<4x4xf32>, tensor<4x4xf32>
  %dgate = mlc.gelu_grad %gu, %gate approximate = tanh : tensor<4x4xf32>
  %dup = mlc.mul %g, %a : tensor<4x4xf32>, tensor<4x4xf32>
  return %dgate, %dup : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// The value d up reads beyond its sibling's inputs is computed from two of
// them (not a unary op): it is read from memory, and the two stay apart.
// CHECK-LABEL: func.func @binary_not_recomputed
// CHECK:      %[[FWD:.*]]:2 = mlc.fusion pointwise ins(%arg0, %arg1 :
// CHECK:      mlc.fusion pointwise ins(%{{.*}}, %arg1, %arg0 :
// CHECK:      mlc.yield %{{[0-9]+}} :
// CHECK:      mlc.mul %{{.*}}, %[[FWD]]#0 :
func.func @binary_not_recomputed(%gate: tensor<4x4xf32>, %up: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = mlc.sub %gate, %up : tensor<4x4xf32>, tensor<4x4xf32>
  %h = mlc.mul %a, %up : tensor<4x4xf32>, tensor<4x4xf32>
  %g = mlc.matmul %h, %h : tensor<4x4xf32>, tensor<4x4xf32>
  %gu = mlc.mul %g, %up : tensor<4x4xf32>, tensor<4x4xf32>
  %dgate = mlc.gelu_grad %gu, %gate approximate = tanh : tensor<4x4xf32>
  %dup = mlc.mul %g, %a : tensor<4x4xf32>, tensor<4x4xf32>
  return %dgate, %dup : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A unary op of a value the sibling does not read (%other): recomputing it
// would read something new, so the two stay apart.
// CHECK-LABEL: func.func @operand_not_shared
// CHECK:      %[[FWD:.*]]:2 = mlc.fusion pointwise ins(%arg2, %arg1 :
// CHECK:      mlc.fusion pointwise ins(%{{.*}}, %arg1, %arg0 :
// CHECK:      mlc.yield %{{[0-9]+}} :
// CHECK:      mlc.mul %{{.*}}, %[[FWD]]#0 :
func.func @operand_not_shared(%gate: tensor<4x4xf32>, %up: tensor<4x4xf32>, %other: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = mlc.gelu %other approximate = tanh : tensor<4x4xf32>
  %h = mlc.mul %a, %up : tensor<4x4xf32>, tensor<4x4xf32>
  %g = mlc.matmul %h, %h : tensor<4x4xf32>, tensor<4x4xf32>
  %gu = mlc.mul %g, %up : tensor<4x4xf32>, tensor<4x4xf32>
  %dgate = mlc.gelu_grad %gu, %gate approximate = tanh : tensor<4x4xf32>
  %dup = mlc.mul %g, %a : tensor<4x4xf32>, tensor<4x4xf32>
  return %dgate, %dup : tensor<4x4xf32>, tensor<4x4xf32>
}
