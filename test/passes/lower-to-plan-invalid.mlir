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

// -----

// A gradient marked mlc.with_loss that its loss's kernel cannot compute:
// other labels than the loss's.
module {
  func.func @forward(%y: tensor<3x6xf32> {mlc.input = "y"}, %t: tensor<3xi64> {mlc.input = "t"}, %u: tensor<3xi64> {mlc.input = "u"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3x6xf32> {mlc.output = "g"}) {
    %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
    %one = mlc.constant dense<1.0> : tensor<f32>
    // expected-error @+1 {{mlc-lower-to-plan: while lowering 'mlc.cross_entropy' in @forward: marked mlc.with_loss, but it does not read its loss's labels with its ignore index and a constant scale}}
    %g = mlc.cross_entropy_grad %one, %y, %u ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
    return %l, %g : tensor<f32>, tensor<3x6xf32>
  }
}

// -----

// A marked gradient with no loss before it.
module {
  func.func @forward(%y: tensor<3x6xf32> {mlc.input = "y"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<3x6xf32> {mlc.output = "g"}) {
    %one = mlc.constant dense<1.0> : tensor<f32>
    // expected-error @+1 {{mlc-lower-to-plan: while lowering 'mlc.cross_entropy_grad' in @forward: marked mlc.with_loss, but no mlc.cross_entropy before it reads its logits}}
    %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
    return %g : tensor<3x6xf32>
  }
}
