"""Loss weighting under gradient accumulation, on packed documents with
--eod-mask-loss (so micro-batches hold unequal counts of labels), against
the same computed by hand with HF's GPT2LMHeadModel on the batches mlc
dumped (--dump-batches), each document run alone:

  default                     the step's loss is the mean of its micro-batches'
                              losses, each a mean over its own labels
                              (Megatron-LM's default)
  --calculate-per-token-loss  the mean over all the step's labels

One process with 2 micro-batches of 2 samples per step, both rules (and the
per-token one on the emulated CUDA device); the expected losses of 2 ranks x
2 micro-batches of 1 sample are written for the test to compare mpirun's
against (ranks.jsonl: the default; token.jsonl: per token).
"""

import argparse
import json
import os
import random
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", required=True)
args = ap.parse_args()

torch.set_num_threads(1)
os.makedirs(args.work, exist_ok=True)
B, M, S, V, E, L, H, P = 2, 2, 16, 128, 32, 2, 4, 32
STEPS, LR, WD, BETAS, EPS = 3, 1e-3, 0.01, (0.9, 0.999), 1e-8
config = f"tiny,vocab_size={V},n_positions={P},n_embd={E},n_layer={L},n_head={H}," \
         "resid_pdrop=0,embd_pdrop=0,attn_pdrop=0"
failures = []


def run(*argv):
    r = subprocess.run(list(argv), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{r.stderr}")


def losses_of(log):
    return [json.loads(line)["loss"] for line in open(log)]


def worst_rel(got, ref):
    return max(abs(a - b) / abs(b) for a, b in zip(got, ref)) if len(got) == len(ref) else 1.0


# Two datasets blended 3:1 (Megatron's blend takes A A A B A A A B ...):
# A's documents are 1..2 bytes, B's 10..20 (each ended by EOD 0), so that a
# step's first micro-batch (A, A) holds fewer labels than its second (A, B).
rnd = random.Random(3)
data = []
for name, sizes in (("short", (1, 2)), ("long", (10, 20))):
    jsonl = os.path.join(args.work, name + ".jsonl")
    with open(jsonl, "w") as f:
        for _ in range(200):
            text = "".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(*sizes)))
            f.write(json.dumps({"text": text}) + "\n")
    prefix = os.path.join(args.work, name)
    run(args.mlc, "preprocess", "--input", jsonl, "--output-prefix", prefix, "--append-eod")
    data.append(prefix + "_text_document")
data = f"3 {data[0]} 1 {data[1]}"
params = tm.init_params(tm.gpt2_shapes(V, P, E, L), seed=7, dtype=torch.float32)
# Large embeddings (the tied head too): confident logits, so that the tokens'
# losses, and the micro-batches' means, differ.
params["transformer.wte.weight"] = params["transformer.wte.weight"].detach() * 20
weights = os.path.join(args.work, "weights.safetensors")
tm.write_safetensors(weights, params)
common = ["--config", config, "--seq-len", str(S), "--reset-attention-mask",
          "--reset-position-ids", "--eod-mask-loss", "--data", data, "--init", weights,
          "--steps", str(STEPS), "--lr", str(LR), "--lr-schedule", "constant",
          "--weight-decay", str(WD), "--clip-grad", "0", "--log-every", "100"]
one = ["--micro-batch", str(B), "--global-batch", str(B * M)]


def train(name, *flags):
    log = os.path.join(args.work, name + ".jsonl")
    run(args.mlc, "train", "gpt2", *common, *one, *flags, "--log-json", log)
    return losses_of(log)


dump = os.path.join(args.work, "dump")
got_default = train("mlc-default", "--dump-batches", dump)
got_token = train("mlc-token", "--calculate-per-token-loss")
got_emulated = train("mlc-token-emulated", "--calculate-per-token-loss",
                     "--device", "cuda-emulator")
batch = {n: np.load(os.path.join(dump, n + ".npy")) for n in ("input_ids", "labels", "cu_seqlens")}
if batch["input_ids"].shape != (STEPS * M, B, S):
    sys.exit(f"--dump-batches: input_ids {batch['input_ids'].shape}, not {(STEPS * M, B, S)}")
# mlc's loss pairs the prediction at i with labels[i + 1].
counts = (batch["labels"][:, :, 1:] != -100).sum(axis=2)  # [micro-batches, rows]
per_micro = counts.sum(axis=1).reshape(STEPS, M)
if any(len(set(c)) == 1 for c in per_micro.tolist()):
    failures.append(f"the micro-batches' label counts per step {per_micro.tolist()} "
                    "are not all unequal: the rules would not differ")


def hf_model():
    import transformers
    m = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=V, n_positions=P, n_embd=E, n_layer=L, n_head=H, resid_pdrop=0,
        embd_pdrop=0, attn_pdrop=0, layer_norm_epsilon=1e-5, activation_function="gelu_new"))
    m.load_state_dict({k: v.clone() for k, v in params.items()}, strict=False)
    m.tie_weights()
    return m


def row_loss(model, k, r):
    """Micro-batch k's row r: its labels' summed cross-entropy (each document
    run alone from position 0) and their count."""
    ids, cu = torch.from_numpy(batch["input_ids"][k, r]), batch["cu_seqlens"][k]
    spans = [(int(a) - r * S, int(b) - r * S) for a, b in zip(cu[:-1], cu[1:])
             if r * S <= a < b <= (r + 1) * S]
    logits = torch.cat([model(input_ids=ids[None, a:b]).logits[0] for a, b in spans], 0)
    labels = torch.from_numpy(batch["labels"][k, r])
    total = torch.nn.functional.cross_entropy(logits[:-1], labels[1:], ignore_index=-100,
                                              reduction="sum")
    return total, int((labels[1:] != -100).sum())


def step_loss(rule, rows):
    """The step's loss of (sum, count) per row of its micro-batches [j][r]."""
    if rule == "token":  # every label of the step alike
        return sum(s for mb in rows for s, _ in mb) / sum(n for mb in rows for _, n in mb)
    if rule == "ranks":  # 2 ranks x 2 micro-batches of 1 row: every row's mean alike
        return sum(s / n for mb in rows for s, n in mb) / sum(len(mb) for mb in rows)
    return sum(sum(s for s, _ in mb) / sum(n for _, n in mb) for mb in rows) / len(rows)


def reference(rule):
    model = hf_model()
    opt = tm.adamw(dict(model.named_parameters()), LR, WD, BETAS, EPS)
    out = []
    for t in range(STEPS):
        opt.zero_grad()
        rows = [[row_loss(model, t * M + j, r) for r in range(B)] for j in range(M)]
        loss = step_loss(rule, rows)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


refs = {rule: reference(rule) for rule in ("default", "token", "ranks")}
for rule, got, what in (("default", got_default, "default"),
                        ("token", got_token, "--calculate-per-token-loss"),
                        ("token", got_emulated, "--calculate-per-token-loss, cuda-emulator")):
    worst = worst_rel(got, refs[rule])
    print(f"{what}: {len(got)} steps of {M} micro-batches, max rel diff {worst:.2e} "
          "against torch")
    if worst > 1e-4:
        failures.append(f"{what}: losses {got} differ from torch's {refs[rule]}")
apart = worst_rel(refs["default"], refs["token"])
print(f"the two rules differ by {apart:.2e} (label counts per micro-batch "
      f"{per_micro.tolist()})")
if apart < 1e-3:
    failures.append(f"the two rules' losses differ by only {apart:.2e}")
for rule, name in (("ranks", "ranks"), ("token", "token")):
    with open(os.path.join(args.work, name + ".jsonl"), "w") as f:
        for t, loss in enumerate(refs[rule]):
            f.write(json.dumps({"step": t + 1, "loss": loss}) + "\n")

if failures:
    print("PACKED ACCUMULATION FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PACKED ACCUMULATION OK")
