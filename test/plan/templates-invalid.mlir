// RUN: mlc-opt %s -split-input-file -verify-diagnostics
// A template kernel's params against its template's schema (each
// template's kSchema, compiler/codegen/templates/, checked by its
// verifyKernel): one case per rule, then a kernel that passes.

// A template is one of the plan dialect's template attributes.
// expected-error @+1 {{unknown attribute `softmaxx` in dialect `plan`}}
plan.kernel @k0 rows #plan.softmaxx args(2) params {columns = 64 : i64, element = f32, rows = 16 : i64}

// -----

// ... and only those: an attribute that is not a template is refused.
// expected-error @+1 {{'plan.kernel' op attribute 'kernel_template' failed to satisfy constraint}}
plan.kernel @k0 rows 3 : i64 args(2) params {columns = 64 : i64, element = f32, rows = 16 : i64}

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'softmax'): parameter 'columns' is missing}}
plan.kernel @k0 rows #plan.softmax args(2) params {element = f32, rows = 16 : i64}

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'layer_norm'): parameter 'eps' must be an f64, got 5.000000e-01 : f32}}
plan.kernel @k0 rows #plan.layer_norm args(4) params {columns = 8 : i64, element = f32, eps = 0.5 : f32, rows = 4 : i64}

// -----

// A typed template's parameter of the wrong kind does not parse.
// expected-error @+2 {{expected non-function type}}
// expected-error @+1 {{failed to parse Plan_EmbeddingTemplate parameter 'ids'}}
plan.kernel @k0 gather #plan.embedding<element = f32, ids = 3, rows = 4, vocab = 16, columns = 8> args(3)

// -----

// An optional parameter, where present, has its kind too.
// expected-error @+1 {{'plan.kernel' op @k0 (template 'softmax'): parameter 'log' must be a flag (unit attribute), got true}}
plan.kernel @k0 rows #plan.softmax args(2) params {columns = 64 : i64, element = f32, log = true, rows = 16 : i64}

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'copies'): parameter 'nests' must be an array of dictionaries, got [1]}}
plan.kernel @k0 copy #plan.copies args(2) params {element = f32, nests = [1 : i64]}

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

// expected-error @+1 {{'plan.kernel' op @k0 (template 'cross_entropy_grad'): parameters 'rows' and 'rows_per_token' must be >= 0, got 16 and -1}}
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
