"""`mlc run` of a one-node RotaryEmbedding model against onnxruntime's
result on the same random input (the model's input `x`, output `y`).

usage: rotary_vs_ort.py MODEL.onnx --mlc MLC --work DIR
"""
import argparse
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort

p = argparse.ArgumentParser()
p.add_argument("model")
p.add_argument("--mlc", required=True)
p.add_argument("--work", required=True)
a = p.parse_args()
os.makedirs(a.work, exist_ok=True)
dims = [d.dim_value for d in onnx.load(a.model).graph.input[0].type.tensor_type.shape.dim]
x = np.random.RandomState(0).randn(*dims).astype(np.float32)
np.save(os.path.join(a.work, "x.npy"), x)
ref = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
subprocess.run([a.mlc, "run", a.model, "--input", "x=" + os.path.join(a.work, "x.npy"),
                "--output-dir", os.path.join(a.work, "out")], check=True)
got = np.load(os.path.join(a.work, "out", "y.npy"))
err = float(np.abs(got - ref).max())
name = os.path.basename(a.model)
print(f"{name}: max |mlc - onnxruntime| = {err:.3g}", "MATCH" if err <= 1e-6 else "MISMATCH")
