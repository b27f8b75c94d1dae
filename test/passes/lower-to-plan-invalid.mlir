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
