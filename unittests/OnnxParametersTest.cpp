//===- OnnxParametersTest.cpp - which parameter each initializer read is --===//
//
// The rule of frontend/onnx/OnnxParameters.h on small graphs written the way
// the dynamo exporter writes them: torch.export's signature in the graph's
// metadata, each node's FX node in its own (as unknown fields where the onnx
// proto mlc is built with predates metadata_props).
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxParameters.h"

#include <gtest/gtest.h>

#include <google/protobuf/unknown_field_set.h>

namespace mlc {
namespace {

void addMetadata(google::protobuf::Message &m, int field, const std::string &key,
                 const std::string &value) {
  onnx::StringStringEntryProto e;
  e.set_key(key);
  e.set_value(value);
  m.GetReflection()->MutableUnknownFields(&m)->AddLengthDelimited(field, e.SerializeAsString());
}

struct Graph {
  onnx::ModelProto model;
  onnx::GraphProto &g = *model.mutable_graph();
  std::set<std::string> floats;

  /// `# inputs` of the signature: placeholder p_NAME (dots as '_') per target.
  void signature(const std::vector<std::string> &targets) {
    std::string text = "\n# inputs\n";
    for (const std::string &t : targets) {
      std::string p = "p_" + t;
      std::replace(p.begin(), p.end(), '.', '_');
      text += p + ": PARAMETER target='" + t + "'\n";
    }
    text += "x: USER_INPUT\n\n# outputs\ny: USER_OUTPUT\n";
    addMetadata(g, 16, "pkg.torch.export.ExportedProgram.graph_signature", text);
  }
  void initializer(const std::string &name, std::vector<int64_t> dims) {
    onnx::TensorProto *t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    floats.insert(name);
  }
  onnx::NodeProto &node(const std::string &op, std::vector<std::string> inputs,
                        const std::string &fx, const std::string &scopes = "") {
    onnx::NodeProto *n = g.add_node();
    n->set_op_type(op);
    n->set_name("node_" + std::to_string(g.node_size()));
    for (const std::string &i : inputs)
      n->add_input(i);
    n->add_output("out_" + std::to_string(g.node_size()));
    if (!fx.empty())
      addMetadata(*n, 9, "pkg.torch.onnx.fx_node", fx);
    if (!scopes.empty())
      addMetadata(*n, 9, "pkg.torch.onnx.name_scopes", scopes);
    return *n;
  }
  llvm::Expected<ParameterPlan> plan() {
    return planParameters(model, readExportSignature(model), floats, "m.onnx");
  }
};

std::string fx(const std::string &op, const std::string &args) {
  return "%r : [num_users=1] = call_function[target=torch.ops.aten." + op + "](args = (" + args +
         "), kwargs = {})";
}

std::string errorOf(llvm::Expected<ParameterPlan> p) {
  if (p)
    return "";
  return llvm::toString(p.takeError());
}

// The default export merged two LayerNorm weights of ones into one
// initializer: each read is its own parameter.
TEST(OnnxParameters, MergedInitializerIsTwoParameters) {
  Graph m;
  m.signature({"ln1.weight", "ln2.weight"});
  m.initializer("ln1.weight", {4});
  m.node("LayerNormalization", {"x", "ln1.weight"}, fx("layer_norm.default", "%x, [4], %p_ln1_weight"));
  m.node("LayerNormalization", {"out_1", "ln1.weight"},
         fx("layer_norm.default", "%out_1, [4], %p_ln2_weight"));
  auto p = m.plan();
  ASSERT_TRUE(bool(p)) << errorOf(std::move(p));
  EXPECT_TRUE(p->attributed);
  EXPECT_EQ(p->reads.at({0, 1}).target, "ln1.weight");
  EXPECT_EQ(p->reads.at({1, 1}).target, "ln2.weight");
  EXPECT_FALSE(p->reads.at({1, 1}).transposed);
}

// aten.linear's weight as MatMul's B (folded transposed) and as Gemm's B
// with transB = 1 (as torch holds it); aten.addmm's as MatMul's B.
TEST(OnnxParameters, TransposedFoldsByOp) {
  Graph m;
  m.signature({"a.weight", "b.weight", "c.weight"});
  m.initializer("val_1", {4, 8});
  m.initializer("b.weight", {8, 4});
  m.initializer("c.weight", {4, 8});
  m.node("MatMul", {"x", "val_1"}, fx("linear.default", "%x, %p_a_weight"));
  onnx::NodeProto &gemm = m.node("Gemm", {"x", "b.weight"}, fx("linear.default", "%x, %p_b_weight"));
  onnx::AttributeProto *tb = gemm.add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  m.node("MatMul", {"x", "c.weight"}, fx("addmm.default", "%p_c_bias, %x, %p_c_weight"));
  auto p = m.plan();
  ASSERT_TRUE(bool(p)) << errorOf(std::move(p));
  EXPECT_EQ(p->reads.at({0, 1}).target, "a.weight");
  EXPECT_TRUE(p->reads.at({0, 1}).transposed);
  EXPECT_FALSE(p->reads.at({1, 1}).transposed);
  EXPECT_FALSE(p->reads.at({2, 1}).transposed);
}

// A linear layer's folded weight and its bias (another node's input): the
// product's operand is torch's weight argument.
TEST(OnnxParameters, ProductOperandIsTheWeight) {
  Graph m;
  m.signature({"q.weight", "q.bias"});
  m.initializer("val_7", {4, 4});
  m.initializer("q.bias", {4});
  m.node("MatMul", {"x", "val_7"}, fx("linear.default", "%x, %p_q_weight, %p_q_bias"));
  m.node("Add", {"q.bias", "out_1"}, fx("linear.default", "%x, %p_q_weight, %p_q_bias"));
  auto p = m.plan();
  ASSERT_TRUE(bool(p)) << errorOf(std::move(p));
  EXPECT_EQ(p->reads.at({0, 1}).target, "q.weight");
  EXPECT_TRUE(p->reads.at({0, 1}).transposed);
  EXPECT_EQ(p->reads.at({1, 0}).target, "q.bias");
}

// RemoveOptionalBiasFromGemm dropped a zero bias: it comes back.
TEST(OnnxParameters, RemovedGemmBiasComesBack) {
  Graph m;
  m.signature({"fc.weight", "fc.bias"});
  m.initializer("fc.weight", {4, 8});
  onnx::NodeProto &n =
      m.node("Gemm", {"x", "fc.weight"}, fx("addmm.default", "%p_fc_bias, %x, %p_fc_weight"));
  addMetadata(n, 9, "pkg.onnxscript.rewriter.rule_name", "RemoveOptionalBiasFromGemm");
  auto p = m.plan();
  ASSERT_TRUE(bool(p)) << errorOf(std::move(p));
  EXPECT_EQ(p->removedBias.at(0), "fc.bias");
}

// A tied weight: torch.export reads it through one placeholder; the other
// name is the parameter read in its module.
TEST(OnnxParameters, TiedNameIsAnAlias) {
  Graph m;
  m.signature({"wte.weight", "head.weight"});
  m.initializer("head.weight", {16, 4});
  m.node("Gather", {"head.weight", "x"}, fx("embedding.default", "%p_head_weight, %x"),
         "['', 'wte', 'embedding']");
  m.node("Transpose", {"head.weight"}, fx("linear.default", "%h, %p_head_weight"),
         "['', 'head', 'linear']");
  auto p = m.plan();
  ASSERT_TRUE(bool(p)) << errorOf(std::move(p));
  ASSERT_EQ(p->aliases.count("head.weight"), 1u);
  EXPECT_EQ(p->aliases.at("head.weight"), std::vector<std::string>{"wte.weight"});
}

// A parameter the optimizer folded into a constant is refused by name; an
// initializer no parameter claims is a constant.
TEST(OnnxParameters, FoldedParameterIsRefused) {
  Graph m;
  m.signature({"norm.weight"});
  m.initializer("add_6", {4});
  m.node("Mul", {"x", "add_6"}, fx("mul.Tensor", "%x, %add_6"), "['', 'norm', 'mul']");
  std::string err = errorOf(m.plan());
  EXPECT_NE(err.find("m.onnx: parameter 'norm.weight' is read by no node of the graph"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("optimize=False"), std::string::npos) << err;
}

/// An FX node's text with its own name: `%NAME : ... aten.OP(args = (ARGS))`.
std::string fxNamed(const std::string &name, const std::string &op, const std::string &args) {
  return "%" + name + " : [num_users=1] = call_function[target=torch.ops.aten." + op +
         "](args = (" + args + "), kwargs = {})";
}

// Gemma's RMSNorm scale 1 + w, folded by the optimizer into the constant
// `add_6`: the value_info says which parameter the constant was folded from,
// and the refusal names both; the parameter's own value is not in the file.
TEST(OnnxParameters, FoldedParameterNamesItsConstant) {
  Graph m;
  m.signature({"norm.weight"});
  m.initializer("add_6", {4});
  onnx::ValueInfoProto *vi = m.g.add_value_info();
  vi->set_name("add_6");
  addMetadata(*vi, 4, "pkg.onnxscript.optimizer.folded_from", "['norm.weight', 'val_5']");
  m.node("Mul", {"x", "add_6"}, fxNamed("mul_5", "mul.Tensor", "%mul_4, %add_6"),
         "['', 'norm', 'mul_5']");
  std::string err = errorOf(m.plan());
  EXPECT_NE(err.find("m.onnx: parameter 'norm.weight' is folded into the constant 'add_6' (its "
                     "value_info's pkg.onnxscript.optimizer.folded_from ['norm.weight', "
                     "'val_5']), which node 'node_1' reads"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("optimize=False"), std::string::npos) << err;
}

// GPT-NeoX's parallel residual: two LayerNorms of one input with equal
// weights, merged by the optimizer into one node. The consumer of the
// merged one still names it (`%layer_norm_1`), but no node says which
// parameters it computed with: refused, naming what was merged.
TEST(OnnxParameters, MergedComputationIsRefused) {
  Graph m;
  m.signature({"ln1.weight", "ln2.weight"});
  m.initializer("ln1.weight", {4});
  m.initializer("val_7", {4, 8});
  m.node("LayerNormalization", {"x", "ln1.weight"},
         fxNamed("layer_norm", "layer_norm.default", "%x, [4], %p_ln1_weight"));
  m.node("MatMul", {"out_1", "val_7"}, fxNamed("mm", "mm.default", "%layer_norm, %c"));
  m.node("MatMul", {"out_1", "val_7"}, fxNamed("mm_1", "mm.default", "%layer_norm_1, %c"));
  std::string err = errorOf(m.plan());
  EXPECT_NE(err.find("m.onnx: parameter 'ln2.weight' is read by no node of the graph: the "
                     "exporter's optimizer merged equal computations into one (node 'node_3' "
                     "reads 'out_1', torch's `%layer_norm`, where torch's op read "
                     "`%layer_norm_1`, which no node computes)"),
            std::string::npos)
      << err;
}

TEST(OnnxParameters, AmbiguousReadIsRefused) {
  Graph m;
  m.signature({"a.scale", "a.shift"});
  m.initializer("val_3", {4});
  m.initializer("val_4", {4});
  m.node("Foo", {"x", "val_3", "val_4"}, fx("foo.default", "%x, %p_a_scale, %p_a_shift"));
  std::string err = errorOf(m.plan());
  EXPECT_NE(err.find("which one it holds cannot be told"), std::string::npos) << err;
}

// No FX metadata (the TorchScript exporter): nothing is attributed, and
// every float initializer stays a parameter of its own name.
TEST(OnnxParameters, UnattributedFile) {
  Graph m;
  m.signature({"ln1.weight"});
  m.initializer("ln1.weight", {4});
  m.node("LayerNormalization", {"x", "ln1.weight"}, "");
  auto p = m.plan();
  ASSERT_TRUE(bool(p)) << errorOf(std::move(p));
  EXPECT_FALSE(p->attributed);
  EXPECT_TRUE(p->reads.empty());
}

} // namespace
} // namespace mlc
