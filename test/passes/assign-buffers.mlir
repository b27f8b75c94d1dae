// RUN: mlc-opt %s -split-input-file --mlc-assign-buffers | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-assign-buffers --mlc-lower-to-plan | FileCheck %s --check-prefix=PLAN

// Every result gets an entry: a kernel's result its own arena slice, a
// transpose and a reshape views of their input (they cost no kernel and no
// slice: the add reads exp's slice through them), a constant filled where
// it is read.
// CHECK-LABEL: func.func @forward
// CHECK: mlc.exp %{{.*}} {mlc.buffers = ["arena"]}
// CHECK: mlc.transpose %{{.*}} {mlc.buffers = ["view"]}
// CHECK: mlc.reshape %{{.*}} {mlc.buffers = ["view"]}
// CHECK: mlc.constant {{.*}} {mlc.buffers = ["constant"]}
// CHECK: mlc.add %{{.*}} {mlc.buffers = ["arena"]}
// PLAN: plan.func "forward"
// PLAN-COUNT-3: plan.arena -1
// PLAN-NOT: plan.arena
// PLAN-NOT: plan.view
// PLAN: plan.launch
func.func @forward(%x: tensor<3x4xf32> {mlc.input = "x"}) -> (tensor<12xf32> {mlc.output = "y"}) {
  %e = mlc.exp %x : tensor<3x4xf32>
  %t = mlc.transpose %e, [1, 0] : tensor<3x4xf32>
  %r = mlc.reshape %t : tensor<4x3xf32> -> tensor<12xf32>
  %c = mlc.constant dense<2.0> : tensor<12xf32>
  %y = mlc.add %r, %c : tensor<12xf32>, tensor<12xf32>
  return %y : tensor<12xf32>
}

// -----

// A gradient an op produces and only the return reads lives in its slice
// of the flat gradient buffer; one the loss also reads (here an output as
// well) or that is a view does not.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[GB:.*]] = mlc.reduce_sum %{{.*}} {mlc.buffers = ["grad:b"]}
// CHECK: mlc.matmul %{{.*}} transpose_lhs {mlc.buffers = ["grad:w"]}
// CHECK: mlc.reduce_sum %{{.*}} {mlc.buffers = ["arena"]}
// CHECK: mlc.transpose %{{.*}} {mlc.buffers = ["view"]}
// PLAN: plan.func "train_step"
// PLAN-DAG: %[[B:.*]] = plan.bind grad "b"
// PLAN-DAG: %[[W:.*]] = plan.bind grad "w"
// PLAN: plan.launch @k{{[0-9]+}}(%[[B]],
// PLAN: plan.gemm %[[W]],
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %b: tensor<3xf32> {mlc.param = "b"}, %v: tensor<3x2xf32> {mlc.param = "v"}, %c: tensor<2xf32> {mlc.param = "c"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %l = mlc.reduce_sum %x axes = [0, 1] : tensor<2x4xf32>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x3xf32> {mlc.param = "w"}, %b: tensor<3xf32> {mlc.param = "b"}, %v: tensor<3x2xf32> {mlc.param = "v"}, %c: tensor<2xf32> {mlc.param = "c"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3xf32> {mlc.grad = "b"}, tensor<4x3xf32> {mlc.grad = "w"}, tensor<2xf32> {mlc.grad = "c"}, tensor<2xf32> {mlc.output = "gc"}, tensor<3x2xf32> {mlc.grad = "v"}) {
  %l = mlc.reduce_sum %x axes = [0, 1] : tensor<2x4xf32>
  %one = mlc.constant dense<1.0> : tensor<2x3xf32>
  %gb = mlc.reduce_sum %one axes = [0] : tensor<2x3xf32>
  %gw = mlc.matmul %x, %one transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32>
  %gc = mlc.reduce_sum %x axes = [1] : tensor<2x4xf32>
  %gv = mlc.transpose %one, [1, 0] : tensor<2x3xf32>
  return %l, %gb, %gw, %gc, %gc, %gv : tensor<f32>, tensor<3xf32>, tensor<4x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<3x2xf32>
}

// -----

// A chain of accumulating products (a tied weight's two gradients): the
// first writes the flat gradient buffer, the second adds to it there
// (`accumulator`), no copy. An accumulator that something else reads too is
// not added to in place: the product gets a slice of its own, a copy of it.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[P:.*]] = mlc.matmul %{{.*}} transpose_lhs {mlc.buffers = ["grad:w"]}
// CHECK: mlc.matmul %{{.*}} acc(%[[P]] : {{.*}}) {mlc.buffers = ["accumulator"]}
// CHECK: %[[Q:.*]] = mlc.matmul %{{.*}} {mlc.buffers = ["arena"]}
// CHECK: mlc.matmul %{{.*}} acc(%[[Q]] : {{.*}}) {mlc.buffers = ["arena"]}
// PLAN: plan.func "train_step"
// PLAN: %[[W:.*]] = plan.bind grad "w"
// PLAN: plan.gemm %[[W]],
// PLAN-NEXT: plan.gemm %[[W]], {{.*}} accumulate
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %l = mlc.reduce_sum %x axes = [0, 1] : tensor<2x4xf32>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<4x3xf32> {mlc.grad = "w"}, tensor<2x3xf32> {mlc.output = "y"}, tensor<2x3xf32> {mlc.output = "q"}) {
  %l = mlc.reduce_sum %x axes = [0, 1] : tensor<2x4xf32>
  %one = mlc.constant dense<1.0> : tensor<2x3xf32>
  %p = mlc.matmul %x, %one transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32>
  %gw = mlc.matmul %x, %one transpose_lhs acc(%p : tensor<4x3xf32>) : tensor<2x4xf32>, tensor<2x3xf32>
  %q = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %y = mlc.matmul %x, %w acc(%q : tensor<2x3xf32>) : tensor<2x4xf32>, tensor<4x3xf32>
  return %l, %gw, %y, %q : tensor<f32>, tensor<4x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// The loss gradient mlc-in-place marked overwrites its logits; one not
// marked (its logits are also an output) gets its own arena slice.
// CHECK-LABEL: func.func @train_step
// CHECK: mlc.cross_entropy_grad {{.*}} {mlc.buffers = ["logits"], mlc.in_place, mlc.with_loss}
// CHECK: mlc.cross_entropy_grad {{.*}} {mlc.buffers = ["arena"], mlc.with_loss}
func.func @forward(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3x6xf32> {mlc.output = "g1"}, tensor<3x6xf32> {mlc.output = "y"}, tensor<3x6xf32> {mlc.output = "g2"}) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.in_place, mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %z = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l2 = mlc.cross_entropy %z, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %g2 = mlc.cross_entropy_grad %one, %z, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %g, %z, %g2 : tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>
}

// -----

// A tensor-parallel reduce sums over its partial products where only it
// reads them (`input`), also where they are a chain of products that add to
// the first one's slice, and into a slice of its own where they are read
// again.
// CHECK-LABEL: func.func @forward
// CHECK: mlc.tp_reduce sum %{{.*}} {mlc.buffers = ["input"]}
// CHECK: mlc.matmul %{{.*}} acc(%{{.*}}) {mlc.buffers = ["accumulator"]}
// CHECK: mlc.tp_reduce sum %{{.*}} {mlc.buffers = ["input"]}
// CHECK: mlc.tp_reduce sum %{{.*}} {mlc.buffers = ["arena"]}
// PLAN: plan.func "forward"
// PLAN: %[[P:.*]] = plan.arena -1 : memref<6xf32>
// PLAN: %[[A:.*]] = plan.arena -1 : memref<6xf32>
// PLAN: plan.gemm %[[P]],
// PLAN-NEXT: plan.tp_all_reduce %[[P]]
// PLAN-NEXT: plan.gemm %[[A]],
// PLAN-NEXT: plan.gemm %[[A]], {{.*}} accumulate
// PLAN-NEXT: plan.tp_all_reduce %[[A]]
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<2x3xf32> {mlc.output = "y"}, tensor<2x3xf32> {mlc.output = "z"}, tensor<2x3xf32> {mlc.output = "q"}, tensor<2x3xf32> {mlc.output = "s"}) {
  %p = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %y = mlc.tp_reduce sum %p : tensor<2x3xf32>
  %a = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %b = mlc.matmul %x, %w acc(%a : tensor<2x3xf32>) : tensor<2x4xf32>, tensor<4x3xf32>
  %s = mlc.tp_reduce sum %b : tensor<2x3xf32>
  %q = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %z = mlc.tp_reduce sum %q : tensor<2x3xf32>
  return %y, %z, %q, %s : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}
