"""Copies a safetensors file with every floating-point value replaced.

    poison_weights.py IN OUT nan|inf|huge

The header is kept as it is, so the file still parses; only the numbers are
NaN (or +inf) — what a diverged run would have saved — or 3e38, finite
values whose products overflow.
"""
import json
import struct
import sys

import numpy as np

src, dst, what = sys.argv[1:4]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body = bytearray(data[8 + n:])
value = {"nan": np.nan, "inf": np.inf, "huge": 3e38}[what]
for name, t in header.items():
    if name == "__metadata__":
        continue
    begin, end = t["data_offsets"]
    dtype = {"F32": np.float32, "F64": np.float64}[t["dtype"]]
    body[begin:end] = np.full((end - begin) // np.dtype(dtype).itemsize, value, dtype).tobytes()
open(dst, "wb").write(data[:8 + n] + bytes(body))
