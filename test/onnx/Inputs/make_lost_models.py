"""Variants of the default (optimize=True) Gemma and GPT-NeoX exports whose
lost parameters the file does not fix, for the refusals of families.test:
small edits at the protobuf wire level (node metadata_props, NodeProto field
9, is newer than the onnx package CI has).

  python make_lost_models.py GEMMA.onnx GPTNEOX.onnx OUT_DIR

writes OUT_DIR/
  gemma-inexact.onnx   the folded constant `add_6` (1 + weight) holds 1e-8
                       at element 0: 1 + w gives it for no f32 w exactly
  gemma-unknown.onnx   the norms' module class renamed (OtherRMSNorm): the
                       file does not say what `add_6` was folded with
  neox-ambiguous.onnx  the signature lists a second LayerNorm module of
                       layer 0 (`extra_layernorm`) whose parameters no node
                       reads: the merged `%layer_norm_1` computed with the
                       parameters of either
  neox-unknown.onnx    the layers' class renamed (GPTNeoXBlock): the file
                       does not say that a layer applies norms of its own
  neox-unplaced.onnx   node_MatMul_258 (layer 0's MLP, which reads the
                       merged `%layer_norm_1`) placed in a module
                       `gpt_neox.layers.X`: the nearest module holding it and
                       the kept LayerNorm is `gpt_neox`, a GPTNeoXModel,
                       whose children hold no unread LayerNorm parameters
"""

import os
import struct
import sys

from onnx_wire import fields, ld

GRAPH, NODE, INITIALIZER = 7, 1, 5  # ModelProto.graph, GraphProto.node/.initializer
GRAPH_META, NODE_NAME, NODE_META = 16, 3, 9
SIGNATURE = "pkg.torch.export.ExportedProgram.graph_signature"
TENSOR_NAME, TENSOR_RAW = 8, 9


def rewrite(model, graph_fn):
    return b"".join(ld(GRAPH, graph_fn(p)) if n == GRAPH and wt == 2 else raw
                    for n, wt, raw, p in fields(model))


def edit_graph(g, node_fn=None, init_fn=None):
    out = b""
    for num, wt, raw, payload in fields(g):
        if num == NODE and node_fn:
            out += ld(NODE, node_fn(bytes(payload)))
        elif num == INITIALIZER and init_fn:
            out += ld(INITIALIZER, init_fn(bytes(payload)))
        else:
            out += raw
    return out


def field_str(payload, number):
    for n, _, _, p in fields(payload):
        if n == number:
            return bytes(p).decode()
    return None


def set_scopes(node_name, scopes):
    """The node's `pkg.torch.onnx.name_scopes` replaced by `scopes`."""
    def fn(node):
        if field_str(node, NODE_NAME) != node_name:
            return node
        out = b""
        for n, _, raw, p in fields(node):
            if n == NODE_META and field_str(p, 1) == "pkg.torch.onnx.name_scopes":
                text = "[" + ", ".join(repr(s) for s in scopes) + "]"
                out += ld(NODE_META, ld(1, b"pkg.torch.onnx.name_scopes") + ld(2, text.encode()))
            else:
                out += raw
        return out
    return fn


def add_parameters(lines):
    """The graph signature with `lines` added after its first PARAMETER."""
    def fn(g):
        out = b""
        for n, _, raw, p in fields(g):
            if n == GRAPH_META and field_str(p, 1) == SIGNATURE:
                text = field_str(p, 2)
                at = text.index("\n", text.index(": PARAMETER")) + 1
                text = text[:at] + "".join(l + "\n" for l in lines) + text[at:]
                out += ld(GRAPH_META, ld(1, SIGNATURE.encode()) + ld(2, text.encode()))
            else:
                out += raw
        return out
    return fn


def first_element(name, value):
    def fn(t):
        if field_str(t, TENSOR_NAME) != name:
            return t
        out = b""
        for n, _, raw, p in fields(t):
            out += ld(TENSOR_RAW, struct.pack("<f", value) + bytes(p)[4:]) if n == TENSOR_RAW else raw
        return out
    return fn


gemma, neox, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out_dir, exist_ok=True)


def write(name, data):
    open(os.path.join(out_dir, name + ".onnx"), "wb").write(data)


g = open(gemma, "rb").read()
write("gemma-inexact", rewrite(g, lambda p: edit_graph(p, init_fn=first_element("add_6", 1e-8))))
renamed = g.replace(b".GemmaRMSNorm'", b".OtherRMSNorm'")
assert renamed != g
write("gemma-unknown", renamed)

n = open(neox, "rb").read()
extra = [f"p_gpt_neox_layers_0_extra_layernorm_{a}: PARAMETER "
         f"target='gpt_neox.layers.0.extra_layernorm.{a}'" for a in ("weight", "bias")]
write("neox-ambiguous", rewrite(n, add_parameters(extra)))
renamed = n.replace(b".GPTNeoXLayer'", b".GPTNeoXBlock'")
assert renamed != n
write("neox-unknown", renamed)
mlp = ["", "gpt_neox", "gpt_neox.layers.X", "gpt_neox.layers.X.mlp",
       "gpt_neox.layers.X.mlp.dense_h_to_4h", "linear_2"]
write("neox-unplaced", rewrite(n, lambda p: edit_graph(p, set_scopes("node_MatMul_258", mlp))))
