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
