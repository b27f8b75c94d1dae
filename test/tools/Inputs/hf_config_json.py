"""`--config path/config.json`: an HF config file for every builtin model.

transformers writes each config (GPT2Config, BertConfig, LlamaConfig,
Qwen2Config, and a transformers-5 style Llama config with rope_parameters and
head_dim), and the graph `mlc compile MODEL --config FILE` builds must be the
very graph of the equivalent `--config PRESET,key=value...` spec. Prints one
SAME line per case; exits non-zero on the first difference.
"""
import argparse
import json
import os
import subprocess
import sys

import transformers

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", required=True)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)

cases = {
    "gpt2": ("gpt2", transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2,
                                              n_head=4, resid_pdrop=0.0, embd_pdrop=0.05,
                                              attn_pdrop=0.0, layer_norm_epsilon=1e-6),
             "tiny,vocab_size=64,n_positions=32,n_embd=32,n_layer=2,n_head=4,resid_pdrop=0,"
             "embd_pdrop=0.05,attn_pdrop=0,layer_norm_epsilon=1e-6"),
    "bert": ("bert", transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                              num_attention_heads=4, intermediate_size=48,
                                              max_position_embeddings=32),
             "tiny,vocab_size=64,hidden_size=32,num_hidden_layers=2,num_attention_heads=4,"
             "intermediate_size=48,max_position_embeddings=32,hidden_dropout_prob=0.1,"
             "attention_probs_dropout_prob=0.1,layer_norm_eps=1e-12"),
    "llama": ("llama", transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                 num_hidden_layers=2, num_attention_heads=4,
                                                 num_key_value_heads=2, max_position_embeddings=32,
                                                 rms_norm_eps=1e-5, rope_theta=500000.0),
              "tiny,vocab_size=64,hidden_size=32,intermediate_size=48,num_hidden_layers=2,"
              "num_attention_heads=4,num_key_value_heads=2,max_position_embeddings=32,"
              "rms_norm_eps=1e-5,rope_theta=500000"),
    "qwen2": ("llama", transformers.Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=48,
                                                 num_hidden_layers=2, num_attention_heads=4,
                                                 num_key_value_heads=2, max_position_embeddings=32,
                                                 tie_word_embeddings=True),
              "qwen2-tiny,vocab_size=64,hidden_size=32,intermediate_size=48,num_hidden_layers=2,"
              "num_attention_heads=4,num_key_value_heads=2,max_position_embeddings=32"),
}


def graph(model, spec, name):
    out = os.path.join(args.work, name + ".mlir")
    subprocess.run([args.mlc, "compile", model, "--config", spec, "--micro-batch", "1",
                    "--seq-len", "8", "--emit=graph", "-o", out], check=True)
    return open(out).read()


def check(name, model, path, spec):
    a, b = graph(model, path, name + "-json"), graph(model, spec, name + "-spec")
    if a != b:
        sys.exit(f"{name}: --config {os.path.basename(path)} builds another graph than "
                 f"--config {spec}")
    print(f"{name}: SAME graph from config.json and from --config {spec.split(',')[0]},...")


for name, (model, cfg, spec) in cases.items():
    path = os.path.join(args.work, name, "config.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    cfg.to_json_file(path)
    check(name, model, path, spec)
    # Keys after the file override it.
    layers = "n_layer" if model == "gpt2" else "num_hidden_layers"
    check(name + "+override", model, path + f",{layers}=1", spec + f",{layers}=1")

# transformers 5 writes the rotary base under rope_parameters and head_dim
# explicitly; a key it leaves out takes LlamaConfig's default (kv heads:
# one per query head).
new = {"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
       "num_hidden_layers": 1, "num_attention_heads": 4, "head_dim": 8,
       "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "hidden_act": "silu",
       "rope_parameters": {"rope_type": "default", "rope_theta": 20000.0},
       "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": True}
path = os.path.join(args.work, "llama5", "config.json")
os.makedirs(os.path.dirname(path), exist_ok=True)
json.dump(new, open(path, "w"))
check("llama-transformers5", "llama", path,
      "tiny,vocab_size=64,hidden_size=32,intermediate_size=48,num_hidden_layers=1,"
      "num_attention_heads=4,num_key_value_heads=4,max_position_embeddings=32,"
      "rms_norm_eps=1e-5,rope_theta=20000,mlp_bias=1")
print("CONFIG JSON OK")
