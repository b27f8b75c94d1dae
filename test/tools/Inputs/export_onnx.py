"""`mlc export-onnx` end to end, and the weights files its error cases read.

  export_onnx.py check --mlc MLC --model M.onnx --work DIR [--loss causal-lm|masked-lm]
      trains M.onnx (a logits-only export of a TorchScript or dynamo
      exporter: inputs, output and vocabulary are read from its graph) for 10
      steps of --loss (causal-lm, or masked-lm for BERT) with --save,
      exports the trained model, and checks that onnxruntime's logits of it
      match `mlc run` on the trained weights (to 1e-5 relative) and differ
      from the untrained model's (so that an export which kept the old
      values fails), that every trained tensor is in it bit for bit, and that
      onnx's checker accepts it (where this onnx knows its IR version and
      opsets), and that `mlc compile` of it declares the trained weights as
      its parameters: the same names (each parameter under its name, a tied
      one's other names as its aliases) and the same values, bit for bit.
      onnxruntime is skipped, with the reason, where it refuses the model
      (opset 23's RotaryEmbedding). Exits non-zero on any failure.

  export_onnx.py weights --from W.safetensors --out BAD.safetensors --case C
      writes W with one change: C = shape (a tensor transposed), unknown (a
      tensor the model lacks), dtype (every tensor as f64), subset (only the
      first tensor).
"""

import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a:8 + n + b],
                                  dtype=kinds[info["dtype"]]).reshape(info["shape"])
    return out


def write_safetensors(path, tensors):
    kinds = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = np.ascontiguousarray(t)
        header[name] = {"dtype": kinds[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + t.nbytes]}
        blobs.append(t.tobytes())
        offset += t.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def weights(args):
    t = dict(read_safetensors(args.src))
    if args.case == "shape":
        name = next(n for n, v in sorted(t.items()) if v.ndim == 2 and v.shape[0] != v.shape[1])
        t[name] = t[name].T
    elif args.case == "unknown":
        t["no.such.weight"] = np.zeros(4, np.float32)
    elif args.case == "subset":
        t = dict([sorted(t.items())[0]])
    elif args.case == "dtype":
        t = {n: v.astype(np.float64) for n, v in t.items()}
    write_safetensors(args.out, t)


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def graph_io(proto):
    """The model's user inputs, its first output and the vocabulary (the
    output's last dim), read from the graph: TorchScript and dynamo exports
    name their initializers differently, but both end in logits over the
    vocabulary."""
    inits = {t.name for t in proto.graph.initializer}
    inputs = [i.name for i in proto.graph.input if i.name not in inits]
    out = proto.graph.output[0]
    dims = out.type.tensor_type.shape.dim
    if not dims or not dims[-1].HasField("dim_value"):
        sys.exit(f"{args.model}: output '{out.name}' has no static last dim (the vocabulary)")
    return inputs, out.name, dims[-1].dim_value


def feeds(inputs, ids):
    """Values for the model's inputs: the token ids, an all-ones attention
    mask, segment 0 (BERT's token_type_ids)."""
    def value(name):
        if "mask" in name:
            return np.ones_like(ids)
        if "type" in name:
            return np.zeros_like(ids)
        return ids
    return {n: value(n) for n in inputs}


def ort_refusal(proto):
    """Why onnxruntime cannot run the model, or None: onnxruntime 1.32
    refuses opset 23's RotaryEmbedding as the exporter writes it (its
    cos/sin caches; test/onnx/Inputs/modern/INVENTORY.md)."""
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset >= 23 and any(n.op_type == "RotaryEmbedding" for n in proto.graph.node):
        return ("onnxruntime refuses opset 23's RotaryEmbedding as exported (its cos_cache and "
                "sin_cache; INVENTORY.md)")
    return None


def check(args):
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    os.makedirs(args.work, exist_ok=True)
    w = os.path.join(args.work, "trained.safetensors")
    out = os.path.join(args.work, "trained.onnx")
    proto = onnx.load(args.model)
    inputs, output, vocab = graph_io(proto)
    rng = np.random.default_rng(0)

    # 10 steps of training, saved. Masked LM: 15% of the positions are
    # predicted, the others ignored (-100).
    batches = os.path.join(args.work, "batches")
    os.makedirs(batches, exist_ok=True)
    ids = rng.integers(0, vocab, size=(10, 2, 16))
    for name, value in feeds(inputs, ids).items():
        np.save(os.path.join(batches, name + ".npy"), value)
    labels = ids if args.loss == "causal-lm" else \
        np.where(rng.random(ids.shape) < 0.15, ids, -100)
    np.save(os.path.join(batches, "labels.npy"), labels)
    subprocess.run([args.mlc, "train", args.model, "--loss", args.loss, "--batches", batches,
                    "--steps", "10", "--lr", "1e-3", "--lr-schedule", "constant", "--save", w,
                    "--log-every", "100"], check=True)
    text = subprocess.run([args.mlc, "export-onnx", "--model", args.model, "--weights", w,
                           "-o", out], check=True, capture_output=True, text=True).stdout
    print(text.strip())

    failures = []
    trained = onnx.load(out)
    # Debian's onnx (1.12) checks IR version <= 8, opsets <= 17 only.
    if trained.ir_version <= onnx.IR_VERSION and all(
            o.version <= onnx.defs.onnx_opset_version() for o in trained.opset_import):
        onnx.checker.check_model(trained)
    inits = {t.name: numpy_helper.to_array(t) for t in trained.graph.initializer}
    saved = read_safetensors(w)
    aliases = 0
    for name, value in saved.items():
        if name in inits or name + ".T" in inits:
            # NAME.T: the transpose a product reads, where the exporter had
            # folded one (torch's orientation is the weights').
            if name in inits and not np.array_equal(inits[name], value):
                failures.append(f"{name}: trained.onnx holds other values than the weights")
            if name + ".T" in inits and not np.array_equal(inits[name + ".T"], value.T):
                failures.append(f"{name}.T: trained.onnx holds other values than the weights")
        # A tied parameter's other name: its one initializer holds it.
        elif any(v.shape == value.shape and np.array_equal(v, value) for v in inits.values()):
            aliases += 1
        else:
            failures.append(f"{name}: not an initializer of trained.onnx")
    print(f"{len(saved)} trained tensors ({aliases} of them another name of a tied one), "
          f"{len(inits)} initializers in trained.onnx")

    # Re-imported, trained.onnx's parameters are the weights: its package's
    # starting values (weights.safetensors) and aliases (aliases.json).
    pkg = os.path.join(args.work, "reimported")
    subprocess.run([args.mlc, "compile", out, "--loss", args.loss, "-o", pkg], check=True,
                   capture_output=True)
    params = read_safetensors(os.path.join(pkg, "weights.safetensors"))
    alias_file = os.path.join(pkg, "aliases.json")
    tied = json.load(open(alias_file)) if os.path.exists(alias_file) else {}
    names = dict((n, n) for n in params)
    names.update((a, p) for p, names_of in tied.items() for a in names_of)
    if sorted(names) != sorted(saved):
        failures.append(f"trained.onnx re-imported has the parameters {sorted(set(names) - set(saved))} "
                        f"the weights lack and lacks {sorted(set(saved) - set(names))}")
    differ = [n for n, p in names.items() if n in saved and
              (params[p].shape != saved[n].shape or not np.array_equal(params[p], saved[n]))]
    if differ:
        failures.append(f"trained.onnx re-imported holds other values than the weights: {differ}")
    same = sorted(names) == sorted(saved) and not differ
    print(f"trained.onnx re-imported: {len(params)} parameters and {len(names) - len(params)} "
          f"other names of tied ones, " + ("the weights' names and values" if same else "DIFFER"))

    # Logits: onnxruntime on trained.onnx against mlc run on the weights.
    x = feeds(inputs, rng.integers(0, vocab, size=(2, 16)))
    files = []
    for name, value in x.items():
        np.save(os.path.join(args.work, name + ".npy"), value)
        files += ["--input", f"{name}={os.path.join(args.work, name + '.npy')}"]
    run_dir = os.path.join(args.work, "run")
    subprocess.run([args.mlc, "run", args.model, "--init", w, *files, "--output-dir", run_dir],
                   check=True)
    got = np.load(os.path.join(run_dir, output + ".npy"))
    refusal = ort_refusal(trained)
    if refusal:
        print(f"onnxruntime SKIPPED: {refusal}")
    else:
        ours = ort.InferenceSession(out).run([output], x)[0]
        before = ort.InferenceSession(args.model).run([output], x)[0]
        r, moved = rel(ours, got), rel(before, got)
        print(f"trained.onnx logits vs mlc run: max rel diff {r:.1e}; "
              f"untrained model's: {moved:.1e}")
        if r > 1e-5:
            failures.append(f"onnxruntime's logits of trained.onnx differ from mlc run's by {r:.2e}")
        if moved < 1e-3:
            failures.append(f"the untrained model's logits are as close ({moved:.2e}): "
                            "training or the export changed nothing")
    if failures:
        print("EXPORT FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("EXPORT OK")


ap = argparse.ArgumentParser()
sub = ap.add_subparsers(dest="cmd", required=True)
c = sub.add_parser("check")
c.add_argument("--mlc", required=True)
c.add_argument("--model", required=True)
c.add_argument("--work", required=True)
c.add_argument("--loss", choices=["causal-lm", "masked-lm"], default="causal-lm")
wp = sub.add_parser("weights")
wp.add_argument("--from", dest="src", required=True)
wp.add_argument("--out", required=True)
wp.add_argument("--case", choices=["shape", "unknown", "dtype", "subset"], required=True)
args = ap.parse_args()
check(args) if args.cmd == "check" else weights(args)
