"""Writes ONNX models that import but that the lowering refuses, for
locations-lowering.test: a softmax over the first axis (the CPU plan's
softmax kernel runs over the last), once from a named node and once from an
unnamed one.

    make_lowering_error_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, softmax_name):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])
    w = numpy_helper.from_array(np.full((4, 5), 0.5, np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="block.0/proj"),
             helper.make_node("Softmax", ["h"], ["y"], axis=0, name=softmax_name)]
    m = helper.make_model(helper.make_graph(nodes, "lowering-error", [x], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name))


save("softmax-named.onnx", "block.0/attn/Softmax")
save("softmax-unnamed.onnx", "")
