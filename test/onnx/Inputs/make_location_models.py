"""Writes a small ONNX model with a named and an unnamed node, for the
locations test: the importer names each op after its node, or after its op
type and index in the graph when the node has no name.

    make_location_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])
w = numpy_helper.from_array(np.full((4, 5), 0.5, np.float32), "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="block.0/proj"),
                       helper.make_node("Tanh", ["h"], ["y"])],
                      "locations", [x], [y], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, os.path.join(out, "named-and-unnamed.onnx"))
