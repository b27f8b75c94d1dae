// RUN: mlc-opt %s -split-input-file --mlc-lower-to-plan -verify-diagnostics
// What mlc-lower-to-plan refuses of mlc-assign-buffers' decisions
// (mlc.buffers, written here by hand), on the op.

func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}) -> (tensor<4xf32> {mlc.output = "y"}) {
  // expected-error @+1 {{mlc-lower-to-plan: no buffers assigned (mlc.buffers): mlc-assign-buffers runs before mlc-lower-to-plan}}
  %y = mlc.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}) -> (tensor<4xf32> {mlc.output = "y"}) {
  // expected-error @+1 {{mlc-lower-to-plan: mlc.buffers holds 2 entries, not one string per result (1)}}
  %y = mlc.exp %x {mlc.buffers = ["arena", "arena"]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}) -> (tensor<4xf32> {mlc.output = "y"}) {
  // expected-error @+1 {{mlc-lower-to-plan: result #0 is assigned 'somewhere', but there is no such kind (mlc.buffers)}}
  %y = mlc.exp %x {mlc.buffers = ["somewhere"]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A transpose is a view: it has no kernel that could fill a slice.
func.func @forward(%x: tensor<3x4xf32> {mlc.input = "x"}) -> (tensor<4x3xf32> {mlc.output = "y"}) {
  // expected-error @+1 {{mlc-lower-to-plan: result #0 is assigned 'arena', but a 'mlc.transpose' lives in 'view'}}
  %t = mlc.transpose %x, [1, 0] {mlc.buffers = ["arena"]} : tensor<3x4xf32>
  %y = mlc.exp %t {mlc.buffers = ["arena"]} : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// Only a view op is a view.
func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}) -> (tensor<4xf32> {mlc.output = "y"}) {
  // expected-error @+1 {{mlc-lower-to-plan: result #0 is assigned 'view', but that kind fits only a view, a constant, a flat-buffer fusion or a widening read at its load, each its own (mlc.buffers)}}
  %y = mlc.exp %x {mlc.buffers = ["view"]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// An accumulator that the output reads too may not be overwritten.
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<2x3xf32> {mlc.output = "y"}, tensor<2x3xf32> {mlc.output = "q"}) {
  %q = mlc.matmul %x, %w {mlc.buffers = ["arena"]} : tensor<2x4xf32>, tensor<4x3xf32>
  // expected-error @+1 {{mlc-lower-to-plan: result #0 is assigned 'accumulator', but its accumulator is read after it, by 'func.return' (mlc.buffers)}}
  %y = mlc.matmul %x, %w acc(%q : tensor<2x3xf32>) {mlc.buffers = ["accumulator"]} : tensor<2x4xf32>, tensor<4x3xf32>
  return %y, %q : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// A product may not add itself onto a norm gradient's dx in dx's slice
// while it reads dx through a view: the GEMM would read what it writes.
func.func @forward(%g: tensor<8x8xf32> {mlc.input = "g"}, %x: tensor<8x8xf32> {mlc.input = "x"}, %w: tensor<8xf32> {mlc.param = "w"}, %p: tensor<8x8xf32> {mlc.param = "p"}) -> (tensor<8x8xf32> {mlc.output = "s"}) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 {mlc.buffers = ["arena", "arena"]} : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %t = mlc.transpose %dx, [1, 0] {mlc.buffers = ["view"]} : tensor<8x8xf32>
  // expected-error @+1 {{mlc-lower-to-plan: result #0 is assigned 'accumulator', but it reads operand #1 from its accumulator's buffer (the accumulator or a view of it) (mlc.buffers)}}
  %s = mlc.matmul %p, %t acc(%dx : tensor<8x8xf32>) {mlc.buffers = ["accumulator"]} : tensor<8x8xf32>, tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

// Nor onto a function's argument: it has no arena slice to add into.
func.func @forward(%a: tensor<2x3xf32> {mlc.input = "a"}, %w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<2x3xf32> {mlc.output = "y"}) {
  // expected-error @+1 {{mlc-lower-to-plan: result #0 is assigned 'accumulator', but its accumulator is neither a product nor a norm gradient (mlc.buffers)}}
  %y = mlc.matmul %x, %w acc(%a : tensor<2x3xf32>) {mlc.buffers = ["accumulator"]} : tensor<2x4xf32>, tensor<4x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// A flat-buffer slice only for the function's result of that slice.
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %l = mlc.reduce_sum %x axes = [0, 1] {mlc.buffers = ["arena"]} : tensor<2x4xf32>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<4x3xf32> {mlc.grad = "w"}) {
  %l = mlc.reduce_sum %x axes = [0, 1] {mlc.buffers = ["arena"]} : tensor<2x4xf32>
  %one = mlc.constant dense<1.0> : tensor<2x3xf32> {mlc.buffers = ["constant"]}
  // expected-error @+1 {{mlc-lower-to-plan: result #0 is assigned 'grad:v', but it is not @train_step's result of that slice, read only by the return (directly or through products that add to it)}}
  %gw = mlc.matmul %x, %one transpose_lhs {mlc.buffers = ["grad:v"]} : tensor<2x4xf32>, tensor<2x3xf32>
  return %l, %gw : tensor<f32>, tensor<4x3xf32>
}

// -----

func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<4x3xf32> {mlc.output = "y"}) {
  // expected-error @+1 {{mlc-lower-to-plan: result #0 is assigned 'weights:w', but no flat buffer is named 'weights'}}
  %y = mlc.exp %w {mlc.buffers = ["weights:w"]} : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// A tensor-parallel reduce over partial sums that the output reads too.
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<2x3xf32> {mlc.output = "y"}, tensor<2x3xf32> {mlc.output = "p"}) {
  %p = mlc.matmul %x, %w {mlc.buffers = ["arena"]} : tensor<2x4xf32>, tensor<4x3xf32>
  // expected-error @+1 {{assigned its partial sums' buffer (mlc.buffers 'input'), but they are read by more than it, or are not a fresh arena slice}}
  %y = mlc.tp_reduce sum %p {mlc.buffers = ["input"]} : tensor<2x3xf32>
  return %y, %p : tensor<2x3xf32>, tensor<2x3xf32>
}
