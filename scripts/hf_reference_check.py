"""On the device machine: HuggingFace transformers against mlc's outputs.

Loads GPT2LMHeadModel and BertForMaskedLM from configs (no download), the
weights mlc used (safetensors, HF names, strict: only the tied output layers
may be absent), computes logits and loss for the same batch on the CPU in
f32 with eager attention, and prints the largest relative differences to
what mlc computed. See scripts/hf_reference_prepare.py.
"""

import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

root = sys.argv[1]
m = json.load(open(os.path.join(root, "meta.json")))
ok = True
for name in ("gpt2", "bert"):
    d = os.path.join(root, name)
    if name == "gpt2":
        cfg = GPT2Config(vocab_size=m["V"], n_positions=32, n_embd=m["E"], n_layer=m["L"],
                         n_head=m["H"], resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
        model = GPT2LMHeadModel(cfg)
    else:
        cfg = BertConfig(vocab_size=m["V"], hidden_size=m["E"], num_hidden_layers=m["L"],
                         num_attention_heads=m["H"], intermediate_size=m["I"],
                         max_position_embeddings=32, hidden_dropout_prob=0,
                         attention_probs_dropout_prob=0)
        model = BertForMaskedLM(cfg)
    model.config._attn_implementation = "eager"
    weights = load_file(os.path.join(d, "weights.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = {"lm_head.weight", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    missing = [k for k in missing if k not in tied and "position_ids" not in k]
    model.tie_weights()
    model.eval()
    inputs = {k: torch.from_numpy(np.load(os.path.join(d, k + ".npy")))
              for k in ("input_ids", "token_type_ids", "attention_mask", "labels")
              if os.path.exists(os.path.join(d, k + ".npy"))}
    with torch.no_grad():
        out = model(**inputs)
    ours = np.load(os.path.join(d, "mlc", "logits.npy"))
    theirs = out.logits.numpy()
    rel = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
    loss_rel = float(abs(np.load(os.path.join(d, "mlc", "loss.npy")) - out.loss.item()) /
                     abs(out.loss.item()))
    good = not missing and not unexpected and rel < 1e-4 and loss_rel < 1e-4
    ok &= good
    print(f"{name}: transformers {__import__('transformers').__version__} vs mlc: logits max rel "
          f"diff {rel:.2e}, loss rel diff {loss_rel:.2e}, missing {missing}, unexpected "
          f"{unexpected} -> {'OK' if good else 'MISMATCH'}")
print("HF REFERENCE OK" if ok else "HF REFERENCE MISMATCH")
