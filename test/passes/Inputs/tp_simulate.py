#!/usr/bin/env python3
"""Runs a tensor-parallel @train_step on T simulated ranks and compares it
with the one-rank program: the loss and every parameter's gradient (each
rank's slice, gathered by the parameter's mlc.tp_split) must agree.

    tp_simulate.py ONE.mlir SHARDED.mlir T [CASE]

CASE picks one module of a -split-input-file output (0 first).

Both files are mlc-opt output in the generic form (--mlir-print-op-generic)
of @forward plus @train_step (after mlc-autodiff). The interpreter knows the
ops such small models use; the ranks run in lockstep, and mlc.tp_reduce /
mlc.tp_copy join their tensors the way the group's collectives do. Values
are float64, so a difference is the layout's, not rounding's. Parameters
and inputs are drawn from a fixed seed; the token ids include an ignored
label (-100) and, where a lookup has a padding_idx, that id.
"""
import re
import sys

import numpy as np

DTYPES = {"f32": np.float64, "f64": np.float64, "i64": np.int64, "i32": np.int64, "i1": np.bool_}


def parse_type(t):
    m = re.match(r"tensor<(.*)>", t.strip())
    parts = m.group(1).split("x")
    return tuple(int(d) for d in parts[:-1]), DTYPES[parts[-1]]


def split_top(s, sep=","):
    out, depth, cur = [], 0, ""
    for c in s:
        if c in "{[<(":
            depth += 1
        elif c in "}]>)":
            depth -= 1
        if c == sep and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return out


def load(path, case):
    """The train step's arguments (name, type, attrs) and ops."""
    lines = open(path).read().split("// -----")[case].splitlines()
    start = next(i for i, l in enumerate(lines) if '"func.func"' in l and 'sym_name = "train_step"' in l)
    head = lines[start]
    attrs_text = head[head.index("arg_attrs = [") + len("arg_attrs = ["):]
    depth, end = 1, 0
    for end, c in enumerate(attrs_text):
        depth += c == "["
        depth -= c == "]"
        if depth == 0:
            break
    arg_attrs = split_top(attrs_text[:end])
    bb = lines[start + 1]
    args = [a.split(":", 1) for a in split_top(bb[bb.index("(") + 1:bb.rindex(")")])]
    ops = []
    for l in lines[start + 2:]:
        if '"func.return"' in l:
            rets = re.match(r'\s*"func.return"\((.*?)\)', l).group(1)
            return [(n.strip(), parse_type(t), a) for (n, t), a in zip(args, arg_attrs)], ops, \
                [r.strip() for r in rets.split(",")]
        m = re.match(r'\s*(?:(%[\w]+)(?::(\d+))? = )?"([\w.]+)"\((.*?)\)(?: <\{(.*)\}>)? : \((.*)\) -> (.*)$', l)
        if not m:
            raise SystemExit(f"{path}: cannot read: {l}")
        res, nres, name, operands, attr, _, rtypes = m.groups()
        rtypes = rtypes.strip()
        if rtypes.startswith("("):
            rtypes = rtypes[1:-1]
        ops.append((res, name, [o.strip() for o in operands.split(",") if o.strip()], attr or "",
                    [parse_type(t) for t in split_top(rtypes)]))
    raise SystemExit(f"{path}: no return")


def attr(a, key):
    m = re.search(r"(?:^|, )" + key + r"(?: = ([^,]*(?:array<[^>]*>)?[^,]*))?(?:,|$)", a)
    return m and (m.group(1) if m.group(1) is not None else True)


def ints(a, key):
    m = re.search(key + r" = array<i64: ([^>]*)>", a)
    return [int(x) for x in m.group(1).split(",")] if m else []


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def gelu_d(x):
    c = np.sqrt(2 / np.pi)
    u = c * (x + 0.044715 * x ** 3)
    t = np.tanh(u)
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)


def run(ranks, ops, collective):
    """Runs `ops` on every rank's environment in lockstep."""
    for res, name, operands, a, rtypes in ops:
        outs = []
        for env in ranks:
            v = [env[o] for o in operands]
            shape, dt = rtypes[0]
            op = name[len("mlc."):]
            if op == "constant":
                m = re.search(r"dense<(.*)> : tensor", a)
                text = m.group(1).replace("0x7F800000", "inf").replace("0xFF800000", "-inf")
                r = np.broadcast_to(np.array(eval(text.replace("true", "True").replace("false", "False"), {"inf": np.inf}), dtype=dt), shape).copy()
            elif op == "iota":
                d = int(attr(a, "dim").split(":")[0])
                r = np.indices(shape)[d].astype(dt)
            elif op in ("reshape", "broadcast"):
                r = np.broadcast_to(v[0], shape).copy() if op == "broadcast" else v[0].reshape(shape)
            elif op == "cast":
                r = np.trunc(v[0]).astype(dt) if dt == np.int64 and v[0].dtype != np.int64 else v[0].astype(dt)
            elif op in ("add", "sub", "mul", "div"):
                r = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                     "div": np.divide}[op](v[0], v[1])
            elif op in ("exp", "log", "neg", "tanh"):
                r = {"exp": np.exp, "log": np.log, "neg": np.negative, "tanh": np.tanh}[op](v[0])
            elif op == "compare":
                p = int(attr(a, "predicate").split(":")[0])
                r = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal][p](v[0], v[1])
            elif op == "select":
                r = np.where(v[0], v[1], v[2])
            elif op in ("reduce_sum", "reduce_max"):
                f = np.sum if op == "reduce_sum" else np.max
                r = f(v[0], axis=tuple(ints(a, "axes")), keepdims=bool(attr(a, "keepdims")))
            elif op == "gelu":
                r = gelu(v[0])
            elif op == "gelu_grad":
                r = v[0] * gelu_d(v[1])
            elif op == "matmul":
                seg = [int(x) for x in re.search(r"operandSegmentSizes = array<i32: ([^>]*)>", a).group(1).split(",")]
                lhs, rhs = v[0], v[1]
                if attr(a, "transpose_lhs"):
                    lhs = np.swapaxes(lhs, -1, -2)
                if attr(a, "transpose_rhs"):
                    rhs = np.swapaxes(rhs, -1, -2)
                r = np.matmul(lhs, rhs)
                if seg[2]:
                    r = r + v[2]
                if seg[3]:
                    r = r + v[2 + seg[2]]
            elif op == "embedding":
                r = v[0][v[1]]
            elif op == "embedding_grad":
                r = np.zeros(shape)
                pad = attr(a, "padding_idx")
                g, idx = v[0].reshape(-1, shape[-1]), v[1].reshape(-1)
                for i, k in enumerate(idx):
                    if pad is True or pad is None or int(pad.split(":")[0]) != k:
                        r[k] += g[i]
            elif op == "cross_entropy" or op == "cross_entropy_grad":
                ign = int(attr(a, "ignore_index").split(":")[0])
                z, y = (v[0], v[1]) if op == "cross_entropy" else (v[1], v[2])
                keep = y != ign
                zs = z - z.max(axis=1, keepdims=True)
                lsm = zs - np.log(np.exp(zs).sum(axis=1, keepdims=True))
                n = max(keep.sum(), 1)
                if op == "cross_entropy":
                    r = np.array(-(lsm[np.arange(len(y)), np.where(keep, y, 0)] * keep).sum() / n)
                else:
                    onehot = np.zeros_like(z)
                    onehot[np.arange(len(y))[keep], y[keep]] = 1
                    r = v[0] * (np.exp(lsm) - onehot) * keep[:, None] / n
            elif op == "slice":
                idx = tuple(slice(b, e if e >= 0 else None if e == -1 else e, st)
                            for b, e, st in zip(ints(a, "starts"), ints(a, "ends"), ints(a, "steps")))
                r = v[0][idx]
            elif op == "pad":
                r = np.pad(v[0], list(zip(ints(a, "low"), ints(a, "high"))))
            elif op in ("tp_copy", "tp_reduce"):
                r = v[0]
            else:
                raise SystemExit(f"tp_simulate.py: no rule for {name}")
            outs.append(np.asarray(r, dtype=dt).reshape(shape))
        if name == "mlc.tp_reduce":
            kind = int(attr(a, "kind").split(":")[0])
            joined = (np.sum if kind == 0 else np.max)(np.stack(outs), axis=0)
            outs = [joined.copy() for _ in outs]
        for env, r in zip(ranks, outs):
            env[res] = r


def main():
    one_path, tp_path, T = sys.argv[1], sys.argv[2], int(sys.argv[3])
    case = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    args1, ops1, ret1 = load(one_path, case)
    argsT, opsT, retT = load(tp_path, case)
    rng = np.random.default_rng(7)
    full = {}
    for name, (shape, dt), a in args1:
        if "mlc.param" in a:
            full[name] = rng.normal(0, 0.5, shape)
        elif "mlc.input" in a:
            vocab = max(s[0] for n, (s, d), aa in args1 if "mlc.param" in aa and len(s) == 2)
            ids = rng.integers(0, vocab, shape)
            flat = ids.reshape(-1)
            if flat.size > 2:
                flat[1] = 3  # a padding id, where a lookup has padding_idx = 3
            if '"labels"' in a and flat.size > 2:
                flat[2] = -100
            if "next_sentence" in a or "token_type" in a:
                ids[...] = rng.integers(0, 2, shape)
            full[name] = ids
    env1 = dict(full)
    run([env1], ops1, None)
    ranks = []
    for r in range(T):
        env = {}
        for (name, (shape, dt), a), (name1, _, _) in zip(argsT, args1 + [(None, None, None)]):
            if "tp_rank" in a:
                env[name] = np.array([float(r)])
                continue
            whole = full[name1]
            m = re.search(r"mlc.tp_split = \{blocks = array<i64: ([^>]*)>, dim = (\d+)", a)
            if m:
                blocks, dim = [int(x) for x in m.group(1).split(",")], int(m.group(2))
                pieces, at = [], 0
                for b in blocks:
                    piece = np.take(whole, range(at + r * b // T, at + (r + 1) * b // T), axis=dim)
                    pieces.append(piece)
                    at += b
                whole = np.concatenate(pieces, axis=dim)
            assert whole.shape == shape, (name, whole.shape, shape)
            env[name] = whole
        ranks.append(env)
    run(ranks, opsT, True)
    worst = 0.0
    loss1 = env1[ret1[0]]
    for env in ranks:
        worst = max(worst, abs(float(env[retT[0]]) - float(loss1)))
    print(f"loss {float(loss1):.12f}, ranks' loss differs by {worst:.3g}")
    # The gradients: returned in parameter order; gather each from its ranks.
    params1 = [(n, a) for n, _, a in args1 if "mlc.param" in a]
    paramsT = [a for n, _, a in argsT if "mlc.param" in a]
    for i, ((n, a1), aT) in enumerate(zip(params1, paramsT)):
        g1 = env1[ret1[1 + i]]
        m = re.search(r"mlc.tp_split = \{blocks = array<i64: ([^>]*)>, dim = (\d+)", aT)
        if m:
            blocks, dim = [int(x) for x in m.group(1).split(",")], int(m.group(2))
            parts = []
            for bi, b in enumerate(blocks):
                for r in range(T):
                    g = ranks[r][retT[1 + i]]
                    off = sum(blocks[:bi]) // T
                    parts.append(np.take(g, range(off, off + b // T), axis=dim))
            gT = np.concatenate(parts, axis=dim)
        else:
            gT = ranks[0][retT[1 + i]]
            for r in range(1, T):
                assert np.array_equal(ranks[r][retT[1 + i]], gT), "replicated gradients differ"
        d = float(np.max(np.abs(gT - g1)))
        name = re.search(r'mlc.param = "([^"]*)"', a1).group(1)
        print(f"grad {name}: max |diff| {d:.3g} (max |grad| {float(np.max(np.abs(g1))):.3g})")
        worst = max(worst, d)
    print("OK" if worst < 1e-9 else f"MISMATCH {worst:.3g}")
    sys.exit(0 if worst < 1e-9 else 1)


if __name__ == "__main__":
    main()
