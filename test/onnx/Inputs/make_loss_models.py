"""Writes logits-only ONNX models whose loss mlc cannot infer.

    make_loss_models.py OUT_DIR

no-attention.onnx   an embedding and a tied head: logits, but no attention
                    to tell a causal from a masked model
labels-input.onnx   the same with an extra input named 'labels'
no-logits.onnx      one output, 'scores': neither loss nor logits
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
V, E = 16, 8
wte = numpy_helper.from_array(np.random.default_rng(0).normal(0, 0.02, (V, E)).astype(np.float32),
                              "wte")
ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])


def save(name, output, extra_inputs=()):
    nodes = [helper.make_node("Gather", ["wte", "input_ids"], ["h"], name="embed"),
             helper.make_node("Transpose", ["wte"], ["wt"], perm=[1, 0], name="tie"),
             helper.make_node("MatMul", ["h", "wt"], [output], name="head")]
    logits = helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", "sequence", V])
    g = helper.make_graph(nodes, name, [ids, *extra_inputs], [logits], [wte])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name + ".onnx"))


save("no-attention", "logits")
save("labels-input", "logits",
     [helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch", "sequence"])])
save("no-logits", "scores")
