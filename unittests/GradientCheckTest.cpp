//===- GradientCheckTest.cpp - autodiff against finite differences ---------===//
//
// Every gradient rule, and whole tiny GPT-2, BERT and Llama models, checked end to
// end in f64: the compiled @train_step's gradients against central finite
// differences of the compiled @forward's loss, both run by the CPU runtime.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipeline.h"
#include "dialects/mlc/MlcDialect.h"
#include "frontend/onnx/OnnxImporter.h"
#include "runtime/backend/cpu/CpuBackend.h"
#include "support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <gtest/gtest.h>
#include <random>
#include <unistd.h>

using namespace mlc;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/mlc-gradcheck-XXXXXX";
  return mkdtemp(tmpl);
}

/// Compiles a module (with @forward) for training into a package; `weights`
/// are an imported model's initial parameters.
std::string compile(mlir::OwningOpRef<mlir::ModuleOp> &module,
                    std::vector<std::pair<std::string, rt::HostTensor>> weights = {}) {
  if (auto err = runPipeline(*module, /*training=*/true)) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return "";
  }
  std::string dir = tempDir();
  PackageDescription description{"test", "", BuildOptions()};
  description.weights = std::move(weights);
  auto lowered = writePackage(*module, dir, description);
  if (!lowered) {
    ADD_FAILURE() << llvm::toString(lowered.takeError());
    return "";
  }
  return dir;
}

struct Inputs {
  /// Values of float inputs and parameters are drawn from [lo, hi].
  double lo = -1.0, hi = 1.0;
  /// Integer inputs draw from [0, intHi).
  int64_t intHi = 4;
  /// Fixed integer inputs by name (labels with ignore_index, masks).
  std::map<std::string, std::vector<int64_t>> fixed;
  /// Tokens of a dynamic token dimension (below the package's capacity).
  int64_t rows = 0;
  /// Elements [begin, end) of a parameter whose gradient is exactly 0 by
  /// definition, not the loss's derivative (an embedding's padding_idx row):
  /// checked to be 0, never against finite differences.
  std::map<std::string, std::pair<int64_t, int64_t>> zero;
};

/// Checks every parameter's analytic gradient against central differences
/// on up to `samples` elements per parameter. Returns the worst relative
/// error (|analytic - numeric| / max(|numeric|, 1e-3 * max |grad|)).
double gradientCheck(const std::string &dir, const Inputs &spec, int samples = 12) {
  rt::Package pkg = rt::Package::load(dir);
  rt::CpuBackend backend(pkg);
  EXPECT_EQ(backend.elementSize(), 8) << "gradient checks run in f64";
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> uni(spec.lo, spec.hi);
  std::vector<double> p(pkg.paramCount);
  for (int64_t i = 0; i < pkg.paramCount; ++i)
    p[i] = uni(rng);
  // One element of the parameters, written through the backend.
  auto setParam = [&](int64_t i, double x) {
    backend.upload(rt::FlatBuffer::Params, i * 8, &x, 8);
  };
  backend.upload(rt::FlatBuffer::Params, 0, p.data(), p.size() * 8);
  for (const rt::InputInfo &in : pkg.inputs) {
    rt::HostTensor t;
    t.dtype = in.dtype;
    t.shape = in.shape;
    if (in.dynamic())
      t.shape[0] = spec.rows;
    t.data.resize(t.numel() * rt::dtypeSize(in.dtype));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (in.dtype == "f64") {
        reinterpret_cast<double *>(t.data.data())[i] = uni(rng);
      } else {
        auto f = spec.fixed.find(in.name);
        int64_t v = f != spec.fixed.end() ? f->second[i % f->second.size()]
                                          : int64_t(rng() % spec.intHi);
        if (in.dtype == "i64")
          reinterpret_cast<int64_t *>(t.data.data())[i] = v;
        else
          reinterpret_cast<int32_t *>(t.data.data())[i] = int32_t(v);
      }
    }
    backend.setInput(in.name, t);
  }
  const int64_t step = 3;
  backend.run("train_step", step);
  std::vector<double> grads(pkg.paramCount);
  backend.download(rt::FlatBuffer::Grads, 0, grads.data(), grads.size() * 8);
  double gmax = 0;
  for (double g : grads)
    gmax = std::max(gmax, std::fabs(g));
  auto loss = [&] {
    backend.run("forward", step);
    return backend.output("forward", "loss").getDouble(0);
  };
  double worst = 0;
  const double h = 1e-5;
  for (const rt::ParamInfo &param : pkg.params) {
    auto zero = spec.zero.find(param.name);
    if (zero != spec.zero.end())
      for (int64_t e = zero->second.first; e < zero->second.second; ++e)
        EXPECT_EQ(grads[param.offset + e], 0.0)
            << param.name << "[" << e << "] must get no gradient";
    for (int s = 0; s < samples && s < param.numel; ++s) {
      int64_t e = s == 0 ? 0 : int64_t(rng() % param.numel);
      if (zero != spec.zero.end() && e >= zero->second.first && e < zero->second.second)
        continue;
      int64_t i = param.offset + e;
      double saved = p[i];
      setParam(i, saved + h);
      double up = loss();
      setParam(i, saved - h);
      double down = loss();
      setParam(i, saved);
      double numeric = (up - down) / (2 * h);
      double err = std::fabs(grads[i] - numeric) /
                   std::max({std::fabs(numeric), 1e-3 * gmax, 1e-12});
      if (err > worst)
        worst = err;
      EXPECT_LT(err, 1e-6) << param.name << "[" << i - param.offset << "]: analytic "
                           << grads[i] << " vs numeric " << numeric;
    }
  }
  return worst;
}

/// Builds the module from text and runs the check.
void checkText(const std::string &text, const Inputs &spec = Inputs(), int samples = 12) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<MlcDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  ASSERT_TRUE(module) << text;
  std::string dir = compile(module);
  ASSERT_FALSE(dir.empty());
  try {
    gradientCheck(dir, spec, samples);
  } catch (const rt::Error &e) {
    FAIL() << e.what();
  }
}

/// A one-op model: loss = sum(op(params...) * r) with a random weighting r,
/// so that every output element's gradient matters.
std::string unary(const std::string &body, const std::string &type,
                  const std::string &extraArgs = "") {
  return "func.func @forward(%x: " + type + " {mlc.param = \"x\"}" + extraArgs +
         ", %r: " + type + " {mlc.input = \"r\"}) -> (tensor<f64> {mlc.output = \"loss\"}) {\n" +
         body + "\n  %weighted = mlc.mul %y, %r : " + type + ", " + type +
         "\n  %l = mlc.reduce_sum %weighted axes = [0, 1] : " + type +
         "\n  return %l : tensor<f64>\n}\n";
}

} // namespace

TEST(GradientCheck, Pointwise) {
  const std::string t = "tensor<3x5xf64>";
  for (std::string op : {"neg", "exp", "tanh", "erf", "silu"})
    checkText(unary("  %y = mlc." + op + " %x : " + t, t));
  checkText(unary("  %y = mlc.gelu %x : " + t, t));
  checkText(unary("  %y = mlc.gelu %x approximate = tanh : " + t, t));
  Inputs positive;
  positive.lo = 0.5;
  positive.hi = 2.0;
  for (std::string op : {"log", "sqrt", "rsqrt"})
    checkText(unary("  %y = mlc." + op + " %x : " + t, t), positive);
  // silu's tails: sigmoid near 0 and near 1.
  Inputs wide;
  wide.lo = -8.0;
  wide.hi = 8.0;
  checkText(unary("  %y = mlc.silu %x : " + t, t), wide);
  // SwiGLU: the gate's and the up projection's gradients (one kernel).
  const std::string up = ", %u: " + t + " {mlc.param = \"u\"}";
  checkText(unary("  %y = mlc.swiglu %x, %u : " + t, t, up));
  checkText(unary("  %y = mlc.swiglu %x, %u : " + t, t, up), wide);
}

/// mlc.rotary in both conventions, plain and transposed (its own gradient),
/// full and partial (rotary dim 4 of a head dim 6: the last two elements
/// pass through), with random tables (the op is linear in x for any
/// tables), read through a transpose (the head split's view) and followed
/// by a pointwise op that fuses with it, or produced by one that cannot
/// (the partner is a read).
TEST(GradientCheck, Rotary) {
  const std::string t = "tensor<3x4xf64>";
  for (std::string D : {"4", "6"})
    for (std::string attrs : {"", " interleaved", " transpose", " interleaved transpose"})
      for (bool viewed : {true, false}) {
        const std::string x = "tensor<2x2x3x" + D + "xf64>", in = "tensor<2x3x2x" + D + "xf64>";
        std::string text =
            "func.func @forward(%x: " + in + " {mlc.param = \"x\"}, %c: " + t +
            " {mlc.input = \"c\"}, %s: " + t + " {mlc.input = \"s\"}, %r: " + x +
            " {mlc.input = \"r\"}) -> (tensor<f64> {mlc.output = \"loss\"}) {\n"
            "  %xt0 = mlc.transpose %x, [0, 2, 1, 3] : " + in + "\n  %xt = " +
            (viewed ? "mlc.transpose %x, [0, 2, 1, 3] : " + in : "mlc.exp %xt0 : " + x) +
            "\n  %y0 = mlc.rotary %xt, %c, %s" + attrs + " : " + x + ", " + t +
            "\n  %y = mlc.tanh %y0 : " + x + "\n  %w = mlc.mul %y, %r : " + x + ", " + x +
            "\n  %l = mlc.reduce_sum %w axes = [0, 1, 2, 3] : " + x +
            "\n  return %l : tensor<f64>\n}\n";
        checkText(text);
      }
}

TEST(GradientCheck, BinaryWithBroadcasting) {
  const std::string t = "tensor<3x5xf64>";
  std::string extra = ", %b: tensor<5xf64> {mlc.param = \"b\"}";
  for (std::string op : {"add", "sub", "mul", "div"})
    checkText(unary("  %y = mlc." + op + " %x, %b : " + t + ", tensor<5xf64>", t, extra));
  Inputs positive;
  positive.lo = 0.5;
  positive.hi = 2.0;
  checkText(unary("  %y = mlc.pow %x, %b : " + t + ", tensor<5xf64>", t, extra), positive);
  // A [3, 1] column broadcast against [1, 5] rows.
  checkText(unary("  %c = mlc.reshape %b : tensor<5xf64> -> tensor<1x5xf64>\n"
                  "  %y0 = mlc.reduce_sum %x axes = [1] keepdims : " + t + "\n"
                  "  %y = mlc.mul %y0, %c : tensor<3x1xf64>, tensor<1x5xf64>",
                  t, extra));
}

TEST(GradientCheck, ShapesAndReductions) {
  const std::string t = "tensor<3x4xf64>";
  checkText(unary("  %z = mlc.transpose %x, [1, 0] : " + t +
                      "\n  %y = mlc.transpose %z, [1, 0] : tensor<4x3xf64>",
                  t));
  checkText(unary("  %s = mlc.slice %x starts = [1, 0] ends = [3, 4] steps = [1, 1] : " + t +
                      "\n  %y = mlc.pad %s low = [0, 0] high = [1, 0] : tensor<2x4xf64>",
                  t));
  checkText(unary("  %a:2 = mlc.split %x axis = 1 sizes = [1, 3] : " + t +
                      "\n  %e = mlc.exp %a#1 : tensor<3x3xf64>"
                      "\n  %y = mlc.concat(%a#0, %e) axis = 1 : tensor<3x1xf64>, tensor<3x3xf64>",
                  t));
  checkText(unary("  %m = mlc.reduce_mean %x axes = [0] keepdims : " + t +
                      "\n  %y = mlc.broadcast %m : tensor<1x4xf64> -> " + t,
                  t));
  checkText(unary("  %m = mlc.reduce_max %x axes = [1] keepdims : " + t +
                      "\n  %y = mlc.sub %x, %m : " + t + ", tensor<3x1xf64>",
                  t));
  checkText(unary("  %y = mlc.softmax %x axis = -1 : " + t, t));
  checkText(unary("  %y = mlc.log_softmax %x axis = 1 : " + t, t));
  // Running sums: the gradient is the running sum the other way.
  checkText(unary("  %y = mlc.cumsum %x axis = 1 : " + t, t));
  checkText(unary("  %y = mlc.cumsum %x axis = 0 exclusive reverse : " + t, t));
  checkText(unary("  %c = mlc.constant dense<0.25> : " + t +
                      "\n  %k = mlc.compare gt %x, %c : " + t + ", " + t +
                      "\n  %y = mlc.select %k, %x, %c : tensor<3x4xi1>, " + t + ", " + t,
                  t));
  checkText(unary("  %y = mlc.dropout %x ratio = 0.5 seed = 11 : " + t, t));
}

TEST(GradientCheck, LayerNormMatmulEmbedding) {
  const std::string t = "tensor<3x4xf64>";
  checkText(unary("  %y = mlc.layer_norm %x, %w, %b epsilon = 1.0e-5 : " + t +
                      ", tensor<4xf64>, tensor<4xf64>",
                  t,
                  ", %w: tensor<4xf64> {mlc.param = \"w\"}, %b: tensor<4xf64> {mlc.param = "
                  "\"b\"}"));
  // 150 wide: the CPU kernel sums dw and db in blocks of 64 columns (64, 64, 22).
  const std::string wide = "tensor<3x150xf64>";
  checkText(unary("  %y = mlc.layer_norm %x, %w, %b epsilon = 1.0e-5 : " + wide +
                      ", tensor<150xf64>, tensor<150xf64>",
                  wide,
                  ", %w: tensor<150xf64> {mlc.param = \"w\"}, %b: tensor<150xf64> {mlc.param = "
                  "\"b\"}"),
            Inputs(), 40);
  // RMSNorm (dx and dw): alone, 150 wide (dw in blocks of 64 columns), and
  // after a residual add (the fused rows kernel, whose dw sums the add).
  checkText(unary("  %y = mlc.rms_norm %x, %w epsilon = 1.0e-5 : " + t + ", tensor<4xf64>", t,
                  ", %w: tensor<4xf64> {mlc.param = \"w\"}"));
  checkText(unary("  %y = mlc.rms_norm %x, %w epsilon = 1.0e-5 : " + wide + ", tensor<150xf64>",
                  wide, ", %w: tensor<150xf64> {mlc.param = \"w\"}"),
            Inputs(), 40);
  checkText(unary("  %s = mlc.add %x, %a : " + t + ", " + t +
                      "\n  %y = mlc.rms_norm %s, %w epsilon = 1.0e-5 : " + t + ", tensor<4xf64>",
                  t, ", %a: " + t + " {mlc.param = \"a\"}, %w: tensor<4xf64> {mlc.param = \"w\"}"));
  // The residual stream around an RMSNorm: the adjoint sum dx + g is added
  // in the norm gradient's row kernel (rms_norm_grad ... plus).
  checkText(unary("  %n = mlc.rms_norm %x, %w epsilon = 1.0e-5 : " + t +
                      ", tensor<4xf64>\n  %y = mlc.add %n, %x : " + t + ", " + t,
                  t, ", %w: tensor<4xf64> {mlc.param = \"w\"}"));
  // Batched x shared weight, both transposes.
  checkText(R"(
func.func @forward(%a: tensor<2x3x4xf64> {mlc.param = "a"}, %w: tensor<5x4xf64> {mlc.param = "w"},
                   %c: tensor<2x5x3xf64> {mlc.param = "c"}, %r: tensor<2x5x5xf64> {mlc.input = "r"})
    -> (tensor<f64> {mlc.output = "loss"}) {
  %h = mlc.matmul %a, %w transpose_rhs : tensor<2x3x4xf64>, tensor<5x4xf64>
  %o = mlc.matmul %c, %h : tensor<2x5x3xf64>, tensor<2x3x5xf64>
  %p = mlc.matmul %o, %o transpose_lhs : tensor<2x5x5xf64>, tensor<2x5x5xf64>
  %y = mlc.mul %p, %r : tensor<2x5x5xf64>, tensor<2x5x5xf64>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<2x5x5xf64>
  return %l : tensor<f64>
})");
  // A product with a bias (written as the op, batched against a shared
  // weight, and transposed), and add(matmul, bias) that the canonicalizer
  // folds into one.
  checkText(R"(
func.func @forward(%a: tensor<2x3x4xf64> {mlc.param = "a"}, %w: tensor<5x4xf64> {mlc.param = "w"},
                   %b: tensor<5xf64> {mlc.param = "b"}, %v: tensor<5x2xf64> {mlc.param = "v"},
                   %c: tensor<2xf64> {mlc.param = "c"}, %r: tensor<2x3x2xf64> {mlc.input = "r"})
    -> (tensor<f64> {mlc.output = "loss"}) {
  %h = mlc.matmul %a, %w transpose_rhs bias(%b : tensor<5xf64>) : tensor<2x3x4xf64>, tensor<5x4xf64>
  %t = mlc.tanh %h : tensor<2x3x5xf64>
  %p = mlc.matmul %t, %v : tensor<2x3x5xf64>, tensor<5x2xf64>
  %o = mlc.add %c, %p : tensor<2xf64>, tensor<2x3x2xf64>
  %y = mlc.mul %o, %r : tensor<2x3x2xf64>, tensor<2x3x2xf64>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<2x3x2xf64>
  return %l : tensor<f64>
})");
  // Products accumulating into each other (acc: its gradient is the
  // result's), one input read by three products: its gradient, a sum of
  // three products, accumulates in the GEMMs too (mlc-accumulate-gemms).
  checkText(R"(
func.func @forward(%a: tensor<2x3x4xf64> {mlc.param = "a"}, %w: tensor<4x5xf64> {mlc.param = "w"},
                   %u: tensor<5x4xf64> {mlc.param = "u"}, %c: tensor<2x3x2xf64> {mlc.param = "c"},
                   %v: tensor<2x5xf64> {mlc.param = "v"}, %z: tensor<4x5xf64> {mlc.param = "z"},
                   %r: tensor<2x3x5xf64> {mlc.input = "r"})
    -> (tensor<f64> {mlc.output = "loss"}) {
  %p = mlc.matmul %a, %w : tensor<2x3x4xf64>, tensor<4x5xf64>
  %q = mlc.matmul %a, %u transpose_rhs acc(%p : tensor<2x3x5xf64>) : tensor<2x3x4xf64>, tensor<5x4xf64>
  %s = mlc.matmul %c, %v acc(%q : tensor<2x3x5xf64>) : tensor<2x3x2xf64>, tensor<2x5xf64>
  %t = mlc.tanh %s : tensor<2x3x5xf64>
  %e = mlc.matmul %a, %z : tensor<2x3x4xf64>, tensor<4x5xf64>
  %o = mlc.mul %t, %e : tensor<2x3x5xf64>, tensor<2x3x5xf64>
  %y = mlc.mul %o, %r : tensor<2x3x5xf64>, tensor<2x3x5xf64>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<2x3x5xf64>
  return %l : tensor<f64>
})");
  // Embedding with repeated ids (scatter-add) and a tied output projection.
  checkText(R"(
func.func @forward(%e: tensor<6x4xf64> {mlc.param = "e"}, %ids: tensor<5xi64> {mlc.input = "ids"},
                   %labels: tensor<5xi64> {mlc.input = "labels"})
    -> (tensor<f64> {mlc.output = "loss"}) {
  %x = mlc.embedding %e, %ids : tensor<6x4xf64>, tensor<5xi64>
  %logits = mlc.matmul %x, %e transpose_rhs : tensor<5x4xf64>, tensor<6x4xf64>
  %l = mlc.cross_entropy %logits, %labels ignore_index = -100 : tensor<5x6xf64>, tensor<5xi64>
  return %l : tensor<f64>
})",
            [] {
              Inputs s;
              s.fixed["ids"] = {1, 3, 1, 5, 0};
              s.fixed["labels"] = {2, -100, 0, 5, 3};
              return s;
            }());
}

/// torch's nn.Embedding(padding_idx=1): the lookups of row 1 (two of five)
/// give it no gradient, every other row its derivative (a tied projection
/// still reaching row 1: test/passes/autodiff.mlir).
TEST(GradientCheck, EmbeddingPaddingIdx) {
  Inputs untied;
  untied.fixed["ids"] = {1, 3, 1, 5, 0};
  untied.zero["e"] = {4, 8}; // row 1 of the 6x4 table
  checkText(R"(
func.func @forward(%e: tensor<6x4xf64> {mlc.param = "e"}, %ids: tensor<5xi64> {mlc.input = "ids"},
                   %r: tensor<5x4xf64> {mlc.input = "r"})
    -> (tensor<f64> {mlc.output = "loss"}) {
  %x = mlc.embedding %e, %ids {padding_idx = 1 : i64} : tensor<6x4xf64>, tensor<5xi64>
  %t = mlc.tanh %x : tensor<5x4xf64>
  %y = mlc.mul %t, %r : tensor<5x4xf64>, tensor<5x4xf64>
  %l = mlc.reduce_sum %y axes = [0, 1] : tensor<5x4xf64>
  return %l : tensor<f64>
})",
            untied, 24);
}

/// loss = sum(attention(q, k, v) * r) over parameters q of type `t` and k,
/// v of type `kv` (`t` where empty; fewer heads: grouped-query attention);
/// `attrs` follow the operands (after `mask %m` when `mask` names its type).
std::string attentionModel(const std::string &t, const std::string &attrs,
                           const std::string &mask = "", std::string kv = "") {
  if (kv.empty())
    kv = t;
  return "func.func @forward(%q: " + t + " {mlc.param = \"q\"}, %k: " + kv +
         " {mlc.param = \"k\"}, %v: " + kv + " {mlc.param = \"v\"}" +
         (mask.empty() ? "" : ", %m: " + mask + " {mlc.input = \"m\"}") + ", %r: " + t +
         " {mlc.input = \"r\"}) -> (tensor<f64> {mlc.output = \"loss\"}) {\n" +
         "  %o = mlc.attention %q, %k, %v" + (mask.empty() ? "" : " mask %m") + " " + attrs +
         " : " + t + ", " + kv + ", " + kv + (mask.empty() ? "" : ", " + mask) + "\n" +
         "  %y = mlc.mul %o, %r : " + t + ", " + t + "\n  %l = mlc.reduce_sum %y axes = [0, 1, 2, 3] : " +
         t + "\n  return %l : tensor<f64>\n}\n";
}

TEST(GradientCheck, Attention) {
  const std::string q = "tensor<2x2x5x3xf64>";
  checkText(attentionModel(q, "causal"));
  checkText(attentionModel(q, "causal dropout = 0.3 seed = 9"));
  checkText(attentionModel(q, "scale = 0.7", "tensor<2x1x1x5xf64>"));
}

// Grouped-query attention: 4 query heads over 2 kv heads (and over 1), so
// dK and dV of a kv head sum over its group; causal, a per-head mask (the
// mask indexed by the query head), dropout (its counters by query head).
TEST(GradientCheck, AttentionGroupedQuery) {
  const std::string q = "tensor<2x4x5x3xf64>", kv = "tensor<2x2x5x3xf64>";
  checkText(attentionModel(q, "causal", "", kv));
  checkText(attentionModel(q, "causal", "tensor<2x4x5x5xf64>", kv));
  checkText(attentionModel(q, "causal dropout = 0.3 seed = 9", "", kv));
  checkText(attentionModel(q, "scale = 0.7", "tensor<1x4x1x5xf64>", "tensor<2x1x5x3xf64>"));
}

// Grouped-query attention over packed sequences (cu_seqlens): 3 and 4
// tokens, 4 query heads over 2 kv heads.
TEST(GradientCheck, AttentionGroupedQueryVarlen) {
  Inputs in;
  in.fixed["cu"] = {0, 3, 7};
  checkText(R"(
func.func @forward(%q: tensor<7x4x3xf64> {mlc.param = "q"}, %k: tensor<7x2x3xf64> {mlc.param = "k"},
                   %v: tensor<7x2x2xf64> {mlc.param = "v"}, %cu: tensor<3xi32> {mlc.input = "cu"},
                   %r: tensor<7x4x2xf64> {mlc.input = "r"}) -> (tensor<f64> {mlc.output = "loss"}) {
  %o = mlc.attention %q, %k, %v cu_seqlens %cu causal : tensor<7x4x3xf64>, tensor<7x2x3xf64>, tensor<7x2x2xf64>, tensor<3xi32>
  %y = mlc.mul %o, %r : tensor<7x4x2xf64>, tensor<7x4x2xf64>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<7x4x2xf64>
  return %l : tensor<f64>
})",
            in);
}

// 150 positions: the CPU kernel's query tiles of 64 rows split them 64, 64,
// 22, so tiles see different key counts (causal) and accumulate dK and dV
// across tiles.
TEST(GradientCheck, AttentionAcrossTiles) {
  const std::string q = "tensor<1x2x150x4xf64>";
  checkText(attentionModel(q, "causal dropout = 0.2 seed = 3"), Inputs(), 40);
  checkText(attentionModel(q, "", "tensor<1x1x1x150xf64>"), Inputs(), 40);
  // Grouped: the kv head's dK, dV summed across tiles and query heads.
  checkText(attentionModel("tensor<1x2x70x4xf64>", "causal", "", "tensor<1x1x70x4xf64>"),
            Inputs(), 40);
}

// Soft-capping (softcap = c: c tanh(s / c) of the scaled scores before the
// mask and softmax), with caps small enough for tanh to bend the scores:
// causal, masked with a scale, grouped-query with dropout, across the CPU
// kernel's query tiles, and with rotary tables read inside.
TEST(GradientCheck, AttentionSoftcap) {
  const std::string q = "tensor<2x2x5x3xf64>";
  checkText(attentionModel(q, "causal softcap = 0.8"));
  checkText(attentionModel(q, "scale = 1.7 softcap = 1.5", "tensor<2x1x1x5xf64>"));
  checkText(attentionModel("tensor<2x4x5x3xf64>", "causal softcap = 0.6 dropout = 0.3 seed = 9",
                           "", "tensor<2x2x5x3xf64>"));
  checkText(attentionModel("tensor<1x2x70x4xf64>", "causal softcap = 1.0", "",
                           "tensor<1x1x70x4xf64>"),
            Inputs(), 40);
}

// Mistral's sliding window (window = W: query i sees keys i - W + 1 .. i):
// a window of 2 of 5 keys, grouped-query with dropout, and across the CPU
// kernel's query tiles (70 positions, a window of 9).
TEST(GradientCheck, AttentionWindow) {
  checkText(attentionModel("tensor<2x2x5x3xf64>", "causal window = 2"));
  checkText(attentionModel("tensor<2x4x5x3xf64>", "causal window = 3 dropout = 0.3 seed = 9", "",
                           "tensor<2x2x5x3xf64>"));
  checkText(attentionModel("tensor<1x2x70x4xf64>", "causal window = 9", "",
                           "tensor<1x1x70x4xf64>"),
            Inputs(), 40);
}

/// One training step of a compiled package at values drawn per name (so
/// that two packages with the same parameters and inputs see the same
/// numbers whatever their flat layouts): the loss, and each parameter's
/// gradient by name.
std::pair<double, std::map<std::string, std::vector<double>>> stepByName(const std::string &dir) {
  rt::Package pkg = rt::Package::load(dir);
  rt::CpuBackend backend(pkg);
  auto draw = [](const std::string &name, int64_t n) {
    std::mt19937_64 rng(std::hash<std::string>()(name));
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    std::vector<double> v(n);
    for (double &x : v)
      x = uni(rng);
    return v;
  };
  for (const rt::ParamInfo &param : pkg.params) {
    std::vector<double> v = draw(param.name, param.numel);
    backend.upload(rt::FlatBuffer::Params, param.offset * 8, v.data(), v.size() * 8);
  }
  for (const rt::InputInfo &in : pkg.inputs) {
    rt::HostTensor t;
    t.dtype = in.dtype;
    t.shape = in.shape;
    std::vector<double> v = draw(in.name, t.numel());
    t.data.resize(v.size() * 8);
    std::memcpy(t.data.data(), v.data(), t.data.size());
    backend.setInput(in.name, t);
  }
  backend.run("train_step", 1);
  std::vector<double> grads(pkg.paramCount);
  backend.download(rt::FlatBuffer::Grads, 0, grads.data(), grads.size() * 8);
  std::map<std::string, std::vector<double>> byName;
  for (const rt::ParamInfo &param : pkg.params)
    byName[param.name].assign(grads.begin() + param.offset,
                              grads.begin() + param.offset + param.numel);
  backend.run("forward", 1);
  return {backend.output("forward", "loss").getDouble(0), byName};
}

/// loss = sum(attention(q, k, v) * r) with additive mask m and soft-capping
/// c: fused, `mlc.attention ... softcap = c` (the cap inside the kernels,
/// forward and backward), or unfused: the scores, the cap, the mask, the
/// softmax and the products as graph ops differentiated one by one, the cap
/// written c (1 - 2 / (exp(2 s / c) + 1)), which is c tanh(s / c) but no
/// chain mlc-recognize folds into an attention.
std::string softcapModel(bool fused, const std::string &q, const std::string &kv,
                         const std::string &kt, const std::string &scores,
                         const std::string &mask, double scale, double cap) {
  std::string head = "func.func @forward(%q: " + q + " {mlc.param = \"q\"}, %k: " + kv +
                     " {mlc.param = \"k\"}, %v: " + kv + " {mlc.param = \"v\"}, %m: " + mask +
                     " {mlc.input = \"m\"}, %r: " + q +
                     " {mlc.input = \"r\"}) -> (tensor<f64> {mlc.output = \"loss\"}) {\n";
  std::string tail = "  %y = mlc.mul %o, %r : " + q + ", " + q +
                     "\n  %l = mlc.reduce_sum %y axes = [0, 1, 2, 3] : " + q +
                     "\n  return %l : tensor<f64>\n}\n";
  auto num = [](double v) { return llvm::formatv("{0:e16}", v).str(); };
  if (fused)
    return head + "  %o = mlc.attention %q, %k, %v mask %m scale = " + num(scale) +
           " softcap = " + num(cap) + " : " + q + ", " + kv + ", " + kv + ", " + mask + "\n" +
           tail;
  const std::string S = scores, f = "tensor<f64>";
  return head + "  %kt = mlc.transpose %k, [0, 1, 3, 2] : " + kv + "\n" +
         "  %s = mlc.matmul %q, %kt : " + q + ", " + kt + "\n" +
         "  %sc = mlc.constant dense<" + num(scale) + "> : " + f + "\n" +
         "  %ss = mlc.mul %s, %sc : " + S + ", " + f + "\n" +
         "  %two = mlc.constant dense<" + num(2.0 / cap) + "> : " + f + "\n" +
         "  %x2 = mlc.mul %ss, %two : " + S + ", " + f + "\n" +
         "  %e = mlc.exp %x2 : " + S + "\n" +
         "  %one = mlc.constant dense<1.0> : " + f + "\n" +
         "  %e1 = mlc.add %e, %one : " + S + ", " + f + "\n" +
         "  %twoc = mlc.constant dense<2.0> : " + f + "\n" +
         "  %fr = mlc.div %twoc, %e1 : " + f + ", " + S + "\n" +
         "  %th = mlc.sub %one, %fr : " + f + ", " + S + "\n" +
         "  %cap = mlc.constant dense<" + num(cap) + "> : " + f + "\n" +
         "  %capped = mlc.mul %th, %cap : " + S + ", " + f + "\n" +
         "  %masked = mlc.add %capped, %m : " + S + ", " + mask + "\n" +
         "  %p = mlc.softmax %masked axis = 3 : " + S + "\n" +
         "  %o = mlc.matmul %p, %v : " + S + ", " + kv + "\n" + tail;
}

// The soft-capped attention kernels against the same math as unfused graph
// ops: the loss and every gradient agree to f64 rounding (one head over
// 70 positions crosses the CPU kernel's query tiles).
TEST(GradientCheck, AttentionSoftcapFusedVsUnfused) {
  struct Case {
    std::string q, kt, scores, mask;
  };
  for (const Case &c : {Case{"tensor<2x2x5x3xf64>", "tensor<2x2x3x5xf64>", "tensor<2x2x5x5xf64>",
                             "tensor<2x1x5x5xf64>"},
                        Case{"tensor<1x1x70x4xf64>", "tensor<1x1x4x70xf64>",
                             "tensor<1x1x70x70xf64>", "tensor<1x1x1x70xf64>"}}) {
    std::pair<double, std::map<std::string, std::vector<double>>> runs[2];
    for (int fused = 0; fused < 2; ++fused) {
      mlir::MLIRContext ctx;
      ctx.loadDialect<MlcDialect, mlir::func::FuncDialect>();
      std::string text = softcapModel(fused, c.q, c.q, c.kt, c.scores, c.mask, 1.3, 0.9);
      auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
      ASSERT_TRUE(module) << text;
      std::string dir = compile(module);
      ASSERT_FALSE(dir.empty());
      // The fused model calls the soft-capped attention kernels; the unfused
      // one has none.
      std::ifstream kernels(dir + "/kernels.cpp");
      std::string all((std::istreambuf_iterator<char>(kernels)), std::istreambuf_iterator<char>());
      EXPECT_EQ(all.find("MLC_ATTN_MASK | MLC_ATTN_SOFTCAP") != std::string::npos, bool(fused))
          << dir;
      try {
        runs[fused] = stepByName(dir);
      } catch (const rt::Error &e) {
        FAIL() << e.what();
      }
    }
    EXPECT_NEAR(runs[0].first, runs[1].first, 1e-12 * std::fabs(runs[1].first));
    for (const auto &[name, unfused] : runs[0].second) {
      const std::vector<double> &fused = runs[1].second[name];
      ASSERT_EQ(fused.size(), unfused.size()) << name;
      for (size_t i = 0; i < fused.size(); ++i)
        EXPECT_NEAR(fused[i], unfused[i], 1e-11) << name << "[" << i << "]";
    }
  }
}

/// loss = sum(attention(q, k, v rotary %c, %s) * r): the fused op that
/// mlc-fold-rotary forms, q of type `t`, k and v of `kv`, random tables of
/// type `tables` (the rotation is linear in q and k for any tables), `attrs`
/// after the tables; `cu` adds cu_seqlens (variable-length).
std::string rotaryAttentionModel(const std::string &t, const std::string &kv,
                                 const std::string &tables, const std::string &attrs,
                                 const std::string &cu = "") {
  const std::string axes = cu.empty() ? "[0, 1, 2, 3]" : "[0, 1, 2]";
  return "func.func @forward(%q: " + t + " {mlc.param = \"q\"}, %k: " + kv +
         " {mlc.param = \"k\"}, %v: " + kv + " {mlc.param = \"v\"}, %c: " + tables +
         " {mlc.input = \"c\"}, %s: " + tables + " {mlc.input = \"s\"}" +
         (cu.empty() ? "" : ", %cu: " + cu + " {mlc.input = \"cu\"}") + ", %r: " + t +
         " {mlc.input = \"r\"}) -> (tensor<f64> {mlc.output = \"loss\"}) {\n" +
         "  %o = mlc.attention %q, %k, %v" + (cu.empty() ? "" : " cu_seqlens %cu") +
         " rotary %c, %s " + attrs + " : " + t + ", " + kv + ", " + kv +
         (cu.empty() ? "" : ", " + cu) + ", " + tables + ", " + tables + "\n" +
         "  %y = mlc.mul %o, %r : " + t + ", " + t + "\n  %l = mlc.reduce_sum %y axes = " + axes +
         " : " + t + "\n  return %l : tensor<f64>\n}\n";
}

// Rotary embedding inside attention (rotary %c, %s): rotate-half and
// interleaved, full and partial (4 of 6 head dims rotate), one table row
// per position or per sequence, grouped-query (dK un-rotated after the
// group's sum), across the CPU kernel's query tiles, and variable-length.
TEST(GradientCheck, AttentionRotary) {
  const std::string q = "tensor<2x2x5x4xf64>";
  checkText(rotaryAttentionModel(q, q, "tensor<1x1x5x4xf64>", "causal"));
  checkText(rotaryAttentionModel(q, q, "tensor<2x1x5x4xf64>", "interleaved"));
  const std::string gq = "tensor<2x4x5x6xf64>", gkv = "tensor<2x2x5x6xf64>";
  checkText(rotaryAttentionModel(gq, gkv, "tensor<2x1x5x4xf64>", "causal"));
  checkText(rotaryAttentionModel(gq, gkv, "tensor<1x1x5x4xf64>", "interleaved causal"));
  checkText(rotaryAttentionModel("tensor<1x2x70x4xf64>", "tensor<1x1x70x4xf64>",
                                 "tensor<1x1x70x4xf64>", "causal"),
            Inputs(), 40);
  Inputs in;
  in.fixed["cu"] = {0, 3, 7};
  checkText(rotaryAttentionModel("tensor<7x4x6xf64>", "tensor<7x2x6xf64>", "tensor<7x1x4xf64>",
                                 "causal", "tensor<3xi32>"),
            in);
  checkText(rotaryAttentionModel("tensor<7x4x6xf64>", "tensor<7x2x6xf64>", "tensor<7x1x6xf64>",
                                 "interleaved", "tensor<3xi32>"),
            in);
  checkText(rotaryAttentionModel(gq, gkv, "tensor<1x1x5x4xf64>", "causal softcap = 0.7"));
  checkText(rotaryAttentionModel("tensor<7x4x6xf64>", "tensor<7x2x6xf64>", "tensor<7x1x4xf64>",
                                 "causal softcap = 0.9", "tensor<3xi32>"),
            in);
}

/// Whole models: every parameter of a tiny GPT-2 and BERT, dropout on.
void checkModel(const std::string &family, const std::string &spec, Inputs inputs,
                bool varlen = false, int64_t microBatch = 2, bool packedDocuments = false) {
  mlir::MLIRContext ctx;
  auto config = parseModelConfig(family, spec);
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  BuildOptions options;
  options.microBatch = microBatch;
  options.seqLen = 6;
  options.dtype = "f64";
  options.varlen = varlen;
  options.resetAttentionMask = options.resetPositionIds = packedDocuments;
  auto module = buildModel(ctx, *config, options);
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  std::string dir = compile(*module);
  ASSERT_FALSE(dir.empty());
  try {
    double worst = gradientCheck(dir, inputs, 6);
    ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
  } catch (const rt::Error &e) {
    FAIL() << e.what();
  }
}

TEST(GradientCheck, TinyGPT2) {
  Inputs in;
  in.lo = -0.5;
  in.hi = 0.5;
  in.intHi = 16;
  checkModel("gpt2",
             "tiny,vocab_size=16,n_positions=8,n_embd=8,n_layer=2,n_head=2,resid_pdrop=0.1,"
             "embd_pdrop=0.1,attn_pdrop=0.2",
             in);
}

/// Packed documents: samples of 6 tokens holding documents of 2 and 4, and
/// 3 and 3 tokens (cu_seqlens over the 12 tokens, trailing empty
/// sequences), positions restarting in each, the loss ignored where the
/// prediction is made from a document's last token (--eod-mask-loss).
Inputs packedDocumentInputs() {
  Inputs in;
  in.lo = -0.5;
  in.hi = 0.5;
  in.intHi = 16;
  in.fixed["input_ids"] = {3, 0, 1, 12, 5, 9, 2, 4, 0, 7, 6, 11};
  in.fixed["labels"] = {3, 0, -100, 12, 5, 9, 2, 4, 0, -100, 6, 11};
  in.fixed["position_ids"] = {0, 1, 0, 1, 2, 3, 0, 1, 2, 0, 1, 2};
  in.fixed["cu_seqlens"] = {0, 2, 6, 9, 12, 12, 12, 12, 12, 12, 12, 12, 12};
  return in;
}

TEST(GradientCheck, TinyGPT2PackedDocuments) {
  checkModel("gpt2",
             "tiny,vocab_size=16,n_positions=8,n_embd=8,n_layer=2,n_head=2,resid_pdrop=0.1,"
             "embd_pdrop=0.1,attn_pdrop=0.2",
             packedDocumentInputs(), /*varlen=*/false, /*microBatch=*/2,
             /*packedDocuments=*/true);
}

TEST(GradientCheck, TinyBERT) {
  Inputs in;
  in.lo = -0.5;
  in.hi = 0.5;
  in.intHi = 2;
  in.fixed["input_ids"] = {3, 7, 1, 12, 5, 9, 2, 4, 15, 0, 6, 11};
  in.fixed["attention_mask"] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  in.fixed["labels"] = {-100, 7, -100, 12, -100, 9, 2, -100, 15, -100, -100, -100};
  checkModel("bert",
             "tiny,vocab_size=16,max_position_embeddings=8,hidden_size=8,"
             "num_hidden_layers=2,num_attention_heads=2,intermediate_size=12,"
             "hidden_dropout_prob=0.1,attention_probs_dropout_prob=0.2",
             in);
}

/// Llama: RMSNorm, rotary embeddings, 2 query heads per key/value head,
/// SwiGLU, with every bias and a tied head (the untied head is one more
/// matmul, checked against PyTorch in test/integration/llama-parity.test).
TEST(GradientCheck, TinyLlama) {
  Inputs in;
  in.lo = -0.5;
  in.hi = 0.5;
  in.intHi = 16;
  const std::string shape = "tiny,vocab_size=16,max_position_embeddings=8,hidden_size=8,"
                            "num_hidden_layers=2,num_attention_heads=2,num_key_value_heads=1,"
                            "intermediate_size=12";
  checkModel("llama", shape + ",tie_word_embeddings=1,attention_bias=1,mlp_bias=1", in);
}

/// Llama on packed documents: the rotary tables gathered at the restarting
/// positions, grouped-query attention over cu_seqlens.
TEST(GradientCheck, TinyLlamaPackedDocuments) {
  checkModel("llama",
             "tiny,vocab_size=16,max_position_embeddings=8,hidden_size=8,"
             "num_hidden_layers=2,num_attention_heads=2,num_key_value_heads=1,"
             "intermediate_size=12,attention_bias=1",
             packedDocumentInputs(), /*varlen=*/false, /*microBatch=*/2,
             /*packedDocuments=*/true);
}

/// Unpadded BERT: 11 tokens in a capacity of 18 (3 sequences of up to 6; the
/// last one empty), so every kernel must stop at the batch's token count.
TEST(GradientCheck, TinyBERTVarlen) {
  Inputs in;
  in.lo = -0.5;
  in.hi = 0.5;
  in.intHi = 2;
  in.rows = 11;
  in.fixed["input_ids"] = {3, 7, 1, 12, 5, 9, 2, 4, 15, 0, 6};
  in.fixed["position_ids"] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5};
  in.fixed["cu_seqlens"] = {0, 5, 11, 11};
  in.fixed["labels"] = {-100, 7, -100, 12, -100, 9, 2, -100, 15, -100, 6};
  checkModel("bert",
             "tiny,vocab_size=16,max_position_embeddings=8,hidden_size=8,"
             "num_hidden_layers=2,num_attention_heads=2,intermediate_size=12,"
             "hidden_dropout_prob=0.1,attention_probs_dropout_prob=0.2",
             in, /*varlen=*/true, /*microBatch=*/3);
}

/// The Llama family as the dynamo exporter writes it, imported in f64: the
/// opset-20 Llama (RMSNorm written out, rotate-half Slice/Neg/Concat, SiLU
/// as x * Sigmoid(x), K/V expanded to the query heads) and the opset-23
/// Qwen2 (RMSNormalization, RotaryEmbedding, Attention; q/k/v biases, tied
/// embeddings), 1 x 6 tokens, every parameter's gradient against finite
/// differences of the loss.
void checkOnnx(const std::string &fixture) {
  mlir::MLIRContext ctx;
  OnnxImportOptions options;
  options.microBatch = 1;
  options.seqLen = 6;
  options.dtype = "f64";
  options.loss = "causal-lm";
  auto imported = importOnnxFile(
      ctx, std::string(MLC_SOURCE_DIR) + "/test/onnx/Inputs/modern/" + fixture + ".onnx",
      options);
  ASSERT_TRUE(bool(imported)) << llvm::toString(imported.takeError());
  std::string dir = compile(imported->module, std::move(imported->weights));
  ASSERT_FALSE(dir.empty());
  Inputs in;
  in.lo = -0.5;
  in.hi = 0.5;
  in.intHi = 256;
  try {
    double worst = gradientCheck(dir, in, 4);
    ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
  } catch (const rt::Error &e) {
    FAIL() << e.what();
  }
}

TEST(GradientCheck, OnnxLlamaOpset20) { checkOnnx("llama-dynamo-opset20"); }
TEST(GradientCheck, OnnxQwen2Opset23) { checkOnnx("qwen2-dynamo-opset23"); }
// The other decoder families of test/onnx/families.test, each at its own
// initialization and with the parameters the default export merged trained
// apart: q/k norms per head (Qwen3) and over the projection (OLMo2),
// post-norms, weightless LayerNorm (OLMo), a sliding-window mask shorter than
// the sequence (Mistral), layers without rotary (SmolLM3), partial rotary with
// LayerNorm biases (StableLM), GeGLU and 1 + w norms (Gemma, optimize=False),
// parallel residual (GPT-NeoX, optimize=False).
TEST(GradientCheck, OnnxQwen3) { checkOnnx("qwen3-dynamo-opset20"); }
TEST(GradientCheck, OnnxOlmo) { checkOnnx("olmo-dynamo-opset20"); }
TEST(GradientCheck, OnnxOlmo2) { checkOnnx("olmo2-dynamo-opset20"); }
TEST(GradientCheck, OnnxMistralWindow) { checkOnnx("mistral-swa-dynamo-opset20"); }
TEST(GradientCheck, OnnxSmolLM3) { checkOnnx("smollm3-dynamo-opset20"); }
TEST(GradientCheck, OnnxStableLm) { checkOnnx("stablelm-dynamo-opset20"); }
TEST(GradientCheck, OnnxGemma) { checkOnnx("gemma-dynamo-opset20-noopt"); }
TEST(GradientCheck, OnnxGptNeoX) { checkOnnx("gptneox-dynamo-opset20-noopt"); }
// Falcon: multi-query attention over one K/V head, its QKV heads one split;
// Gemma 2: sandwich norms, GeGLU, soft-capped attention and final logits.
TEST(GradientCheck, OnnxFalcon) { checkOnnx("falcon-dynamo-opset20"); }
TEST(GradientCheck, OnnxGemma2) { checkOnnx("gemma2-dynamo-opset20-noopt"); }
