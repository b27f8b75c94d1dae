"""Writes ONNX models whose attributes have the wrong type for their operator
(a FLOAT axis, an INTS axis, an INT perm, a STRING epsilon, a FLOAT Cast
target) and one where every type is right.

    make_attr_models.py OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import AttributeProto, TensorProto, helper, numpy_helper, save

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
scale = numpy_helper.from_array(np.ones(4, np.float32), "scale")


def model(name, node, inits=()):
    g = helper.make_graph([node], name, [x], [y], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    save(m, os.path.join(out, name + ".onnx"))


def attribute(name, kind, value):
    """An attribute of exactly this type, whatever helper would infer."""
    a = AttributeProto(name=name, type=kind)
    {AttributeProto.INT: lambda: setattr(a, "i", value),
     AttributeProto.FLOAT: lambda: setattr(a, "f", value),
     AttributeProto.STRING: lambda: setattr(a, "s", value),
     AttributeProto.INTS: lambda: a.ints.extend(value)}[kind]()
    return a


def node(op, inputs, attr, name):
    n = helper.make_node(op, inputs, ["y"], name=name)
    n.attribute.append(attr)
    return n


model("softmax-float-axis", node("Softmax", ["x"], attribute("axis", AttributeProto.FLOAT, -1.0),
                                 "sm"))
model("softmax-ints-axis", node("Softmax", ["x"], attribute("axis", AttributeProto.INTS, [2]),
                                "sm"))
model("softmax-int-axis", node("Softmax", ["x"], attribute("axis", AttributeProto.INT, 1), "sm"))
model("transpose-int-perm", node("Transpose", ["x"], attribute("perm", AttributeProto.INT, 1),
                                 "tr"))
model("layernorm-string-epsilon",
      node("LayerNormalization", ["x", "scale"],
           attribute("epsilon", AttributeProto.STRING, b"1e-5"), "ln"), [scale])
model("cast-float-to", node("Cast", ["x"], attribute("to", AttributeProto.FLOAT, 1.0), "cast"))
