"""Hugging Face model directories in and out of mlc.

  --part llama  A seeded tiny LlamaForCausalLM, saved by save_pretrained into
                3+ shards (max_shard_size=100KB) and into one
                model.safetensors, with a tokenizer.json beside: `mlc run llama
                --config DIR --init DIR` gives the same logits from both as
                torch does. Then a few steps of `mlc train llama --config DIR
                --init DIR --save OUT/ --max-shard-size 100KB`: OUT loads with
                LlamaForCausalLM.from_pretrained with no missing, unexpected or
                mis-shaped keys, its shards keep save_pretrained's size rule,
                its tokenizer loads with AutoTokenizer, and transformers'
                logits equal `mlc run --config OUT --init OUT`'s.
  --part gpt2, --part bert, --part qwen2
                `mlc train MODEL --config tiny,... --save OUT/` loads with
                AutoModelForCausalLM / AutoModelForMaskedLM, and gives mlc's
                logits (qwen2: the builtin llama with q/k/v biases and a tied
                head, which config.json names Qwen2ForCausalLM; the tied head
                is stored once, as save_pretrained stores it).
  --part generate
                A tiny Llama-shaped model with a byte-level BPE tokenizer.json
                (examples/hf-llama/tokenizer, made by the tokenizers library),
                trained 10 steps on the bundled corpus (`mlc preprocess
                --tokenizer-type HuggingFaceTokenizer`) and saved with --save
                OUT/: AutoModelForCausalLM and AutoTokenizer load OUT; the
                logits equal `mlc run`'s; greedy generation in transformers
                equals `mlc generate --temperature 0` token for token and as
                decoded text; and with a generation_config.json of greedy
                defaults, `mlc generate` with no flags equals `generate()` with
                no arguments (the file's max_new_tokens and eos ids on both
                sides), while --max-tokens overrides the file. Then
                --save-dir-hf: the checkpoint's hf/ loads with from_pretrained
                and holds the checkpoint's weights.
  --part bad    Writes broken copies of the sharded Llama for the test's error
                cases: DIR/missing-shard, two-shards, lacks, unlisted.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--part", choices=["llama", "qwen2", "gpt2", "bert", "generate", "bad"],
                required=True)
ap.add_argument("--work", required=True)
args = ap.parse_args()

import transformers  # noqa: E402

transformers.logging.set_verbosity_error()
torch.set_num_threads(1)
os.makedirs(args.work, exist_ok=True)
failures = []
B, S = 2, 16
ids = np.random.default_rng(0).integers(0, 64, size=(B, S)).astype(np.int64)
ids_path = os.path.join(args.work, "ids.npy")
np.save(ids_path, ids)


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def mlc_run(model, config, init, tag, extra=()):
    out = os.path.join(args.work, "out-" + tag)
    inputs = ["--input", f"input_ids={ids_path}", "--input", f"labels={ids_path}"]
    subprocess.run([args.mlc, "run", model, "--config", config, "--init", init] + inputs +
                   list(extra) + ["--output-dir", out], check=True)
    return np.load(os.path.join(out, "logits.npy"))


def shards_of(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))


def check_loading_info(info, what):
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        if info[kind]:
            failures.append(f"{what}: {kind} {info[kind]}")


def llama_model():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=32,
                                   rms_norm_eps=1e-6, initializer_range=0.1,
                                   tie_word_embeddings=False)
    m = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():  # norms away from ones: a wrong norm path cannot hide
        g = torch.Generator().manual_seed(1)
        for name, t in m.named_parameters():
            if name.endswith("norm.weight"):
                t.copy_(1.0 + 0.1 * torch.randn(t.shape, generator=g))
    return m.eval()


def write_tokenizer(d):
    """A word-level tokenizer of 64 ids, made by the tokenizers library."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"<unk>": 0, **{f"w{i}": i for i in range(1, 64)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>"}, f)


if args.part in ("llama", "bad"):
    model = llama_model()
    sharded = os.path.join(args.work, "sharded")
    single = os.path.join(args.work, "single")
    model.save_pretrained(sharded, max_shard_size="100KB", safe_serialization=True)
    model.save_pretrained(single, safe_serialization=True)
    write_tokenizer(sharded)

if args.part == "bad":
    index = json.load(open(os.path.join(sharded, "model.safetensors.index.json")))
    files = sorted(set(index["weight_map"].values()))

    def copy(name):
        d = os.path.join(args.work, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(sharded, d)
        return d

    def rewrite(d, file, change):
        path = os.path.join(d, file)
        tensors = {k: torch.from_numpy(v) for k, v in tm.read_safetensors(path).items()}
        change(tensors)
        tm.write_safetensors(path, tensors)

    os.remove(os.path.join(copy("missing-shard"), files[1]))
    # A tensor of the first shard stored in the second as well.
    first = sorted(k for k, v in index["weight_map"].items() if v == files[0])[0]
    rewrite(copy("two-shards"), files[1],
            lambda t: t.__setitem__(first, torch.zeros(model.state_dict()[first].shape)))
    rewrite(copy("lacks"), files[0], lambda t: t.pop(first))
    rewrite(copy("unlisted"), files[0],
            lambda t: t.__setitem__("model.extra.weight", torch.zeros(4)))
    print(f"bad copies of {len(files)} shards; shared tensor {first} of {files[0]}; "
          f"second shard {files[1]}")
    sys.exit(0)

if args.part == "llama":
    n = len(shards_of(sharded))
    print(f"save_pretrained(max_shard_size=100KB): {n} shards")
    if n < 3:
        failures.append(f"only {n} shards")
    with torch.no_grad():
        torch_logits = model(input_ids=torch.from_numpy(ids)).logits.numpy()
    got_sharded = mlc_run("llama", sharded, sharded, "sharded")
    got_single = mlc_run("llama", single, single, "single")
    same = np.array_equal(got_sharded, got_single)
    r = rel(got_sharded, torch_logits)
    print(f"--init DIR: sharded and single-file logits equal: {same}; vs torch {r:.2e}")
    if not same or r > 1e-5:
        failures.append(f"sharded logits: equal to single {same}, vs torch {r:.2e}")

    # Training, saved as a directory.
    bdir = os.path.join(args.work, "batches")
    os.makedirs(bdir, exist_ok=True)
    steps = np.random.default_rng(1).integers(0, 64, size=(3, B, S)).astype(np.int64)
    np.save(os.path.join(bdir, "input_ids.npy"), steps)
    np.save(os.path.join(bdir, "labels.npy"), steps)
    out = os.path.join(args.work, "trained") + "/"
    subprocess.run([args.mlc, "train", "llama", "--config", sharded, "--init", sharded,
                    "--micro-batch", str(B), "--seq-len", str(S), "--batches", bdir,
                    "--steps", "3", "--lr", "1e-2", "--save", out, "--max-shard-size", "100KB",
                    "--log-every", "100"], check=True)
    files = sorted(os.listdir(out))
    print("--save DIR/: " + " ".join(f for f in files if not f.startswith("model-")) +
          f" and {len(shards_of(out))} shards")
    index = json.load(open(os.path.join(out, "model.safetensors.index.json")))
    sizes = {}
    for f in shards_of(out):
        t = tm.read_safetensors(os.path.join(out, f))
        sizes[f] = [a.nbytes for a in t.values()]
        # save_pretrained's rule: past the size only a shard of one tensor.
        if sum(sizes[f]) > 100_000 and len(sizes[f]) > 1:
            failures.append(f"{f} holds {sum(sizes[f])} bytes in {len(sizes[f])} tensors")
        for name in t:
            if index["weight_map"].get(name) != f:
                failures.append(f"{name} is in {f}, the index says {index['weight_map'].get(name)}")
    total = sum(sum(s) for s in sizes.values())
    if index["metadata"]["total_size"] != total or len(index["weight_map"]) != len(
            model.state_dict()):
        failures.append(f"index: total_size {index['metadata']['total_size']} != {total}")
    loaded, info = transformers.AutoModelForCausalLM.from_pretrained(
        out, output_loading_info=True)
    check_loading_info(info, "from_pretrained")
    loaded.eval()
    with torch.no_grad():
        hf_logits = loaded(input_ids=torch.from_numpy(ids)).logits.numpy()
    mlc_logits = mlc_run("llama", out, out, "trained")
    r = rel(hf_logits, mlc_logits)
    moved = rel(hf_logits, torch_logits)
    print(f"from_pretrained: {type(loaded).__name__}, no missing or unexpected keys: "
          f"{not any(info.values())}; logits vs mlc run {r:.2e} (trained away from the "
          f"initial ones by {moved:.2e})")
    if r > 1e-5 or moved < 1e-3:
        failures.append(f"trained logits vs mlc {r:.2e}, moved {moved:.2e}")
    # Under the default 5GB: one model.safetensors, no index; the tokenizer
    # named by --tokenizer-model (a file: the configs beside it come too).
    out1 = os.path.join(args.work, "one-file") + "/"
    subprocess.run([args.mlc, "train", "llama", "--config", single, "--init", single,
                    "--micro-batch", str(B), "--seq-len", str(S), "--batches", bdir,
                    "--steps", "1", "--save", out1, "--log-every", "100",
                    "--tokenizer-model", os.path.join(sharded, "tokenizer.json")], check=True)
    print("--save DIR/ under 5GB: " + " ".join(sorted(os.listdir(out1))))
    loaded1, info1 = transformers.AutoModelForCausalLM.from_pretrained(
        out1, output_loading_info=True)
    check_loading_info(info1, "from_pretrained of one file")
    tok = transformers.AutoTokenizer.from_pretrained(out1)
    if tok("w1 w2")["input_ids"] != [1, 2]:
        failures.append("the --tokenizer-model copy does not tokenize as the original")
    tok = transformers.AutoTokenizer.from_pretrained(out)
    enc = tok("w1 w2 w63 nope")["input_ids"]
    print(f"AutoTokenizer: {type(tok).__name__} {enc}")
    if enc != [1, 2, 63, 0]:
        failures.append(f"tokenizer gives {enc}")

if args.part in ("gpt2", "bert", "qwen2"):
    out = os.path.join(args.work, args.part) + "/"
    model_name = "llama" if args.part == "qwen2" else args.part
    if args.part == "qwen2":
        config = ("tiny,vocab_size=64,hidden_size=32,intermediate_size=48,num_hidden_layers=2,"
                  "num_attention_heads=4,num_key_value_heads=2,max_position_embeddings=32,"
                  "qkv_bias=1,tie_word_embeddings=1")
        auto = transformers.AutoModelForCausalLM
        extra = []
    elif args.part == "gpt2":
        config = ("tiny,vocab_size=64,n_positions=32,n_embd=32,n_layer=2,n_head=2,"
                  "resid_pdrop=0,embd_pdrop=0,attn_pdrop=0")
        auto = transformers.AutoModelForCausalLM
        extra = []
    else:
        config = ("tiny,vocab_size=64,max_position_embeddings=32,hidden_size=32,"
                  "num_hidden_layers=2,num_attention_heads=2,intermediate_size=48,"
                  "hidden_dropout_prob=0,attention_probs_dropout_prob=0")
        auto = transformers.AutoModelForMaskedLM
        types = np.zeros((B, S), dtype=np.int64)
        mask = np.ones((B, S), dtype=np.int64)
        np.save(os.path.join(args.work, "types.npy"), types)
        np.save(os.path.join(args.work, "mask.npy"), mask)
        extra = ["--input", f"token_type_ids={args.work}/types.npy",
                 "--input", f"attention_mask={args.work}/mask.npy"]
    bdir = os.path.join(args.work, "batches")
    os.makedirs(bdir, exist_ok=True)
    steps = np.random.default_rng(1).integers(0, 64, size=(2, B, S)).astype(np.int64)
    np.save(os.path.join(bdir, "input_ids.npy"), steps)
    np.save(os.path.join(bdir, "labels.npy"), steps)
    if args.part == "bert":
        np.save(os.path.join(bdir, "token_type_ids.npy"), np.zeros_like(steps))
        np.save(os.path.join(bdir, "attention_mask.npy"), np.ones_like(steps))
    subprocess.run([args.mlc, "train", model_name, "--config", config, "--micro-batch", str(B),
                    "--seq-len", str(S), "--batches", bdir, "--steps", "2", "--save", out,
                    "--max-shard-size", "20KB", "--log-every", "100"], check=True)
    loaded, info = auto.from_pretrained(out, output_loading_info=True)
    check_loading_info(info, "from_pretrained")
    loaded.eval()
    with torch.no_grad():
        kw = {"input_ids": torch.from_numpy(ids)}
        if args.part == "bert":
            kw["token_type_ids"] = torch.from_numpy(types)
            kw["attention_mask"] = torch.from_numpy(mask)
        hf_logits = loaded(**kw).logits.numpy()
    mlc_logits = mlc_run(model_name, out, out, args.part, extra)
    r = rel(hf_logits, mlc_logits)
    print(f"{args.part} --save DIR/: {len(shards_of(out))} shards; from_pretrained: "
          f"{type(loaded).__name__}, no missing or unexpected keys: {not any(info.values())}; "
          f"logits vs mlc run {r:.2e}")
    if r > 1e-5:
        failures.append(f"logits differ by {r:.2e}")

if args.part == "generate":
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..", "..", "..")
    tok_dir = os.path.join(args.work, "tokenizer")
    shutil.rmtree(tok_dir, ignore_errors=True)
    shutil.copytree(os.path.join(root, "examples", "hf-llama", "tokenizer"), tok_dir)
    text = open(os.path.join(root, "data", "corpus", "python-docs.txt"), encoding="utf-8").read()
    corpus = os.path.join(args.work, "corpus.jsonl")
    with open(corpus, "w") as f:
        for p in [p for p in text[:200_000].split("\n\n") if p.strip()]:
            f.write(json.dumps({"text": p}) + "\n")
    prefix = os.path.join(args.work, "corpus")
    subprocess.run([args.mlc, "preprocess", "--input", corpus, "--output-prefix", prefix,
                    "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tok_dir,
                    "--append-eod"], check=True, stdout=subprocess.DEVNULL)
    config = ("tiny,vocab_size=512,hidden_size=64,intermediate_size=128,num_hidden_layers=2,"
              "num_attention_heads=4,num_key_value_heads=2,max_position_embeddings=64")
    out = os.path.join(args.work, "trained") + "/"
    subprocess.run([args.mlc, "train", "llama", "--config", config, "--micro-batch", "4",
                    "--seq-len", "64", "--data", prefix + "_text_document", "--steps", "10",
                    "--lr", "1e-3", "--warmup", "2", "--save", out, "--tokenizer-model", tok_dir,
                    "--log-every", "100", "--progress", "plain"], check=True)
    model, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    check_loading_info(info, "from_pretrained")
    model.eval()
    tok = transformers.AutoTokenizer.from_pretrained(out)
    # Logits on the tokenizer's ids of two pieces of the corpus.
    rows = [tok(t)["input_ids"][:S] for t in ("The list of arguments is", "def main():\n    ")]
    rows = [r + [tok.eos_token_id] * (S - len(r)) for r in rows]
    np.save(ids_path, np.array(rows, dtype=np.int64))
    ids = np.load(ids_path)
    with torch.no_grad():
        hf_logits = model(input_ids=torch.from_numpy(ids)).logits.numpy()
    r = rel(hf_logits, mlc_logits := mlc_run("llama", out, out, "generate"))
    print(f"from_pretrained: {type(model).__name__}, AutoTokenizer: {type(tok).__name__}; "
          f"logits vs mlc run {r:.2e}")
    if r > 1e-5:
        failures.append(f"logits differ by {r:.2e}")

    def mlc_generate(directory, prompt, *flags):
        ids_file = os.path.join(args.work, "generated-ids.txt")
        res = subprocess.run([args.mlc, "generate", "llama", "--config", directory, "--init",
                              directory, "--prompt", prompt, "--output-ids", ids_file] +
                             list(flags), capture_output=True)
        if res.returncode != 0:
            sys.exit("mlc generate failed:\n" + res.stderr.decode())
        got = [int(x) for x in open(ids_file).read().split()]
        return got, res.stdout.decode()[:-1]  # the trailing newline

    def hf_generate(prompt, **kw):
        ids = tok(prompt, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            seq = model.generate(ids, attention_mask=torch.ones_like(ids),
                                 pad_token_id=tok.eos_token_id, **kw)[0].tolist()
        return seq, tok.decode(seq, skip_special_tokens=True)

    def margins(seq, start):
        """The smallest gap between the first and second logit of the steps."""
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([seq[:-1]])).logits[0]
        top = logits[start - 1:].topk(2, dim=-1).values
        return float((top[:, 0] - top[:, 1]).min())

    prompt = "The list of arguments"
    n_prompt = len(tok(prompt)["input_ids"])
    # Flags override the directory's generation_config.json (which samples).
    want, want_text = hf_generate(prompt, do_sample=False, max_new_tokens=24)
    got, got_text = mlc_generate(out, prompt, "--temperature", "0", "--max-tokens", "24")
    print(f"greedy, {len(want) - n_prompt} tokens: transformers and mlc generate --temperature 0: "
          f"ids equal: {got == want}, text equal: {got_text == want_text} "
          f"(smallest top-2 logit gap {margins(want, n_prompt):.2e})")
    if got != want or got_text != want_text:
        failures.append(f"greedy generation differs:\n    mlc  {got} {got_text!r}\n"
                        f"    hf   {want} {want_text!r}")
    # The committed generation_config.json samples (temperature 0.7, top_k 40,
    # top_p 0.95, 40 new tokens): with one seed, no flags give what those
    # flags give, and not the greedy continuation.
    sampled = mlc_generate(out, prompt, "--seed", "7")
    flagged = mlc_generate(out, prompt, "--seed", "7", "--temperature", "0.7", "--top-k", "40",
                           "--top-p", "0.95", "--max-tokens", "40")
    print(f"the file's sampling defaults equal the same flags: {sampled == flagged}; "
          f"{len(sampled[0]) - n_prompt} tokens")
    if sampled != flagged or sampled[0][:len(want)] == want:
        failures.append(f"sampling defaults: {sampled} vs flags {flagged}")
    # The directory's generation_config.json as the defaults on both sides.
    greedy = os.path.join(args.work, "greedy")
    shutil.rmtree(greedy, ignore_errors=True)
    shutil.copytree(out, greedy)
    # An eos id that the greedy continuation reaches after a few tokens.
    later = [t for i, t in enumerate(want) if i >= n_prompt + 4 and t not in want[n_prompt:i]]
    if not later:
        sys.exit(f"the greedy continuation {want[n_prompt:]} repeats itself: retrain")
    stop = later[0]
    with open(os.path.join(greedy, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": tok.bos_token_id, "eos_token_id": [tok.eos_token_id, stop],
                   "do_sample": False, "max_new_tokens": 30, "transformers_version": "4.38.2"},
                  f)
    model = transformers.AutoModelForCausalLM.from_pretrained(greedy).eval()
    want, want_text = hf_generate(prompt)
    got, got_text = mlc_generate(greedy, prompt)
    print(f"generation_config.json defaults: {len(want) - n_prompt} tokens, ids equal: "
          f"{got == want}, text equal: {got_text == want_text}")
    if got != want or got_text != want_text or want[-1] != stop:
        failures.append(f"generation_config.json defaults:\n    mlc  {got}\n    hf   {want}")
    got, _ = mlc_generate(greedy, prompt, "--max-tokens", "3")
    print(f"--max-tokens 3 over the file's: {len(got) - n_prompt} tokens")
    if got != want[:n_prompt + 3]:
        failures.append(f"--max-tokens 3: {got}")

    # --save-dir-hf: each checkpoint holds hf/, which from_pretrained loads
    # with the checkpoint's own weights; --keep rotates it with its checkpoint.
    ck = os.path.join(args.work, "checkpoints")
    shutil.rmtree(ck, ignore_errors=True)
    subprocess.run([args.mlc, "train", "llama", "--config", config, "--micro-batch", "4",
                    "--seq-len", "64", "--data", prefix + "_text_document", "--steps", "4",
                    "--save-dir", ck, "--save-interval", "2", "--keep", "1", "--save-dir-hf",
                    "--tokenizer-model", tok_dir, "--max-shard-size", "200KB",
                    "--log-every", "100", "--progress", "plain"], check=True)
    steps = sorted(os.listdir(ck))
    hf = os.path.join(ck, steps[-1], "hf")
    loaded, info = transformers.AutoModelForCausalLM.from_pretrained(hf, output_loading_info=True)
    check_loading_info(info, "from_pretrained of hf/")
    saved = tm.read_safetensors(os.path.join(ck, steps[-1], "model.safetensors"))
    state = loaded.state_dict()
    same = set(saved) == set(state) and all(
        np.array_equal(saved[k], state[k].numpy()) for k in saved)
    hf_tok = transformers.AutoTokenizer.from_pretrained(hf)
    print(f"--save-dir-hf: {' '.join(steps)}, hf/ of {len(shards_of(hf))} shards; "
          f"from_pretrained holds the checkpoint's weights: {same}; "
          f"AutoTokenizer: {hf_tok(prompt)['input_ids'] == tok(prompt)['input_ids']}")
    if not same or steps != ["step-00000004"] or len(shards_of(hf)) < 2:
        failures.append(f"--save-dir-hf: {steps}, weights equal {same}")

if failures:
    print("MODEL DIRECTORY FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("MODEL DIRECTORY OK")
