// RUN: mlc-opt %s -split-input-file -verify-diagnostics
// One case per verifier rule of a dropout's block (`block %rank of N span S`
// on mlc.dropout, `block %rank of N along A` on mlc.attention).

func.func @span_not_suffix(%x: tensor<2x4x64xf32>, %r: tensor<1xf64>) {
  // expected-error @+1 {{'mlc.dropout' op a dropout block's span 96 is not the product of the input's static dims from one dim on}}
  %d = mlc.dropout %x ratio = 0.1 seed = 7 block %r of 2 span 96 : tensor<2x4x64xf32>, tensor<1xf64>
  return
}

// -----

func.func @span_dynamic(%x: tensor<?x64xf32>, %r: tensor<1xf64>) {
  // expected-error @+1 {{'mlc.dropout' op a dropout block's span 128 is not the product of the input's static dims from one dim on}}
  %d = mlc.dropout %x ratio = 0.1 seed = 7 block %r of 2 span 128 : tensor<?x64xf32>, tensor<1xf64>
  return
}

// -----

func.func @rank_shape(%x: tensor<2x64xf32>, %r: tensor<2xf64>) {
  // expected-error @+1 {{a dropout block's rank must be a tensor<1xf64>, got 'tensor<2xf64>'}}
  %d = mlc.dropout %x ratio = 0.1 seed = 7 block %r of 2 span 64 : tensor<2x64xf32>, tensor<2xf64>
  return
}

// -----

func.func @count(%x: tensor<2x64xf32>, %r: tensor<1xf64>) {
  // expected-error @+1 {{a dropout block's count must be at least 1, got 0}}
  %d = mlc.dropout %x ratio = 0.1 seed = 7 block %r of 0 span 64 : tensor<2x64xf32>, tensor<1xf64>
  return
}

// -----

func.func @without_rank(%x: tensor<2x64xf32>) {
  // expected-error @+1 {{'mlc.dropout' op a dropout block needs its rank, count and span together}}
  %d = mlc.dropout %x ratio = 0.1 seed = 7 {blocks = 2 : i64} : tensor<2x64xf32>
  return
}

// -----

func.func @attention_keys(%q: tensor<2x2x4x32xf32>, %r: tensor<1xf64>) {
  // expected-error @+1 {{a dropout block's axis 3 is not a dim of the probabilities but the keys' (0 .. 2)}}
  %a = mlc.attention %q, %q, %q causal dropout = 0.1 seed = 3 block %r of 2 along 3 : tensor<2x2x4x32xf32>, tensor<2x2x4x32xf32>, tensor<2x2x4x32xf32>, tensor<1xf64>
  return
}

// -----

func.func @attention_varlen_axis(%q: tensor<?x2x32xf32>, %cu: tensor<3xi32>, %r: tensor<1xf64>) {
  // expected-error @+1 {{a dropout block's axis 2 is not a dim of the probabilities but the keys' (0 .. 1)}}
  %a = mlc.attention %q, %q, %q cu_seqlens %cu dropout = 0.1 seed = 3 block %r of 2 along 2 : tensor<?x2x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>, tensor<3xi32>, tensor<1xf64>
  return
}
