"""Runs a dropout kernel of a whole tensor and the same dropout's kernel of
each block (`block %rank of N span S`), as the CPU target prints them
(mlc-print-kernels=target=cpu), and checks that block r's output is the
whole output's block r, bit for bit.

    dropout_blocks.py WHOLE.cpp BLOCK.cpp PRELUDE_DIR WORKDIR SEED BLOCKS

WHOLE.cpp and BLOCK.cpp are the printed kernels of one program at one
process and at one rank of BLOCKS; the dropout of seed SEED is the kernel
that draws `mlc_uniform(keySEED, flat)` (whole) or through mlc_block_index
(block). The whole tensor's blocks are contiguous (a split of its leading
non-unit dim), as in the test that calls this.
"""
import ctypes
import os
import re
import subprocess
import sys

import numpy as np

whole_src, block_src, prelude, work, seed, blocks = sys.argv[1:7]
blocks = int(blocks)


def load(path, marker, tag):
    text = open(path).read()
    name = None
    for m in re.finditer(r'extern "C" void (k\d+)\(char \*\*b, MlcKernelCtx \*ctx\) \{(.*?)\n\}\n', text, re.S):
        if marker in m.group(2):
            name = m.group(1)
    if name is None:
        sys.exit(f"no kernel of {path} draws {marker}")
    src = os.path.join(work, tag + ".cpp")
    open(src, "w").write('#include "cpu.h"\n#include "rows.h"\n#include "attention.h"\n' + text)
    lib = os.path.join(work, tag + ".so")
    subprocess.run(["c++", "-std=c++17", "-fopenmp", "-shared", "-fPIC", "-O1", "-I", prelude, src,
                    "-o", lib], check=True)
    return getattr(ctypes.CDLL(lib), name), int(re.search(rf"{name}_args = (\d+)", text).group(1))


class Ctx(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int64), ("error", ctypes.POINTER(ctypes.c_int64)),
                ("rows", ctypes.c_int64), ("win", ctypes.POINTER(ctypes.c_int64)),
                ("nwin", ctypes.c_int64)]


def run(kernel, arrays, step):
    err = (ctypes.c_int64 * 4)()
    ctx = Ctx(step, err, 0, None, 0)
    ptrs = (ctypes.c_char_p * len(arrays))(*[a.ctypes.data_as(ctypes.c_char_p) for a in arrays])
    kernel(ptrs, ctypes.byref(ctx))


whole, nw = load(whole_src, f"mlc_uniform(key{seed}, flat)", "whole")
block, nb = load(block_src, f"mlc_uniform(key{seed}, mlc_block_index(", "block")
if (nw, nb) != (2, 3):
    sys.exit(f"expected kernels (out, in) and (out, in, rank), got {nw} and {nb} arguments")
n = 32
x = (1.0 + np.arange(n)).astype(np.float32)
for step in (1, 7):
    want = np.zeros(n, np.float32)
    run(whole, [want, x], step)
    dropped = int((want == 0).sum())
    for r in range(blocks):
        m = n // blocks
        got = np.zeros(m, np.float32)
        run(block, [got, np.ascontiguousarray(x[r * m:(r + 1) * m]), np.array([float(r)])], step)
        if got.tobytes() != want[r * m:(r + 1) * m].tobytes():
            sys.exit(f"step {step}: block {r} differs from the whole tensor's block")
    print(f"step {step}: {blocks} blocks equal the whole tensor's, {dropped} of {n} dropped")
