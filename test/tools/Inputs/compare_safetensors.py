"""Compares two safetensors files tensor by tensor, exactly.

    compare_safetensors.py A B      exit 0 and print IDENTICAL when every
                                    tensor matches bit for bit and is finite
    compare_safetensors.py A        exit 0 and print FINITE when every value
                                    of A is finite
    compare_safetensors.py A B RTOL exit 0 and print CLOSE when every value
                                    is within RTOL of the largest |B| of its
                                    tensor
    compare_safetensors.py A B RTOL SKIP
                                    the same, leaving out tensors whose name
                                    contains SKIP (compared for names only)
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64}


def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + e], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


a = read(sys.argv[1])
bad = [k for k, v in a.items() if not np.isfinite(v).all()]
if bad:
    print(f"NOT FINITE: {len(bad)} tensors, e.g. {bad[0]}")
    sys.exit(1)
if len(sys.argv) == 2:
    print(f"FINITE: {len(a)} tensors")
    sys.exit(0)
b = read(sys.argv[2])
if a.keys() != b.keys():
    print("DIFFERENT NAMES")
    sys.exit(1)
if len(sys.argv) > 3:
    rtol = float(sys.argv[3])
    skip = sys.argv[4] if len(sys.argv) > 4 else None
    worst = max(float(np.abs(a[k].astype(np.float64) - b[k]).max() / max(np.abs(b[k]).max(), 1e-30))
                for k in a if not (skip and skip in k))
    if worst > rtol:
        print(f"DIFFERENT: max relative difference {worst:.2e} > {rtol}")
        sys.exit(1)
    print(f"CLOSE: {len(a)} tensors, max relative difference {worst:.2e}")
    sys.exit(0)
diff = [k for k in a if a[k].tobytes() != b[k].tobytes()]
if diff:
    print(f"DIFFERENT: {len(diff)} tensors, e.g. {diff[0]}")
    sys.exit(1)
print(f"IDENTICAL: {len(a)} tensors, all finite")
