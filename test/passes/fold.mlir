// RUN: mlc-opt %s -split-input-file --mlc-fold | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-fold --mlc-assign-buffers --mlc-lower-to-plan | FileCheck %s --check-prefix=PLAN
// mlc-fold, the first pass of the lowering pipeline: every op of the graph
// functions folded (with the rule MLIR's conversion applies before a
// pattern) until none folds, and the ops the folds left unread erased. The
// lowering's decisions and its conversion then see one graph.

// A reshape of a reshape of a reshape folds, in place, into one reshape of
// the transpose; the inner reshapes, read by nothing else, are erased.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: %[[T:.*]] = mlc.transpose %arg0, [1, 0]
// CHECK-NEXT: %[[R:.*]] = mlc.reshape %[[T]] : tensor<4x3xf32> -> tensor<2x6xf32>
// CHECK-NEXT: %[[E:.*]] = mlc.exp %[[R]]
// CHECK-NEXT: return %[[E]]
func.func @forward(%x: tensor<3x4xf32> {mlc.input = "x"}) -> (tensor<2x6xf32> {mlc.output = "y"}) {
  %t = mlc.transpose %x, [1, 0] : tensor<3x4xf32>
  %r = mlc.reshape %t : tensor<4x3xf32> -> tensor<12xf32>
  %q = mlc.reshape %r : tensor<12xf32> -> tensor<3x4xf32>
  %p = mlc.reshape %q : tensor<3x4xf32> -> tensor<2x6xf32>
  %y = mlc.exp %p : tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}

// -----

// An inner reshape another op reads stays: only the outer one changes.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: %[[R:.*]] = mlc.reshape %arg0 : tensor<3x4xf32> -> tensor<12xf32>
// CHECK-NEXT: %[[Q:.*]] = mlc.reshape %arg0 : tensor<3x4xf32> -> tensor<2x6xf32>
// CHECK-NEXT: %[[E:.*]] = mlc.exp %[[R]]
// CHECK-NEXT: return %[[E]], %[[Q]]
func.func @forward(%x: tensor<3x4xf32> {mlc.input = "x"}) -> (tensor<12xf32> {mlc.output = "y"}, tensor<2x6xf32> {mlc.output = "z"}) {
  %r = mlc.reshape %x : tensor<3x4xf32> -> tensor<12xf32>
  %q = mlc.reshape %r : tensor<12xf32> -> tensor<2x6xf32>
  %y = mlc.exp %r : tensor<12xf32>
  return %y, %q : tensor<12xf32>, tensor<2x6xf32>
}

// -----

// A product by ones folds to its other operand: its reader reads that, the
// ones are erased, and no kernel computes the product.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: %[[E:.*]] = mlc.exp %arg0
// CHECK-NEXT: return %[[E]]
// PLAN-LABEL: plan.input "scaled"
// PLAN-NEXT: plan.kernel @k0 pointwise args(2)
// PLAN-NOT: mlc.mul
// PLAN: mlc.exp
// PLAN-NOT: plan.kernel
// PLAN: plan.func "forward"
// PLAN-NEXT: %[[X:.*]] = plan.bind input "scaled"
// PLAN-NEXT: %[[Y:.*]] = plan.arena -1
// PLAN-NEXT: plan.launch @k0(%[[Y]], %[[X]])
// PLAN-NEXT: plan.output "y" %[[Y]]
func.func @forward(%x: tensor<4x3xf32> {mlc.input = "scaled"}) -> (tensor<4x3xf32> {mlc.output = "y"}) {
  %one = mlc.constant dense<1.0> : tensor<4x3xf32>
  %r = mlc.mul %x, %one : tensor<4x3xf32>, tensor<4x3xf32>
  %y = mlc.exp %r : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// Nothing folds: a product by twos, a reshape of a transpose (a view the
// reshape cannot look through). The graph is left as it is.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: mlc.constant dense<2.000000e+00>
// CHECK-NEXT: mlc.mul
// CHECK-NEXT: mlc.transpose
// CHECK-NEXT: mlc.reshape
// CHECK-NEXT: mlc.exp
// CHECK-NEXT: return
func.func @forward(%x: tensor<4x3xf32> {mlc.input = "x"}) -> (tensor<12xf32> {mlc.output = "y"}) {
  %two = mlc.constant dense<2.0> : tensor<4x3xf32>
  %r = mlc.mul %x, %two : tensor<4x3xf32>, tensor<4x3xf32>
  %t = mlc.transpose %r, [1, 0] : tensor<4x3xf32>
  %q = mlc.reshape %t : tensor<3x4xf32> -> tensor<12xf32>
  %y = mlc.exp %q : tensor<12xf32>
  return %y : tensor<12xf32>
}
