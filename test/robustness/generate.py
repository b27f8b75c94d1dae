"""Robustness families of what a user sees: `generate` and `mlc plot`.

    generate.py --mlc MLC --runtime MLC_RUNTIME --work DIR --data FILE

  generate-flags    every numeric flag of `mlc generate` and `mlc-runtime
                    generate` with values no flag accepts
  generate-weights  weights that are NaN, infinite or overflow: an error naming
                    the weights file, and no sampled text on stdout (non-finite
                    ones are refused as they load, before the prompt is echoed)
  plot              logs that are empty, torn, not numbers, a directory or
                    missing; outputs that are a directory or the log itself
"""
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
from harness import arguments, check, report, run, sh

args = arguments()
W = args.work

pkg = os.path.join(W, "pkg")
sh(args.mlc, "compile", "gpt2", "--config", "tiny,n_layer=1", "--micro-batch", "1",
   "--seq-len", "8", "--inference", "-o", pkg)
weights = os.path.join(W, "w.safetensors")
log = os.path.join(W, "log.jsonl")
sh(args.mlc, "train", "gpt2", "--config", "tiny,n_layer=1", "--micro-batch", "2", "--seq-len", "8",
   "--data", args.data, "--steps", "4", "--save", weights, "--log-json", log)
tools = {"mlc": [args.mlc, "generate", pkg], "mlc-runtime": [args.runtime, "generate", pkg]}

# 1. generate's numeric flags.
bad = ["abc", "", "1e400", "-1e400", "nan", "inf", "-5", "3.5x", "99999999999999999999", " 1"]
for tool, argv in tools.items():
    for flag in ["temperature", "top-k", "max-tokens", "seed"]:
        for value in bad:
            if flag == "temperature" and value == "99999999999999999999":
                continue  # a large temperature is a number: near-uniform sampling
            if flag == "seed" and value == " 1":
                continue  # the training flags' table reads integers as strtoll does
            extra = [] if flag == "max-tokens" else ["--max-tokens", "2"]
            run("generate-flags", argv + [f"--{flag}", value] + extra, f"--{flag}",
                errors="replace")
    r = sh(*argv, "--prompt", "ab", "--max-tokens", "0")
    check("generate-flags", r.stdout == "ab\n", f"{tool} --max-tokens 0 printed {r.stdout!r}")


# 2. Weights that are not finite, or overflow the logits.
def poisoned(name, fill):
    data = open(weights, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = bytearray(data[8 + n:])
    for key, t in header.items():
        if key != "__metadata__":
            begin, end = t["data_offsets"]
            values = np.frombuffer(bytes(body[begin:end]), np.float32).copy()
            fill(values)
            body[begin:end] = values.tobytes()
    path = os.path.join(W, name + ".safetensors")
    open(path, "wb").write(data[:8 + n] + bytes(body))
    return path


cases = {"nan": lambda v: v.fill(np.nan), "inf": lambda v: v.fill(np.inf),
         "-inf": lambda v: v.fill(-np.inf), "huge": lambda v: v.fill(3e38),
         "one-nan-each": lambda v: v.__setitem__(0, np.nan)}
for name, fill in cases.items():
    path = poisoned(name, fill)
    for tool, argv in tools.items():
        r = run("generate-weights", argv + ["--init", path, "--prompt", "The ", "--max-tokens", "4"],
                os.path.basename(path), errors="replace")
        # Weights that are not finite are refused as they load, before the
        # prompt is echoed; finite ones that overflow the logits, at the first
        # token after it.
        want = "The " if name == "huge" else ""
        if r is not None:
            check("generate-weights", r.stdout == want,
                  f"{tool} on {name} weights printed {r.stdout!r}, not {want!r}")

# 3. mlc plot on logs that are not --log-json files, and outputs it must refuse.
rows = open(log).read()
logs = {"empty": "", "blank": "\n \n\t\n", "torn-only": '{"step": 1, "lo',
        "torn-middle": rows.replace("\n", "\n{\"step\": 3, \"lo\n", 1),
        "step-string": '{"step": "one", "loss": 2.5}\n', "step-huge": '{"step": 1e400, "loss": 2}\n',
        "loss-string": '{"step": 1, "loss": "abc"}\n', "loss-array": '{"step": 1, "loss": [1]}\n',
        "loss-bool": '{"step": 1, "loss": true}\n', "no-step": '{"loss": 2.5}\n',
        "not-json": "step 1 loss 2.5\n", "binary": "\x00\x89PNG\r\n\x1a\n\x00"}
out = os.path.join(W, "plots")
os.makedirs(out, exist_ok=True)
png = os.path.join(out, "x.png")
for name, text in logs.items():
    path = os.path.join(W, name + ".jsonl")
    open(path, "w").write(text)
    if os.path.exists(png):
        os.remove(png)
    run("plot", [args.mlc, "plot", path, "-o", png], path, out_dirs=[out], errors="replace")
    check("plot", not os.path.exists(png), f"{name}: a failed plot wrote {png}")
run("plot", [args.mlc, "plot", W, "-o", png], W, out_dirs=[out])
run("plot", [args.mlc, "plot", os.path.join(W, "missing.jsonl"), "-o", png], "missing.jsonl")
run("plot", [args.mlc, "plot", log, "-o", out], out, out_dirs=[out])
run("plot", [args.mlc, "plot", log, "-o", os.path.join(W, "no", "dir", "x.png")], "no/dir")
run("plot", [args.mlc, "plot", log, "-o", log], log)
check("plot", open(log, "rb").read() == rows.encode(), "plot -o LOG changed the log")
link = os.path.join(W, "link.png")
if not os.path.lexists(link):
    os.symlink(log, link)
run("plot", [args.mlc, "plot", log, "-o", link], log)
check("plot", open(log, "rb").read() == rows.encode(), "plot -o LINK-TO-LOG changed the log")
for flag in ["width", "height"]:
    for value in ["abc", "", "100", "99999", "-640", "1e400"]:
        run("plot", [args.mlc, "plot", log, "-o", png, f"--{flag}", value], f"--{flag}")
torn = os.path.join(W, "live.jsonl")
open(torn, "w").write(rows + '{"step": 5, "loss": 2.')
r = subprocess.run([args.mlc, "plot", torn, "-o", png], capture_output=True, text=True)
check("plot", r.returncode == 0 and "left out" in r.stdout and os.path.exists(png),
      f"a log with an unfinished last line: {r.stdout!r}")
report()
