// RUN: mlc-opt %s -split-input-file --mlc-lower-to-plan -verify-diagnostics
// What mlc-lower-to-plan refuses, with the reason, on the op that fails (or
// the argument, or the module when it lacks @forward).

// expected-error @+1 {{mlc-lower-to-plan: the module has no @forward function}}
module {
  func.func @other() {
    return
  }
}

// -----

module {
  // expected-error @+1 {{mlc-lower-to-plan: argument #0 of @forward is neither an mlc.param nor an mlc.input}}
  func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {mlc.output = "y"}) {
    %y = mlc.exp %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<?x4xf32> {mlc.input = "x"}) -> (tensor<?x4xf32> {mlc.output = "y"}) {
    // expected-error @+1 {{mlc-lower-to-plan: 'mlc.exp' has a dynamic dimension 0 but the module declares no mlc.token_capacity}}
    %y = mlc.exp %x : tensor<?x4xf32>
    return %y : tensor<?x4xf32>
  }
}

// -----

// A rotary op reads its input at the element and at its pair partner, so a
// fusion must bring the input in from memory, not compute it. The error is
// on the rotary op, inside the fusion being lowered.
module {
  func.func @forward(%x: tensor<2x4x8xf32> {mlc.input = "x"}, %t: tensor<4x8xf32> {mlc.input = "t"}) -> (tensor<2x4x8xf32> {mlc.output = "y"}) {
    %y = mlc.fusion pointwise ins(%x, %t : tensor<2x4x8xf32>, tensor<4x8xf32>) {
    ^bb0(%a: tensor<2x4x8xf32>, %c: tensor<4x8xf32>):
      %e = mlc.exp %a : tensor<2x4x8xf32>
      // expected-error @+1 {{mlc-lower-to-plan: while lowering 'mlc.fusion' in @forward: mlc.rotary's input (and a transposed op's sin) must be inputs of the fusion}}
      %r = mlc.rotary %e, %c, %c : tensor<2x4x8xf32>, tensor<4x8xf32>
      mlc.yield %r : tensor<2x4x8xf32>
    } : tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}
