//===- DialectTest.cpp - builtin models and their configs ------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "frontend/Frontend.h"
#include "frontend/Models.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlc;

namespace {

std::string errorOf(llvm::Expected<ModelConfig> c) {
  if (c)
    return "";
  return llvm::toString(c.takeError());
}

/// Sum of the element counts of every `mlc.param` argument.
int64_t parameterCount(mlir::func::FuncOp fn) {
  int64_t total = 0;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (fn.getArgAttr(i, "mlc.param"))
      total += llvm::cast<mlir::RankedTensorType>(fn.getArgument(i).getType())
                   .getNumElements();
  return total;
}

int64_t countFor(const char *family, const char *spec) {
  mlir::MLIRContext ctx;
  auto config = parseModelConfig(family, spec);
  EXPECT_TRUE(bool(config));
  BuildOptions options;
  options.microBatch = 1;
  options.seqLen = 8;
  auto module = buildModel(ctx, *config, options);
  EXPECT_TRUE(bool(module));
  auto fn = (**module).lookupSymbol<mlir::func::FuncOp>("forward");
  return parameterCount(fn);
}

} // namespace

TEST(ModelConfig, PresetsAndOverrides) {
  auto c = parseModelConfig("gpt2", "small,n_layer=2");
  ASSERT_TRUE(bool(c));
  EXPECT_EQ(c->get("n_layer"), 2);
  EXPECT_EQ(c->get("n_embd"), 768);
  EXPECT_EQ(c->get("vocab_size"), 50257);
}

TEST(ModelConfig, ErrorsNameTheProblem) {
  EXPECT_NE(errorOf(parseModelConfig("gpt2", "huge")).find("unknown gpt2 preset 'huge'"),
            std::string::npos);
  EXPECT_NE(errorOf(parseModelConfig("gpt2", "tiny,hidden_size=3")).find("hidden_size"),
            std::string::npos);
  EXPECT_NE(errorOf(parseModelConfig("bert", "tiny,num_attention_heads=3"))
                .find("not divisible"),
            std::string::npos);
  EXPECT_NE(errorOf(parseModelConfig("gpt2", "tiny,n_layer=x")).find("needs a number"),
            std::string::npos);
  EXPECT_NE(errorOf(parseModelConfig("gpt2", "tiny,resid_pdrop=1.5")).find("[0, 1)"),
            std::string::npos);
  EXPECT_NE(errorOf(parseModelConfig("t5", "")).find("unknown model"), std::string::npos);
  EXPECT_NE(errorOf(parseModelConfig("llama", "tiny,num_key_value_heads=3"))
                .find("not divisible by num_key_value_heads=3"),
            std::string::npos);
  EXPECT_NE(errorOf(parseModelConfig("llama", "tiny,tie_word_embeddings=2")).find("0 or 1"),
            std::string::npos);
  EXPECT_NE(errorOf(parseModelConfig("llama", "tiny,head_dim=7")).find("even"),
            std::string::npos);
  EXPECT_NE(errorOf(parseModelConfig("llama", "tiny,rope_theta=0")).find("positive"),
            std::string::npos);
}

TEST(ModelConfig, LlamaHeadDimDefaultsToHiddenOverHeads) {
  auto c = parseModelConfig("llama", "tiny,hidden_size=96,num_attention_heads=4");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->get("head_dim"), 24);
  auto d = parseModelConfig("llama", "llama-3.2-1b");
  ASSERT_TRUE(bool(d));
  EXPECT_EQ(d->get("head_dim"), 64);
}

// The parameter counts HF reports for the same configurations (tied embeddings
// counted once): GPT2LMHeadModel small 124,439,808; BertForMaskedLM base
// 109,514,298 (no pooler).
TEST(Models, ParameterCountsMatchHuggingFace) {
  EXPECT_EQ(countFor("gpt2", "small"), 124439808);
  EXPECT_EQ(countFor("bert", "base"), 109514298);
  // TinyLlama-1.1B, Llama-3.2-1B (tied) and Qwen2-0.5B (tied, q/k/v biases)
  // as transformers counts them.
  EXPECT_EQ(countFor("llama", "tinyllama-1.1b"), 1100048384);
  EXPECT_EQ(countFor("llama", "llama-3.2-1b"), 1235814400);
  EXPECT_EQ(countFor("llama", "qwen2-0.5b"), 494032768);
  // The sizes people train: gpt2-xl and Meta-Llama-3-8B as transformers
  // counts them (num_parameters()).
  EXPECT_EQ(countFor("gpt2", "gpt2-xl"), 1557611200);
  EXPECT_EQ(countFor("llama", "llama-3-8b"), 8030261248);
}

// Llama-3.1-8B is Llama-3-8B's shapes and parameters with the llama3
// rope_scaling, whose four numbers go together.
TEST(Models, Llama31PresetCarriesItsRopeScaling) {
  auto c = parseModelConfig("llama", "llama-3.1-8b");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->getFloat("rope_scaling_factor"), 8);
  EXPECT_EQ(c->getFloat("rope_scaling_original_max_position_embeddings"), 8192);
  EXPECT_EQ(c->get("max_position_embeddings"), 131072);
  EXPECT_EQ(countFor("llama", "llama-3.1-8b"), 8030261248);
  EXPECT_EQ(countFor("llama", "llama-3.2-1b"), 1235814400);
  // Meta-Llama-3-70B's count (transformers' num_parameters()), with the
  // same llama3 rope_scaling as Llama-3.1.
  EXPECT_EQ(countFor("llama", "llama-3-70b"), 70553706496);
  auto l70 = parseModelConfig("llama", "llama-3-70b");
  ASSERT_TRUE(bool(l70)) << llvm::toString(l70.takeError());
  EXPECT_EQ(l70->getFloat("rope_scaling_factor"), 8);
  EXPECT_EQ(l70->getFloat("rope_theta"), 500000);
  EXPECT_EQ(l70->get("num_key_value_heads"), 8);
  // No scaling on the presets without it; the band must be low < high.
  auto t = parseModelConfig("llama", "tiny");
  ASSERT_TRUE(bool(t));
  EXPECT_EQ(t->values.count("rope_scaling_factor"), 0u);
  std::string e = errorOf(parseModelConfig(
      "llama", "llama-3.1-8b,rope_scaling_low_freq_factor=4,rope_scaling_high_freq_factor=4"));
  EXPECT_NE(e.find("rope_scaling_low_freq_factor=4 must be below rope_scaling_high_freq_factor=4"),
            std::string::npos)
      << e;
}

// GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=256, n_embd=128,
// n_layer=2, n_head=4, n_inner=200, tie_word_embeddings=False)) has 334,736
// parameters: an MLP 200 wide and its own lm_head.weight.
TEST(Models, GPT2InnerWidthAndUntiedHeadMatchHuggingFace) {
  EXPECT_EQ(countFor("gpt2", "tiny,n_inner=200,tie_word_embeddings=false"), 334736);
}

TEST(Models, InputsAndOutputsCarryHFNames) {
  mlir::MLIRContext ctx;
  auto config = parseModelConfig("bert", "tiny");
  ASSERT_TRUE(bool(config));
  auto module = buildModel(ctx, *config, BuildOptions());
  ASSERT_TRUE(bool(module));
  auto fn = (**module).lookupSymbol<mlir::func::FuncOp>("forward");
  std::vector<std::string> names;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto name = fn.getArgAttrOfType<mlir::StringAttr>(i, "mlc.input"))
      names.push_back(name.str());
  EXPECT_EQ(names, (std::vector<std::string>{"input_ids", "token_type_ids",
                                             "attention_mask", "labels"}));
  EXPECT_EQ(fn.getResultAttrOfType<mlir::StringAttr>(0, "mlc.output").str(), "loss");
  EXPECT_EQ(fn.getResultAttrOfType<mlir::StringAttr>(1, "mlc.output").str(), "logits");
}

// LlamaPreTrainedModel._init_weights: linears and the embedding from
// N(0, initializer_range), biases zero; RMSNorm weights start at one.
TEST(Models, LlamaInitializesAsHuggingFace) {
  mlir::MLIRContext ctx;
  auto config = parseModelConfig("llama", "tiny,initializer_range=0.05,attention_bias=1,mlp_bias=1");
  ASSERT_TRUE(bool(config));
  auto module = buildModel(ctx, *config, BuildOptions());
  ASSERT_TRUE(bool(module));
  auto fn = (**module).lookupSymbol<mlir::func::FuncOp>("forward");
  int checked = 0;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto name = fn.getArgAttrOfType<mlir::StringAttr>(i, "mlc.param");
    if (!name)
      continue;
    llvm::StringRef n = name.getValue();
    std::string init = fn.getArgAttrOfType<mlir::StringAttr>(i, "mlc.init").str();
    std::string expected = n.ends_with("norm.weight") ? "ones"
                           : n.ends_with(".bias")     ? "zeros"
                                                      : "normal:0.05";
    EXPECT_EQ(init, expected) << n.str();
    ++checked;
  }
  // embed, 2 x (4 + 3 linears with biases + 2 norms), norm, lm_head.
  EXPECT_EQ(checked, 1 + 2 * (14 + 2) + 1 + 1);
}

TEST(Models, RejectsBadShapes) {
  mlir::MLIRContext ctx;
  auto config = parseModelConfig("gpt2", "tiny");
  ASSERT_TRUE(bool(config));
  BuildOptions options;
  options.seqLen = 4096;
  auto module = buildModel(ctx, *config, options);
  ASSERT_FALSE(bool(module));
  EXPECT_NE(llvm::toString(module.takeError()).find("n_positions"), std::string::npos);
}

// The frontend contract (frontend/Frontend.h): what every frontend hands the
// compiler is checked, and each violation is named.
namespace {

std::string contractError(const std::string &text, bool training = true) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<MlcDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  EXPECT_TRUE(bool(module)) << text;
  if (!module)
    return "unparsed";
  if (auto err = verifyFrontendModule(*module, training))
    return llvm::toString(std::move(err));
  return "";
}

} // namespace

TEST(FrontendContract, BuiltinModelsHoldIt) {
  mlir::MLIRContext ctx;
  for (const char *family : {"gpt2", "bert", "llama"}) {
    auto config = parseModelConfig(family, "tiny");
    ASSERT_TRUE(bool(config));
    auto module = buildModel(ctx, *config, BuildOptions());
    ASSERT_TRUE(bool(module));
    auto err = verifyFrontendModule(**module, /*training=*/true);
    EXPECT_FALSE(bool(err)) << llvm::toString(std::move(err));
  }
}

TEST(FrontendContract, ViolationsAreNamed) {
  const char *ok = R"(func.func @forward(%w: tensor<4xf32> {mlc.param = "w"},
      %x: tensor<4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}) {
    %y = mlc.mul %w, %x : tensor<4xf32>, tensor<4xf32>
    %l = mlc.reduce_sum %y axes = [0] : tensor<4xf32>
    return %l : tensor<f32>
  })";
  EXPECT_EQ(contractError(ok), "");
  EXPECT_EQ(contractError("func.func @other() { return }"),
            "the model has no @forward function");
  EXPECT_EQ(contractError(R"(func.func @forward(%w: tensor<4xf32>) -> tensor<4xf32> {
    return %w : tensor<4xf32> })", false),
            "@forward argument #0 must be marked either mlc.param or mlc.input");
  EXPECT_EQ(contractError(R"(func.func @forward(%a: tensor<4xf32> {mlc.param = "w"},
      %b: tensor<4xf32> {mlc.param = "w"}) -> tensor<4xf32> { return %a : tensor<4xf32> })",
                          false),
            "@forward argument #1: parameter name 'w' is empty or used twice");
  EXPECT_EQ(contractError(R"(func.func @forward(%a: tensor<4xi64> {mlc.param = "w"})
      -> tensor<4xi64> { return %a : tensor<4xi64> })", false),
            "parameter 'w' must be a statically shaped float tensor");
  EXPECT_EQ(contractError(R"(func.func @forward(%a: tensor<4xf32> {mlc.param = "w",
      mlc.init = "uniform"}) -> tensor<4xf32> { return %a : tensor<4xf32> })", false),
            "parameter 'w' has init 'uniform' (normal:STD, zeros, ones or package)");
  EXPECT_EQ(contractError(R"(func.func @forward(%x: tensor<4x?xf32> {mlc.input = "x"})
      -> tensor<4x?xf32> { return %x : tensor<4x?xf32> })", false),
            "input 'x' has a dynamic dimension 1; only the leading (token) dimension may be");
  EXPECT_EQ(contractError(R"(func.func @forward(%w: tensor<4xf32> {mlc.param = "w"})
      -> (tensor<4xf32> {mlc.output = "logits"}) { return %w : tensor<4xf32> })"),
            "training needs @forward to return a scalar float result marked mlc.output = "
            "\"loss\"");
}
