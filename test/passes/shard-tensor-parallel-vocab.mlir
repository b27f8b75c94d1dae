// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=2 | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=2 --mlc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=2 --mlc-autodiff | FileCheck %s --check-prefix=NOMAX
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel="size=2 vocab-parallel=false" | FileCheck %s --check-prefix=REPL
// RUN: mlc-opt %s -split-input-file --mlc-shard-tensor-parallel=size=1 | FileCheck %s --check-prefix=ONE

// A GPT-2-shaped model with a tied head: the token table keeps this rank's
// 8 of 16 vocabulary rows (dim 0, the same shard for the lookup and the
// head), the lookup zeroes the ids this rank does not hold and a tp_reduce
// sum joins the ranks' rows; the head is column-parallel over the
// vocabulary behind a tp_copy, and the loss joins the row maxima (max), the
// exp-sums and the target's logit (sum) without gathering the logits. The
// logits output is this rank's columns of them, "vocab_parallel_logits"
// (what sampling gathers); the rank is a new scalars argument.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<8x8xf32> {mlc.param = "wte", mlc.tp_split = {blocks = array<i64: 16>, dim = 0 : i64}}
// CHECK-SAME: %arg5: tensor<1xf64> {mlc.scalars = "tp_rank"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<2x4x8xf32> {mlc.output = "vocab_parallel_logits"}) {
// CHECK: %[[R:.*]] = mlc.cast %{{.*}} : tensor<f64> -> tensor<i64>
// CHECK: %[[OFF:.*]] = mlc.mul %[[R]], %{{.*}} : tensor<i64>, tensor<i64>
// CHECK: %[[LOCAL:.*]] = mlc.sub %arg3, %[[OFF]] : tensor<2x4xi64>, tensor<i64>
// CHECK: %[[OWN:.*]] = mlc.select %{{.*}} : tensor<2x4xi1>, tensor<2x4xi1>, tensor<2x4xi1>
// CHECK: %[[IDX:.*]] = mlc.select %[[OWN]], %[[LOCAL]], %{{.*}} : tensor<2x4xi1>, tensor<2x4xi64>, tensor<2x4xi64>
// CHECK-NEXT: %[[ROWS:.*]] = mlc.embedding %arg0, %[[IDX]] : tensor<8x8xf32>, tensor<2x4xi64>
// CHECK: %[[MINE:.*]] = mlc.select %{{.*}}, %[[ROWS]], %{{.*}} : tensor<2x4x1xi1>, tensor<2x4x8xf32>, tensor<f32>
// CHECK-NEXT: %[[X:.*]] = mlc.tp_reduce sum %[[MINE]] : tensor<2x4x8xf32>
// CHECK: mlc.tp_reduce sum %{{.*}} : tensor<2x4x8xf32>
// CHECK: %[[H:.*]] = mlc.tp_copy %{{.*}} : tensor<2x4x8xf32>
// CHECK-NEXT: %[[Z:.*]] = mlc.matmul %[[H]], %arg0 transpose_rhs : tensor<2x4x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: %[[Z2:.*]] = mlc.reshape %[[Z]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[LMAX:.*]] = mlc.reduce_max %[[Z2]] axes = [1] keepdims : tensor<8x8xf32>
// CHECK-NEXT: %[[M:.*]] = mlc.tp_reduce max %[[LMAX]] {mlc.stop_gradient} : tensor<8x1xf32>
// CHECK-NEXT: %[[SH:.*]] = mlc.sub %[[Z2]], %[[M]] : tensor<8x8xf32>, tensor<8x1xf32>
// CHECK-NEXT: %[[EX:.*]] = mlc.exp %[[SH]]
// CHECK-NEXT: %[[LS:.*]] = mlc.reduce_sum %[[EX]] axes = [1] keepdims
// CHECK-NEXT: %[[S:.*]] = mlc.tp_reduce sum %[[LS]] : tensor<8x1xf32>
// CHECK: %[[HIT:.*]] = mlc.compare eq %{{.*}}, %{{.*}} : tensor<8x1xi64>, tensor<8xi64>
// CHECK: %[[TS:.*]] = mlc.select %[[HIT]], %[[SH]], %{{.*}} : tensor<8x8xi1>, tensor<8x8xf32>, tensor<f32>
// CHECK-NEXT: %[[LT:.*]] = mlc.reduce_sum %[[TS]] axes = [1] keepdims
// CHECK-NEXT: %[[T:.*]] = mlc.tp_reduce sum %[[LT]] : tensor<8x1xf32>
// CHECK-NEXT: %[[LOG:.*]] = mlc.log %[[S]]
// CHECK-NEXT: mlc.sub %[[LOG]], %[[T]]
// CHECK-NOT: mlc.cross_entropy
// CHECK-NOT: mlc.tp_
// CHECK: return %{{.*}}, %[[Z]] : tensor<f32>, tensor<2x4x8xf32>
// Backward: each forward collective's dual, once: 2 tp_copy forward (the
// MLP's, the head's) and 4 as the duals of the tp_reduce sums (the
// lookup's, the MLP's, the exp-sums', the target's). The shift is detached
// (mlc.stop_gradient): no dual for its max, and no max rule (a compare of
// the logits with their maxima) reads the logits in backward. The
// embedding's gradient is this rank's rows only.
// GRAD-LABEL: func.func @train_step
// GRAD-COUNT-6: mlc.tp_copy
// GRAD-NOT: mlc.tp_copy
// NOMAX-LABEL: func.func @train_step
// NOMAX-NOT: mlc.compare eq %{{.*}}xf32>
// NOMAX: return
// GRAD: mlc.embedding_grad %{{.*}} : tensor<2x4x8xf32>, tensor<2x4xi64> -> tensor<8x8xf32>
// GRAD: return
// vocab-parallel=false: the table, the head and the loss stay replicated
// (and the head's tp_copy and the logits output are not needed).
// REPL-LABEL: func.func @forward
// REPL-SAME: %arg0: tensor<16x8xf32> {mlc.param = "wte"}
// REPL-SAME: -> (tensor<f32> {mlc.output = "loss"}, tensor<2x4x16xf32> {mlc.output = "logits"})
// REPL: mlc.embedding %arg0, %arg3 : tensor<16x8xf32>, tensor<2x4xi64>
// REPL: mlc.cross_entropy %{{.*}} : tensor<8x16xf32>, tensor<8xi64>
// REPL-NOT: mlc.tp_reduce max
// One rank: nothing changes.
// ONE-LABEL: func.func @forward
// ONE-SAME: %arg0: tensor<16x8xf32> {mlc.param = "wte"}
// ONE-NOT: mlc.tp_
// ONE-NOT: tp_rank
// ONE: mlc.cross_entropy
// ONE: return
func.func @forward(%wte: tensor<16x8xf32> {mlc.param = "wte"},
                   %w1: tensor<8x16xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<16x8xf32> {mlc.param = "c_proj.weight"},
                   %ids: tensor<2x4xi64> {mlc.input = "input_ids"},
                   %labels: tensor<2x4xi64> {mlc.input = "labels"})
    -> (tensor<f32> {mlc.output = "loss"}, tensor<2x4x16xf32> {mlc.output = "logits"}) {
  %x = mlc.embedding %wte, %ids : tensor<16x8xf32>, tensor<2x4xi64>
  %h = mlc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x16xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<2x4x16xf32>
  %y = mlc.matmul %a, %w2 : tensor<2x4x16xf32>, tensor<16x8xf32>
  %r = mlc.add %x, %y : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %logits = mlc.matmul %r, %wte transpose_rhs : tensor<2x4x8xf32>, tensor<16x8xf32>
  %z = mlc.reshape %logits : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %l = mlc.reshape %labels : tensor<2x4xi64> -> tensor<8xi64>
  %loss = mlc.cross_entropy %z, %l ignore_index = -100 : tensor<8x16xf32>, tensor<8xi64>
  return %loss, %logits : tensor<f32>, tensor<2x4x16xf32>
}

// -----

// Untied, with a bias on the head (BERT's decoder) and the shifted loss's
// slice of the logits: the head weight [V, H] keeps dim 0, its bias too;
// the slice keeps the (now local) vocabulary whole. A padding_idx (torch's
// nn.Embedding(padding_idx=3)) keeps its meaning: the ordinary lookup has
// none, and the padding ids read row 3 from a one-row lookup marked
// padding_idx (it never gets a gradient), on the rank that holds it
// (offset == 0), zeros elsewhere. Positions stay replicated.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<8x8xf32> {mlc.param = "embed_tokens.weight", mlc.tp_split = {blocks = array<i64: 16>, dim = 0 : i64}}
// CHECK-SAME: %arg1: tensor<16x8xf32> {mlc.param = "embed_positions.weight"}
// CHECK-SAME: %arg4: tensor<8x8xf32> {mlc.param = "lm_head.weight", mlc.tp_split = {blocks = array<i64: 16>, dim = 0 : i64}}
// CHECK-SAME: %arg5: tensor<8xf32> {mlc.param = "lm_head.bias", mlc.tp_split = {blocks = array<i64: 16>, dim = 0 : i64}}
// CHECK: %[[OFF:.*]] = mlc.mul
// CHECK: mlc.embedding %arg1, %{{.*}} : tensor<16x8xf32>, tensor<4xi64>
// CHECK: %[[ROWS:.*]] = mlc.embedding %arg0, %{{.*}} : tensor<8x8xf32>, tensor<2x4xi64>
// CHECK-NOT: padding_idx
// CHECK: %[[SLOT:.*]] = mlc.constant dense<3> : tensor<1xi64>
// CHECK-NEXT: %[[PADROW:.*]] = mlc.embedding %arg0, %[[SLOT]] {padding_idx = 3 : i64} : tensor<8x8xf32>, tensor<1xi64>
// CHECK-NEXT: %[[ZERO:.*]] = mlc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[HOLDS:.*]] = mlc.compare eq %[[OFF]], %[[ZERO]] : tensor<i64>, tensor<i64>
// CHECK-NEXT: %[[PADV:.*]] = mlc.select %[[HOLDS]], %[[PADROW]], %{{.*}} : tensor<i1>, tensor<1x8xf32>, tensor<f32>
// CHECK: %[[ISPAD:.*]] = mlc.compare eq %{{.*}}, %{{.*}} : tensor<2x4x1xi64>, tensor<i64>
// CHECK-NEXT: %[[J:.*]] = mlc.select %[[ISPAD]], %[[PADV]], %{{.*}} : tensor<2x4x1xi1>, tensor<1x8xf32>, tensor<2x4x8xf32>
// CHECK-NEXT: mlc.tp_reduce sum %[[J]] : tensor<2x4x8xf32>
// CHECK: mlc.matmul %{{.*}}, %arg4 transpose_rhs bias(%arg5 : tensor<8xf32>) : tensor<2x4x8xf32>, tensor<8x8xf32>
// CHECK: mlc.slice %{{.*}} starts = [0, 0, 0] ends = [2, 3, 8] steps = [1, 1, 1] : tensor<2x4x8xf32>
// CHECK: mlc.tp_reduce max
// CHECK-NOT: mlc.cross_entropy
// CHECK: return
// NOMAX-LABEL: func.func @train_step
// NOMAX-NOT: mlc.compare eq %{{.*}}xf32>
// NOMAX: return
// GRAD-LABEL: func.func @train_step
// GRAD: mlc.embedding_grad %{{.*}} {padding_idx = 3 : i64} : tensor<1x8xf32>, tensor<1xi64> -> tensor<8x8xf32>
// GRAD: return
func.func @forward(%wte: tensor<16x8xf32> {mlc.param = "embed_tokens.weight"},
                   %wpe: tensor<16x8xf32> {mlc.param = "embed_positions.weight"},
                   %w1: tensor<8x16xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<16x8xf32> {mlc.param = "c_proj.weight"},
                   %wh: tensor<16x8xf32> {mlc.param = "lm_head.weight"},
                   %bh: tensor<16xf32> {mlc.param = "lm_head.bias"},
                   %ids: tensor<2x4xi64> {mlc.input = "input_ids"},
                   %labels: tensor<2x4xi64> {mlc.input = "labels"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %pos = mlc.iota dim = 0 : tensor<4xi64>
  %p = mlc.embedding %wpe, %pos : tensor<16x8xf32>, tensor<4xi64>
  %e = mlc.embedding %wte, %ids {padding_idx = 3 : i64} : tensor<16x8xf32>, tensor<2x4xi64>
  %x = mlc.add %e, %p : tensor<2x4x8xf32>, tensor<4x8xf32>
  %h = mlc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x16xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<2x4x16xf32>
  %y = mlc.matmul %a, %w2 : tensor<2x4x16xf32>, tensor<16x8xf32>
  %logits = mlc.matmul %y, %wh transpose_rhs bias(%bh : tensor<16xf32>) : tensor<2x4x8xf32>, tensor<16x8xf32>
  %s = mlc.slice %logits starts = [0, 0, 0] ends = [2, 3, 16] steps = [1, 1, 1] : tensor<2x4x16xf32>
  %z = mlc.reshape %s : tensor<2x3x16xf32> -> tensor<6x16xf32>
  %ls = mlc.slice %labels starts = [0, 1] ends = [2, 4] steps = [1, 1] : tensor<2x4xi64>
  %l = mlc.reshape %ls : tensor<2x3xi64> -> tensor<6xi64>
  %loss = mlc.cross_entropy %z, %l ignore_index = -100 : tensor<6x16xf32>, tensor<6xi64>
  return %loss : tensor<f32>
}

// -----

// BERT for pre-training: the masked-LM loss is vocabulary-parallel; the
// pooler (tanh of a dense on the first token) and the next-sentence
// classifier's loss over 2 classes are not a vocabulary and stay
// replicated, as does the token-type table.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<8x8xf32> {mlc.param = "bert.embeddings.word_embeddings.weight", mlc.tp_split = {blocks = array<i64: 16>, dim = 0 : i64}}
// CHECK-SAME: %arg1: tensor<2x8xf32> {mlc.param = "bert.embeddings.token_type_embeddings.weight"}
// CHECK-SAME: %arg4: tensor<8x8xf32> {mlc.param = "bert.pooler.dense.weight"}
// CHECK-SAME: %arg5: tensor<2x8xf32> {mlc.param = "cls.seq_relationship.weight"}
// CHECK: mlc.embedding %arg1, %arg7 : tensor<2x8xf32>, tensor<8xi64>
// CHECK: mlc.tp_reduce max
// CHECK-NOT: mlc.tp_reduce max
// CHECK: %[[P:.*]] = mlc.matmul %{{.*}}, %arg4 transpose_rhs : tensor<1x8xf32>, tensor<8x8xf32>
// CHECK-NEXT: %[[T:.*]] = mlc.tanh %[[P]] : tensor<1x8xf32>
// CHECK-NEXT: %[[NSP:.*]] = mlc.matmul %[[T]], %arg5 transpose_rhs : tensor<1x8xf32>, tensor<2x8xf32>
// CHECK-NEXT: mlc.cross_entropy %[[NSP]], %{{.*}} ignore_index = -100 : tensor<1x2xf32>, tensor<1xi64>
func.func @forward(%wte: tensor<16x8xf32> {mlc.param = "bert.embeddings.word_embeddings.weight"},
                   %wtt: tensor<2x8xf32> {mlc.param = "bert.embeddings.token_type_embeddings.weight"},
                   %w1: tensor<8x16xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<16x8xf32> {mlc.param = "c_proj.weight"},
                   %wp: tensor<8x8xf32> {mlc.param = "bert.pooler.dense.weight"},
                   %wn: tensor<2x8xf32> {mlc.param = "cls.seq_relationship.weight"},
                   %ids: tensor<8xi64> {mlc.input = "input_ids"},
                   %types: tensor<8xi64> {mlc.input = "token_type_ids"},
                   %labels: tensor<8xi64> {mlc.input = "labels"},
                   %nsp: tensor<1xi64> {mlc.input = "next_sentence_label"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %e = mlc.embedding %wte, %ids : tensor<16x8xf32>, tensor<8xi64>
  %tt = mlc.embedding %wtt, %types : tensor<2x8xf32>, tensor<8xi64>
  %x = mlc.add %e, %tt : tensor<8x8xf32>, tensor<8x8xf32>
  %h = mlc.matmul %x, %w1 : tensor<8x8xf32>, tensor<8x16xf32>
  %a = mlc.gelu %h : tensor<8x16xf32>
  %y = mlc.matmul %a, %w2 : tensor<8x16xf32>, tensor<16x8xf32>
  %z = mlc.matmul %y, %wte transpose_rhs : tensor<8x8xf32>, tensor<16x8xf32>
  %mlm = mlc.cross_entropy %z, %labels ignore_index = -100 : tensor<8x16xf32>, tensor<8xi64>
  %cls = mlc.slice %y starts = [0, 0] ends = [1, 8] steps = [1, 1] : tensor<8x8xf32>
  %p = mlc.matmul %cls, %wp transpose_rhs : tensor<1x8xf32>, tensor<8x8xf32>
  %pt = mlc.tanh %p : tensor<1x8xf32>
  %n = mlc.matmul %pt, %wn transpose_rhs : tensor<1x8xf32>, tensor<2x8xf32>
  %nl = mlc.cross_entropy %n, %nsp ignore_index = -100 : tensor<1x2xf32>, tensor<1xi64>
  %loss = mlc.add %mlm, %nl : tensor<f32>, tensor<f32>
  return %loss : tensor<f32>
}
