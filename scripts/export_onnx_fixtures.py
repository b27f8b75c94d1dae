"""Exports the ONNX fixtures that mlc's importer tests use.

Tiny, randomly initialized HuggingFace models (no downloaded weights):
GPT2LMHeadModel and BertForMaskedLM, exported with torch.onnx.export at
opsets 14 and 17, in eval mode (dropout gone, equal initializers merged by
the exporter) and training mode (Dropout nodes with training_mode), with a
loss output (labels as an input) or logits only. Batch and sequence are
symbolic dims ("batch", "sequence").

  python scripts/export_onnx_fixtures.py OUT_DIR
  python scripts/export_onnx_fixtures.py --corpus fuzz/corpus/onnx
  python scripts/export_onnx_fixtures.py --opset18 test/onnx/Inputs   # onnx >= 1.14

needs transformers 4.38.2 beside PyTorch (the test venv has both). Each
model's HF config goes beside it as NAME.json, so that tests rebuild the
PyTorch model from the config and the ONNX initializers.

Exports from today's stack (issue 23; test/onnx/Inputs/modern, README.md
there): torch >= 2.9's default dynamo exporter on transformers 5.x, made in a
side venv that CI never needs (the files are committed), with their torch
references (logits, 10 AdamW steps, weights in HF names) and INVENTORY.md:

  /usr/bin/python3 -m venv /work/modern-venv
  /work/modern-venv/bin/pip install torch transformers onnx onnxscript onnxruntime numpy safetensors
  /work/modern-venv/bin/python scripts/export_onnx_fixtures.py --modern test/onnx/Inputs/modern

and the Llama family (tiny LlamaForCausalLM, Qwen2ForCausalLM and
Phi3ForCausalLM with partial rotary; the other families' files and
INVENTORY.md sections stay as they are):

  /work/modern-venv/bin/python scripts/export_onnx_fixtures.py --modern --families=llama,qwen2 test/onnx/Inputs/modern
  /work/modern-venv/bin/python scripts/export_onnx_fixtures.py --modern --families=phi3 test/onnx/Inputs/modern

then, with the test venv (torch 1.13), TorchScript re-exports of the same
weights that today's importer takes, checked against those references by
test/onnx/modern-references.test:

  build/venv/bin/python scripts/export_onnx_fixtures.py --modern-torchscript test/onnx/Inputs/modern
"""

import copy
import os
import sys

import numpy as np

try:  # not needed by --opset18 (--modern: the side venv's torch and transformers)
    import torch
    import transformers
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
except ImportError:
    torch = None
try:  # --modern only (transformers >= 4.40)
    from transformers import Phi3Config, Phi3ForCausalLM
except ImportError:
    Phi3ForCausalLM = None

B, S = 2, 16


SIZE = {"vocab": 256, "positions": 64, "hidden": 64, "layers": 2, "heads": 4}


def gpt2(dropout):
    cfg = GPT2Config(vocab_size=SIZE["vocab"], n_positions=SIZE["positions"],
                     n_embd=SIZE["hidden"], n_layer=SIZE["layers"], n_head=SIZE["heads"],
                     resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                     use_cache=False)
    return GPT2LMHeadModel(cfg)


def bert(dropout):
    cfg = BertConfig(vocab_size=SIZE["vocab"], hidden_size=SIZE["hidden"],
                     num_hidden_layers=SIZE["layers"], num_attention_heads=SIZE["heads"],
                     intermediate_size=4 * SIZE["hidden"],
                     max_position_embeddings=SIZE["positions"], hidden_dropout_prob=dropout,
                     attention_probs_dropout_prob=dropout)
    return BertForMaskedLM(cfg)


def export(out_dir, name, family, opset, training, labels, dropout, fold, seed):
    torch.manual_seed(seed)
    model = gpt2(dropout) if family == "gpt2" else bert(dropout)
    model.config.return_dict = False
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, SIZE["vocab"], (B, S), generator=g)
    # Keyword arguments in the order of the model's forward signature, which
    # is the order of the graph's inputs.
    if family == "gpt2":
        kwargs = {"labels": ids.clone()} if labels else {}
    else:
        mask = torch.ones(B, S, dtype=torch.int64)
        mask[-1, S * 2 // 3:] = 0
        lab = torch.where(torch.rand(B, S, generator=g) < 0.3, ids, torch.full_like(ids, -100))
        kwargs = {"attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
        if labels:
            kwargs["labels"] = lab
    names = ["input_ids"] + list(kwargs)
    outputs = (["loss"] if labels else []) + ["logits"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["logits"] = {0: "batch", 1: "sequence"}
    model.train(training)
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, (ids, kwargs), path, input_names=names,
                      output_names=outputs, dynamic_axes=axes, opset_version=opset,
                      training=mode, do_constant_folding=fold)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        f.write(model.config.to_json_string())
    print(f"{path}: {os.path.getsize(path)} bytes")


FIXTURES = [
    # name, family, opset, training, labels, dropout, constant folding.
    # Constant folding (the exporter's default) folds the transposes of
    # Linear weights into new initializers named onnx::MatMul_N, which unties
    # tied weights; exports meant for training keep it off.
    ("gpt2-lm-opset14-eval", "gpt2", 14, False, True, 0.1, False),
    ("gpt2-logits-opset17-eval", "gpt2", 17, False, False, 0.1, False),
    ("gpt2-lm-opset17-train", "gpt2", 17, True, True, 0.1, False),
    ("bert-mlm-opset14-eval", "bert", 14, False, True, 0.1, False),
    ("bert-logits-opset17-eval", "bert", 17, False, False, 0.1, True),
    ("bert-mlm-opset17-train", "bert", 17, True, True, 0.1, False),
]

# Opset 18 (axes as inputs) from PyTorch 1.13, whose exporter stops at 17:
# onnx's version converter, which needs onnx >= 1.14 (Debian has 1.12; a
# venv with `pip install onnx==1.16.2` runs this step).
OPSET18 = [("bert-mlm-opset14-eval", "bert-mlm-opset18-eval"),
           ("gpt2-lm-opset17-train", "gpt2-lm-opset18-train")]


def convert_to_opset18(out_dir):
    import shutil
    import onnx
    from onnx import version_converter
    if tuple(int(x) for x in onnx.__version__.split(".")[:2]) < (1, 14):
        print(f"opset 18 fixtures skipped: onnx {onnx.__version__} < 1.14")
        return
    for src, dst in OPSET18:
        m = version_converter.convert_version(onnx.load(os.path.join(out_dir, src + ".onnx")), 18)
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out_dir, dst + ".onnx"))
        shutil.copy(os.path.join(out_dir, src + ".json"), os.path.join(out_dir, dst + ".json"))
        print(f"{dst}.onnx: converted from {src}")


# ---------------------------------------------------------------------------
# --modern OUT_DIR: exports from today's stack (torch >= 2.9's default dynamo
# exporter, transformers 5.x), with their references. Run it with a side
# venv's python (never the test venv):
#
#   /usr/bin/python3 -m venv /work/modern-venv
#   /work/modern-venv/bin/pip install torch transformers onnx onnxscript \
#       onnxruntime numpy safetensors
#   /work/modern-venv/bin/python scripts/export_onnx_fixtures.py --modern test/onnx/Inputs/modern
#
# Per family (gpt2, bert; llama, qwen2, phi3 with --families), one seeded
# random model exported several ways (Llama and Qwen2: opset20, -noopt,
# opset23; Phi3: opset20, opset23):
#   FAMILY-dynamo-opset20         the default: opset 20, onnx optimizer on
#   FAMILY-dynamo-opset20-noopt   optimize=False (HF names on every parameter)
#   FAMILY-dynamo-opset18         opset_version=18
#   FAMILY-dynamo-opset23         opset_version=23
#   gpt2-dynamo-opset20-extdata   external_data=True (initializers in .onnx.data)
# each with NAME.json (versions, opset, shapes, onnxruntime's agreement, the
# initializer <-> HF name map) and NAME.nodes.txt (the graph, a node a line).
# Shared by a family's exports (same weights):
#   FAMILY-dynamo-ref.npz     input ids and torch logits at the exported shape
#                             and a smaller one; the 10 training batches and
#                             torch's AdamW losses
#   FAMILY-dynamo-init.safetensors / -trained.safetensors
#                             the weights (HF state_dict names, strict-loadable)
#                             before and after the 10 AdamW steps
#   FAMILY-dynamo-config.json the HF config
# INVENTORY.md: ops, opsets, int/bool computations of every export.
# ---------------------------------------------------------------------------

MODERN_SIZE = {"vocab": 256, "positions": 64, "hidden": 64, "layers": 2, "heads": 4}
MODERN_SHAPES = {"export": (2, 16), "small": (1, 8)}
# The training reference: mlc train's AdamW (decoupled decay on rank >= 2
# parameters only, global gradient-norm clipping, constant lr), i.e.
#   mlc train NAME.onnx --loss causal-lm|masked-lm --batches DIR --steps 10
#     --lr 1e-3 --lr-schedule constant --weight-decay 0.01 --beta1 0.9
#     --beta2 0.999 --eps 1e-8 --clip-grad 1.0
MODERN_ADAMW = {"steps": 10, "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01,
                "clip_grad_norm": 1.0, "lr_schedule": "constant", "warmup": 0,
                "decay": "parameters of rank >= 2 (matrices); biases, LayerNorm weights and biases "
                         "get weight_decay 0 (mlc's convention, test/integration/Inputs/"
                         "torch_models.py adamw)"}
MODERN_VARIANTS = [
    # suffix, torch.onnx.export keyword arguments
    ("opset20", {}),
    ("opset20-noopt", {"optimize": False}),
    ("opset18", {"opset_version": 18}),
    ("opset23", {"opset_version": 23}),
]
MASK_ID = MODERN_SIZE["vocab"] - 1  # BERT's stand-in [MASK] token


# The Llama family (decoder only, causal LM like GPT-2, input_ids only): a
# tiny LlamaForCausalLM (untied head, no biases) and Qwen2ForCausalLM (tied
# embeddings, q/k/v biases), both with grouped-query attention (4 query heads
# over 2 key/value heads, head_dim 16), RoPE theta 10000 and RMSNorm eps 1e-5.
# They export at the default opset 20 (optimize on and off) and at 23.
# Phi3ForCausalLM (fused qkv_proj and gate_up_proj, untied head) is the same
# size with partial rotary (Phi-4-mini's partial_rotary_factor 0.75: the
# first 12 of each head's 16 features rotate, the last 4 pass), exported at
# opsets 20 and 23 (whose RotaryEmbedding reads the sliced 12 features: the
# exporter writes no rotary_embedding_dim).
MODERN_LLAMA_SIZE = {"intermediate": 128, "kv_heads": 2, "rope_theta": 10000.0, "eps": 1e-5,
                     "partial_rotary_factor": 0.75}
MODERN_LLAMA_VARIANTS = [("opset20", {}), ("opset20-noopt", {"optimize": False}),
                         ("opset23", {"opset_version": 23})]
MODERN_PHI3_VARIANTS = [("opset20", {}), ("opset23", {"opset_version": 23})]
# Every other decoder family transformers ships, each a tiny random model of
# the same size at its own defaults (transformers 5.x): its own config class
# and *ForCausalLM, exported at opset 20 with the onnx optimizer on (the
# default) and off. What each adds to the Llama layer:
#   mistral      sliding_window 64 (>= any sequence the fixtures use)
#   mistral-swa  sliding_window 8 (< the export's sequence of 16)
#   qwen3        RMSNorm of q and k per head; tied embeddings
#   gemma        RMSNorm scaled by 1 + w, GeGLU (tanh GELU), embeddings x sqrt(E)
#   gemma2       sandwich norms, query_pre_attn_scalar, attention-logit and
#                final-logit soft-capping
#   olmo         LayerNorm without weight or bias
#   olmo2        post-norms, q/k RMSNorm over the whole projection
#   gptneox      parallel residual, LayerNorm with bias, rotary on 1/4 of a head
#   smollm3      layers without rotary (no_rope_layer_interval 2)
#   stablelm     LayerNorm with bias, partial rotary
#   falcon       multi-query attention, parallel attention + MLP, LayerNorm
FAMILY_CONFIGS = {
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 64}),
    "mistral-swa": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 8}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16, "tie_word_embeddings": True}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 16}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 16}),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}),
    "gptneox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"intermediate_size": 256}),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {"no_rope_layer_interval": 2,
                                                       "pad_token_id": None}),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {}),
    "falcon": ("FalconConfig", "FalconForCausalLM", {}),
}
FAMILY_VARIANTS = [("opset20", {}), ("opset20-noopt", {"optimize": False})]
MODERN_FAMILIES = ("gpt2", "bert", "llama", "qwen2", "phi3") + tuple(FAMILY_CONFIGS)
LLAMA_FAMILIES = ("llama", "qwen2", "phi3") + tuple(FAMILY_CONFIGS)
# Beside the fresh models (HF's own initialization: every norm weight 1,
# every bias 0, as a user trains from scratch), a pretrained-like variant of
# these: every vector parameter perturbed by N(0, 0.1), so that none is 0 or
# 1 and no two are equal (FAMILY-perturbed-dynamo-opset20). GPT-NeoX's: its
# two LayerNorms of one input then differ, so the default export merges
# neither them nor their initializers, and trains.
PERTURBED_FAMILIES = ("gpt2", "bert", "llama", "gptneox")


def modern_llama_config(family):
    """The HF config of the tiny Llama, Qwen2 or Phi3; the same keywords
    build Llama's and Qwen2's in transformers 4.38.2 (the test venv) and 5.x."""
    z, l = MODERN_SIZE, MODERN_LLAMA_SIZE
    common = dict(vocab_size=z["vocab"], hidden_size=z["hidden"],
                  intermediate_size=l["intermediate"], num_hidden_layers=z["layers"],
                  num_attention_heads=z["heads"], num_key_value_heads=l["kv_heads"],
                  max_position_embeddings=z["positions"], rms_norm_eps=l["eps"],
                  rope_theta=l["rope_theta"], hidden_act="silu", attention_dropout=0.0,
                  use_cache=False, bos_token_id=0, eos_token_id=0)
    if family == "llama":
        return LlamaConfig(tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                           **common)
    if family == "phi3":
        return Phi3Config(tie_word_embeddings=False, resid_pdrop=0.0, embd_pdrop=0.0,
                          partial_rotary_factor=l["partial_rotary_factor"],
                          original_max_position_embeddings=z["positions"], pad_token_id=None,
                          **common)
    return Qwen2Config(tie_word_embeddings=True, use_sliding_window=False, **common)


def family_model(family):
    """A tiny random model of one of FAMILY_CONFIGS (transformers 5.x)."""
    z, l = MODERN_SIZE, MODERN_LLAMA_SIZE
    cfg_name, model_name, extra = FAMILY_CONFIGS[family]
    kw = dict(vocab_size=z["vocab"], hidden_size=z["hidden"], num_hidden_layers=z["layers"],
              num_attention_heads=z["heads"], max_position_embeddings=z["positions"],
              use_cache=False, bos_token_id=0, eos_token_id=0)
    if family != "falcon":
        kw["intermediate_size"] = l["intermediate"]
    if family not in ("gptneox", "falcon"):
        kw["num_key_value_heads"] = l["kv_heads"]
    kw.update(extra)
    cfg = getattr(transformers, cfg_name)(**kw)
    for k in ("attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop"):
        if hasattr(cfg, k):
            setattr(cfg, k, 0.0)
    return getattr(transformers, model_name)(cfg)


def modern_model(family):
    z = MODERN_SIZE
    if family in FAMILY_CONFIGS:
        return family_model(family)
    if family in LLAMA_FAMILIES:
        cfg = modern_llama_config(family)
        return {"llama": LlamaForCausalLM, "qwen2": Qwen2ForCausalLM,
                "phi3": Phi3ForCausalLM}[family](cfg)
    if family == "gpt2":
        cfg = GPT2Config(vocab_size=z["vocab"], n_positions=z["positions"], n_embd=z["hidden"],
                         n_layer=z["layers"], n_head=z["heads"], resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0, summary_first_dropout=0.0, use_cache=False,
                         bos_token_id=0, eos_token_id=0)
        return GPT2LMHeadModel(cfg)
    cfg = BertConfig(vocab_size=z["vocab"], hidden_size=z["hidden"], num_hidden_layers=z["layers"],
                     num_attention_heads=z["heads"], intermediate_size=4 * z["hidden"],
                     max_position_embeddings=z["positions"], hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, pad_token_id=0)
    return BertForMaskedLM(cfg)


def modern_batch(family, g, B, S):
    """One batch of int64 inputs (torch tensors) in forward-signature order,
    plus its labels: input_ids for GPT-2 (HF and mlc shift them), for BERT the
    original token at ~30% of the unpadded positions (their inputs replaced by
    MASK_ID), -100 elsewhere."""
    V = MODERN_SIZE["vocab"]
    ids = torch.randint(1, V - 1, (B, S), generator=g)
    if family != "bert":  # causal LMs: the labels are the inputs (HF shifts them)
        return {"input_ids": ids}, ids.clone()
    mask = torch.ones(B, S, dtype=torch.int64)
    mask[-1, S * 3 // 4:] = 0  # the last sequence is padded
    chosen = (torch.rand(B, S, generator=g) < 0.3) & (mask == 1)
    chosen[0, 1] = True  # never an empty loss
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    inputs = torch.where(chosen, torch.full_like(ids, MASK_ID), ids)
    types = torch.zeros_like(ids)
    types[:, S // 2:] = 1
    types[mask == 0] = 0
    return {"input_ids": inputs, "attention_mask": mask, "token_type_ids": types}, labels


def modern_references(family, seed, perturbed=False):
    """The model at its initial weights, its logits at both shapes, and 10
    AdamW steps in torch (losses, gradient norms, trained weights).
    `perturbed`: the pretrained-like variant (PERTURBED_FAMILIES)."""
    torch.manual_seed(seed)
    model = modern_model(family).eval()
    if perturbed:
        # HF initializes biases to 0 and norm weights to 1 (and the default
        # exporter then merges the equal ones): perturb every vector so that
        # none is 0 or 1 and each is distinct, as in a trained model.
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() < 2:
                    p.add_(0.1 * torch.randn_like(p))
    init = copy.deepcopy(model.state_dict())
    g = torch.Generator().manual_seed(seed + 1)
    ref = {}
    batches = {}
    for tag, (B, S) in MODERN_SHAPES.items():
        b, labels = modern_batch(family, g, B, S)
        with torch.no_grad():
            ref[tag + "_logits"] = model(**b).logits.numpy().astype(np.float32)
        for k, v in b.items():
            ref[f"{tag}_{k}"] = v.numpy()
        batches[tag] = b
    B, S = MODERN_SHAPES["export"]
    steps = [modern_batch(family, g, B, S) for _ in range(MODERN_ADAMW["steps"])]
    for k in steps[0][0]:
        ref["train_" + k] = np.stack([s[0][k].numpy() for s in steps])
    ref["train_labels"] = np.stack([s[1].numpy() for s in steps])

    # Training: dropout is 0 in the config, so train mode is deterministic.
    trained = copy.deepcopy(model).train()
    params = dict(trained.named_parameters())  # tied weights appear once
    a = MODERN_ADAMW
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a["lr"], betas=tuple(a["betas"]), eps=a["eps"])
    losses, norms = [], []
    for b, labels in steps:
        opt.zero_grad()
        loss = trained(**b, labels=labels).loss
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(list(params.values()),
                                                          a["clip_grad_norm"])))
        opt.step()
        losses.append(loss.item())
    ref["train_losses"] = np.array(losses, dtype=np.float64)
    ref["train_grad_norms"] = np.array(norms, dtype=np.float64)
    trained_state = {k: v.detach().clone() for k, v in trained.state_dict().items()}
    return model, init, trained_state, ref, batches


# The Llama-family files are kept small (all of them together ~6 MB) by
# dropping one node metadata entry, the Python stack trace of each node
# (~30% of a file; it names the exporting machine's paths). Importers never
# read it; the rest of the metadata stays.
MODERN_STRIPPED = "node metadata_props 'pkg.torch.onnx.stack_trace' removed after export"


def modern_strip_stack_traces(path):
    import onnx
    m = onnx.load(path)
    for n in m.graph.node:
        keep = [(p.key, p.value) for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del n.metadata_props[:]
        for k, v in keep:
            n.metadata_props.add(key=k, value=v)
    onnx.save(m, path)


def modern_buffers(proto):
    """Initializers that torch.export's graph signature (graph metadata
    `pkg.torch.export.ExportedProgram.graph_signature`) calls BUFFER."""
    import re
    text = next((p.value for p in proto.graph.metadata_props
                 if p.key == "pkg.torch.export.ExportedProgram.graph_signature"), "")
    targets = set(re.findall(r": BUFFER target='([^']*)'", text))
    return sorted(t.name for t in proto.graph.initializer if t.name in targets)


def modern_export(model, family, path, batch, kwargs):
    """torch.onnx.export as today's users call it: the HF model itself, the
    default dynamo exporter, symbolic batch and sequence."""
    batch_dim = torch.export.Dim("batch")
    seq_dim = torch.export.Dim("sequence", max=MODERN_SIZE["positions"])
    shapes = {k: {0: batch_dim, 1: seq_dim} for k in batch}
    prog = torch.onnx.export(model, (), kwargs=dict(batch), dynamic_shapes=shapes,
                             input_names=list(batch), output_names=["logits"], dynamo=True,
                             **kwargs)
    return prog


def modern_export_and_save(model, family, path, side, batch, kwargs, meta):
    """One variant's export, saved as it asks (external data, a side file of
    another name); the Llama family's without node stack traces."""
    import onnx
    prog = modern_export(model, family, path, batch,
                         {k: v for k, v in kwargs.items() if k != "_save"})
    if kwargs.get("external_data"):
        prog.save(path, external_data=True)
    elif "_save" in kwargs:
        onnx.save_model(prog.model_proto, path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=os.path.basename(side),
                        size_threshold=64)
    else:
        prog.save(path)
    if family in LLAMA_FAMILIES:
        modern_strip_stack_traces(path)
        meta["stripped"] = MODERN_STRIPPED


def tensor_type(t):
    import onnx
    if not t.HasField("tensor_type"):
        return str(t)
    tt = t.tensor_type
    dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?")
            for d in tt.shape.dim] if tt.HasField("shape") else None
    et = onnx.TensorProto.DataType.Name(tt.elem_type).lower()
    return et + ("[" + ",".join(dims) + "]" if dims is not None else "[unranked]")


def attr_text(a):
    import onnx
    from onnx import helper
    v = helper.get_attribute_value(a)
    if a.type == onnx.AttributeProto.TENSOR:
        arr = onnx.numpy_helper.to_array(v)
        return f"{a.name}=tensor<{arr.dtype}{list(arr.shape)}>" + (
            f"({arr.reshape(-1)[:4].tolist()})" if arr.size <= 4 else "")
    if a.type == onnx.AttributeProto.GRAPH:
        return f"{a.name}=<graph>"
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, float):
        v = float(f"{v:.6g}")
    if a.name == "to":
        v = onnx.TensorProto.DataType.Name(v).lower()
    return f"{a.name}={v}"


def modern_inventory(path, name, state):
    """The graph of one export: its op inventory (INVENTORY.md's section),
    its node list (NAME.nodes.txt), and its initializer <-> HF name map."""
    import collections
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    g = m.graph
    types = {}
    # Values the file gives no type: onnx's shape inference's, marked "~".
    try:
        inferred = onnx.shape_inference.infer_shapes(m).graph.value_info
    except Exception:  # noqa: BLE001 (the listing then shows "?")
        inferred = []
    for vi in inferred:
        types[vi.name] = tensor_type(vi.type) + "~"
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        types[vi.name] = tensor_type(vi.type)
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n, a in inits.items():
        types[n] = f"{a.dtype}{list(a.shape)}".replace("float32", "float").replace(" ", "")
    # Initializer <-> HF state_dict: equal (or transposed) tensors.
    hf = {k: v.numpy() for k, v in state.items()}
    init_map, unmatched_init = {}, []
    matched_hf = set()
    for n, a in inits.items():
        hit, rel = [], None
        if a.dtype == np.float32 and a.ndim >= 1 and a.size > 1:
            for k, v in hf.items():
                if v.shape == a.shape and np.array_equal(v, a):
                    hit.append(k)
                    rel = "equal"
                elif v.ndim == 2 and v.T.shape == a.shape and np.array_equal(v.T, a):
                    hit.append(k)
                    rel = "transposed"
        matched_hf.update(hit)
        if hit:
            # hf: every state_dict name of that tensor (tied weights: all aliases)
            init_map[n] = {"hf": hit, "relation": rel, "shape": list(a.shape)}
        else:
            unmatched_init.append(n)
    # A state_dict entry whose tensor is another's (tied) matches it too.
    hf_unmatched = [k for k in hf if k not in matched_hf]

    rows = collections.Counter()
    attrs = collections.defaultdict(set)
    intbool = collections.Counter()
    lines = []
    # Which values depend on the graph inputs' values (not only on their
    # shapes: Shape's output does not): int/bool ones among them are what an
    # importer cannot evaluate once it has fixed the shapes.
    by_value = {i.name for i in g.input if i.name not in inits}
    consumers = collections.defaultdict(list)
    value_intbool = collections.Counter()
    for node in g.node:
        key = (node.domain or "ai.onnx", node.op_type)
        rows[key] += 1
        sig = " ".join(attr_text(a) for a in node.attribute)
        if sig:
            attrs[key].add(sig)
        outs = [types.get(o, "?") for o in node.output]
        is_intbool = any(t.startswith(("int", "bool", "uint")) for t in outs)
        if is_intbool:
            intbool[key] += 1
        for i in node.input:
            if i in by_value and i in {x.name for x in g.input}:
                consumers[i].append(node.op_type)
        if node.op_type != "Shape" and any(i in by_value for i in node.input):
            by_value.update(node.output)
            if is_intbool:
                value_intbool[node.op_type] += 1
        ins = ", ".join(f"{i}:{types.get(i, '?')}" if i else "<none>" for i in node.input)
        lines.append(f"{node.op_type}{'[' + node.domain + ']' if node.domain else ''}"
                     f"({ins}) -> {', '.join(node.output)}:{', '.join(outs)}"
                     + (f"  {{{sig}}}" if sig else ""))
    with open(path[:-len(".onnx")] + ".nodes.txt", "w") as f:
        f.write(f"# {name}: {len(g.node)} nodes, node order as stored; NAME:TYPE\n")
        for i in g.input:
            f.write(f"input {i.name}:{tensor_type(i.type)}\n")
        for o in g.output:
            f.write(f"output {o.name}:{tensor_type(o.type)}\n")
        for n, a in inits.items():
            tag = init_map.get(n)
            val = f" = {a.reshape(-1)[:6].tolist()}" if a.size <= 6 else ""
            f.write(f"initializer {n}:{types[n]}{val}"
                    + (f"  (HF {' = '.join(tag['hf'])}, {tag['relation']})" if tag else "") + "\n")
        f.write("\n".join(lines) + "\n")
        for fn in m.functions:
            f.write(f"\nfunction {fn.domain}::{fn.name}({', '.join(fn.input)}) -> "
                    f"{', '.join(fn.output)}\n")
            for node in fn.node:
                f.write(f"  {node.op_type}({', '.join(node.input)}) -> {', '.join(node.output)}\n")

    md = [f"## {name}", ""]
    raw = onnx.load(path, load_external_data=False)
    ext = collections.Counter(
        next(e.value for e in t.external_data if e.key == "location")
        for t in raw.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    inline = sum(1 for t in raw.graph.initializer
                 if t.data_location != onnx.TensorProto.EXTERNAL)
    md.append(f"- file: `{os.path.basename(path)}` ({os.path.getsize(path)} bytes"
              + "".join(f", {c} initializers in external data `{loc}` "
                        f"({os.path.getsize(os.path.join(os.path.dirname(path), loc))} bytes), "
                        f"{inline} inline" for loc, c in ext.items())
              + f"), ir_version {m.ir_version}, producer {m.producer_name} {m.producer_version}")
    md.append("- opset_import: " + ", ".join(f"`{o.domain or 'ai.onnx'}` {o.version}"
                                             for o in m.opset_import))
    md.append("- inputs: " + ", ".join(f"`{i.name}: {tensor_type(i.type)}`" for i in g.input))
    md.append("- outputs: " + ", ".join(f"`{o.name}: {tensor_type(o.type)}`" for o in g.output))
    consts = [n for n in unmatched_init]
    md.append(f"- initializers: {len(inits)}: {len(init_map)} parameters (HF tensors, "
              f"{sum(1 for v in init_map.values() if v['relation'] == 'transposed')} of them "
              f"transposed), {len(consts)} constants"
              + (f"; HF state_dict entries with no initializer: {', '.join(hf_unmatched)}"
                 if hf_unmatched else ""))
    md.append("- graph inputs' direct consumers: " + "; ".join(
        f"`{i}` -> " + ", ".join(f"{op} x{c}" if c > 1 else op
                                 for op, c in collections.Counter(ops).items())
        for i, ops in consumers.items()))
    md.append("- int/bool nodes computed from input *values* (not foldable once shapes are "
              "fixed): " + (", ".join(f"{op} x{c}" for op, c in sorted(value_intbool.items()))
                            or "none (all int/bool work derives from shapes and constants)"))
    md.append(f"- nodes: {len(g.node)}; value_info: {len(g.value_info)}; local functions: "
              f"{len(m.functions)}"
              + (" (" + ", ".join(f"{f.domain}::{f.name}" for f in m.functions) + ")"
                 if m.functions else ""))
    md.append("")
    md.append("| domain | op_type | count | int/bool outputs | attributes (distinct) |")
    md.append("|---|---|---|---|---|")
    for (dom, op), c in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        at = "; ".join(sorted(attrs[(dom, op)]))
        md.append(f"| {dom} | {op} | {c} | {intbool[(dom, op)] or ''} | {at} |")
    md.append("")
    return "\n".join(md), init_map, consts, hf_unmatched, m


def modern_check_ort(path, ref, family, names):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    out = {}
    for tag in MODERN_SHAPES:
        feed = {n: ref[f"{tag}_{n}"] for n in names}
        try:
            got = sess.run(["logits"], feed)[0]
        except Exception as e:  # noqa: BLE001 (onnxruntime refuses a node: record it)
            out[tag] = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:400]}
            continue
        want = ref[tag + "_logits"]
        diff = float(np.max(np.abs(got - want)))
        out[tag] = {"max_abs_diff": diff, "max_rel_diff": diff / float(np.max(np.abs(want)))}
    return out


def modern_inventory_merge(path, header, text):
    """INVENTORY.md: HEADER, then the file's `## NAME` sections with those in
    TEXT (just generated) in place of the ones of the same name and new ones
    appended: a run for some families leaves the others' sections as they
    were (a run for all rewrites the file byte for byte)."""
    import re

    def sections(t):
        return {p.split("\n", 1)[0]: p for p in re.split(r"(?m)^(?=## )", t) if
                p.startswith("## ")}
    old = open(path).read() if os.path.exists(path) else ""
    kept, new = sections(old), sections(text)
    body = "".join(new.get(k, kept.get(k)) for k in list(kept) + [k for k in new if k not in kept])
    return "\n".join(header) + "\n" + body


def modern(out_dir, families=("gpt2", "bert"), perturbed=False):
    import hashlib
    import json
    import onnx
    import onnxruntime
    import onnxscript
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "onnx": onnx.__version__, "onnxscript": onnxscript.__version__,
                "onnxruntime": onnxruntime.__version__, "numpy": np.__version__,
                "python": sys.version.split()[0]}
    print(versions)
    inventory = ["# ONNX exports from today's stack: op inventory", "",
                 "Generated by `scripts/export_onnx_fixtures.py --modern` (see its docstring) "
                 "with " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".", "",
                 "`int/bool outputs`: how many of the op's nodes produce an integer or bool "
                 "tensor (shape arithmetic, masks, indices). The per-node listing of each "
                 "export is NAME.nodes.txt beside it; what stands out is in README.md.", ""]
    header = list(inventory)
    for family in families:
        seed = 2000 + MODERN_FAMILIES.index(family)
        model, init, trained, ref, batches = modern_references(family, seed, perturbed)
        base = f"{family}-perturbed-dynamo" if perturbed else f"{family}-dynamo"
        np.savez(os.path.join(out_dir, base + "-ref.npz"), **ref)
        tied = {}
        by_ptr = {}
        for k, v in model.state_dict().items():
            by_ptr.setdefault(v.data_ptr(), []).append(k)
        tied = [ks for ks in by_ptr.values() if len(ks) > 1]
        save_file({k: v.clone().contiguous() for k, v in init.items()},
                  os.path.join(out_dir, base + "-init.safetensors"))
        save_file({k: v.clone().contiguous() for k, v in trained.items()},
                  os.path.join(out_dir, base + "-trained.safetensors"))
        with open(os.path.join(out_dir, base + "-config.json"), "w") as f:
            f.write(model.config.to_json_string())
        names = list(batches["export"])
        variants = list({"phi3": MODERN_PHI3_VARIANTS}.get(family, MODERN_LLAMA_VARIANTS)
                        if family in LLAMA_FAMILIES else MODERN_VARIANTS)
        if family in FAMILY_CONFIGS:
            variants = list(FAMILY_VARIANTS)
        if perturbed:
            variants = [("opset20", {})]
        elif family == "gpt2":
            variants.append(("opset20-extdata", {"external_data": True}))
            # Every parameter in a side file of another name. (size_threshold=0,
            # which moves the int64 shape constants too, makes a file that
            # onnxruntime 1.32 refuses: "Cannot parse data from external
            # tensors" in Unsqueeze's shape inference.)
            variants.append(("opset20-extdata-weights", {"_save": "onnx.save_model(proto, path, "
                             "save_as_external_data=True, all_tensors_to_one_file=True, "
                             "location=NAME.weights, size_threshold=64)"}))
        for suffix, kwargs in variants:
            name = f"{base}-{suffix}"
            path = os.path.join(out_dir, name + ".onnx")
            side = path + ".data" if kwargs.get("external_data") else (
                os.path.join(out_dir, name + ".weights") if "_save" in kwargs else None)
            for stale in (path, side):
                if stale and os.path.exists(stale):
                    os.remove(stale)
            meta = {"name": name, "family": family, "versions": versions,
                    "export_call": "torch.onnx.export(model, (), kwargs={" +
                    ", ".join(f'"{n}": {n}' for n in names) + "}, dynamic_shapes={...: {0: "
                    "Dim('batch'), 1: Dim('sequence', max=%d)}}, input_names=%s, "
                    "output_names=['logits'], dynamo=True%s)" % (
                        MODERN_SIZE["positions"], names,
                        "".join(f", {k}={v!r}" for k, v in kwargs.items() if k != "_save"))
                    + (", then " + kwargs["_save"] if "_save" in kwargs else ""),
                    "export_kwargs": kwargs}
            try:
                modern_export_and_save(model, family, path, side, batches["export"], kwargs,
                                       meta)
            except Exception as e:  # an opset the exporter refuses: say what happened
                meta["error"] = f"{type(e).__name__}: {e}"
                print(f"{name}: export failed: {meta['error']}")
                inventory += [f"## {name}", "", "Export failed: `" +
                              meta["error"].splitlines()[0][:500] + "`", ""]
                with open(os.path.join(out_dir, name + ".json"), "w") as f:
                    json.dump(meta, f, indent=1)
                continue
            md, init_map, consts, hf_unmatched, proto = modern_inventory(path, name, init)
            inventory.append(md)
            ort_res = modern_check_ort(path, ref, family, names)
            worst = max(r.get("max_rel_diff", 0.0) for r in ort_res.values())
            print(f"{name}: {os.path.getsize(path)} bytes; onnxruntime vs torch max rel diff "
                  f"{worst:.2e}")
            # onnxruntime 1.32 refuses opset 23's RotaryEmbedding as the exporter
            # writes it (cos/sin caches [batch, sequence, head_dim/2]): the
            # JSON records its message; every other export must agree.
            assert worst <= 1e-5 and all("error" not in r for r in ort_res.values()
                                         ) or family in LLAMA_FAMILIES, (name, ort_res)
            opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
            meta.update({
                "opset": opset,
                "opset_import": {o.domain or "ai.onnx": o.version for o in proto.opset_import},
                "optimized": kwargs.get("optimize", True),
                "external_data": os.path.basename(side) if side else None,
                "inputs": {i.name: tensor_type(i.type) for i in proto.graph.input},
                "outputs": {o.name: tensor_type(o.type) for o in proto.graph.output},
                "config": base + "-config.json",
                "reference": base + "-ref.npz",
                "reference_keys": {
                    "export_shape": list(MODERN_SHAPES["export"]),
                    "small_shape": list(MODERN_SHAPES["small"]),
                    "inputs": {tag: {n: f"{tag}_{n}" for n in names} for tag in MODERN_SHAPES},
                    "logits": {tag: tag + "_logits" for tag in MODERN_SHAPES},
                    "train_batches": {n: "train_" + n for n in names + ["labels"]},
                    "train_losses": "train_losses",
                    "train_grad_norms": "train_grad_norms (before clipping)"},
                "input_values": {tag: {n: ref[f"{tag}_{n}"].tolist() for n in names}
                                 for tag in MODERN_SHAPES},
                "logits_summary": {tag: {
                    "shape": list(ref[tag + "_logits"].shape),
                    "sha256_f32": hashlib.sha256(ref[tag + "_logits"].tobytes()).hexdigest(),
                    "max_abs": float(np.max(np.abs(ref[tag + "_logits"]))),
                    "first": ref[tag + "_logits"].reshape(-1)[:4].tolist()}
                    for tag in MODERN_SHAPES},
                "onnxruntime_vs_torch": ort_res,
                "loss": {"gpt2": "causal-lm: HF GPT2LMHeadModel(labels=input_ids): logits[:, :-1]"
                                 " against input_ids[:, 1:], mean cross entropy (mlc --loss "
                                 "causal-lm, labels input 'labels')",
                         "llama": "causal-lm: HF LlamaForCausalLM(labels=input_ids), as GPT-2",
                         "qwen2": "causal-lm: HF Qwen2ForCausalLM(labels=input_ids), as GPT-2",
                         "phi3": "causal-lm: HF Phi3ForCausalLM(labels=input_ids), as GPT-2",
                         **{f: f"causal-lm: HF {FAMILY_CONFIGS[f][1]}(labels=input_ids), as GPT-2"
                            for f in FAMILY_CONFIGS},
                         "bert": "masked-lm: HF BertForMaskedLM(labels=...): mean cross entropy "
                                 "over labels != -100, no shift (mlc --loss masked-lm, labels "
                                 "input 'labels'); inputs at labelled positions are "
                                 f"MASK_ID={MASK_ID}"}[family],
                "adamw": MODERN_ADAMW,
                "train_losses": ref["train_losses"].tolist(),
                "train_grad_norms": ref["train_grad_norms"].tolist(),
                "weights": {"init": base + "-init.safetensors",
                            "trained": base + "-trained.safetensors",
                            "names": "HF state_dict names (model.state_dict(), tied entries "
                                     "stored once each)",
                            "tied": tied},
                "initializer_to_hf": init_map,
                "hf_without_initializer": hf_unmatched,
                "constant_initializers": len(consts),
            })
            if family in LLAMA_FAMILIES:
                # Constants of the import (never trained, not in --save).
                meta["buffers"] = modern_buffers(proto)
            with open(os.path.join(out_dir, name + ".json"), "w") as f:
                json.dump(meta, f, indent=1)
            for p in (path, side):
                if p:
                    assert os.path.getsize(p) < 1.5e6, p
    inv_path = os.path.join(out_dir, "INVENTORY.md")
    merged = modern_inventory_merge(inv_path, header,
                                    "\n".join(inventory[len(header):]) + "\n")
    with open(inv_path, "w") as f:
        f.write(merged)
    print(f"{out_dir}/INVENTORY.md written")



def modern_torchscript(out_dir):
    """--modern-torchscript OUT_DIR (the test venv: torch 1.13, transformers
    4.38.2): the --modern models' initial weights exported by the TorchScript
    exporter that today's importer takes (opset 17, no constant folding), as
    FAMILY-torchscript-opset17.onnx with a NAME.json whose references are the
    dynamo fixtures' (same weights), so that modern_parity.py and its
    references are checked against today's mlc."""
    import json
    import onnx
    import onnxruntime
    from safetensors.torch import load_file
    torch.set_num_threads(1)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
                "numpy": np.__version__, "python": sys.version.split()[0]}
    for family in ("gpt2", "bert"):
        base = f"{family}-dynamo"
        src = json.load(open(os.path.join(out_dir, base + "-opset20-noopt.json")))
        model = modern_model(family)
        model.load_state_dict(load_file(os.path.join(out_dir, base + "-init.safetensors")),
                              strict=True)
        model.eval()
        model.config.return_dict = False
        ref = dict(np.load(os.path.join(out_dir, src["reference"])))
        names = list(src["inputs"])
        b = {n: torch.from_numpy(ref["export_" + n]) for n in names}
        with torch.no_grad():
            own = model(**b)[0].numpy()
        own_diff = float(np.max(np.abs(own - ref["export_logits"])) /
                         np.max(np.abs(ref["export_logits"])))
        name = f"{family}-torchscript-opset17"
        path = os.path.join(out_dir, name + ".onnx")
        axes = {n: {0: "batch", 1: "sequence"} for n in names + ["logits"]}
        torch.onnx.export(model, (b["input_ids"], {n: b[n] for n in names[1:]}), path,
                          input_names=names, output_names=["logits"], dynamic_axes=axes,
                          opset_version=17, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.EVAL)
        _, init_map, consts, hf_unmatched, proto = modern_inventory(path, name,
                                                                    model.state_dict())
        ort_res = modern_check_ort(path, ref, family, names)
        worst = max(r["max_rel_diff"] for r in ort_res.values())
        print(f"{name}: {os.path.getsize(path)} bytes; onnxruntime vs the stored torch 2.15 "
              f"logits: max rel diff {worst:.2e}; torch 1.13 vs them {own_diff:.2e}")
        assert worst <= 1e-5 and own_diff <= 1e-5
        meta = dict(src)
        meta.update({
            "name": name, "versions": versions,
            "export_call": "torch.onnx.export(model, (input_ids, {...}), path, input_names=%s, "
                           "output_names=['logits'], dynamic_axes={batch, sequence}, "
                           "opset_version=17, do_constant_folding=False, "
                           "training=TrainingMode.EVAL)" % names,
            "export_kwargs": {"exporter": "torchscript", "opset_version": 17,
                              "do_constant_folding": False},
            "opset": 17,
            "opset_import": {o.domain or "ai.onnx": o.version for o in proto.opset_import},
            "optimized": False, "external_data": None,
            "inputs": {i.name: tensor_type(i.type) for i in proto.graph.input},
            "outputs": {o.name: tensor_type(o.type) for o in proto.graph.output},
            "references_from": "the dynamo fixtures' (" + src["reference"] + ", torch " +
                               src["versions"]["torch"] + ", transformers " +
                               src["versions"]["transformers"] + "): the same weights",
            "torch_1_13_vs_reference_logits": own_diff,
            "onnxruntime_vs_torch": ort_res,
            "initializer_to_hf": init_map,
            "hf_without_initializer": hf_unmatched,
            "constant_initializers": len(consts),
        })
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(meta, f, indent=1)


if __name__ == "__main__":
    # --corpus: the same exports of minute models (a few KB), the ONNX fuzz
    # target's seed corpus (fuzz/corpus/onnx).
    corpus = "--corpus" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(paths) != 1:
        sys.exit(__doc__)
    if "--modern-torchscript" in sys.argv:
        assert transformers.__version__ == "4.38.2", transformers.__version__
        modern_torchscript(paths[0])
        sys.exit(0)
    if "--modern" in sys.argv:
        # --families llama,qwen2: only those (INVENTORY.md keeps the others)
        fam = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--families=")),
                   "gpt2,bert")
        if fam == "all":
            fam = ",".join(MODERN_FAMILIES)
        modern(paths[0], tuple(fam.split(",")), perturbed="--perturbed" in sys.argv)
        sys.exit(0)
    if "--opset18" in sys.argv:
        convert_to_opset18(paths[0])
        sys.exit(0)
    assert transformers.__version__ == "4.38.2", transformers.__version__
    os.makedirs(paths[0], exist_ok=True)
    if corpus:
        SIZE.update(vocab=16, positions=8, hidden=8, layers=1, heads=2)
        B, S = 2, 4
    for i, f in enumerate(FIXTURES):
        export(paths[0], *f, seed=100 + i)
    if not corpus:
        convert_to_opset18(paths[0])
    if corpus:
        for name in os.listdir(paths[0]):
            if name.endswith(".json"):
                os.remove(os.path.join(paths[0], name))
