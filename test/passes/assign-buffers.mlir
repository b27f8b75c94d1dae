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

// -----

// A product added onto a norm gradient's dx (mlc-accumulate-gemms' sum onto
// OLMo2's residual stream gradient) adds itself in dx's slice where dx's
// other readers all come first and it reads none of its inputs from that
// slice (`accumulator`: the GEMM accumulates onto dx, no copy). Not where
// dx is read after the product (the exp), nor where the product reads dx
// itself or a view of it (the transpose): there the product gets a slice of
// its own, first a copy of dx.
// CHECK-LABEL: func.func @forward
// CHECK: %[[DX:.*]], %{{.*}} = mlc.rms_norm_grad {{.*}} {mlc.buffers = ["arena", "arena"]}
// CHECK: mlc.rms_norm_grad %[[DX]], {{.*}} {mlc.buffers = ["arena", "arena"]}
// CHECK: mlc.matmul %{{.*}} acc(%[[DX]] : {{.*}}) {mlc.buffers = ["accumulator"]}
// CHECK: %[[DX2:.*]], %{{.*}} = mlc.rms_norm_grad
// CHECK: mlc.matmul %{{.*}} acc(%[[DX2]] : {{.*}}) {mlc.buffers = ["arena"]}
// CHECK: mlc.exp %[[DX2]]
// CHECK: %[[DX3:.*]], %{{.*}} = mlc.rms_norm_grad
// CHECK: mlc.matmul %[[DX3]], %{{.*}} acc(%[[DX3]] : {{.*}}) {mlc.buffers = ["arena"]}
// CHECK: %[[DX4:.*]], %{{.*}} = mlc.rms_norm_grad
// CHECK: %[[T:.*]] = mlc.transpose %[[DX4]]
// CHECK: mlc.matmul %{{.*}}, %[[T]] acc(%[[DX4]] : {{.*}}) {mlc.buffers = ["arena"]}
// PLAN: plan.func "forward"
// PLAN: plan.launch @[[NORM:k[0-9]+]](%[[D1:[0-9]+]],
// PLAN-NEXT: plan.launch @[[NORM]](
// PLAN-NEXT: plan.gemm %[[D1]], {{.*}} accumulate
// PLAN-NEXT: plan.launch @[[NORM]](%[[D2:[0-9]+]],
// PLAN-NEXT: plan.launch @[[COPY:k[0-9]+]](%[[S2:[0-9]+]], %[[D2]])
// PLAN-NEXT: plan.gemm %[[S2]], {{.*}} accumulate
// PLAN: plan.launch @[[NORM]](%[[D3:[0-9]+]],
// PLAN-NEXT: plan.launch @[[COPY]](%[[S3:[0-9]+]], %[[D3]])
// PLAN-NEXT: plan.gemm %[[S3]], %[[D3]], {{.*}} accumulate
// PLAN-NEXT: plan.launch @[[NORM]](%[[D4:[0-9]+]],
// PLAN: plan.launch @[[COPY]](%[[S4:[0-9]+]], %[[D4]])
// PLAN-NEXT: plan.gemm %[[S4]], {{.*}} accumulate
// PLAN: plan.output "s" %[[D1]]
func.func @forward(%g: tensor<8x8xf32> {mlc.input = "g"}, %x: tensor<8x8xf32> {mlc.input = "x"}, %w: tensor<8xf32> {mlc.param = "w"}, %p: tensor<8x8xf32> {mlc.param = "p"}) -> (tensor<8x8xf32> {mlc.output = "s"}, tensor<8x8xf32> {mlc.output = "dy"}, tensor<8x8xf32> {mlc.output = "s2"}, tensor<8x8xf32> {mlc.output = "e"}, tensor<8x8xf32> {mlc.output = "s3"}, tensor<8x8xf32> {mlc.output = "s4"}) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %dy, %dw2 = mlc.rms_norm_grad %dx, %x, %w epsilon = 1.0e-6 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %s = mlc.matmul %x, %p acc(%dx : tensor<8x8xf32>) : tensor<8x8xf32>, tensor<8x8xf32>
  %dx2, %dw3 = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %s2 = mlc.matmul %x, %p acc(%dx2 : tensor<8x8xf32>) : tensor<8x8xf32>, tensor<8x8xf32>
  %e = mlc.exp %dx2 : tensor<8x8xf32>
  %dx3, %dw4 = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %s3 = mlc.matmul %dx3, %p acc(%dx3 : tensor<8x8xf32>) : tensor<8x8xf32>, tensor<8x8xf32>
  %dx4, %dw5 = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %t = mlc.transpose %dx4, [1, 0] : tensor<8x8xf32>
  %s4 = mlc.matmul %p, %t acc(%dx4 : tensor<8x8xf32>) : tensor<8x8xf32>, tensor<8x8xf32>
  return %s, %dy, %s2, %e, %s3, %s4 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
