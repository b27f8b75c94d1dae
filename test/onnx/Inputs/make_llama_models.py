"""Writes the small ONNX models of test/onnx/llama.test: the Llama family's
constructs the importer refuses (with the file, node and op named), and
torch.export's graph signature (graph metadata_props, GraphProto field 16,
which Debian's onnx 1.12 cannot set: appended as raw protobuf here).

    make_llama_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
F = TensorProto.FLOAT


def model(name, nodes, inputs, outputs, inits=(), opset=23):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10 if opset > 20 else 9
    return m


def save(m, name, signature=None):
    data = m.SerializeToString()
    if signature is not None:
        # ModelProto.graph (field 7) once more: protobuf merges the two, so
        # the graph gains metadata_props (field 16) = {key, value}.
        def field(num, payload):
            return encode_varint(num << 3 | 2) + encode_varint(len(payload)) + payload
        entry = field(1, b"pkg.torch.export.ExportedProgram.graph_signature") + \
            field(2, signature.encode())
        data += field(7, field(16, entry))
    open(os.path.join(out, name + ".onnx"), "wb").write(data)


def encode_varint(v):
    b = b""
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            b += bytes([byte | 0x80])
        else:
            return b + bytes([byte])


x = helper.make_tensor_value_info("x", F, [2, 4, 6])
x4 = helper.make_tensor_value_info("x", F, [2, 2, 4, 6])
y = helper.make_tensor_value_info("y", F, None)
cache = numpy_helper.from_array(np.ones((2, 4, 3), np.float32), "cache")

# Sin of a value computed from the inputs: mlc has no trigonometric kernel.
save(model("sin-runtime", [helper.make_node("Sin", ["x"], ["y"], name="sin_of_x")], [x], [y]),
     "sin-runtime")
# RotaryEmbedding with position_ids (a KV-cache export's form).
pos = helper.make_tensor_value_info("pos", TensorProto.INT64, [2, 4])
save(model("rotary-position-ids",
           [helper.make_node("RotaryEmbedding", ["x", "cache", "cache", "pos"], ["y"],
                             name="rope")], [x4, pos], [y], [cache]), "rotary-position-ids")
# An odd rotary_embedding_dim: no pairs.
save(model("rotary-odd-dim",
           [helper.make_node("RotaryEmbedding", ["x", "cache", "cache"], ["y"], name="rope",
                             rotary_embedding_dim=3)], [x4], [y], [cache]), "rotary-odd-dim")
# Caches of the wrong length.
short = numpy_helper.from_array(np.ones((2, 3, 3), np.float32), "short")
save(model("rotary-bad-cache",
           [helper.make_node("RotaryEmbedding", ["x", "short", "short"], ["y"], name="rope")],
           [x4], [y], [short]), "rotary-bad-cache")

# y = x * freq + w: `freq` a BUFFER, `w` a PARAMETER in the signature (in the
# graph's metadata, or the model's); the same model without one (both
# parameters, the rule for files without it).
freq = numpy_helper.from_array(np.linspace(0.5, 1, 6).astype(np.float32), "freq")
w = numpy_helper.from_array(np.full(6, 0.25, np.float32), "w")
m = model("buffers", [helper.make_node("Mul", ["x", "freq"], ["xf"]),
                      helper.make_node("Add", ["xf", "w"], ["y"])], [x], [y], [freq, w], opset=20)
buffers_signature = ("\n# inputs\np_w: PARAMETER target='w'\n"
                     "b_freq: BUFFER target='freq' persistent=False\nx: USER_INPUT\n\n"
                     "# outputs\ny: USER_OUTPUT\n")
save(m, "no-signature")
# The signature in the model's metadata_props (older exporters' place).
older = onnx.ModelProto()
older.CopyFrom(m)
older.metadata_props.append(onnx.StringStringEntryProto(
    key="pkg.torch.export.ExportedProgram.graph_signature", value=buffers_signature))
save(older, "buffer-signature-model-metadata")
save(m, "buffer-signature", buffers_signature)

# Grouped-query Attention (4 query heads over 2 kv heads, rank 3): K/V stay
# at their 2 heads in mlc.attention.
q12 = helper.make_tensor_value_info("q", F, [2, 4, 12])
kv6 = helper.make_tensor_value_info("kv", F, [2, 4, 6])
save(model("attention-gqa", [helper.make_node("Attention", ["q", "kv", "kv"], ["y"], name="attn",
                                              q_num_heads=4, kv_num_heads=2, is_causal=1)],
           [q12, kv6], [y]), "attention-gqa")
# Interleaved rotation of the first 4 of 6 features (constant caches
# [2, 4, 2] of distinct values): one mlc.rotary with [2, 1, 4, 4] tables,
# each angle on both members of its pair, the sine negated on the first.
# The same with the caches an initializer (a parameter, as no signature says
# otherwise): not constant, so the rotation is written out.
ci = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(2, 4, 2) / 16, "ci")
rope = helper.make_node("RotaryEmbedding", ["x", "ci", "ci"], ["y"], name="rope", interleaved=1,
                        rotary_embedding_dim=4)
save(model("rotary-interleaved-partial",
           [helper.make_node("Constant", [], ["ci"], value=ci), rope], [x4], [y]),
     "rotary-interleaved-partial")
save(model("rotary-parameter-cache", [rope], [x4], [y], [ci]), "rotary-parameter-cache")
