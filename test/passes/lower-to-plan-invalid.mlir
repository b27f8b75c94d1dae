// RUN: mlc-opt %s -split-input-file --mlc-lower-to-plan -verify-diagnostics
// What mlc-lower-to-plan refuses, with the reason.

// expected-error @+1 {{mlc-lower-to-plan: the module has no @forward function}}
module {
  func.func @other() {
    return
  }
}

// -----

// expected-error @+1 {{argument #0 of @forward is neither an mlc.param nor an mlc.input}}
module {
  func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {mlc.output = "y"}) {
    %y = mlc.exp %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{'mlc.exp' has a dynamic dimension 0 but the module declares no mlc.token_capacity}}
module {
  func.func @forward(%x: tensor<?x4xf32> {mlc.input = "x"}) -> (tensor<?x4xf32> {mlc.output = "y"}) {
    %y = mlc.exp %x : tensor<?x4xf32>
    return %y : tensor<?x4xf32>
  }
}

// -----

// A rotary op reads its input at the element and at its pair partner, so a
// fusion must bring the input in from memory, not compute it.
// expected-error @+1 {{: its input (and a transposed op's sin) must be inputs of the fusion}}
module {
  func.func @forward(%x: tensor<2x4x8xf32> {mlc.input = "x"}, %t: tensor<4x8xf32> {mlc.input = "t"}) -> (tensor<2x4x8xf32> {mlc.output = "y"}) {
    %y = mlc.fusion pointwise ins(%x, %t : tensor<2x4x8xf32>, tensor<4x8xf32>) {
    ^bb0(%a: tensor<2x4x8xf32>, %c: tensor<4x8xf32>):
      %e = mlc.exp %a : tensor<2x4x8xf32>
      %r = mlc.rotary %e, %c, %c : tensor<2x4x8xf32>, tensor<4x8xf32>
      mlc.yield %r : tensor<2x4x8xf32>
    } : tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}
