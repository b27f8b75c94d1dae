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

// A typed template's missing parameter is a parse error.
// expected-error @+1 {{struct is missing required parameter: columns}}
plan.kernel @k0 rows #plan.softmax<element = f32, rows = 16> args(2)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'layer_norm'): parameter 'eps' must be finite and >= 0, got -5.000000e-01}}
plan.kernel @k0 rows #plan.layer_norm<element = f32, rows = 4, columns = 8, eps = -0.5> args(4)

// -----

// expected-error @+1 {{'plan.kernel' op @k0 (template 'embedding'): parameter 'ids' must be a type, got 3 : i64}}
plan.kernel @k0 gather #plan.embedding args(3) params {columns = 8 : i64, element = f32, ids = 3 : i64, rows = 4 : i64, vocab = 16 : i64}

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

// expected-error @+1 {{'plan.kernel' op @k0 (template 'copies'): parameter 'nests' must be an array of dictionaries, got [1]}}
plan.kernel @k0 copy #plan.copies args(2) params {element = f32, nests = [1 : i64]}

// -----

// Every required parameter of its kind: no error.
plan.kernel @k0 rows #plan.cross_entropy args(3) params {columns = 256 : i64, element = f32, ignore = -100 : i64, labels = i64, rows = 16 : i64}

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
