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
--hf-config as the HF model's own config.json. --family mistral
(MistralForCausalLM, its sliding window as long as the sequence: causal
attention; --window W < 16 a shorter one, query i seeing keys i - W + 1 .. i
as transformers' eager attention masks them), qwen3 (Qwen3ForCausalLM: RMSNorm over each head's q and k)
and llama3 (LlamaForCausalLM with Llama 3.1's llama3 rope_scaling, its
original_max_position_embeddings 64 so that at head_dim 8 one frequency is
kept, one interpolated and two divided by the factor) always give mlc the
config.json, whose model_type the builtin llama reads.

transformers 4.38 (the test's) has no Qwen3 and no llama3 rope_scaling: `--write-fixture DIR`, run with
transformers 5, writes what the comparison needs (config.json, the initial
weights, the batches, HF's logits and loss, torch's per-step losses, the
torch-trained model's logits and its state_dict's names) into DIR;
`--fixture DIR` then compares mlc against those instead of running HF.

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
ap.add_argument("--family", choices=["llama", "qwen2", "mistral", "qwen3", "llama3"],
                required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--fixture", help="compare against the references in this directory")
ap.add_argument("--write-fixture", help="write the references into this directory and stop")
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--window", type=int, default=0,
                help="--family mistral: its sliding_window (default: the sequence's length)")
ap.add_argument("--hf-config", action="store_true",
                help="give mlc the HF model's own config.json instead of a preset spec")
args = ap.parse_args()

if not args.fixture:
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
tied = qwen
common_cfg = dict(vocab_size=V, hidden_size=E, intermediate_size=I, num_hidden_layers=L,
                  num_attention_heads=H, num_key_value_heads=HKV, max_position_embeddings=P,
                  rms_norm_eps=RMS_EPS, tie_word_embeddings=tied, initializer_range=STD)
config = (f"tiny,vocab_size={V},hidden_size={E},intermediate_size={I},num_hidden_layers={L},"
          f"num_attention_heads={H},num_key_value_heads={HKV},max_position_embeddings={P},"
          f"rms_norm_eps={RMS_EPS},rope_theta={THETA:g},initializer_range={STD}")
if qwen:
    config += ",tie_word_embeddings=1,qkv_bias=1"
# Mistral and Qwen3 come to mlc as their config.json (model_type mistral, qwen3).
if args.family in ("mistral", "qwen3", "llama3"):
    args.hf_config = True
CLASSES = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "qwen3": "Qwen3",
           "llama3": "Llama"}
# Llama 3.1's rope_scaling but for the original context: wavelengths
# 2 pi / inv_freq of 6.3, 63, 628 and 6283 positions against 64 / 4 and
# 64 / 1 — kept, interpolated, divided by 8, divided by 8.
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
if args.family == "llama3":  # the stretched context is past the original one
    common_cfg["max_position_embeddings"] = 512


def hf_model():
    prefix = CLASSES[args.family]
    kw = dict(common_cfg)
    if transformers.__version__.startswith("4."):
        kw["rope_theta"] = THETA
        if args.family == "llama3":
            kw["rope_scaling"] = dict(LLAMA3_SCALING)
    elif args.family == "llama3":  # transformers 5: base and scaling in rope_parameters
        kw["rope_parameters"] = dict(LLAMA3_SCALING, rope_theta=THETA)
    else:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": THETA}
    if args.family == "mistral":
        # The whole sequence (causal attention), or a shorter window.
        kw["sliding_window"] = args.window or S
    if args.family == "qwen3":
        kw["head_dim"] = E // H
    cfg = getattr(transformers, prefix + "Config")(**kw)
    cfg._attn_implementation = "eager"
    return getattr(transformers, prefix + "ForCausalLM")(cfg)


def state_dict_for_mlc(m):
    sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
    if m.config.tie_word_embeddings:
        sd.pop("lm_head.weight")
    return sd


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


failures = []


def reference():
    """HF's side of the comparison: the model, batches and every reference."""
    torch.manual_seed(0)
    model = hf_model()
    with torch.no_grad():
        g = torch.Generator().manual_seed(1)
        for name, t in model.named_parameters():
            if name.endswith("norm.weight"):
                t.copy_(1.0 + 0.1 * torch.randn(t.shape, generator=g))
            elif name.endswith(".bias"):
                t.copy_(0.05 * torch.randn(t.shape, generator=g))
    ids = np.random.default_rng(0).integers(0, V, size=(args.steps, B, S))
    ref = {"ids": ids, "weights": state_dict_for_mlc(model), "config": model.config,
           "class": type(model).__name__}
    # Forward: logits and loss of step 0's batch.
    model.eval()
    with torch.no_grad():
        t0 = torch.from_numpy(ids[0])
        out = model(input_ids=t0, labels=t0)
    ref["logits"], ref["loss"] = out.logits.numpy(), out.loss.numpy()
    # Training: per-step losses with and without clipping.
    for clip in (0.0, 1.0):
        m = hf_model()
        m.load_state_dict(model.state_dict())
        m.train()
        params = dict(m.named_parameters())  # a tied head's weight appears once
        opt = tm.adamw(params, LR, WD, BETAS, EPS)
        losses = []
        for t in range(args.steps):
            opt.zero_grad()
            tb = torch.from_numpy(ids[t])
            out = m(input_ids=tb, labels=tb)
            out.loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(list(params.values()), clip)
            opt.step()
            losses.append(out.loss.item())
        ref[f"losses{clip}"] = np.array(losses)
        if clip == 0.0:
            m.eval()
            with torch.no_grad():
                ref["trained_logits"] = m(input_ids=torch.from_numpy(ids[0])).logits.numpy()
    ref["names"] = sorted(model.state_dict())
    return ref


if args.fixture:
    d = args.fixture
    npz = np.load(os.path.join(d, "reference.npz"))
    meta = json.load(open(os.path.join(d, "reference.json")))
    ref = {k: npz[k] for k in npz.files}
    ref["weights"] = os.path.join(d, "weights.safetensors")
    ref["config_path"] = os.path.join(d, "config.json")
    ref["names"], ref["class"], ref["tied"] = meta["names"], meta["class"], meta["tied"]
else:
    ref = reference()
    ref["tied"] = bool(ref["config"].tie_word_embeddings)
    if args.write_fixture:
        d = args.write_fixture
        os.makedirs(d, exist_ok=True)
        ref["config"].to_json_file(os.path.join(d, "config.json"))
        tm.write_safetensors(os.path.join(d, "weights.safetensors"), ref["weights"])
        np.savez_compressed(os.path.join(d, "reference.npz"), ids=ref["ids"].astype(np.int64),
                            logits=ref["logits"], loss=ref["loss"], losses0=ref["losses0.0"],
                            losses1=ref["losses1.0"], trained_logits=ref["trained_logits"])
        with open(os.path.join(d, "reference.json"), "w") as f:
            json.dump({"names": ref["names"], "class": ref["class"], "tied": ref["tied"],
                       "transformers": transformers.__version__,
                       "torch": torch.__version__}, f, indent=1)
        print(f"fixture written to {d}")
        sys.exit(0)
    ref["losses0"], ref["losses1"] = ref.pop("losses0.0"), ref.pop("losses1.0")
    weights = os.path.join(args.work, "weights.safetensors")
    tm.write_safetensors(weights, ref["weights"])
    ref["weights"] = weights
    if args.hf_config:
        ref["config_path"] = os.path.join(args.work, "config.json")
        ref["config"].to_json_file(ref["config_path"])
if args.hf_config or args.fixture:
    config = ref["config_path"]
ids = ref["ids"]
weights = ref["weights"]
bdir = os.path.join(args.work, "batches")
os.makedirs(bdir, exist_ok=True)
np.save(os.path.join(bdir, "input_ids.npy"), ids.astype(np.int64))
np.save(os.path.join(bdir, "labels.npy"), ids.astype(np.int64))
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
logits, loss = mlc_run(weights, "init")
r = rel(logits, ref["logits"])
print(f"{args.family} forward: logits max rel diff {r:.2e}")
if r > 1e-5:
    failures.append(f"logits differ by {r:.2e}")
r = rel(loss, ref["loss"])
print(f"{args.family} forward: loss rel diff {r:.2e}")
if r > 1e-5:
    failures.append(f"loss differs by {r:.2e}")

# Training: per-step losses with and without clipping; the clip=0 run saves.
for clip, ref_losses in ((0.0, ref["losses0"]), (1.0, ref["losses1"])):
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
                        f"{list(ref_losses)}")

# --save: the trained weights under the HF model's names, strictly; with
# transformers at hand, loaded into a fresh HF model.
save = os.path.join(args.work, "trained-clip0.0.safetensors")
sd = {k: torch.from_numpy(v) for k, v in tm.read_safetensors(save).items()}
if ref["tied"]:
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]  # the tied alias
mlc_logits, _ = mlc_run(save, "trained")
if args.fixture:
    if sorted(sd) != ref["names"]:
        failures.append(f"--save's names {sorted(sd)} are not {ref['class']}'s {ref['names']}")
    loaded = mlc_logits
    how = f"names match {ref['class']}'s state_dict"
else:
    fresh = hf_model()
    fresh.load_state_dict(sd, strict=True)
    fresh.eval()
    with torch.no_grad():
        loaded = fresh(input_ids=torch.from_numpy(ids[0])).logits.numpy()
    how = f"load strictly into {type(fresh).__name__}"
r = rel(loaded, mlc_logits)
r_torch = rel(loaded, ref["trained_logits"])
print(f"{args.family} --save: {len(sd)} tensors {how}; logits vs mlc run {r:.2e}, "
      f"vs torch-trained {r_torch:.2e}")
if r > 1e-5:
    failures.append(f"the saved weights in HF give logits {r:.2e} from mlc's")
if r_torch > 1e-3:
    failures.append(f"the saved weights differ from torch's trained ones (logits {r_torch:.2e})")

if failures:
    print("PARITY FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PARITY OK")
