"""Minimized seeds for the ONNX fuzz target (fuzz/corpus/onnx/).

From the exports of today's stack (test/onnx/Inputs/modern/): the graph as
exported, each float initializer of more than 64 elements replaced by a
ConstantOfShape node of its shape (smaller ones, norms' and biases' weights,
stay initializers), so a seed is a few kB (the fuzzer's max_len is 64 kB)
and still walks the exporter's mask, attention, RoPE and shape code through
the importer. The GPT-2/BERT seeds (modern-gpt2-*, modern-bert-*) drop all
metadata; the Llama/Qwen2/Phi3 seeds (Phi3's: partial rotary) keep the
two entries the importer reads: the graph's torch.export signature
(OnnxSignature.cpp reads it: buffers, and tied parameters in
OnnxAliases.cpp) and the name scopes of the nodes that read an initializer
(OnnxAliases.cpp), nothing else.

Two hand-built models reach the tie rule itself (the fixtures' tied
embeddings are too big to stay initializers):
  sig-tied.onnx       an embedding read by Gather in `transformer.wte` and,
                      transposed, by the head in `lm_head`: `lm_head.weight`
                      is tied to `transformer.wte.weight`; a BUFFER
                      initializer stays a constant.
  sig-ambiguous.onnx  two `*.bias` read at the same depth below `cls`, a
                      target no node reads, the signature in the model's
                      metadata_props (the older place): the note's paths.

The campaigns' findings, each a seed that must give an error (fuzz/CAMPAIGNS.md):
  finding-attention-scale.onnx  Attention (opset 23) with scale=-4.

Run with an onnx that knows metadata_props (>= 1.16; /work/modern-venv):
    make_onnx_corpus.py MODERN_DIR OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SIGNATURE = "pkg.torch.export.ExportedProgram.graph_signature"
SCOPES = "pkg.torch.onnx.name_scopes"
KEEP_ELEMENTS = 64


def entry(key, value):
    return onnx.StringStringEntryProto(key=key, value=value)


def minimize(m, keep_metadata):
    g = m.graph
    keep, nodes, kept = [], [], set()
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT and len(t.dims) >= 1 and \
                int(np.prod(t.dims)) > KEEP_ELEMENTS:
            shape = numpy_helper.from_array(np.array(list(t.dims), np.int64), t.name + "_shape")
            keep.append(shape)
            nodes.append(helper.make_node(
                "ConstantOfShape", [shape.name], [t.name],
                value=numpy_helper.from_array(np.array([0.01], np.float32))))
        else:
            keep.append(t)
            kept.add(t.name)
    del g.initializer[:]
    g.initializer.extend(keep)
    rest = list(g.node)
    del g.node[:]
    g.node.extend(nodes + rest)
    del g.value_info[:]
    # The exporter's per-node metadata (source locations, stack traces) but
    # the name scopes of a node that reads a kept initializer.
    for n in g.node:
        n.doc_string = ""
        scopes = [p for p in n.metadata_props if p.key == SCOPES]
        del n.metadata_props[:]
        if keep_metadata and any(i in kept for i in n.input):
            n.metadata_props.extend(scopes)
    signature = [p for p in g.metadata_props if p.key == SIGNATURE]
    del g.metadata_props[:]
    if keep_metadata:
        g.metadata_props.extend(signature)
    del m.metadata_props[:]
    m.doc_string = ""
    return m


def scoped(node, *scopes):
    node.metadata_props.append(entry(SCOPES, repr(["", *scopes, node.name])))
    return node


def signature(params, buffers=(), output="logits"):
    lines = ["# inputs"]
    lines += [f"p_{t.replace('.', '_')}: PARAMETER target='{t}'" for t in params]
    lines += [f"b_{t.replace('.', '_')}: BUFFER target='{t}' persistent=False" for t in buffers]
    lines += ["input_ids: USER_INPUT", "", "# outputs", f"{output}: USER_OUTPUT"]
    return "\n".join(lines) + "\n"


def init(name, *shape):
    rng = np.random.default_rng(len(name))
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def tied_model():
    """ids -> Gather(wte) * scale -> LayerNorm -> MatMul(wte^T) -> logits."""
    nodes = [
        scoped(helper.make_node("Gather", ["transformer.wte.weight", "input_ids"], ["h"],
                                name="embedding"), "transformer", "transformer.wte"),
        scoped(helper.make_node("Mul", ["h", "transformer.scale"], ["hs"], name="mul"),
               "transformer"),
        scoped(helper.make_node("LayerNormalization",
                                ["hs", "transformer.ln_f.weight", "transformer.ln_f.bias"],
                                ["n"], name="layer_norm", axis=-1, epsilon=1e-5),
               "transformer", "transformer.ln_f"),
        scoped(helper.make_node("Transpose", ["transformer.wte.weight"], ["wt"], name="t",
                                perm=[1, 0]), "lm_head"),
        scoped(helper.make_node("MatMul", ["n", "wt"], ["logits"], name="linear"), "lm_head"),
    ]
    g = helper.make_graph(
        nodes, "tied",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", 16])],
        [init("transformer.wte.weight", 16, 4), init("transformer.scale", 4),
         init("transformer.ln_f.weight", 4), init("transformer.ln_f.bias", 4)])
    g.metadata_props.append(entry(SIGNATURE, signature(
        ["transformer.wte.weight", "transformer.ln_f.weight", "transformer.ln_f.bias",
         "lm_head.weight"], buffers=["transformer.scale"])))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


def ambiguous_model():
    """Two `*.bias` read at one depth below `cls`: `cls.bias` is placed on
    neither; `cls.decoder.weight` is read nowhere."""
    nodes = [
        scoped(helper.make_node("Gather", ["emb.weight", "input_ids"], ["h"], name="embedding"),
               "emb"),
        scoped(helper.make_node("Add", ["h", "cls.a.bias"], ["ha"], name="add"), "cls", "cls.a"),
        scoped(helper.make_node("Add", ["ha", "cls.b.bias"], ["logits"], name="add_1"),
               "cls", "cls.b"),
    ]
    g = helper.make_graph(
        nodes, "ambiguous",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", 4])],
        [init("emb.weight", 8, 4), init("cls.a.bias", 4), init("cls.b.bias", 4)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.metadata_props.append(entry(SIGNATURE, signature(
        ["emb.weight", "cls.a.bias", "cls.b.bias", "cls.bias", "cls.decoder.weight"])))
    return m


def attention_scale_model():
    """Attention with a negative scale (the importer aborted in the op's
    builder; now an error naming the node)."""
    qkv = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 2, 4, 3]) for n in "qkv"]
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn", scale=-4.0)
    g = helper.make_graph([node], "attention_scale", qkv,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 4, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


src, out = sys.argv[1], sys.argv[2]
for name in ["gpt2-dynamo-opset20", "gpt2-dynamo-opset20-noopt", "gpt2-dynamo-opset23",
             "bert-dynamo-opset20", "bert-dynamo-opset23", "llama-dynamo-opset20",
             "llama-dynamo-opset23", "qwen2-dynamo-opset20", "qwen2-dynamo-opset23",
             "phi3-dynamo-opset20", "phi3-dynamo-opset23"]:
    m = onnx.load(os.path.join(src, name + ".onnx"), load_external_data=False)
    keep_metadata = name.startswith(("llama", "qwen2", "phi3"))
    onnx.save(minimize(m, keep_metadata), os.path.join(out, "modern-" + name + ".onnx"))
onnx.save(tied_model(), os.path.join(out, "sig-tied.onnx"))
onnx.save(ambiguous_model(), os.path.join(out, "sig-ambiguous.onnx"))
onnx.save(attention_scale_model(), os.path.join(out, "finding-attention-scale.onnx"))
