"""Packed documents (--reset-attention-mask, --reset-position-ids, --eod-mask-loss)
against Megatron-LM's semantics and HF's GPT2LMHeadModel (--model gpt2) or
LlamaForCausalLM (--model llama: rotary positions that reset, grouped-query
attention).

1. The batches `mlc train` fed (--dump-batches) against a re-implementation of
   Megatron's _get_ltor_masks_and_position_ids on the same samples: the
   block-diagonal causal mask it builds is exactly what cu_seqlens allows,
   the position ids are its, and --eod-mask-loss masks the labels it masks.
2. Logits of a packed batch (several documents per sample) against the HF
   model run on each document alone (positions from 0), its gradients (one
   AdamW step that can be inverted: betas 0, eps 1, lr 1, so the update is
   g / (|g| + 1)), and 10 AdamW steps' losses on the batches the data source
   dealt; the first steps again with the CUDA kernels on the emulated device.
3. With no EOD in the batch the packed package gives the plain causal one's
   losses, and greedy generation from it the plain one's text.
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
ap.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
ap.add_argument("--work", required=True)
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--seq", type=int, default=16)
ap.add_argument("--max-doc", type=int, default=12, help="longest document, in bytes")
args = ap.parse_args()

torch.set_num_threads(1)
os.makedirs(args.work, exist_ok=True)
B, S, V, E, L, H = 2, args.seq, 128, 32, 2, 4
I, HKV = 48, 2  # llama: the MLP's width, 4 query heads over 2 key/value heads
P = max(32, S)
LR, WD, BETAS, EPS = 1e-3, 0.01, (0.9, 0.999), 1e-8
EOD = 0  # the byte tokenizer's
MODEL = args.model
if MODEL == "gpt2":
    config = f"tiny,vocab_size={V},n_positions={P},n_embd={E},n_layer={L},n_head={H}," \
             "resid_pdrop=0,embd_pdrop=0,attn_pdrop=0"
else:
    config = f"tiny,vocab_size={V},hidden_size={E},intermediate_size={I},num_hidden_layers={L}," \
             f"num_attention_heads={H},num_key_value_heads={HKV},max_position_embeddings={P}"
failures = []


def run(*argv):
    r = subprocess.run(list(argv), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{r.stderr}")
    return r


def losses_of(log):
    return [json.loads(line)["loss"] for line in open(log)]


def worst_rel(got, ref, steps, what, tolerance):
    """The largest relative difference of two loss lists; a failure past
    `tolerance` or when `got` is not `steps` long."""
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
    if len(got) != steps or worst > tolerance:
        failures.append(f"{what}: losses differ by {worst:.2e}: {got} vs {ref}")
    return worst


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


# Short documents (2..--max-doc bytes, each ended by EOD), so a sample holds
# several of them and cuts the last.
rnd = random.Random(0)
jsonl = os.path.join(args.work, "docs.jsonl")
with open(jsonl, "w") as f:
    for _ in range(300):
        text = "".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(2, args.max_doc)))
        f.write(json.dumps({"text": text}) + "\n")
prefix = os.path.join(args.work, "docs")
run(args.mlc, "preprocess", "--input", jsonl, "--output-prefix", prefix, "--append-eod")
data = prefix + "_text_document"



def hf_model():
    """The HF model of --model; the GPT-2 one ties its head once loaded."""
    import transformers
    if MODEL == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=V, n_positions=P, n_embd=E, n_layer=L, n_head=H, resid_pdrop=0,
            embd_pdrop=0, attn_pdrop=0, layer_norm_epsilon=1e-5,
            activation_function="gelu_new"))
    cfg = transformers.LlamaConfig(vocab_size=V, hidden_size=E, intermediate_size=I,
                                   num_hidden_layers=L, num_attention_heads=H,
                                   num_key_value_heads=HKV, max_position_embeddings=P,
                                   rms_norm_eps=1e-6, rope_theta=10000.0,
                                   tie_word_embeddings=False, initializer_range=0.1)
    cfg._attn_implementation = "eager"
    return transformers.LlamaForCausalLM(cfg)


def load_hf(params):
    """A fresh HF model holding `params` (mlc's names are HF's)."""
    m = hf_model()
    missing, unexpected = m.load_state_dict({k: v.clone() for k, v in params.items()},
                                            strict=False)
    if unexpected or any(not (k.endswith("attn.bias") or k.endswith("masked_bias") or
                              (k == "lm_head.weight" and MODEL == "gpt2")) for k in missing):
        sys.exit(f"HF state dict: missing {missing}, unexpected {unexpected}")
    m.tie_weights()
    return m


if MODEL == "gpt2":
    params = tm.init_params(tm.gpt2_shapes(V, P, E, L), seed=7, dtype=torch.float32)
else:
    # HF's seeded init (std 0.1, so that the loss notices a wrong rotary
    # position), norm weights perturbed from ones.
    torch.manual_seed(0)
    params = {k: v.detach().clone() for k, v in hf_model().state_dict().items()}
    gen = torch.Generator().manual_seed(1)
    for k, v in params.items():
        if k.endswith("norm.weight"):
            v.copy_(1.0 + 0.1 * torch.randn(v.shape, generator=gen))
weights = os.path.join(args.work, "weights.safetensors")
tm.write_safetensors(weights, params)
common = ["--config", config, "--micro-batch", str(B), "--seq-len", str(S), "--init", weights]
packed = ["--reset-attention-mask", "--reset-position-ids"]


def megatron_masks(data, eod, reset_position_ids, reset_attention_mask, eod_mask_loss):
    """Megatron-LM's left-to-right masks for tokens [b, s], written from its
    documented behaviour: True in the attention mask means "masked"."""
    b, s = data.shape
    att = torch.tril(torch.ones(b, s, s)).view(b, 1, s, s)
    loss_mask = torch.ones(b, s)
    if eod_mask_loss:
        loss_mask[data == eod] = 0.0
    pos = torch.arange(s, dtype=torch.long).unsqueeze(0).repeat(b, 1)
    for r in range(b):
        ends = pos[r, data[r] == eod].tolist()
        prev = 0
        for i in ends:
            if reset_attention_mask:
                att[r, 0, i + 1:, :i + 1] = 0
            if reset_position_ids:
                pos[r, i + 1:] -= i + 1 - prev
                prev = i + 1
    return att < 0.5, loss_mask, pos


def documents(cu, r):
    """Sample r's documents [a, b) (offsets within the sample) from cu_seqlens."""
    return [(int(a) - r * S, int(b) - r * S) for a, b in zip(cu[:-1], cu[1:])
            if r * S <= a < b <= (r + 1) * S]


# 1. The batches mlc trains on.
dump = os.path.join(args.work, "dump")
log = os.path.join(args.work, "train.jsonl")
run(args.mlc, "train", MODEL, *common, *packed, "--eod-mask-loss", "--data", data,
    "--steps", str(args.steps), "--lr", str(LR), "--lr-schedule", "constant",
    "--weight-decay", str(WD), "--clip-grad", "0", "--log-json", log, "--log-every", "100",
    "--dump-batches", dump)
batch = {n: np.load(os.path.join(dump, n + ".npy"))
         for n in ("input_ids", "labels", "position_ids", "cu_seqlens")}
docs_per_sample = []
for t in range(args.steps):
    ids = torch.from_numpy(batch["input_ids"][t])
    masked, loss_mask, pos = megatron_masks(ids, EOD, True, True, True)
    cu = batch["cu_seqlens"][t]
    if len(cu) != B * S + 1 or cu[0] != 0 or np.any(np.diff(cu) < 0) or cu[-1] != B * S:
        failures.append(f"step {t}: cu_seqlens {cu.tolist()} is not B*S+1 rising offsets")
    allowed = np.zeros((B, S, S), dtype=bool)
    for r in range(B):
        spans = documents(cu, r)
        docs_per_sample.append(len(spans))
        for a, b in spans:
            for i in range(a, b):
                allowed[r, i, a:i + 1] = True
    if not np.array_equal(allowed, ~masked[:, 0].numpy()):
        failures.append(f"step {t}: cu_seqlens allow other keys than Megatron's mask")
    if not np.array_equal(batch["position_ids"][t], pos.numpy()):
        failures.append(f"step {t}: position_ids differ from Megatron's")
    # mlc's loss pairs the prediction at i with labels[i + 1].
    ignored = batch["labels"][t][:, 1:] == -100
    if not np.array_equal(ignored, loss_mask[:, :-1].numpy() == 0):
        failures.append(f"step {t}: the labels mlc ignores are not Megatron's loss mask")
    if not np.array_equal(np.where(ignored, batch["input_ids"][t][:, 1:], batch["labels"][t][:, 1:]),
                          batch["input_ids"][t][:, 1:]):
        failures.append(f"step {t}: labels other than masked ones differ from input_ids")
print(f"batches: {args.steps} micro-batches of {B}x{S}, {min(docs_per_sample)} to "
      f"{max(docs_per_sample)} documents per sample, as Megatron's masks and position ids")

# 2. The HF model on each document alone.
hf = load_hf(params)


def hf_logits_of(model, ids, cu):
    """Logits [B, S, V]: each document of each sample run alone from position 0."""
    rows = []
    for r in range(B):
        parts = [model(input_ids=ids[r:r + 1, a:b]).logits[0] for a, b in documents(cu, r)]
        rows.append(torch.cat(parts, 0))
    return torch.stack(rows)


def hf_logits(ids, cu):
    return hf_logits_of(hf, ids, cu)


def hf_loss(logits, labels):
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V),
                                             labels[:, 1:].reshape(-1), ignore_index=-100)


inputs = []
for n in batch:
    path = os.path.join(args.work, n + "0.npy")
    np.save(path, batch[n][0])
    inputs += ["--input", f"{n}={path}"]
out = os.path.join(args.work, "out")
run(args.mlc, "run", MODEL, *common, *packed, *inputs, "--output-dir", out)
with torch.no_grad():
    ref = hf_logits(torch.from_numpy(batch["input_ids"][0]), batch["cu_seqlens"][0])
    ref_loss = hf_loss(ref, torch.from_numpy(batch["labels"][0]))
r = rel(np.load(os.path.join(out, "logits.npy")), ref.numpy())
print(f"forward: logits max rel diff {r:.2e} against HF's documents run alone")
if r > 1e-4:
    failures.append(f"logits differ from HF's by {r:.2e}")
r = rel(np.load(os.path.join(out, "loss.npy")), ref_loss.numpy())
if r > 1e-4:
    failures.append(f"loss differs from HF's by {r:.2e}")

# --reset-position-ids alone: every token sees the whole sample (causal), at
# the positions that restart after each EOD: the HF model given those
# position_ids. (With the reset mask too, Llama's rotary embedding cannot
# tell reset positions from 0..S-1: a score depends only on i - j within a
# document. This is where its gathered tables show.)
out = os.path.join(args.work, "out-positions")
positional = [a for n in ("input_ids", "labels", "position_ids")
              for a in ("--input", f"{n}={os.path.join(args.work, n + '0.npy')}")]
run(args.mlc, "run", MODEL, *common, "--reset-position-ids", *positional, "--output-dir", out)
with torch.no_grad():
    ref = hf(input_ids=torch.from_numpy(batch["input_ids"][0]),
             position_ids=torch.from_numpy(batch["position_ids"][0])).logits
r = rel(np.load(os.path.join(out, "logits.npy")), ref.numpy())
print(f"positions alone: logits max rel diff {r:.2e} against HF's with position_ids")
if r > 1e-4:
    failures.append(f"--reset-position-ids alone: logits differ from HF's by {r:.2e}")

# Gradients of step 0's packed batch. One AdamW step with betas 0 and eps 1
# (lr 1, no decay) moves each weight by d = g / (|g| + 1), so the gradient
# the compiled backward computed is g = d / (1 - |d|).
saved = os.path.join(args.work, "step1.safetensors")
run(args.mlc, "train", MODEL, *common, *packed, "--eod-mask-loss", "--data", data,
    "--steps", "1", "--lr", "1", "--lr-schedule", "constant", "--beta1", "0", "--beta2", "0",
    "--eps", "1", "--weight-decay", "0", "--clip-grad", "0", "--log-every", "100",
    "--save", saved)
stepped = tm.read_safetensors(saved)
ref_model = load_hf(params)
hf_loss(hf_logits_of(ref_model, torch.from_numpy(batch["input_ids"][0]), batch["cu_seqlens"][0]),
        torch.from_numpy(batch["labels"][0])).backward()
worst_grad = 0.0
for name, t in ref_model.named_parameters():
    d = params[name].detach().numpy().astype(np.float64) - stepped[name].astype(np.float64)
    r = rel(d / (1 - np.abs(d)), t.grad.numpy().astype(np.float64))
    worst_grad = max(worst_grad, r)
    if r > 1e-3:
        failures.append(f"the gradient of {name} differs from HF's by {r:.2e}")
print(f"gradients: {len(stepped)} tensors, max rel diff {worst_grad:.2e} against HF's "
      f"documents run alone")

p = dict(hf.named_parameters())
opt = tm.adamw(p, LR, WD, BETAS, EPS)
ref_losses = []
for t in range(args.steps):
    opt.zero_grad()
    loss = hf_loss(hf_logits(torch.from_numpy(batch["input_ids"][t]), batch["cu_seqlens"][t]),
                   torch.from_numpy(batch["labels"][t]))
    loss.backward()
    opt.step()
    ref_losses.append(loss.item())
got = losses_of(log)
worst = worst_rel(got, ref_losses, args.steps, "mlc against HF", 1e-4)
print(f"train: {len(got)} steps, loss {ref_losses[0]:.5f} -> {ref_losses[-1]:.5f}, "
      f"max rel diff {worst:.2e}")

# The CUDA kernels (the emulated device) on the same batches: forward and
# backward of the variable-length causal attention over the packed tokens.
emulated = 3
log = os.path.join(args.work, "emulated.jsonl")
run(args.mlc, "train", MODEL, *common, *packed, "--eod-mask-loss", "--data", data,
    "--steps", str(emulated), "--lr", str(LR), "--lr-schedule", "constant",
    "--weight-decay", str(WD), "--clip-grad", "0", "--log-json", log, "--log-every", "100",
    "--device", "cuda-emulator")
emu = losses_of(log)
worst = worst_rel(emu, got, emulated, "the emulated CUDA kernels against the CPU", 1e-5)
print(f"cuda-emulator: {len(emu)} steps, max rel diff {worst:.2e} against the CPU")

# 3. No EOD: the packed package is the plain causal one.
rng = np.random.default_rng(1)
steps = 5
ids = rng.integers(1, V, size=(steps, B, S))
plain_dir, packed_dir = os.path.join(args.work, "plain"), os.path.join(args.work, "packed")
for d in (plain_dir, packed_dir):
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "input_ids.npy"), ids)
    np.save(os.path.join(d, "labels.npy"), ids)
np.save(os.path.join(packed_dir, "position_ids.npy"),
        np.tile(np.arange(S), (steps, B, 1)).astype(np.int64))
cu = np.full(B * S + 1, B * S, dtype=np.int32)
cu[:B + 1] = np.arange(B + 1) * S
np.save(os.path.join(packed_dir, "cu_seqlens.npy"), np.tile(cu, (steps, 1)))
results = {}
for name, d, flags in (("plain", plain_dir, []), ("packed", packed_dir, packed)):
    log = os.path.join(d, "train.jsonl")
    run(args.mlc, "train", MODEL, *common, *flags, "--batches", d, "--steps", str(steps),
        "--lr", str(LR), "--lr-schedule", "constant", "--log-json", log, "--log-every", "100")
    results[name] = losses_of(log)
worst = worst_rel(results["packed"], results["plain"], steps, "without EOD, packed against plain",
                  1e-6)
print(f"no EOD: packed and plain losses over {steps} steps, max rel diff {worst:.2e}")

# Generation from a packed package: one document per row, the plain model's text.
texts = [run(args.mlc, "generate", MODEL, *common, *flags, "--prompt", "abc", "--max-tokens",
             "12", "--temperature", "0").stdout for flags in ([], packed)]
print(f"generate: packed and plain greedy text {'agree' if texts[0] == texts[1] else 'differ'}")
if texts[0] != texts[1] or not texts[0]:
    failures.append(f"greedy generation differs: plain {texts[0]!r}, packed {texts[1]!r}")

if failures:
    print("PACKED DOCUMENTS FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PACKED DOCUMENTS OK")
