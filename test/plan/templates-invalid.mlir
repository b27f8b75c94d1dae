// RUN: mlc-opt %s -split-input-file -verify-diagnostics
// A template kernel's parameters: what their ODS types refuse as they parse
// (PlanTemplates.td), and what each template's verifyKernel checks beyond
// them (compiler/codegen/templates/): one case per rule, then kernels that
// pass.

// A template is one of the plan dialect's template attributes.
// expected-error @+1 {{unknown attribute `softmaxx` in dialect `plan`}}
plan.kernel @k0 rows #plan.softmaxx args(2) params {columns = 64 : i64, element = f32, rows = 16 : i64}

// -----

// ... and only those: an attribute that is not a template is refused.
// expected-error @+1 {{'plan.kernel' op attribute 'kernel_template' failed to satisfy constraint}}
plan.kernel @k0 rows 3 : i64 args(2) params {columns = 64 : i64, element = f32, rows = 16 : i64}

// -----

// A typed template's missing parameter is a parse error.
// expected-error @+1 {{struct is missing required parameter: columns}}
plan.kernel @k0 rows #plan.softmax<element = f32, rows = 16> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'layer_norm'): parameter 'eps' must be finite and >= 0, got -5.000000e-01}}
plan.kernel @k0 rows #plan.layer_norm<element = f32, rows = 4, columns = 8, eps = -0.5> args(4)

// -----

// A typed template's parameter of the wrong kind does not parse.
// expected-error @+2 {{expected non-function type}}
// expected-error @+1 {{failed to parse Plan_EmbeddingTemplate parameter 'ids'}}
plan.kernel @k0 gather #plan.embedding<element = f32, ids = 3, rows = 4, vocab = 16, columns = 8> args(3)

// -----

// Row templates (softmax, softmax_grad, layer_norm, layer_norm_grad): rows
// of `columns` > 0 float elements, a row count >= 0, their buffers.
// expected-error @+1 {{'plan.kernel' op @k0 (template 'softmax'): parameter 'columns' must be > 0, got 0}}
plan.kernel @k0 rows #plan.softmax<element = f32, rows = 16, columns = 0, log = true> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'softmax_grad'): parameter 'rows_per_token' must be >= 0, got -2}}
plan.kernel @k0 rows #plan.softmax_grad<element = f32, rows = 16, rows_per_token = -2, columns = 64> args(3)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'softmax_grad'): parameter 'element' must be a float type, got 'i32'}}
plan.kernel @k0 rows #plan.softmax_grad<element = i32, rows = 16, columns = 64> args(3)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'softmax_grad'): takes 3 arguments with these parameters, got 2}}
plan.kernel @k0 rows #plan.softmax_grad<element = f32, rows = 16, columns = 64> args(2)

// -----

// A LayerNorm reads its weight and bias, an RMSNorm its weight, a `unit` norm neither.
// expected-error @+1 {{'plan.kernel' op @k0 (template 'layer_norm'): takes 3 arguments with these parameters, got 4}}
plan.kernel @k0 rows #plan.layer_norm<element = f32, rows = 4, columns = 8, eps = 1.0e-5, rms = true> args(4)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'layer_norm'): takes its parameters in #plan.layer_norm<...>, not in params}}
plan.kernel @k0 rows #plan.layer_norm<element = f32, rows = 4, columns = 8, eps = 1.0e-5, unit = true> args(2) params {eps = 1.0e-5 : f64}

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'layer_norm_grad'): parameter 'capacity' must be >= rows (16), got 8}}
plan.kernel @k0 rows #plan.layer_norm_grad<element = f32, rows = 16, capacity = 8, columns = 64, eps = 1.0e-5> args(6)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'layer_norm_grad'): parameter 'copy' must be a float type, got 'i32'}}
plan.kernel @k0 rows #plan.layer_norm_grad<element = f32, rows = 16, capacity = 16, columns = 64, eps = 1.0e-5, copy = i32> args(7)

// -----

// Well-formed row kernels: no error.
plan.kernel @k0 rows #plan.softmax<element = f64, rows = 16, rows_per_token = 2, columns = 64> args(2)
plan.kernel @k1 rows #plan.layer_norm<element = f32, rows = 4, columns = 8, eps = 0.0> args(4)
plan.kernel @k2 rows #plan.layer_norm_grad<element = f32, rows = 8, capacity = 16, columns = 64, eps = 1.0e-6, rms = true, residual = true, copy = bf16, grad_element = bf16, plus_one = true> args(7)

// -----

// A copies kernel's nests are #plan.nest<...>, each with its every
// required field.
// expected-error @+2 {{struct is missing required parameter: src_arg}}
// expected-error @+1 {{failed to parse Plan_CopiesTemplate parameter 'nests'}}
plan.kernel @k0 copy #plan.copies<element = f32, nests = [#plan.nest<dims = [8], dst_offset = 0, dst_strides = [1], src_offset = 0, src_strides = [1]>]> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'copies'): nest 1: parameter 'src_arg' must be an input, 1 to 2, got 3}}
plan.kernel @k0 copy #plan.copies<element = f32, nests = [#plan.nest<dims = [8], dst_offset = 0, dst_strides = [1], src_arg = 1, src_offset = 0, src_strides = [1]>, #plan.nest<dims = [8], dst_offset = 8, dst_strides = [1], src_arg = 3, src_offset = 0, src_strides = [1]>]> args(3)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'copies'): nest 0: 2 dims but 2 destination and 1 source strides}}
plan.kernel @k0 copy #plan.copies<element = f32, nests = [#plan.nest<dims = [4, 8], dst_offset = 0, dst_strides = [16, 1], src_arg = 1, src_offset = 0, src_strides = [1]>], zero_bytes = 256> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'copies'): parameter 'nests' must not be empty}}
plan.kernel @k0 copy #plan.copies<element = f32, nests = []> args(1)

// -----

// iota's source is its index, no argument.
// expected-error @+1 {{'plan.kernel' op @k0 (template 'iota'): nest 0: parameter 'src_arg' must be -1 (the index), got 1}}
plan.kernel @k0 pointwise #plan.iota<element = i64, nests = [#plan.nest<dims = [4, 8], dst_offset = 0, dst_strides = [8, 1], src_arg = 1, src_offset = 0, src_strides = [0, 1]>]> args(1)

// -----

// A nest is no template.
// expected-error @+1 {{'plan.kernel' op attribute 'kernel_template' failed to satisfy constraint}}
plan.kernel @k0 copy #plan.nest<dims = [8], dst_offset = 0, dst_strides = [1], src_arg = 1, src_offset = 0, src_strides = [1]> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'constant'): parameter 'values' must hold 'f32' elements, got 'f64'}}
plan.kernel @k0 fill #plan.constant<element = f32, values = dense<[1.0, 2.0]> : tensor<2xf64>> args(1)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'rotary_table'): parameter 'positions' must be >= 0, got -1}}
plan.kernel @k0 fill #plan.rotary_table<element = f32, positions = -1, inv_freq = array<f64: 1.0, 0.1>> args(1)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'rotary_table'): parameter 'element' must be a float type, got 'i32'}}
plan.kernel @k0 fill #plan.rotary_table<element = i32, positions = 8, inv_freq = array<f64: 1.0, 0.1>, sine = true> args(1)

// -----

// A reduction's `reduce` and `layout` are its enums' cases.
// expected-error @+2 {{expected ::mlc::plan::ReductionKind to be one of: sum, mean, max}}
// expected-error @+1 {{failed to parse Plan_ReductionTemplate parameter 'reduce'}}
plan.kernel @k0 reduction #plan.reduction<reduce = min, layout = rows, element = f32, rows = 4, outputs = 4, length = 8> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'reduction'): parameter 'length' must be > 0 in a rows reduction, got 0}}
plan.kernel @k0 reduction #plan.reduction<reduce = sum, layout = rows, element = f32, rows = 4, outputs = 4> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'reduction'): a general reduction needs kept_dims, kept_strides, reduced_dims and reduced_strides}}
plan.kernel @k0 reduction #plan.reduction<reduce = max, layout = general, element = f32, outputs = 4, kept_dims = [4], kept_strides = [1]> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'reduction'): the kept and reduced axes belong to a general reduction}}
plan.kernel @k0 reduction #plan.reduction<reduce = sum, layout = columns, element = f32, rows = 4, length = 8, kept_dims = [8]> args(2)

// -----

// Well-formed copies, iota, constant, rotary_table and reductions: no error.
plan.kernel @k0 copy #plan.copies<element = f32, nests = [#plan.nest<dims = [4, 8], dynamic = true, dst_offset = 0, dst_strides = [16, 1], src_arg = 1, src_offset = 0, src_strides = [8, 1], vector_lanes = 4, dst_vector = true, src_vector = true>], zero_bytes = 256> args(2)
plan.kernel @k1 pointwise #plan.iota<element = i64, nests = [#plan.nest<dims = [4, 8], dst_offset = 0, dst_strides = [8, 1], src_arg = -1, src_offset = 0, src_strides = [0, 1]>]> args(1)
plan.kernel @k2 fill #plan.constant<element = i64, values = dense<[1, 2, 3]> : tensor<3xi64>> args(1)
plan.kernel @k3 fill #plan.rotary_table<element = bf16, positions = 8, inv_freq = array<f64: 1.0, 0.1>, sine = true> args(1)
plan.kernel @k4 reduction #plan.reduction<reduce = mean, layout = rows, element = f32, rows = 64, rows_per_token = 1, outputs = 64, length = 8, count = 8> args(2)
plan.kernel @k5 reduction #plan.reduction<reduce = max, layout = general, element = f32, outputs = 4, kept_dims = [4], kept_strides = [1], reduced_dims = [2, 3], reduced_strides = [24, 4]> args(2)

// -----

// The cross-entropy and embedding templates (typed): their models refuse
// what the types allow but the kernels cannot run.
// expected-error @+1 {{'plan.kernel' op @k0 (template 'cross_entropy'): parameter 'columns' must be > 0, got 0}}
plan.kernel @k0 rows #plan.cross_entropy<element = f32, labels = i64, rows = 16, columns = 0, ignore = -100> args(3)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'cross_entropy'): parameter 'labels' must be an integer type, got 'f32'}}
plan.kernel @k0 rows #plan.cross_entropy<element = f32, labels = f32, rows = 16, columns = 256, ignore = -100> args(3)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'cross_entropy'): takes its parameters in #plan.cross_entropy<...>, not in params}}
plan.kernel @k0 rows #plan.cross_entropy<element = f32, labels = i64, rows = 16, columns = 256, ignore = -100> args(3) params {columns = 256 : i64}

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'cross_entropy_grad'): parameter 'element' must be a float type, got 'i32'}}
plan.kernel @k0 rows #plan.cross_entropy_grad<element = i32, labels = i64, rows = 16, columns = 256, ignore = -100> args(4)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'cross_entropy_grad'): parameter 'rows_per_token' must be >= 0, got -1}}
plan.kernel @k0 rows #plan.cross_entropy_grad<element = f32, labels = i64, rows = 16, rows_per_token = -1, columns = 256, ignore = -100> args(4)

// -----

// The fused loss and gradient's incoming gradient is a constant: required.
// expected-error @+1 {{struct is missing required parameter: scale}}
plan.kernel @k0 rows #plan.cross_entropy_with_grad<element = f32, labels = i64, grad = f32, rows = 16, columns = 256, ignore = -100> args(4)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'cross_entropy_with_grad'): parameter 'grad' must be a float type, got 'i64'}}
plan.kernel @k0 rows #plan.cross_entropy_with_grad<element = f32, labels = i64, grad = i64, rows = 16, columns = 256, ignore = -100, scale = 1.0 : f32> args(4)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'embedding'): parameter 'vocab' must be > 0, got 0}}
plan.kernel @k0 gather #plan.embedding<element = f32, ids = i64, rows = 4, vocab = 0, columns = 8> args(3)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'embedding_grad'): parameter 'ids' must be an integer type, got 'f32'}}
plan.kernel @k0 scatter #plan.embedding_grad<element = f32, ids = f32, rows = 4, vocab = 16, columns = 8> args(3)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'embedding_grad'): parameter 'padding' must be a row of the 16-row table, got 16}}
plan.kernel @k0 scatter #plan.embedding_grad<element = f32, ids = i64, rows = 4, vocab = 16, columns = 8, padding = 16> args(3)

// -----

// Well-formed: no error (a gradient without `scale` reads it from p3[0];
// dynamic rows; a padding row; rows added to the table as it is).
plan.kernel @k0 rows #plan.cross_entropy<element = f32, labels = i64, rows = 16, columns = 256, ignore = -100> args(3)
plan.kernel @k1 rows #plan.cross_entropy_grad<element = f64, labels = i32, rows = 16, rows_per_token = 2, columns = 256, ignore = -1> args(4)
plan.kernel @k2 rows #plan.cross_entropy_with_grad<element = f32, labels = i64, grad = bf16, rows = 16, columns = 256, ignore = -100, scale = 5.000000e-01 : f32> args(4)
plan.kernel @k3 gather #plan.embedding<element = bf16, ids = i32, rows = 4, rows_per_token = 1, vocab = 16, columns = 8> args(3)
plan.kernel @k4 scatter #plan.embedding_grad<element = f32, ids = i64, rows = 4, vocab = 16, columns = 8, padding = 0, accumulate = true> args(3)

// -----

// A typed template (#plan.fill<...>) checks its parameters' names and
// types as it parses...
// expected-error @+1 {{duplicate or unknown struct parameter name: cnt}}
plan.kernel @k0 fill #plan.fill<element = f32, cnt = 4, value = 0.0 : f32> args(1)

// -----

// ... and its model checks what the types cannot say, naming the kernel.
// expected-error @+1 {{'plan.kernel' op @k0 (template 'fill'): parameter 'value' must be an integer or a float, got "zero"}}
plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = "zero"> args(1)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'fill'): parameter 'count' must be >= 0, got -4}}
plan.kernel @k0 fill #plan.fill<element = f32, count = -4, value = 0.0 : f32> args(1)

// -----

// Its parameters are the attribute's: a params dictionary beside them is refused.
// expected-error @+1 {{'plan.kernel' op @k0 (template 'fill'): takes its parameters in #plan.fill<...>, not in params}}
plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = 0.0 : f32> args(1) params {count = 4 : i64}

// -----

// A well-formed fill: no error.
plan.kernel @k0 fill #plan.fill<element = f64, count = 4, value = 1 : i64> args(1)

// -----

// attention (#plan.attention<...>, typed): its model checks the shape the
// types allow, here a query head count its kv heads do not divide (more
// cases in attention-rotary-invalid.mlir).
// expected-error @+1 {{'plan.kernel' op @k4 (template 'attention'): kv_heads 3 must divide heads 4}}
plan.kernel @k4 attention #plan.attention<element = f32, causal = true, batch = 2, heads = 4, kv_heads = 3, seq_q = 8, seq_k = 8, head_dim = 32, value_dim = 32, token_capacity = 0, scale = 0.17677669529663687, dropout = 1.000000e-01, seed = 2, arg_types = [f32, f32, f32, f32], arg_written = [true, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], tensors = [0, 1024, 32, 128, 0, 3072, 32, 384, 128, 3072, 32, 384, 256, 3072, 32, 384]> args(4)

// -----

// scan (mlc.cumsum's running sum): an element type whose sum the kernel
// keeps exactly in C (f32, f64, i32, i64), lines of length > 0, 2 arguments.
// expected-error @+1 {{'plan.kernel' op @k0 (template 'scan'): parameter 'element' must be f32, f64, i32 or i64, got 'bf16'}}
plan.kernel @k0 pointwise #plan.scan<element = bf16, rows = 2, length = 8, inner = 1> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'scan'): parameter 'length' must be > 0, got 0}}
plan.kernel @k0 pointwise #plan.scan<element = i64, rows = 2, length = 0, inner = 1> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'scan'): parameter 'inner' must be > 0, got 0}}
plan.kernel @k0 pointwise #plan.scan<element = f32, rows = 2, length = 8, inner = 0> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'scan'): takes 2 arguments (the sums, the input), got 3}}
plan.kernel @k0 pointwise #plan.scan<element = i64, rows = 2, length = 8, inner = 1> args(3)

// -----

// Well-formed: no error (dynamic rows; an exclusive sum from the end).
plan.kernel @k0 pointwise #plan.scan<element = i64, rows = 2, length = 1024, inner = 1> args(2)
plan.kernel @k1 pointwise #plan.scan<element = f64, rows = 64, rows_per_token = 1, length = 8, inner = 6, exclusive = true, reverse = true> args(2)
