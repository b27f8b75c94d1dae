"""Minimized seeds for the ONNX fuzz target (fuzz/corpus/onnx/) from the
exports of today's stack (test/onnx/Inputs/modern/, the fixtures branch):
the graph as exported, each float initializer of rank >= 1 replaced by a
ConstantOfShape node of its shape, so a seed is a few kB (the fuzzer's
max_len is 64 kB) and still walks the exporter's mask, attention and shape
code through the importer.

    make_onnx_corpus.py MODERN_DIR OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

src, out = sys.argv[1], sys.argv[2]
names = ["gpt2-dynamo-opset20", "gpt2-dynamo-opset20-noopt", "gpt2-dynamo-opset23",
         "bert-dynamo-opset20", "bert-dynamo-opset23"]
for name in names:
    m = onnx.load(os.path.join(src, name + ".onnx"), load_external_data=False)
    g = m.graph
    keep, nodes = [], []
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT and len(t.dims) >= 1:
            shape = numpy_helper.from_array(np.array(list(t.dims), np.int64), t.name + "_shape")
            keep.append(shape)
            nodes.append(helper.make_node(
                "ConstantOfShape", [shape.name], [t.name],
                value=numpy_helper.from_array(np.array([0.01], np.float32))))
        else:
            keep.append(t)
    del g.initializer[:]
    g.initializer.extend(keep)
    rest = list(g.node)
    del g.node[:]
    g.node.extend(nodes + rest)
    del g.value_info[:]
    # The exporter's per-node metadata (source locations, stack traces).
    for n in g.node:
        n.doc_string = ""
        if hasattr(n, "metadata_props"):
            del n.metadata_props[:]
    del m.metadata_props[:]
    m.doc_string = ""
    m.DiscardUnknownFields()  # fields newer than this onnx (metadata_props)
    onnx.save(m, os.path.join(out, "modern-" + name + ".onnx"))
