"""Single-operator ONNX models through `mlc run`, against onnxruntime.

Covers operator forms the HF fixtures do not use: opset-18 Split with
num_outputs and ReduceMean with axes as an input, Gemm's transB/alpha/beta,
Trilu masks, Expand, Flatten, Relu, LogSoftmax with NegativeLogLikelihoodLoss;
and the newer opsets' single-op forms: opset-20 Gelu (none, tanh),
LayerNormalization without a bias, opset-23 RMSNormalization (and RMSNorm's
decomposition) and Attention
(rank 4 causal with a scale, rank 3 with a boolean mask), CastLike, ReduceMax
with axes as an input, and ops of a plain graph at opset 23; SiLU as
x * Sigmoid(x), opset-23 RotaryEmbedding (rank 4; rank 3, interleaved,
partial) with Cos/Sin rotary tables of constants; GatherND at constant
indices that pick slabs (Falcon's qkv[..., [-2], :]), Max/Min/Sum/Mean of
1 to 3 inputs, attention scores soft-capped as Gemma 2's export writes
them, and position ids from a 5000-token run-time mask (CumSum), in f32 and
bf16.

    op_models.py --mlc MLC --work DIR [--device cuda-emulator] [--only NAME,...]
"""
import argparse
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
ap.add_argument("--device", default="cpu")
ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)
rng = np.random.default_rng(0)
F = TensorProto.FLOAT


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array))


def rotary_tables(half):
    """cos and sin [2, 4, half] of positions 0..3 x theta^(-2i/(2 half))."""
    freq = (10000.0 ** (-np.arange(half) / half)).astype(np.float32)
    return [const("start", np.array(0, np.int64)), const("limit", np.array(4, np.int64)),
            const("delta", np.array(1, np.int64)),
            helper.make_node("Range", ["start", "limit", "delta"], ["pos"]),
            helper.make_node("Cast", ["pos"], ["posf"], to=F),
            const("col", np.array([1, 4, 1], np.int64)),
            helper.make_node("Reshape", ["posf", "col"], ["p3"]),
            const("freq", freq), helper.make_node("Mul", ["p3", "freq"], ["ang1"]),
            const("bshape", np.array([2, 4, half], np.int64)),
            helper.make_node("Expand", ["ang1", "bshape"], ["ang"]),
            helper.make_node("Cos", ["ang"], ["cos"]), helper.make_node("Sin", ["ang"], ["sin"])]


MODELS = {
    "split18": (18, [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=2, num_outputs=3),
                     helper.make_node("Mul", ["a", "b"], ["ab"]),
                     helper.make_node("Add", ["ab", "c"], ["y"])],
                [vi("x", [2, 4, 6])], [vi("y", None)], []),
    "reducemean18": (18, [const("axes", np.array([-1], np.int64)),
                          helper.make_node("Mul", ["x", "x"], ["sq"]),
                          helper.make_node("ReduceMean", ["sq", "axes"], ["m"], keepdims=0),
                          helper.make_node("Sqrt", ["m"], ["y"])],
                     [vi("x", [2, 4, 6])], [vi("y", None)], []),
    "gemm": (17, [helper.make_node("Gemm", ["x2", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
             [vi("x2", [3, 6])], [vi("y", None)],
             [numpy_helper.from_array(rng.standard_normal((5, 6)).astype(np.float32), "w"),
              numpy_helper.from_array(rng.standard_normal((5,)).astype(np.float32), "c")]),
    "trilu": (17, [const("ones", np.ones((4, 4), np.int64)),
                   helper.make_node("Trilu", ["ones"], ["tri"], upper=0),
                   helper.make_node("Cast", ["tri"], ["mask"], to=TensorProto.BOOL),
                   const("low", np.array(-1e4, np.float32)),
                   helper.make_node("Where", ["mask", "x4", "low"], ["y"])],
              [vi("x4", [2, 4, 4])], [vi("y", None)], []),
    "expand_flatten_relu": (17, [const("shape", np.array([3, 2, 4, 6], np.int64)),
                                 helper.make_node("Expand", ["x", "shape"], ["e"]),
                                 helper.make_node("Flatten", ["e"], ["f"], axis=2),
                                 helper.make_node("Relu", ["f"], ["y"])],
                            [vi("x", [2, 4, 6])], [vi("y", None)], []),
    "nll": (17, [helper.make_node("LogSoftmax", ["x2"], ["lp"], axis=1),
                 helper.make_node("NegativeLogLikelihoodLoss", ["lp", "t"], ["y"],
                                  ignore_index=-100)],
            [vi("x2", [3, 6]), vi("t", [3], TensorProto.INT64)], [vi("y", None)], []),
    "gelu20": (20, [helper.make_node("Gelu", ["x"], ["g"]),
                    helper.make_node("Gelu", ["x"], ["t"], approximate="tanh"),
                    helper.make_node("Add", ["g", "t"], ["y"])],
               [vi("x", [2, 4, 6])], [vi("y", None)], []),
    "layernorm20": (20, [helper.make_node("LayerNormalization", ["x", "w"], ["y"],
                                          epsilon=1e-3)],
                    [vi("x", [2, 4, 6])], [vi("y", None)],
                    [numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "w")]),
    "rmsnorm23": (23, [helper.make_node("RMSNormalization", ["x", "w"], ["y"], epsilon=1e-4)],
                  [vi("x", [2, 4, 6])], [vi("y", None)],
                  [numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "w")]),
    # RMSNorm as exporters decompose it (Pow, ReduceMean, Add eps, Sqrt,
    # Reciprocal, Mul x, Mul w) after a residual add: mlc-recognize makes it
    # mlc.rms_norm, fused with the add as one row kernel.
    "rmsnorm_decomposed": (18, [helper.make_node("Add", ["x", "res"], ["h"]),
                                const("two", np.array(2.0, np.float32)),
                                const("axes", np.array([-1], np.int64)),
                                const("eps", np.array(1e-5, np.float32)),
                                helper.make_node("Pow", ["h", "two"], ["sq"]),
                                helper.make_node("ReduceMean", ["sq", "axes"], ["ms"]),
                                helper.make_node("Add", ["ms", "eps"], ["mse"]),
                                helper.make_node("Sqrt", ["mse"], ["rms"]),
                                helper.make_node("Reciprocal", ["rms"], ["inv"]),
                                helper.make_node("Mul", ["h", "inv"], ["n"]),
                                helper.make_node("Mul", ["w", "n"], ["y"])],
                           [vi("x", [2, 4, 6])], [vi("y", None)],
                           [numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "w"),
                            numpy_helper.from_array(
                                rng.standard_normal((2, 4, 6)).astype(np.float32), "res")]),
    "attention23_causal": (23, [helper.make_node("Attention", ["q4", "k4", "v4"], ["y"],
                                                 is_causal=1, scale=0.3)],
                           [vi("q4", [2, 2, 4, 3]), vi("k4", [2, 2, 4, 3]), vi("v4", [2, 2, 4, 3])],
                           [vi("y", None)], []),
    "attention23_mask": (23, [const("m", np.array([[True, True, False, True]] * 4)),
                              helper.make_node("Attention", ["x", "x", "x", "m"], ["y"],
                                               q_num_heads=2, kv_num_heads=2)],
                         [vi("x", [2, 4, 6])], [vi("y", None)], []),
    "castlike_reducemax18": (18, [const("axes", np.array([1], np.int64)),
                                  helper.make_node("ReduceMax", ["x", "axes"], ["m"], keepdims=1),
                                  helper.make_node("Cast", ["m"], ["i"], to=TensorProto.INT64),
                                  helper.make_node("CastLike", ["i", "x"], ["f"]),
                                  helper.make_node("Sub", ["x", "f"], ["y"])],
                             [vi("x", [2, 4, 6])], [vi("y", None)], []),
    # Masks from a run-time attention_mask, the dynamo exporter's way:
    # Cast to bool, GatherND with constant position indices, And with a
    # constant causal mask, Not, Where to an additive mask; IsNaN + Where
    # after the softmax.
    "mask_runtime": (20, [helper.make_node("Cast", ["am"], ["amb"], to=TensorProto.BOOL),
                          const("idx", np.stack(np.broadcast_arrays(
                              np.arange(2).reshape(2, 1, 1, 1), np.arange(4).reshape(1, 1, 1, 4)),
                              -1).astype(np.int64)),
                          helper.make_node("GatherND", ["amb", "idx"], ["g"]),
                          const("tri", np.tril(np.ones((4, 4), bool)).reshape(1, 1, 4, 4)),
                          helper.make_node("And", ["tri", "g"], ["m"]),
                          helper.make_node("Not", ["m"], ["nm"]),
                          const("lo", np.array(-1e4, np.float32)),
                          const("zero", np.array(0.0, np.float32)),
                          helper.make_node("Where", ["nm", "lo", "zero"], ["fm"]),
                          helper.make_node("Add", ["s4", "fm"], ["sc"]),
                          helper.make_node("Softmax", ["sc"], ["sm"], axis=-1),
                          helper.make_node("IsNaN", ["sm"], ["nan"]),
                          helper.make_node("Where", ["nan", "zero", "sm"], ["y"])],
                     [vi("am", [2, 4], TensorProto.INT64), vi("s4", [2, 2, 4, 4])],
                     [vi("y", None)], []),
    # Integer arithmetic and comparisons on a run-time input; constant
    # CumSum, Expand, Transpose and GatherND folded.
    "int_runtime": (18, [const("one", np.array(1, np.int64)),
                         const("three", np.array([3], np.int64)),
                         const("ones", np.ones((4, 2), np.int64)),
                         const("ax", np.array(0, np.int64)),
                         helper.make_node("CumSum", ["ones", "ax"], ["cs"]),
                         helper.make_node("Transpose", ["cs"], ["cst"], perm=[1, 0]),
                         const("e", np.array([2, 4], np.int64)),
                         helper.make_node("Expand", ["one", "e"], ["ex"]),
                         helper.make_node("Mul", ["cst", "ex"], ["k"]),
                         helper.make_node("Sub", ["am", "one"], ["s"]),
                         helper.make_node("Mul", ["s", "three"], ["m3"]),
                         helper.make_node("Max", ["m3", "k"], ["mx"]),
                         helper.make_node("LessOrEqual", ["mx", "three"], ["le"]),
                         helper.make_node("Cast", ["le"], ["lef"], to=TensorProto.FLOAT),
                         helper.make_node("Cast", ["mx"], ["mxf"], to=TensorProto.FLOAT),
                         helper.make_node("Add", ["lef", "mxf"], ["y"])],
                    [vi("am", [2, 4], TensorProto.INT64)], [vi("y", None)], []),
    # The optimize=False export's q/k/v split: SplitToSequence + SequenceAt;
    # a full-range Slice (to INT64_MAX) of a value is the value itself.
    "split_to_sequence": (20, [const("two", np.array(2, np.int64)),
                               helper.make_node("SplitToSequence", ["x", "two"], ["seq"], axis=2),
                               const("p0", np.array(0, np.int64)),
                               const("pl", np.array(-1, np.int64)),
                               helper.make_node("SequenceAt", ["seq", "p0"], ["a"]),
                               helper.make_node("SequenceAt", ["seq", "pl"], ["c"]),
                               helper.make_node("SplitToSequence", ["x"], ["rows"], axis=1,
                                                keepdims=0),
                               helper.make_node("SequenceAt", ["rows", "p0"], ["r"]),
                               const("st", np.array([0], np.int64)),
                               const("en", np.array([2**63 - 1], np.int64)),
                               helper.make_node("Slice", ["r", "st", "en"], ["rs"]),
                               helper.make_node("Unsqueeze", ["rs", "p0"], ["r1"]),
                               helper.make_node("Mul", ["a", "c"], ["ac"]),
                               helper.make_node("Transpose", ["r1"], ["rt"], perm=[1, 0, 2]),
                               const("sl0", np.array([0], np.int64)),
                               const("sl2", np.array([2], np.int64)),
                               helper.make_node("Slice", ["rt", "sl0", "sl2", "sl2"], ["r2"]),
                               helper.make_node("Add", ["ac", "r2"], ["y"])],
                          [vi("x", [2, 4, 6])], [vi("y", None)], []),
    # Position ids from a run-time attention_mask (HF's
    # cumsum(mask) * mask - 1), and a reverse exclusive CumSum of floats
    # along a middle axis: products with a triangular matrix.
    "cumsum_runtime": (18, [const("ax1", np.array(1, np.int64)),
                            helper.make_node("CumSum", ["am", "ax1"], ["cs"]),
                            helper.make_node("Mul", ["cs", "am"], ["csm"]),
                            const("one", np.array(1, np.int64)),
                            helper.make_node("Sub", ["csm", "one"], ["pos"]),
                            helper.make_node("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
                            helper.make_node("CumSum", ["x", "ax1"], ["xc"], exclusive=1,
                                             reverse=1),
                            const("sh", np.array([2, 4, 1], np.int64)),
                            helper.make_node("Reshape", ["posf", "sh"], ["p3"]),
                            helper.make_node("Add", ["xc", "p3"], ["y"])],
                       [vi("am", [2, 4], TensorProto.INT64), vi("x", [2, 4, 6])],
                       [vi("y", None)], []),
    # Position ids of a 5000-token run-time mask: mlc.cumsum's running sum,
    # exact in i64 (also run in bf16, where no part of it may be narrowed).
    "cumsum_positions": (18, [const("ax1", np.array(1, np.int64)),
                              helper.make_node("CumSum", ["aml", "ax1"], ["cs"]),
                              helper.make_node("Mul", ["cs", "aml"], ["csm"]),
                              const("one", np.array(1, np.int64)),
                              helper.make_node("Sub", ["csm", "one"], ["pos"]),
                              helper.make_node("Cast", ["pos"], ["y"], to=TensorProto.FLOAT)],
                         [vi("aml", [2, 5000], TensorProto.INT64)], [vi("y", None)], []),
    # ReduceMin as -max(-x): axes as an attribute (opset 17), as an input (18).
    "reducemin17": (17, [helper.make_node("ReduceMin", ["x"], ["y"], axes=[1], keepdims=1)],
                    [vi("x", [2, 4, 6])], [vi("y", None)], []),
    "reducemin18": (18, [const("axes", np.array([0, 2], np.int64)),
                         helper.make_node("ReduceMin", ["x", "axes"], ["y"], keepdims=0)],
                    [vi("x", [2, 4, 6])], [vi("y", None)], []),
    "split23": (23, [helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
                     helper.make_node("Mul", ["a", "b"], ["y"])],
                [vi("x", [2, 4, 6])], [vi("y", None)], []),
    # SiLU as x * Sigmoid(x), with |x| up to ~100 (no overflow at either end).
    "silu": (20, [const("big", np.array(30.0, np.float32)),
                  helper.make_node("Mul", ["x", "big"], ["xb"]),
                  helper.make_node("Sigmoid", ["xb"], ["sg"]),
                  helper.make_node("Mul", ["xb", "sg"], ["y"])],
             [vi("x", [2, 4, 6])], [vi("y", None)], []),
    # Opset 23 RotaryEmbedding with rotary tables the importer evaluates
    # (Cos/Sin of positions x inverse frequencies, as the exporter writes
    # them): rank 4, rotate-half pairs, the whole head.
    "rotary23": (23, rotary_tables(3) + [
        helper.make_node("RotaryEmbedding", ["r4", "cos", "sin"], ["y"])],
        [vi("r4", [2, 2, 4, 6])], [vi("y", None)], []),
    # Rank 3 [B, S, heads * D] with num_heads, interleaved pairs, and a
    # partial rotary_embedding_dim (4 of the head's 6 features rotate).
    "rotary23_interleaved": (23, rotary_tables(2) + [
        helper.make_node("RotaryEmbedding", ["r3", "cos", "sin"], ["y"], interleaved=1,
                         num_heads=2, rotary_embedding_dim=4)],
        [vi("r3", [2, 4, 12])], [vi("y", None)], []),
    # GatherND at constant indices that are not positions: Falcon's
    # qkv[..., [-2], :] (Transpose, GatherND of [[-2]], Transpose back), and
    # tuples of two indices picking three runs of slabs.
    "gathernd_slabs": (20, [helper.make_node("Transpose", ["x"], ["xt"], perm=[2, 0, 1]),
                            const("i1", np.array([[-2]], np.int64)),
                            helper.make_node("GatherND", ["xt", "i1"], ["g1"]),
                            helper.make_node("Transpose", ["g1"], ["g1t"], perm=[1, 2, 0]),
                            const("i2", np.array([[[1, 2], [1, 3]], [[0, 0], [-1, -4]]], np.int64)),
                            helper.make_node("GatherND", ["x", "i2"], ["g2"]),
                            const("sh", np.array([2, 1, 2, 6], np.int64)),
                            helper.make_node("Reshape", ["g2", "sh"], ["g2r"]),
                            helper.make_node("Transpose", ["g2r"], ["g2t"], perm=[0, 2, 1, 3]),
                            const("sh2", np.array([2, 4, 3], np.int64)),
                            helper.make_node("Reshape", ["g2t", "sh2"], ["g2s"]),
                            const("sl0", np.array([0], np.int64)),
                            const("sl1", np.array([1], np.int64)),
                            const("sl2", np.array([2], np.int64)),
                            helper.make_node("Slice", ["g2s", "sl0", "sl1", "sl2"], ["g2c"]),
                            helper.make_node("Add", ["g1t", "g2c"], ["y"])],
                       [vi("x", [2, 4, 6])], [vi("y", None)], []),
    # Gemma 2's attention-logit soft-capping as the dynamo exporter writes
    # it (scores * scale, / cap, Tanh, * cap, then the causal mask), with
    # scores of several caps: one attention whose kernels apply the cap.
    "attention_softcap": (20, [helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 1, 3, 2]),
                               helper.make_node("MatMul", ["q4", "kt"], ["s"]),
                               const("scale", np.array(1.2, np.float32)),
                               helper.make_node("Mul", ["s", "scale"], ["ss"]),
                               const("cap", np.array(0.8, np.float32)),
                               helper.make_node("Div", ["ss", "cap"], ["sd"]),
                               helper.make_node("Tanh", ["sd"], ["st"]),
                               helper.make_node("Mul", ["st", "cap"], ["sc"]),
                               const("causal", np.where(np.tril(np.ones((4, 4), bool)), 0.0,
                                                        -3.4028235e38).astype(np.float32)
                                     .reshape(1, 1, 4, 4)),
                               helper.make_node("Add", ["sc", "causal"], ["sm"]),
                               helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
                               helper.make_node("MatMul", ["p", "v4"], ["y"])],
                          [vi("q4", [2, 2, 4, 3]), vi("k4", [2, 2, 4, 3]), vi("v4", [2, 2, 4, 3])],
                          [vi("y", None)], []),
    # Max, Min, Sum and Mean of 1 to 3 inputs that broadcast together (the
    # optimize=False export writes a one-input Max); Sum of constants folded.
    "variadic": (20, [helper.make_node("Max", ["x"], ["mx"]),
                      const("c6", rng.standard_normal(6).astype(np.float32)),
                      const("c41", rng.standard_normal((4, 1)).astype(np.float32)),
                      helper.make_node("Sum", ["c6", "c6"], ["c6x2"]),
                      helper.make_node("Min", ["x", "c41", "c6x2"], ["mn"]),
                      helper.make_node("Sum", ["mx", "c6", "c41"], ["sm"]),
                      helper.make_node("Mean", ["x", "c6", "mn"], ["me"]),
                      helper.make_node("Mean", ["me"], ["me1"]),
                      helper.make_node("Max", ["sm", "me1"], ["mm"]),
                      helper.make_node("Mul", ["mm", "mn"], ["y"])],
                 [vi("x", [2, 4, 6])], [vi("y", None)], []),
}
FEEDS = {"x": rng.standard_normal((2, 4, 6)).astype(np.float32),
         "x2": rng.standard_normal((3, 6)).astype(np.float32),
         "x4": rng.standard_normal((2, 4, 4)).astype(np.float32),
         "t": np.array([1, -100, 5], np.int64),
         "am": np.array([[1, 1, 1, 0], [3, 0, 2, 1]], np.int64),
         "aml": (rng.random((2, 5000)) < 0.9).astype(np.int64),
         "s4": rng.standard_normal((2, 2, 4, 4)).astype(np.float32),
         "q4": rng.standard_normal((2, 2, 4, 3)).astype(np.float32),
         "k4": rng.standard_normal((2, 2, 4, 3)).astype(np.float32),
         "v4": rng.standard_normal((2, 2, 4, 3)).astype(np.float32),
         "r4": rng.standard_normal((2, 2, 4, 6)).astype(np.float32),
         "r3": rng.standard_normal((2, 4, 12)).astype(np.float32)}

# Also run with --dtype bf16 (mixed precision), to the same tolerance.
BF16 = {"cumsum_positions"}
failures = []
for name, (opset, nodes, inputs, outputs, inits) in MODELS.items():
    if args.only and name not in args.only.split(","):
        continue
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10 if opset > 20 else 9 if opset > 18 else 8
    path = os.path.join(args.work, name + ".onnx")
    onnx.save(model, path)
    feeds = {i.name: FEEDS[i.name] for i in inputs}
    ref = ort.InferenceSession(path).run(None, feeds)[0]
    files = []
    for k, v in feeds.items():
        np.save(os.path.join(args.work, k + ".npy"), v)
        files += ["--input", f"{k}={os.path.join(args.work, k + '.npy')}"]
    for dtype in ["f32"] + (["bf16"] if name in BF16 else []):
        out = os.path.join(args.work, "out-" + name + "-" + dtype)
        subprocess.run([args.mlc, "run", path, *files, "--output-dir", out, "--device",
                        args.device, "--dtype", dtype], check=True)
        got = np.load(os.path.join(out, "y.npy"))
        diff = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30)) \
            if got.shape == ref.shape else float("inf")
        label = name if dtype == "f32" else name + ", bf16"
        print(f"{label} (opset {opset}): shape {list(got.shape)}, max rel diff {diff:.1e}")
        if not diff <= 1e-5:  # NaN fails too
            failures.append(f"{label}: mlc {got.shape} vs onnxruntime {ref.shape}, diff {diff}")
if failures:
    print("OP MODELS FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("OP MODELS OK")
