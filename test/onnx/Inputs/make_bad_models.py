"""Writes malformed and unsupported ONNX models for the importer's error tests.

    make_bad_models.py GOOD.onnx OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

good, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
data = open(good, "rb").read()
open(os.path.join(out, "truncated.onnx"), "wb").write(data[: len(data) // 3])
open(os.path.join(out, "garbage.onnx"), "wb").write(bytes(range(256)) * 8)
open(os.path.join(out, "empty.onnx"), "wb").write(b"")


def save(name, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name + ".onnx"))


x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
w5 = numpy_helper.from_array(np.ones((5, 3), np.float32), "w5")
save("unsupported-op", [helper.make_node("Relu", ["x"], ["h"], name="act"),
                        helper.make_node("Hardmax", ["h"], ["y"], name="my_hardmax")],
     [x], [y])
save("old-opset", [helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [w], opset=11)
save("dynamic-rank", [helper.make_node("MatMul", ["x", "w"], ["y"])],
     [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)], [y], [w])
save("missing-initializer", [helper.make_node("MatMul", ["x", "w_missing"], ["y"], name="proj")],
     [x], [y])
save("mismatched-shapes", [helper.make_node("MatMul", ["x", "w5"], ["y"], name="proj")],
     [x], [y], [w5])
save("bad-reshape", [helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(
                         np.array([-1, 7], np.int64))),
                     helper.make_node("Reshape", ["x", "s"], ["y"], name="flatten")],
     [x], [y])
# Raw data shorter than the shape needs.
short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3], raw_data=b"\0" * 20)
save("short-initializer", [helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [short])
# Opsets and domains the importer does not take, and opset-23 Attention forms
# it refuses (grouped-query heads, a KV cache).
save("new-opset", [helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [w], opset=24)
save("gelu-opset18", [helper.make_node("Gelu", ["x"], ["y"], name="act")], [x], [y], opset=18)
g = helper.make_graph([helper.make_node("FastGelu", ["x"], ["y"], name="fg", domain="com.microsoft")],
                      "ms", [x], [y])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                        helper.make_opsetid("com.microsoft", 1)])
m.ir_version = 8
onnx.save(m, os.path.join(out, "ms-domain.onnx"))
q3 = helper.make_tensor_value_info("q", TensorProto.FLOAT, [2, 4, 8])
q12 = helper.make_tensor_value_info("q", TensorProto.FLOAT, [2, 4, 12])
k3 = helper.make_tensor_value_info("k", TensorProto.FLOAT, [2, 4, 4])
save("attention-gqa", [helper.make_node("Attention", ["q", "k", "k"], ["y"], name="attn",
                                        q_num_heads=3, kv_num_heads=2)], [q12, k3], [y], opset=23)
save("attention-cache", [helper.make_node("Attention", ["q", "q", "q", "", "q", "q"],
                                          ["y", "pk", "pv"], name="attn",
                                          q_num_heads=2, kv_num_heads=2)],
     [q3], [y, helper.make_tensor_value_info("pk", TensorProto.FLOAT, None)], opset=23)
# Run-time computation mlc has no op for: a cumulative sum of booleans
# (ONNX's CumSum takes numbers), a gather at indices computed from an input.
am = helper.make_tensor_value_info("am", TensorProto.INT64, [2, 4])
bm = helper.make_tensor_value_info("bm", TensorProto.BOOL, [2, 4])
ax = numpy_helper.from_array(np.array(1, np.int64), "ax")
save("cumsum-bool", [helper.make_node("CumSum", ["bm", "ax"], ["y"], name="pos")], [bm],
     [y], [ax], opset=18)
save("gathernd-runtime", [helper.make_node("Unsqueeze", ["am", "ax2"], ["i"]),
                          helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd")],
     [x, am], [y], [numpy_helper.from_array(np.array([2], np.int64), "ax2")], opset=18)
# GatherND of a run-time value at a constant index past its dim; a Max of
# no inputs (ONNX's Max takes 1 to N).
x3 = helper.make_tensor_value_info("x3", TensorProto.FLOAT, [3, 2, 4])
save("gathernd-range", [helper.make_node("GatherND", ["x3", "i"], ["y"], name="gnd")], [x3], [y],
     [numpy_helper.from_array(np.array([[1], [-5]], np.int64), "i")], opset=20)
save("max-none", [helper.make_node("Max", [], ["m"], name="mx"),
                  helper.make_node("Add", ["x3", "m"], ["y"])], [x3], [y], opset=20)
