"""Walks docs/models.md's config-key tables against transformers and mlc.

For GPT2Config, BertConfig and LlamaConfig of the installed transformers:

  coverage   every key to_dict() of a default config writes, and every keyword
             its constructor takes, has a row in the docs (the class's table or
             the table of keys of every config class);
  behaviour  each row is checked with a non-default value in a config.json
             built from a tiny default config:
               "no effect on training"  the graph equals the default's,
               "refused unless V"       mlc fails, naming the key (and the
                                        default value builds),
               "modeled"                the graph changes (or, for a bound,
                                        the bound is enforced);
  parity     GPT-2's modeled keys that change the computation (n_inner,
             tie_word_embeddings, scale_attn_weights,
             scale_attn_by_inverse_layer_idx) give transformers'
             GPT2LMHeadModel's logits on the same weights (1e-5 relative).

transformers 5 writes some keys 4.38 does not (dtype, head_dim, mlp_bias,
rope_parameters, ...): --transformers5 DIR holds each class's tiny config as
transformers 5 writes it, with its constructor's keywords (written by this
script's --write-transformers5 DIR under transformers 5). Their keys must have
rows too, and each must build the graph of the same model's 4.38 config.

Prints one line per class and check; exits non-zero listing every failure.
"""

import argparse
import copy
import inspect
import json
import os
import re
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "integration", "Inputs"))
import torch_models as tm  # noqa: E402
import transformers  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--docs", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--transformers5", help="transformers 5's configs of the same tiny models")
ap.add_argument("--write-transformers5", help="write them (under transformers 5) and stop")
args = ap.parse_args()

TINY = {
    "GPT2Config": dict(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4),
    "BertConfig": dict(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=48, max_position_embeddings=32),
    "LlamaConfig": dict(vocab_size=64, hidden_size=32, intermediate_size=48,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        max_position_embeddings=32),
}


def constructor_keys(cls):
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "kwargs")]


if args.write_transformers5:
    for cname, kw in TINY.items():
        cls = getattr(transformers, cname)
        with open(os.path.join(args.write_transformers5, cname + ".json"), "w") as f:
            json.dump({"config": json.loads(cls(**kw).to_json_string(use_diff=False)),
                       "constructor_keys": constructor_keys(cls),
                       "transformers": transformers.__version__}, f, indent=1, sort_keys=True)
    sys.exit(0)
os.makedirs(args.work, exist_ok=True)
torch.set_num_threads(1)

# --- the docs' tables --------------------------------------------------------

tables = {}
section = None
for line in open(args.docs):
    heading = re.match(r"^### (.*)", line)
    if heading:
        title = heading.group(1)
        section = ("common" if title.startswith("Keys of every config class")
                   else title.split()[0])
        tables[section] = {}
        continue
    row = re.match(r"^\| `([^`]+)` \| ([^|]+) \|", line)
    if row and section:
        tables[section][row.group(1)] = row.group(2).strip()
for name in ("common", "GPT2Config", "BertConfig", "LlamaConfig"):
    if not tables.get(name):
        sys.exit(f"docs/models.md has no table for {name}")

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


# --- mlc ----------------------------------------------------------------------

counter = [0]


def compile_graph(family, cfg, extra=()):
    """(ok, graph text or stderr) of `mlc compile FAMILY --config cfg.json`."""
    counter[0] += 1
    path = os.path.join(args.work, f"c{counter[0]}.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    r = subprocess.run([args.mlc, "compile", family, "--config", path, "--micro-batch", "1",
                        "--seq-len", "8", "--emit=graph", "-o", "-"] + list(extra),
                       capture_output=True, text=True)
    return r.returncode == 0, r.stdout if r.returncode == 0 else r.stderr


def other_value(v, key):
    """A value of the key's kind other than v."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 3
    if isinstance(v, float):
        return v + 0.5
    if isinstance(v, str):
        return v + "-other"
    if isinstance(v, dict):
        return {"0": [0]} if key == "pruned_heads" else {"0": "OTHER"}
    if isinstance(v, list):
        return ["sliding_attention"] * max(1, len(v))
    return {"type": "linear", "factor": 2.0} if key == "rope_scaling" else 5


# Non-default values of the modeled keys that suit the tiny configs below.
MODELED = {
    "GPT2Config": dict(vocab_size=80, n_positions=40, n_embd=48, n_layer=3, n_head=8,
                       n_inner=40, resid_pdrop=0.2, embd_pdrop=0.2, attn_pdrop=0.2,
                       layer_norm_epsilon=1e-3, initializer_range=0.05,
                       tie_word_embeddings=False, scale_attn_weights=False,
                       scale_attn_by_inverse_layer_idx=True),
    "BertConfig": dict(vocab_size=80, hidden_size=48, num_hidden_layers=3,
                       num_attention_heads=8, intermediate_size=40,
                       max_position_embeddings=40, type_vocab_size=3, hidden_dropout_prob=0.2,
                       attention_probs_dropout_prob=0.2, layer_norm_eps=1e-5,
                       initializer_range=0.05),
    "LlamaConfig": dict(vocab_size=80, hidden_size=48, intermediate_size=40,
                        num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=4,
                        head_dim=16, rms_norm_eps=1e-3, rope_theta=20000.0,
                        rope_parameters={"rope_type": "default", "rope_theta": 20000.0},
                        rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 64},
                        tie_word_embeddings=True, attention_bias=True, mlp_bias=True,
                        initializer_range=0.05),
}
# Keys the docs call modeled that bound the sequence rather than shape the
# graph: a value under --seq-len 8 must be refused, naming the key.
BOUNDS = {"max_position_embeddings", "n_positions"}
# Values of refused keys that mlc builds, beside the default (checked to build).
REFUSED_SAMPLE = {"activation_function": "relu", "hidden_act": "relu",
                  "attention_dropout": 0.1, "layer_types": ["sliding_attention"] * 2}

FAMILIES = {"GPT2Config": "gpt2", "BertConfig": "bert", "LlamaConfig": "llama"}
classes = {c: (FAMILIES[c], getattr(transformers, c)(**kw)) for c, kw in TINY.items()}

for cname, (family, hf) in classes.items():
    base = json.loads(hf.to_json_string(use_diff=False))
    signature = constructor_keys(type(hf))
    rows = dict(tables["common"])
    rows.update(tables[cname])
    # Coverage: every key of the class has a row.
    missing = sorted(k for k in set(base) | set(signature) if k not in rows)
    if missing:
        fail(f"{cname}: keys with no row in docs/models.md: {', '.join(missing)}")
    ok, base_graph = compile_graph(family, base)
    if not ok:
        fail(f"{cname}: the default config does not build: {base_graph.strip()}")
        continue
    if args.transformers5:
        new = json.load(open(os.path.join(args.transformers5, cname + ".json")))
        keys5 = set(new["config"]) | set(new["constructor_keys"])
        missing = sorted(k for k in keys5 if k not in rows)
        if missing:
            fail(f"{cname} (transformers {new['transformers']}): keys with no row in "
                 f"docs/models.md: {', '.join(missing)}")
        ok, graph = compile_graph(family, new["config"])
        if not ok or graph != base_graph:
            fail(f"{cname}: transformers {new['transformers']}'s config of the same model "
                 + ("is refused: " + graph.strip() if not ok else "builds another graph"))
        else:
            print(f"{cname}: transformers {new['transformers']}'s config ({len(keys5)} keys) "
                  "builds the same graph")
    counts = {"modeled": 0, "refused": 0, "no effect": 0}
    # No effect: every such key changed at once builds the same graph; if not,
    # one at a time to name the culprit.
    quiet = [k for k, what in rows.items() if what.startswith("no effect")]
    changed = copy.deepcopy(base)
    for k in quiet:
        changed[k] = other_value(base.get(k), k)
    ok, graph = compile_graph(family, changed)
    if not ok or graph != base_graph:
        for k in quiet:
            one = copy.deepcopy(base)
            one[k] = other_value(base.get(k), k)
            ok, graph = compile_graph(family, one)
            if not ok or graph != base_graph:
                fail(f"{cname}: {k} = {json.dumps(one[k])} is documented as no effect on "
                     f"training, but " + ("mlc refuses it" if not ok else "the graph changes"))
    counts["no effect"] = len(quiet)
    for k, what in rows.items():
        if what.startswith("no effect"):
            continue
        if k == "model_type":
            bad = dict(base, model_type="t5")
            ok, err = compile_graph(family, bad)
            if ok or "model_type 't5'" not in err:
                fail(f"{cname}: model_type 't5' is not refused by name")
            continue
        if what.startswith("refused unless"):
            counts["refused"] += 1
            value = REFUSED_SAMPLE.get(k, other_value(base.get(k), k))
            ok, err = compile_graph(family, dict(base, **{k: value}))
            if ok or k not in err:
                fail(f"{cname}: {k} = {json.dumps(value)} is documented as refused but "
                     + ("builds" if ok else f"the error does not name it: {err.strip()}"))
            continue
        if what != "modeled":
            fail(f"{cname}: {k}: unknown action '{what}' in docs/models.md")
            continue
        counts["modeled"] += 1
        if k == "sliding_window":
            # Mistral's window: shorter than the sequence narrows the causal
            # attention; the sequence's length or more is plain causal
            # attention.
            mistral = dict(base, model_type="mistral", sliding_window=4)
            ok, graph = compile_graph(family, mistral)
            if not ok or "causal window = 4 :" not in graph:
                fail(f"{cname}: a Mistral sliding_window of 4 under --seq-len 8 does not "
                     "build attention with a window of 4")
            mistral["sliding_window"] = 8
            ok, graph = compile_graph(family, mistral)
            if not ok or graph != base_graph:
                fail(f"{cname}: a Mistral sliding_window of --seq-len does not build plain "
                     "causal attention")
            continue
        if k in BOUNDS:
            ok, err = compile_graph(family, dict(base, **{k: 4}))
            if ok or k not in err:
                fail(f"{cname}: {k} = 4 under --seq-len 8 is not refused by name")
            continue
        if k not in MODELED[cname]:
            fail(f"{cname}: {k} is documented as modeled, and this test has no value for it")
            continue
        value = MODELED[cname][k]
        ok, graph = compile_graph(family, dict(base, **{k: value}))
        if not ok:
            fail(f"{cname}: {k} = {json.dumps(value)} is documented as modeled but refused: "
                 f"{graph.strip()}")
        elif graph == base_graph:
            fail(f"{cname}: {k} = {json.dumps(value)} is documented as modeled but builds "
                 "the default's graph")
    # A key in no table is refused by name.
    ok, err = compile_graph(family, dict(base, not_a_config_key=1))
    if ok or "not_a_config_key" not in err:
        fail(f"{cname}: an unknown key is not refused by name")
    print(f"{cname}: {len(set(base) | set(signature))} keys documented; "
          f"{counts['modeled']} modeled, {counts['refused']} refused unless default, "
          f"{counts['no effect']} no effect (checked)")

# --- parity: GPT-2's modeled keys against GPT2LMHeadModel ---------------------

B, S = 2, 8
ids = np.random.default_rng(0).integers(0, 64, size=(B, S))
ids_path = os.path.join(args.work, "ids.npy")
np.save(ids_path, ids.astype(np.int64))
cases = {"n_inner": dict(n_inner=40), "tie_word_embeddings": dict(tie_word_embeddings=False),
         "scale_attn_weights": dict(scale_attn_weights=False),
         "scale_attn_by_inverse_layer_idx": dict(scale_attn_by_inverse_layer_idx=True)}
for name, change in cases.items():
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  initializer_range=0.2, **change)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    work = os.path.join(args.work, "parity-" + name)
    os.makedirs(work, exist_ok=True)
    cfg.to_json_file(os.path.join(work, "config.json"))
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()
          if not k.endswith((".attn.bias", ".attn.masked_bias"))}
    if cfg.tie_word_embeddings:
        sd.pop("lm_head.weight")
    tm.write_safetensors(os.path.join(work, "w.safetensors"), sd)
    with torch.no_grad():
        ref = model(input_ids=torch.from_numpy(ids)).logits.numpy()
    r = subprocess.run([args.mlc, "run", "gpt2", "--config", os.path.join(work, "config.json"),
                        "--micro-batch", str(B), "--seq-len", str(S), "--init",
                        os.path.join(work, "w.safetensors"), "--input",
                        f"input_ids={ids_path}", "--input", f"labels={ids_path}",
                        "--output-dir", os.path.join(work, "out")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"parity {name}: mlc run failed: {r.stderr.strip()}")
        continue
    got = np.load(os.path.join(work, "out", "logits.npy"))
    rel = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
    print(f"gpt2 {name}={json.dumps(list(change.values())[0])}: logits max rel diff vs "
          f"GPT2LMHeadModel {rel:.1e}")
    if rel > 1e-5:
        fail(f"parity {name}: logits differ from GPT2LMHeadModel's by {rel:.2e}")

if failures:
    print(f"CONFIG KEYS FAILED ({len(failures)})")
    sys.exit(1)
print("CONFIG KEYS OK")
