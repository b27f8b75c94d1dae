// RUN: mlc-opt %s -split-input-file -verify-diagnostics
// The asynchronous tensor-parallel all-reduce (a tag) and its plan.tp_wait.

plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  // expected-error @+1 {{waits for tag 0, which no earlier plan.tp_all_reduce started}}
  plan.tp_wait %a tag 0 : memref<4xf32>
}

// -----

plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  %b = plan.arena 32 : memref<4xf32>
  plan.tp_all_reduce %a tag 0 : memref<4xf32>
  // expected-error @+1 {{waits for another buffer than tag 0's all-reduce}}
  plan.tp_wait %b tag 0 : memref<4xf32>
}

// -----

// expected-error @+1 {{tensor-parallel all-reduce tag 5 is started but never waited for}}
plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  plan.tp_all_reduce %a tag 5 : memref<4xf32>
}

// -----

plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  // expected-error @+1 {{only a sum runs asynchronously (a tag), not a max}}
  plan.tp_all_reduce %a max tag 0 : memref<4xf32>
  plan.tp_wait %a tag 0 : memref<4xf32>
}

// -----

plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  plan.tp_all_reduce %a tag 0 : memref<4xf32>
  plan.tp_wait %a tag 0 : memref<4xf32>
  // expected-error @+1 {{tag 0 is waited for twice}}
  plan.tp_wait %a tag 0 : memref<4xf32>
}

// -----

// While tag 0 is in flight no other tensor-parallel collective runs: not a
// blocking all-reduce, not a second asynchronous one, not a
// sequence-parallel gather or reduce-scatter (the group's collectives run
// one at a time, in one order; on CUDA the asynchronous one has a stream of
// its own).
plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  %b = plan.arena 32 : memref<4xf32>
  plan.tp_all_reduce %a tag 0 : memref<4xf32>
  // expected-error @+1 {{'plan.tp_all_reduce' op runs while the tensor-parallel all-reduce tag 0 is in flight (before its plan.tp_wait)}}
  plan.tp_all_reduce %b : memref<4xf32>
  plan.tp_wait %a tag 0 : memref<4xf32>
}

// -----

plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  %b = plan.arena 32 : memref<4xf32>
  plan.tp_all_reduce %a tag 3 : memref<4xf32>
  // expected-error @+1 {{'plan.tp_all_reduce' op runs while the tensor-parallel all-reduce tag 3 is in flight}}
  plan.tp_all_reduce %b tag 4 : memref<4xf32>
  plan.tp_wait %b tag 4 : memref<4xf32>
  plan.tp_wait %a tag 3 : memref<4xf32>
}

// -----

module attributes {mlc.tensor_parallel = 2 : i64} {
plan.func "train_step" arena 128 {
  %a = plan.arena 0 : memref<4xf32>
  %s = plan.arena 32 : memref<4xf32>
  %w = plan.arena 64 : memref<8xf32>
  plan.tp_all_reduce %a tag 1 : memref<4xf32>
  // expected-error @+1 {{'plan.tp_all_gather' op runs while the tensor-parallel all-reduce tag 1 is in flight}}
  plan.tp_all_gather %w, %s : memref<8xf32>, memref<4xf32>
  plan.tp_wait %a tag 1 : memref<4xf32>
}
}

// -----

module attributes {mlc.tensor_parallel = 2 : i64} {
plan.func "train_step" arena 128 {
  %a = plan.arena 0 : memref<4xf32>
  %s = plan.arena 32 : memref<4xf32>
  %w = plan.arena 64 : memref<8xf32>
  plan.tp_all_reduce %a tag 2 : memref<4xf32>
  // expected-error @+1 {{'plan.tp_reduce_scatter' op runs while the tensor-parallel all-reduce tag 2 is in flight}}
  plan.tp_reduce_scatter %s, %w : memref<4xf32>, memref<8xf32>
  plan.tp_wait %a tag 2 : memref<4xf32>
}
}

// -----

// No step reads or writes the in-flight buffer before its wait: the sum
// lands there at the wait. A kernel reading it, a GEMM writing it, and a
// step reaching its bytes through a view or another placed slice.
plan.kernel @k pointwise args(2) params {dims = array<i64: 4>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  %b = plan.arena 32 : memref<4xf32>
  plan.tp_all_reduce %a tag 7 : memref<4xf32>
  // expected-error @+1 {{'plan.launch' op reads or writes the buffer of the tensor-parallel all-reduce tag 7 before its plan.tp_wait}}
  plan.launch @k(%b, %a) : memref<4xf32>, memref<4xf32>
  plan.tp_wait %a tag 7 : memref<4xf32>
}

// -----

plan.func "train_step" arena 128 {
  %a = plan.arena 0 : memref<4xf32>
  %x = plan.arena 32 : memref<4xf32>
  %y = plan.arena 64 : memref<4xf32>
  plan.tp_all_reduce %a tag 0 : memref<4xf32>
  // expected-error @+1 {{'plan.gemm' op reads or writes the buffer of the tensor-parallel all-reduce tag 0}}
  plan.gemm %a, %x, %y m 2 n 2 k 2 : memref<4xf32>, memref<4xf32>, memref<4xf32>
  plan.tp_wait %a tag 0 : memref<4xf32>
}

// -----

plan.kernel @k pointwise args(2) params {dims = array<i64: 2>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  %b = plan.arena 32 : memref<2xf32>
  %o = plan.arena 4 : memref<2xf32>
  %v = plan.view %a[8] : memref<4xf32> to memref<2xf32>
  plan.tp_all_reduce %a tag 0 : memref<4xf32>
  // expected-error @+1 {{'plan.launch' op reads or writes the buffer of the tensor-parallel all-reduce tag 0}}
  plan.launch @k(%b, %v) : memref<2xf32>, memref<2xf32>
  plan.tp_wait %a tag 0 : memref<4xf32>
}

// -----

plan.kernel @k pointwise args(2) params {dims = array<i64: 2>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  %b = plan.arena 32 : memref<2xf32>
  %o = plan.arena 12 : memref<2xf32>
  plan.tp_all_reduce %a tag 0 : memref<4xf32>
  // expected-error @+1 {{'plan.launch' op reads or writes the buffer of the tensor-parallel all-reduce tag 0}}
  plan.launch @k(%o, %b) : memref<2xf32>, memref<2xf32>
  plan.tp_wait %a tag 0 : memref<4xf32>
}

// -----

// A start never waited for is named as that, not as in flight at the next
// collective (the runtime's plan reader orders its messages the same way).
// expected-error @+1 {{tensor-parallel all-reduce tag 2 is started but never waited for}}
plan.func "train_step" arena 64 {
  %a = plan.arena 0 : memref<4xf32>
  %b = plan.arena 32 : memref<4xf32>
  plan.tp_all_reduce %a tag 2 : memref<4xf32>
  plan.tp_all_reduce %b : memref<4xf32>
}

// -----

// Accepted: while tag 0 is in flight, a GEMM and a kernel over other
// buffers (one of them a view of the next bytes of the arena, right after
// the in-flight slice) and a data-parallel bucket's sum; the gather and the
// next asynchronous all-reduce after its wait.
module attributes {mlc.tensor_parallel = 2 : i64} {
plan.param "p" : f32 [4] init "zeros"
plan.kernel @k pointwise args(2) params {dims = array<i64: 4>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "train_step" arena 160 {
  %g = plan.bind grad "*" : memref<4xf32>
  %a = plan.arena 0 : memref<4xf32>
  %next = plan.arena 16 : memref<8xf32>
  %n = plan.view %next[0] : memref<8xf32> to memref<4xf32>
  %x = plan.arena 48 : memref<4xf32>
  %y = plan.arena 64 : memref<4xf32>
  %w = plan.arena 80 : memref<8xf32>
  plan.tp_all_reduce %a tag 0 : memref<4xf32>
  plan.gemm %y, %x, %n m 2 n 2 k 2 : memref<4xf32>, memref<4xf32>, memref<4xf32>
  plan.launch @k(%x, %n) : memref<4xf32>, memref<4xf32>
  plan.all_reduce_start %g [0, 4] tag 0 : memref<4xf32>
  plan.tp_wait %a tag 0 : memref<4xf32>
  plan.tp_all_gather %w, %a : memref<8xf32>, memref<4xf32>
  plan.tp_all_reduce %y tag 1 : memref<4xf32>
  plan.launch @k(%x, %a) : memref<4xf32>, memref<4xf32>
  plan.all_reduce_wait tag 0
  plan.tp_wait %y tag 1 : memref<4xf32>
  plan.output "w" %w [8] : memref<8xf32>
}
}
