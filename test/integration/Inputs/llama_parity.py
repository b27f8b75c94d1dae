"""The builtin llama against transformers' own LlamaForCausalLM / Qwen2ForCausalLM.

A seeded tiny HF model (4 query heads over 2 key/value heads, RoPE, RMSNorm,
SwiGLU; --family qwen2: q/k/v biases and a tied head) writes its state_dict
as safetensors (HF names; a tied head's lm_head.weight is left out, as
save_pretrained leaves it out). Then:

  forward   `mlc run llama --init W` gives HF's logits and loss (1e-5 relative);
  training  10 AdamW steps of `mlc train llama` (constant LR, decay on
            matrices, clipping off and at 1.0) give torch.optim.AdamW's losses
            on HF's model (1e-4 relative);
  --save    the trained weights load into a fresh HF model with
            load_state_dict(strict=True) (the tied lm_head.weight is the
            alias of model.embed_tokens.weight) and give mlc's logits.

mlc gets the shapes as a `--config tiny,key=value...` spec, or with
--hf-config as the HF model's own config.json.

The norm weights and biases are perturbed away from HF's ones/zeros init so
that a wrong norm or bias path cannot hide.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--family", choices=["llama", "qwen2"], required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--hf-config", action="store_true",
                help="give mlc the HF model's own config.json instead of a preset spec")
args = ap.parse_args()

import transformers  # noqa: E402

torch.set_num_threads(1)
os.makedirs(args.work, exist_ok=True)
B, S, V, E, I, L, H, HKV, P = 2, 16, 64, 32, 48, 2, 4, 2, 32
LR, WD, BETAS, EPS = 1e-3, 0.01, (0.9, 0.999), 1e-8
THETA, RMS_EPS = 10000.0, 1e-6
# A larger init than HF's 0.02, so that the loss itself (not only the logits)
# notices a wrong rotary sign or head grouping.
STD = 0.1
qwen = args.family == "qwen2"
common_cfg = dict(vocab_size=V, hidden_size=E, intermediate_size=I, num_hidden_layers=L,
                  num_attention_heads=H, num_key_value_heads=HKV, max_position_embeddings=P,
                  rms_norm_eps=RMS_EPS, rope_theta=THETA, tie_word_embeddings=qwen,
                  initializer_range=STD)
config = (f"tiny,vocab_size={V},hidden_size={E},intermediate_size={I},num_hidden_layers={L},"
          f"num_attention_heads={H},num_key_value_heads={HKV},max_position_embeddings={P},"
          f"rms_norm_eps={RMS_EPS},rope_theta={THETA:g},initializer_range={STD}")
if qwen:
    config += ",tie_word_embeddings=1,qkv_bias=1"


def hf_model():
    if qwen:
        cfg = transformers.Qwen2Config(**common_cfg)
        cls = transformers.Qwen2ForCausalLM
    else:
        cfg = transformers.LlamaConfig(**common_cfg)
        cls = transformers.LlamaForCausalLM
    cfg._attn_implementation = "eager"
    return cls(cfg)


torch.manual_seed(0)
model = hf_model()
with torch.no_grad():
    g = torch.Generator().manual_seed(1)
    for name, t in model.named_parameters():
        if name.endswith("norm.weight"):
            t.copy_(1.0 + 0.1 * torch.randn(t.shape, generator=g))
        elif name.endswith(".bias"):
            t.copy_(0.05 * torch.randn(t.shape, generator=g))


def state_dict_for_mlc(m):
    sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
    if m.config.tie_word_embeddings:
        sd.pop("lm_head.weight")
    return sd


if args.hf_config:
    config = os.path.join(args.work, "config.json")
    model.config.to_json_file(config)
weights = os.path.join(args.work, "weights.safetensors")
tm.write_safetensors(weights, state_dict_for_mlc(model))
rng = np.random.default_rng(0)
ids = rng.integers(0, V, size=(args.steps, B, S))
bdir = os.path.join(args.work, "batches")
os.makedirs(bdir, exist_ok=True)
np.save(os.path.join(bdir, "input_ids.npy"), ids.astype(np.int64))
np.save(os.path.join(bdir, "labels.npy"), ids.astype(np.int64))


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


failures = []
common = ["--config", config, "--micro-batch", str(B), "--seq-len", str(S)]


def mlc_run(init, tag):
    path = os.path.join(args.work, "ids0.npy")
    np.save(path, ids[0].astype(np.int64))
    out = os.path.join(args.work, "out-" + tag)
    subprocess.run([args.mlc, "run", "llama"] + common +
                   ["--init", init, "--input", f"input_ids={path}", "--input",
                    f"labels={path}", "--output-dir", out], check=True)
    return np.load(os.path.join(out, "logits.npy")), np.load(os.path.join(out, "loss.npy"))


# Forward: logits and loss of step 0's batch.
model.eval()
with torch.no_grad():
    t0 = torch.from_numpy(ids[0])
    ref = model(input_ids=t0, labels=t0)
logits, loss = mlc_run(weights, "init")
r = rel(logits, ref.logits.numpy())
print(f"{args.family} forward: logits max rel diff {r:.2e}")
if r > 1e-5:
    failures.append(f"logits differ by {r:.2e}")
r = rel(loss, ref.loss.numpy())
print(f"{args.family} forward: loss rel diff {r:.2e}")
if r > 1e-5:
    failures.append(f"loss differs by {r:.2e}")

# Training: per-step losses with and without clipping; the clip=0 run saves.
trained = None
for clip in (0.0, 1.0):
    m = hf_model()
    m.load_state_dict(model.state_dict())
    m.train()
    params = dict(m.named_parameters())  # a tied head's weight appears once
    opt = tm.adamw(params, LR, WD, BETAS, EPS)
    ref_losses = []
    for t in range(args.steps):
        opt.zero_grad()
        tb = torch.from_numpy(ids[t])
        out = m(input_ids=tb, labels=tb)
        out.loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), clip)
        opt.step()
        ref_losses.append(out.loss.item())
    if clip == 0.0:
        trained = m
    log = os.path.join(args.work, f"train-clip{clip}.jsonl")
    save = os.path.join(args.work, f"trained-clip{clip}.safetensors")
    subprocess.run([args.mlc, "train", "llama"] + common +
                   ["--init", weights, "--batches", bdir, "--steps", str(args.steps),
                    "--lr", str(LR), "--lr-schedule", "constant", "--weight-decay", str(WD),
                    "--clip-grad", str(clip), "--log-json", log, "--log-every", "100",
                    "--save", save], check=True)
    got = [json.loads(line)["loss"] for line in open(log)]
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref_losses))
    print(f"{args.family} train clip={clip}: {len(got)} steps, "
          f"loss {ref_losses[0]:.5f} -> {ref_losses[-1]:.5f}, max rel diff {worst:.2e}")
    if len(got) != args.steps or worst > 1e-4:
        failures.append(f"clip={clip}: losses differ by {worst:.2e}: mlc {got} torch "
                        f"{ref_losses}")

# --save: the trained weights in a fresh HF model, strictly, by HF name.
save = os.path.join(args.work, "trained-clip0.0.safetensors")
sd = {k: torch.from_numpy(v) for k, v in tm.read_safetensors(save).items()}
fresh = hf_model()
if fresh.config.tie_word_embeddings:
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]  # the tied alias
fresh.load_state_dict(sd, strict=True)
fresh.eval()
trained.eval()
with torch.no_grad():
    t0 = torch.from_numpy(ids[0])
    loaded = fresh(input_ids=t0).logits.numpy()
    torch_trained = trained(input_ids=t0).logits.numpy()
mlc_logits, _ = mlc_run(save, "trained")
r = rel(loaded, mlc_logits)
r_torch = rel(loaded, torch_trained)
print(f"{args.family} --save: {len(sd)} tensors load strictly into "
      f"{type(fresh).__name__}; logits vs mlc run {r:.2e}, vs torch-trained {r_torch:.2e}")
if r > 1e-5:
    failures.append(f"the saved weights in HF give logits {r:.2e} from mlc's")
if r_torch > 1e-3:
    failures.append(f"the saved weights differ from torch's trained ones (logits {r_torch:.2e})")

if failures:
    print("PARITY FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PARITY OK")
