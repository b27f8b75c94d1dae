// RUN: mlc-opt %s --mlc-cuda-vectorize | FileCheck %s
// RUN: mlc-opt %s --mlc-cuda-vectorize | mlc-opt | FileCheck %s
// RUN: mlc-opt %s --mlc-cuda-vectorize --mlc-cuda-launch | FileCheck %s --check-prefix=LAUNCH
// RUN: not mlc-opt %s --mlc-cuda-launch -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNDECIDED

// A copies or iota kernel's nests are #plan.nest<...> attributes;
// mlc-cuda-vectorize writes its decision into each: vector_lanes, and which
// of the destination and the source are vector accesses (iota's source, the
// index, never is). A concatenation of two [4, 8] rows into [4, 16], after
// clearing 256 bytes, and a [4, 8] iota along the last dimension.
plan.kernel @k0 copy #plan.copies<element = f32, nests = [#plan.nest<dims = [4, 8], dst_offset = 0, dst_strides = [16, 1], src_arg = 1, src_offset = 0, src_strides = [8, 1]>, #plan.nest<dims = [4, 8], dst_offset = 8, dst_strides = [16, 1], src_arg = 2, src_offset = 0, src_strides = [8, 1]>], zero_bytes = 256> args(3)
plan.kernel @k1 pointwise #plan.iota<element = i64, nests = [#plan.nest<dims = [4, 8], dst_offset = 0, dst_strides = [8, 1], src_arg = -1, src_offset = 0, src_strides = [0, 1]>]> args(1)

// CHECK: plan.kernel @k0 copy #plan.copies<element = f32, nests = [#plan.nest<dims = [4, 8], dst_offset = 0, dst_strides = [16, 1], src_arg = 1, src_offset = 0, src_strides = [8, 1], vector_lanes = 4, dst_vector = true, src_vector = true>, #plan.nest<dims = [4, 8], dst_offset = 8, dst_strides = [16, 1], src_arg = 2, src_offset = 0, src_strides = [8, 1], vector_lanes = 4, dst_vector = true, src_vector = true>], zero_bytes = 256> args(3){{$}}
// CHECK: plan.kernel @k1 pointwise #plan.iota<element = i64, nests = [#plan.nest<dims = [4, 8], dst_offset = 0, dst_strides = [8, 1], src_arg = -1, src_offset = 0, src_strides = [0, 1], vector_lanes = 2, dst_vector = true>]> args(1){{$}}

// The schedule: the zeroing (256 bytes, 4 a thread), then a phase per nest
// of 32 / 4 vectors; iota's i64 index in pairs (16 bytes).
// LAUNCH: plan.kernel @k0 copy {{.*}} attributes {cuda.launch = [array<i64: 1, 256>, array<i64: 1, 256>, array<i64: 1, 256>]
// LAUNCH: plan.kernel @k1 pointwise {{.*}} attributes {cuda.launch = [array<i64: 1, 256>]

// Without the decision mlc-cuda-launch cannot schedule a nest.
// UNDECIDED: kernel @k0: no vector decision (run mlc-cuda-vectorize first)
