// RUN: mlc-opt %s -split-input-file --mlc-assign-buffers --mlc-lower-to-plan -verify-diagnostics
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

// -----

// A gradient marked mlc.in_place whose logits something else reads (here
// an output): the lowering refuses to overwrite them.
module {
  func.func @forward(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3x6xf32> {mlc.output = "g"}, tensor<3x6xf32> {mlc.output = "logits"}) {
    %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
    %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
    %one = mlc.constant dense<1.0> : tensor<f32>
    // expected-error @+1 {{mlc-lower-to-plan: while lowering 'mlc.cross_entropy' in @forward: marked mlc.in_place, but its logits are read by more than its loss, or are not a fresh arena slice (an input, a parameter or a view)}}
    %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.in_place, mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
    return %l, %g, %y : tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>
  }
}

// -----

// Logits that are an input are not the step's to overwrite.
module {
  func.func @forward(%y: tensor<3x6xf32> {mlc.input = "y"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3x6xf32> {mlc.output = "g"}) {
    %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
    %one = mlc.constant dense<1.0> : tensor<f32>
    // expected-error @+1 {{marked mlc.in_place, but its logits are read by more than its loss}}
    %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.in_place, mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
    return %l, %g : tensor<f32>, tensor<3x6xf32>
  }
}

// -----

// mlc.in_place on a gradient with a kernel of its own (not mlc.with_loss).
module {
  func.func @forward(%y: tensor<3x6xf32> {mlc.input = "y"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<3x6xf32> {mlc.output = "g"}) {
    %one = mlc.constant dense<1.0> : tensor<f32>
    // expected-error @+1 {{mlc-lower-to-plan: while lowering 'mlc.cross_entropy_grad' in @forward: marked mlc.in_place, but not mlc.with_loss: only the kernel of a loss and its gradient writes the gradient over the logits}}
    %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.in_place} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
    return %g : tensor<3x6xf32>
  }
}

// -----

// mlc.gemm_epilogue on an erf GELU: no GEMM epilogue computes it.
module {
  func.func @forward(%w: tensor<4x8xf32> {mlc.param = "w"}, %x: tensor<6x4xf32> {mlc.input = "x"}) -> (tensor<6x8xf32> {mlc.output = "g"}) {
    %y = mlc.matmul %x, %w : tensor<6x4xf32>, tensor<4x8xf32>
    // expected-error @+1 {{mlc-lower-to-plan: while lowering 'mlc.matmul' in @forward: marked mlc.gemm_epilogue, but it is not a tanh GELU of an f32, f64 or bf16 product}}
    %g = mlc.gelu %y {mlc.gemm_epilogue} : tensor<6x8xf32>
    return %g : tensor<6x8xf32>
  }
}

// -----

// mlc.gemm_epilogue on the GELU of a product with an accumulator.
module {
  func.func @forward(%w: tensor<4x8xf32> {mlc.param = "w"}, %x: tensor<6x4xf32> {mlc.input = "x"}, %a: tensor<6x8xf32> {mlc.input = "a"}) -> (tensor<6x8xf32> {mlc.output = "g"}) {
    %y = mlc.matmul %x, %w acc(%a : tensor<6x8xf32>) : tensor<6x4xf32>, tensor<4x8xf32>
    // expected-error @+1 {{marked mlc.gemm_epilogue, but its product adds an accumulator, which a GELU epilogue would not see}}
    %g = mlc.gelu %y approximate = tanh {mlc.gemm_epilogue} : tensor<6x8xf32>
    return %g : tensor<6x8xf32>
  }
}

// -----

// Two marked GELUs of one product: a GEMM has one epilogue.
module {
  func.func @forward(%w: tensor<4x8xf32> {mlc.param = "w"}, %x: tensor<6x4xf32> {mlc.input = "x"}) -> (tensor<6x8xf32> {mlc.output = "g"}, tensor<6x8xf32> {mlc.output = "h"}) {
    %y = mlc.matmul %x, %w : tensor<6x4xf32>, tensor<4x8xf32>
    // expected-error @+1 {{marked mlc.gemm_epilogue, but another reader of its product is marked too: a GEMM has one epilogue}}
    %g = mlc.gelu %y approximate = tanh {mlc.gemm_epilogue} : tensor<6x8xf32>
    %h = mlc.gelu %y approximate = tanh {mlc.gemm_epilogue} : tensor<6x8xf32>
    return %g, %h : tensor<6x8xf32>, tensor<6x8xf32>
  }
}

// -----

// mlc.gemm_epilogue on the GELU of something other than a product.
module {
  func.func @forward(%x: tensor<6x8xf32> {mlc.input = "x"}) -> (tensor<6x8xf32> {mlc.output = "g"}) {
    %y = mlc.exp %x : tensor<6x8xf32>
    // expected-error @+1 {{mlc-lower-to-plan: while lowering 'mlc.gelu' in @forward: marked mlc.gemm_epilogue, but its input is not a matmul's product}}
    %g = mlc.gelu %y approximate = tanh {mlc.gemm_epilogue} : tensor<6x8xf32>
    return %g : tensor<6x8xf32>
  }
}

// -----

// mlc.in_reader_layout on an attention result whose reader moves the
// innermost dimension: the kernel writes rows of the head dimension
// contiguous, so that layout cannot hold them.
module {
  func.func @forward(%q: tensor<2x4x16x8xf32> {mlc.input = "q"}) -> (tensor<2x4x8x16xf32> {mlc.output = "t"}) {
    // expected-error @+1 {{mlc-lower-to-plan: while lowering 'mlc.attention' in @forward: marked mlc.in_reader_layout, but result 0 is read by no view whose layout can hold it}}
    %a = mlc.attention %q, %q, %q causal {mlc.in_reader_layout = array<i64: 0>} : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
    %t = mlc.transpose %a, [0, 1, 3, 2] : tensor<2x4x16x8xf32>
    return %t : tensor<2x4x8x16xf32>
  }
}

// -----

// mlc.in_reader_layout on a pointwise result that no concatenation reads.
module {
  func.func @forward(%x: tensor<2x8xf32> {mlc.input = "x"}) -> (tensor<2x8xf32> {mlc.output = "e"}) {
    // expected-error @+1 {{marked mlc.in_reader_layout, but result 0 is not a pointwise result of the iteration's shape that its reader's layout can hold}}
    %e = mlc.fusion pointwise ins(%x : tensor<2x8xf32>) {
    ^bb0(%b: tensor<2x8xf32>):
      %0 = mlc.exp %b : tensor<2x8xf32>
      mlc.yield %0 : tensor<2x8xf32>
    } {mlc.in_reader_layout = array<i64: 0>} : tensor<2x8xf32>
    return %e : tensor<2x8xf32>
  }
}

// -----

// mlc.in_reader_layout on a concatenation that no transpose reads.
module {
  func.func @forward(%x: tensor<2x8xf32> {mlc.input = "x"}) -> (tensor<2x16xf32> {mlc.output = "c"}) {
    // expected-error @+1 {{marked mlc.in_reader_layout, but its reader's layout cannot hold it}}
    %c = mlc.concat(%x, %x) axis = 1 {mlc.in_reader_layout = array<i64: 0>} : tensor<2x8xf32>, tensor<2x8xf32>
    return %c : tensor<2x16xf32>
  }
}

// -----

// A running sum along the dynamic token dimension: its length is only
// known at run time, and each line of a scan kernel is a fixed length.
module attributes {mlc.token_capacity = 8 : i64} {
  func.func @forward(%x: tensor<?x4xi64> {mlc.input = "x"}) -> (tensor<?x4xi64> {mlc.output = "y"}) {
    // expected-error @+1 {{mlc-lower-to-plan: while lowering 'mlc.cumsum' in @forward: a running sum along the dynamic token dimension is not supported}}
    %y = mlc.cumsum %x axis = 0 : tensor<?x4xi64>
    return %y : tensor<?x4xi64>
  }
}

// -----

// An op no conversion pattern lowers (arithmetic of another dialect, where
// the graph has mlc.add): refused by name, on the op.
module {
  func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}) -> (tensor<4xf32> {mlc.output = "y"}) {
    // expected-error @+1 {{mlc-lower-to-plan: while lowering 'arith.addf' in @forward: no CPU lowering for 'arith.addf'}}
    %y = arith.addf %x, %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// A graph that still folds (a product by ones): the conversion would fold
// it after mlc-in-place and mlc-assign-buffers decided about the graph as
// it was, so the lowering refuses it, on the op; mlc-fold runs first in the
// lowering pipeline (test/passes/fold.mlir).
module {
  func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}) -> (tensor<4xf32> {mlc.output = "y"}) {
    %one = mlc.constant dense<1.0> : tensor<4xf32>
    // expected-error @+1 {{mlc-lower-to-plan: folds, and the conversion would fold it after the lowering's decisions about it (run mlc-fold first)}}
    %r = mlc.mul %x, %one : tensor<4xf32>, tensor<4xf32>
    %y = mlc.exp %r : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
