// RUN: mlc-opt %s -split-input-file -verify-diagnostics
// One case per plan verifier rule.

// expected-error @+1 {{parameter element type must be f32 or f64, got 'i64'}}
plan.param "w" : i64 [4] init "zeros"

// -----

// expected-error @+1 {{parameter dimensions must be positive}}
plan.param "w" : f32 [4, 0] init "zeros"

// -----

// expected-error @+1 {{init must be normal:STD, zeros, ones or package, got 'uniform'}}
plan.param "w" : f32 [4] init "uniform"

// -----

// expected-error @+1 {{init normal:STD needs a standard deviation >= 0, got 'normal:-1'}}
plan.param "w" : f32 [4] init "normal:-1"

// -----

// expected-error @+1 {{input dimensions must be positive (-1 only for the leading token dimension)}}
plan.input "x" : i64 [4, -1]

// -----

// expected-error @+1 {{a kernel takes at least one buffer}}
plan.kernel @k0 pointwise args(0) params {dims = array<i64: 1>} {
}

// -----

// expected-error @+1 {{a kernel is a template (#plan.NAME and params) or a body}}
plan.kernel @k0 pointwise args(1)

// -----

// A typed template's parameters are not optional.
// expected-error @+1 {{expected '<'}}
plan.kernel @k0 rows #plan.cross_entropy args(3)

// -----

// expected-error @+1 {{a kernel with a body needs its iteration space (params.dims)}}
plan.kernel @k0 pointwise args(1) params {rows = 4 : i64} {
  %x = plan.load arg 0 offset 0 strides [1] : tensor<f32>
}

// -----

// expected-error @+1 {{a kernel body accesses 1 of its 2 arguments}}
plan.kernel @k0 pointwise args(2) params {dims = array<i64: 4>} {
  %x = plan.load arg 1 offset 0 strides [1] : tensor<f32>
}

// -----

plan.kernel @k0 pointwise args(2) params {dims = array<i64: 4>} {
  // expected-error @+1 {{has 2 strides for a nest of 1 dimensions}}
  %x = plan.load arg 1 offset 0 strides [1, 1] : tensor<f32>
  plan.store %x, arg 0 offset 0 strides [1] : tensor<f32>
}

// -----

plan.kernel @k0 pointwise args(2) params {dims = array<i64: 4>} {
  %x = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  // expected-error @+1 {{argument 1 is accessed at two places}}
  plan.store %x, arg 1 offset 4 strides [1] : tensor<f32>
  plan.store %x, arg 0 offset 0 strides [1] : tensor<f32>
}

// -----

plan.kernel @k0 pointwise args(2) params {dims = array<i64: 4>} {
  // expected-error @+1 {{argument 2 of a kernel of 2 arguments}}
  %x = plan.load arg 2 offset 0 strides [1] : tensor<f32>
}

// -----

// expected-error @+1 {{'plan.load' op expects parent op 'plan.kernel'}}
%x = plan.load arg 0 offset 0 strides [1] : tensor<f32>

// -----

plan.func "forward" arena 0 {
  // expected-error @+1 {{is not allowed in a plan.func}}
  %c = arith.constant 0 : index
}

// -----

plan.func "forward" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  plan.output "y" %a [4] : memref<4xf32>
  // expected-error @+1 {{output 'y' is returned twice}}
  plan.output "y" %a [4] : memref<4xf32>
}

// -----

plan.func "forward" arena 64 {
  // expected-error @+1 {{arena offset must be >= 0 (or -1: not yet placed)}}
  %a = plan.arena -2 : memref<4xf32>
}

// -----

plan.func "forward" arena 64 {
  // expected-error @+1 {{arena slice [56, 72) lies outside the function's arena of 64 bytes}}
  %a = plan.arena 56 : memref<4xf32>
}

// -----

plan.kernel @k0 pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "forward" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  // expected-error @+1 {{shares arena bytes [8, 16) with another slice while both are live (steps 0-1 and 0-1)}}
  %b = plan.arena 8 : memref<4xf32>
  plan.launch @k0(%a, %b) : memref<4xf32>, memref<4xf32>
  plan.launch @k0(%b, %a) : memref<4xf32>, memref<4xf32>
}

// -----

plan.param "w" : f32 [4] init "zeros"
plan.func "forward" arena 0 {
  // expected-error @+1 {{parameter 'w' holds 4 x 'f32', the buffer 'memref<3xf32>'}}
  %w = plan.bind param "w" : memref<3xf32>
}

// -----

plan.input "x" : i64 [4]
plan.func "forward" arena 0 {
  // expected-error @+1 {{input 'x' is 'i64', the buffer 'i32'}}
  %x = plan.bind input "x" : memref<4xi32>
}

// -----

plan.func "forward" arena 0 {
  // expected-error @+1 {{names no plan.param 'missing' of the module}}
  %w = plan.bind grad "missing" : memref<3xf32>
}

// -----

plan.func "forward" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  // expected-error @+1 {{view of bytes [8, 24) lies outside its source of 16 bytes}}
  %v = plan.view %a [8] : memref<4xf32> to memref<4xf32>
}

// -----

plan.func "forward" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  // expected-error @+1 {{view offset 2 is not a multiple of the element size}}
  %v = plan.view %a [2] : memref<4xf32> to memref<2xf32>
}

// -----

plan.func "forward" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  // expected-error @+1 {{launches unknown kernel @nowhere}}
  plan.launch @nowhere(%a) : memref<4xf32>
}

// -----

plan.kernel @k0 pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "forward" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  // expected-error @+1 {{passes 1 buffers to @k0, which takes 2}}
  plan.launch @k0(%a) : memref<4xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xi32>
  %l = plan.arena 64 : memref<8xi32>
  %r = plan.arena 128 : memref<12xi32>
  // expected-error @+1 {{GEMM element type must be f32, f64 or bf16, got 'i32'}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 : memref<6xi32>, memref<8xi32>, memref<12xi32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf64>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM operands of 'f64' with a result of 'f32'; the types must agree, or be bf16 -> f32}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 : memref<6xf32>, memref<8xf64>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xbf16>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM operands must share the element type 'bf16'}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 : memref<6xf32>, memref<8xbf16>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xbf16>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM operands of 'f32' with a result of 'bf16'; the types must agree, or be bf16 -> f32}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 : memref<6xbf16>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM extents must be positive (m or k -1: the token count)}}
  plan.gemm %o, %l, %r m 2 n -1 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM needs one lhs and one rhs stride per batch dimension (1)}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 {batch = array<i64: 1>} : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM batch dimensions must be positive}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 {batch = array<i64: 0>, lhs_strides = array<i64: 0>, rhs_strides = array<i64: 0>} : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM writes 12 elements into a buffer of 6}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 {batch = array<i64: 2>, lhs_strides = array<i64: 0>, rhs_strides = array<i64: 0>} : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<7xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM reads past the end of its lhs buffer}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 : memref<6xf32>, memref<7xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<12xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM reads past the end of its rhs buffer}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 {batch = array<i64: 2>, lhs_strides = array<i64: 0>, rhs_strides = array<i64: 12>} : memref<12xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %a = plan.arena 0 : memref<32xf32>
  %o = plan.view %a [0] : memref<32xf32> to memref<6xf32>
  %l = plan.view %a [64] : memref<32xf32> to memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM output must not alias an operand}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  // expected-error @+1 {{output dimensions must be positive (-1 only for the leading token dimension)}}
  plan.output "y" %a [2, -1] : memref<4xf32>
}

// -----

plan.func "forward" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  // expected-error @+1 {{output 'y' of 6 elements reads a buffer of 4}}
  plan.output "y" %a [2, 3] : memref<4xf32>
}

// -----

// expected-error @+1 {{scalars need a size >= 1}}
plan.scalars "adamw" : f64 [0]

// -----

// expected-error @+1 {{scalars are f64}}
plan.scalars "adamw" : f32 [9]

// -----

plan.scalars "adamw" : f64 [9]
plan.func "optimizer" arena 0 {
  // expected-error @+1 {{scalars 'adamw' hold 9, the buffer 8}}
  %h = plan.bind scalars "adamw" : memref<8xf64>
}

// -----

plan.func "optimizer" arena 0 {
  // expected-error @+1 {{names no plan.scalars 'adamw' of the module}}
  %h = plan.bind scalars "adamw" : memref<9xf64>
}

// -----

plan.param "w" : f32 [4, 3] decay init "normal:0.02"
plan.param "b" : f32 [3] init "zeros"
plan.func "optimizer" arena 0 {
  // expected-error @+1 {{the whole flat buffer holds 15 x 'f32', the buffer 'memref<12xf32>'}}
  %m = plan.bind moment1 "*" : memref<12xf32>
}

// -----

plan.param "w" : f32 [4] init "zeros"
plan.func "train_step" arena 0 {
  %p = plan.bind param "*" : memref<4xf32>
  // expected-error @+1 {{reduces the whole gradient buffer (plan.bind grad "*")}}
  plan.all_reduce_start %p [0, 4] tag 0 : memref<4xf32>
  plan.all_reduce_wait tag 0
}

// -----

plan.param "w" : f32 [4] init "zeros"
plan.func "train_step" arena 0 {
  %g = plan.bind grad "*" : memref<4xf32>
  // expected-error @+1 {{slice [2, 6) is not inside the 4 gradients}}
  plan.all_reduce_start %g [2, 4] tag 0 : memref<4xf32>
  plan.all_reduce_wait tag 0
}

// -----

plan.param "w" : f32 [4] init "zeros"
plan.func "train_step" arena 0 {
  %g = plan.bind grad "*" : memref<4xf32>
  plan.all_reduce_start %g [0, 4] tag 0 : memref<4xf32>
  // expected-error @+1 {{tag 0 is started twice}}
  plan.all_reduce_start %g [0, 4] tag 0 : memref<4xf32>
  plan.all_reduce_wait tag 0
}

// -----

plan.func "train_step" arena 0 {
  // expected-error @+1 {{waits for tag 3, which no earlier plan.all_reduce_start started}}
  plan.all_reduce_wait tag 3
}

// -----

plan.param "w" : f32 [4] init "zeros"
// expected-error @+1 {{all-reduce tag 0 is started but never waited for}}
plan.func "train_step" arena 0 {
  %g = plan.bind grad "*" : memref<4xf32>
  plan.all_reduce_start %g [0, 4] tag 0 : memref<4xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  %b = plan.arena 192 : memref<2xf32>
  // expected-error @+1 {{GEMM bias must be the result's 3 columns of 'f32', got 'memref<2xf32>'}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 bias(%b : memref<2xf32>) : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  %b = plan.view %o[0] : memref<6xf32> to memref<3xf32>
  // expected-error @+1 {{GEMM output must not alias an operand}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 bias(%b : memref<3xf32>) : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 512 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  %p = plan.arena 192 : memref<6xf64>
  // expected-error @+1 {{GEMM gelu(pre) takes an f32, f64 or bf16 pre-activation of the result's type 'memref<6xf32>', got 'memref<6xf64>'}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 gelu(%p : memref<6xf64>) : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 512 {
  %o = plan.arena 0 : memref<6xbf16>
  %l = plan.arena 64 : memref<8xbf16>
  %r = plan.arena 128 : memref<12xbf16>
  %p = plan.arena 192 : memref<6xf32>
  // expected-error @+1 {{GEMM gelu(pre) takes an f32, f64 or bf16 pre-activation of the result's type 'memref<6xbf16>', got 'memref<6xf32>'}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 gelu(%p : memref<6xf32>) : memref<6xbf16>, memref<8xbf16>, memref<12xbf16>
}

// -----

plan.func "forward" arena 512 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{GEMM output must not alias an operand}}
  plan.gemm %o, %l, %r m 2 n 3 k 4 gelu(%o : memref<6xf32>) : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.kernel @k0 pointwise args(2) params {dims = array<i64: 4>} {
  %x = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  // expected-error @+1 {{accumulates in a pointwise kernel (only column_reduction sums)}}
  plan.accumulate %x, arg 0 : tensor<f32>
}

// -----

plan.kernel @k0 rows args(3) params {dims = array<i64: 4, 8>, eps = 1.0e-5 : f64, rows = 4 : i64} {
  %x = plan.load arg 1 offset 0 strides [8, 1] : tensor<f32>
  %w = plan.load arg 2 offset 0 strides [0, 1] : tensor<f32>
  // expected-error @+1 {{an RMSNorm (rms) takes no bias}}
  plan.normalize rms %x, %w, %w, arg 0 offset 0 strides [8, 1] : tensor<f32>, tensor<f32>, tensor<f32> into f32
}

// -----

plan.kernel @k0 rows args(3) params {dims = array<i64: 4, 8>, eps = 1.0e-5 : f64, rows = 4 : i64} {
  %x = plan.load arg 1 offset 0 strides [8, 1] : tensor<f32>
  %w = plan.load arg 2 offset 0 strides [0, 1] : tensor<f32>
  // expected-error @+1 {{a LayerNorm needs a bias (or rms for an RMSNorm)}}
  plan.normalize %x, %w, arg 0 offset 0 strides [8, 1] : tensor<f32>, tensor<f32> into f32
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  // expected-error @+1 {{accumulates into a buffer that no earlier step of the function writes (its value would be undefined)}}
  plan.gemm %o, %l, %r accumulate m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

// Earlier steps that only read the accumulator do not write it: a GEMM's
// operand, a body kernel's load, a template's input (softmax's argument 1).
plan.kernel @k0 pointwise args(2) params {dims = array<i64: 6>} {
  %x = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %x, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.kernel @k1 rows #plan.softmax<element = f32, rows = 2, columns = 3> args(2)
plan.func "forward" arena 512 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  %t = plan.arena 192 : memref<6xf32>
  %v = plan.view %o [0] : memref<6xf32> to memref<6xf32>
  plan.gemm %t, %o, %r m 2 n 3 k 2 : memref<6xf32>, memref<6xf32>, memref<12xf32>
  plan.launch @k0(%t, %v) : memref<6xf32>, memref<6xf32>
  plan.launch @k1(%t, %o) : memref<6xf32>, memref<6xf32>
  // expected-error @+1 {{accumulates into a buffer that no earlier step of the function writes (its value would be undefined)}}
  plan.gemm %o, %l, %r accumulate m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

// Written first, each accumulation is valid: by a body kernel's store (into
// a view of the buffer), a template's output (softmax's argument 0), a
// GEMM's gelu pre-activation.
plan.kernel @k0 pointwise args(2) params {dims = array<i64: 6>} {
  %x = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %x, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.kernel @k1 rows #plan.softmax<element = f32, rows = 2, columns = 3> args(2)
plan.func "forward" arena 1024 {
  %a = plan.arena 0 : memref<6xf32>
  %b = plan.arena 64 : memref<6xf32>
  %c = plan.arena 128 : memref<6xf32>
  %t = plan.arena 192 : memref<6xf32>
  %l = plan.arena 256 : memref<8xf32>
  %r = plan.arena 320 : memref<12xf32>
  %v = plan.view %a [0] : memref<6xf32> to memref<6xf32>
  plan.launch @k0(%v, %t) : memref<6xf32>, memref<6xf32>
  plan.gemm %a, %l, %r accumulate m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
  plan.launch @k1(%b, %t) : memref<6xf32>, memref<6xf32>
  plan.gemm %b, %l, %r accumulate m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
  plan.gemm %t, %l, %r m 2 n 3 k 4 gelu(%c : memref<6xf32>) : memref<6xf32>, memref<8xf32>, memref<12xf32>
  plan.gemm %c, %l, %r accumulate m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 512 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  %p = plan.arena 192 : memref<6xf32>
  plan.gemm %o, %l, %r m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
  // expected-error @+1 {{an accumulating GEMM has no GELU epilogue}}
  plan.gemm %o, %l, %r accumulate m 2 n 3 k 4 gelu(%p : memref<6xf32>) : memref<6xf32>, memref<8xf32>, memref<12xf32>
}

// -----

plan.func "forward" arena 256 {
  %o = plan.arena 0 : memref<6xf32>
  %l = plan.arena 64 : memref<8xf32>
  %r = plan.arena 128 : memref<12xf32>
  plan.gemm %o, %l, %r m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
  // expected-error @+1 {{GEMM output must not alias an operand}}
  plan.gemm %o, %o, %r accumulate m 2 n 3 k 2 : memref<6xf32>, memref<6xf32>, memref<12xf32>
}

// -----

// The distributed optimizer's collectives: an all-gather gathers parameters.
plan.param "w" : f32 [4] init "zeros"
plan.func "optimizer" arena 0 {
  %g = plan.bind grad "*" : memref<4xf32>
  // expected-error @+1 {{takes the whole param buffer (plan.bind param "*")}}
  plan.all_gather_start %g [0, 4] tag 0 : memref<4xf32>
  plan.all_gather_wait tag 0
}

// -----

plan.param "w" : f32 [4] init "zeros"
plan.func "train_step" arena 0 {
  %g = plan.bind grad "*" : memref<4xf32>
  // expected-error @+1 {{slice [2, 6) is not inside the 4 elements}}
  plan.reduce_scatter_start %g [2, 4] tag 0 : memref<4xf32>
  plan.reduce_scatter_wait tag 0
}

// -----

// Tags are per kind: a reduce-scatter's wait needs a reduce-scatter's start.
plan.param "w" : f32 [4] init "zeros"
plan.func "train_step" arena 0 {
  %g = plan.bind grad "*" : memref<4xf32>
  plan.all_reduce_start %g [0, 4] tag 0 : memref<4xf32>
  plan.all_reduce_wait tag 0
  // expected-error @+1 {{waits for tag 0, which no earlier plan.reduce_scatter_start started}}
  plan.reduce_scatter_wait tag 0
}

// -----

plan.param "w" : f32 [4] init "zeros"
plan.func "grad_norm" arena 8 {
  %n = plan.arena 0 : memref<2xf32>
  // expected-error @+1 {{sums one f64 norm over the ranks, got 'memref<2xf32>'}}
  plan.all_reduce_norm %n : memref<2xf32>
}

// -----

plan.func "forward" arena 64 {
  %ids = plan.arena 0 : memref<4xi64>
  // expected-error @+1 {{reduces floating-point values, got 'memref<4xi64>'}}
  plan.tp_all_reduce %ids : memref<4xi64>
}

// -----

// Only the flat-buffer kernels (the update, the gradient norm) take a shard.
plan.param "w" : f32 [4] init "zeros"
plan.kernel @k pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "optimizer" arena 0 {
  %p = plan.bind param "*" : memref<4xf32>
  %g = plan.bind grad "*" : memref<4xf32>
  // expected-error @+1 {{shard applies to the optimizer and gradient-norm kernels only; @k is neither}}
  plan.launch @k(%p, %g) {shard = 0 : i64} : memref<4xf32>, memref<4xf32>
}
