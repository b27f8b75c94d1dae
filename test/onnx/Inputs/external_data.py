"""Models whose initializers lie in external files (data_location EXTERNAL,
as torch.onnx.export writes above 2 GB), good and broken, for the importer.

    external_data.py --mlc MLC --work DIR

Writes DIR/ext.onnx (+ ext.data: both weights in one file at offsets),
runs it through `mlc run` against onnxruntime and prints EXTERNAL OK; then
writes the broken variants external-data.test checks the errors of:
past-end.onnx (offset + length beyond the file), escape.onnx (a location
outside the model's directory), missing.onnx (no such file),
short.onnx (a length that is not the shape's).
"""
import argparse
import copy
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", required=True)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)
rng = np.random.default_rng(0)
w = rng.standard_normal((6, 5)).astype(np.float32)
bias = rng.standard_normal(5).astype(np.float32)
x = rng.standard_normal((2, 3, 6)).astype(np.float32)


def external(name, array, location, offset, length=None):
    t = numpy_helper.from_array(array, name)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": str(offset)}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def model(inits):
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
                           helper.make_node("Add", ["h", "b"], ["y"], name="bias")], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    return m


# Both weights in one file, the bias after 16 bytes of padding.
with open(os.path.join(args.work, "ext.data"), "wb") as f:
    f.write(w.tobytes() + b"\0" * 16 + bias.tobytes())
good = [external("w", w, "ext.data", 0, w.nbytes), external("b", bias, "ext.data", w.nbytes + 16)]
path = os.path.join(args.work, "ext.onnx")
onnx.save(model(good), path)
ref = ort.InferenceSession(path).run(None, {"x": x})[0]
np.save(os.path.join(args.work, "x.npy"), x)
out = os.path.join(args.work, "out")
subprocess.run([args.mlc, "run", path, "--input", "x=" + os.path.join(args.work, "x.npy"),
                "--output-dir", out], check=True)
got = np.load(os.path.join(out, "y.npy"))
diff = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
print(f"ext: max rel diff {diff:.1e}")
if not diff <= 1e-6:
    print("EXTERNAL MISMATCH")
    sys.exit(1)
print("EXTERNAL OK")

size = w.nbytes + 16 + bias.nbytes
bad = {"past-end": [good[0], external("b", bias, "ext.data", size - 8, bias.nbytes)],
       "escape": [external("w", w, "../ext.data", 0, w.nbytes), good[1]],
       "missing": [external("w", w, "nothere.data", 0, w.nbytes), good[1]],
       "short": [external("w", w, "ext.data", 0, w.nbytes - 4), good[1]]}
for name, inits in bad.items():
    onnx.save(model(copy.deepcopy(inits)), os.path.join(args.work, name + ".onnx"))
