"""`mlc preprocess --tokenizer-type HuggingFaceTokenizer` against Hugging Face
`tokenizers` (Rust, encode_batch) on the same tokenizer.json, corpus and
threads, and `--tokenizer-type SentencePieceTokenizer` against the
`sentencepiece` library (C++, encode of the list with num_threads) on the
same tokenizer.model. Not a test: it prints MB/s of each and their ratio.

    python bench/hf_tokenizer_bench.py --mlc build/bin/mlc \
        [--tokenizer-model DIR_OR_FILE ...] [--sentencepiece-model FILE ...] \
        [--threads 1,2] [--corpus FILE.jsonl]

Without either model flag, the tokenizer test fixtures of both kinds; with
one of them, that kind alone.

Without --corpus, the mixed corpus of the tokenizer tests (hf_corpus.py,
about 1.4 MB of prose, code, other scripts and emoji) repeated --copies
times. mlc is timed twice: as a user runs it, the whole process (start-up,
loading the tokenizer, reading JSONL, tokenizing, writing the dataset), and
by its own clock, which starts once the tokenizer is loaded (reading,
tokenizing, writing). The libraries are timed on encoding alone, the texts
already in memory (tokenizers with RAYON_NUM_THREADS threads, sentencepiece
with num_threads), loading excluded. Each figure
is the best of --repeat runs; a ratio > 1: mlc is faster.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "..", "test", "integration", "Inputs")
sys.path.insert(0, INPUTS)

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", default=os.path.join(HERE, "..", "build", "bin", "mlc"))
ap.add_argument("--tokenizer-model", action="append",
                help="tokenizer.json or its directory (default: the test fixtures)")
ap.add_argument("--sentencepiece-model", action="append",
                help="tokenizer.model or its directory (default: the test fixtures)")
ap.add_argument("--threads", default="1,2")
ap.add_argument("--corpus", help="JSONL with a 'text' field per line")
ap.add_argument("--copies", type=int, default=2)
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--python", default=sys.executable,
                help="Python with `tokenizers` and `sentencepiece`")
args = ap.parse_args()

defaults = not args.tokenizer_model and not args.sentencepiece_model
models = [("HuggingFaceTokenizer", m) for m in args.tokenizer_model or
          ([os.path.join(INPUTS, "hf_tokenizers", n) for n in ("llama3", "llama2", "bert")]
           if defaults else [])]
models += [("SentencePieceTokenizer", m) for m in args.sentencepiece_model or
           ([os.path.join(INPUTS, "spm_tokenizers", n, "tokenizer.model")
             for n in ("bpe", "unigram")] if defaults else [])]
work = tempfile.mkdtemp()
corpus = args.corpus
if not corpus:
    import hf_corpus
    corpus = os.path.join(work, "mixed.jsonl")
    docs = hf_corpus.documents(os.path.join(HERE, "..", "data", "corpus", "python-docs.txt"))
    with open(corpus, "w", encoding="utf-8") as f:
        for _ in range(args.copies):
            for d in docs:
                f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
size = sum(len(json.loads(line)["text"].encode("utf-8")) for line in open(corpus, encoding="utf-8"))

HF = r"""
import json, os, sys, time
from tokenizers import Tokenizer, __version__
model, corpus, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
if os.path.isdir(model):
    model = os.path.join(model, "tokenizer.json")
texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
tok = Tokenizer.from_file(model)
best = 1e30
for _ in range(repeat):
    t = time.perf_counter()
    tok.encode_batch(texts)
    best = min(best, time.perf_counter() - t)
print(__version__, best)
"""

SPM = r"""
import json, os, sys, time
import sentencepiece as spm
model, corpus, repeat, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if os.path.isdir(model):
    model = os.path.join(model, "tokenizer.model")
texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
sp = spm.SentencePieceProcessor(model_file=model)
best = 1e30
for _ in range(repeat):
    t = time.perf_counter()
    sp.encode(texts, num_threads=threads)
    best = min(best, time.perf_counter() - t)
print(spm.__version__, best)
"""

print(f"corpus: {corpus}, {size / 1e6:.2f} MB of text")
for kind, model in models:
    name = os.path.basename(model.rstrip("/"))
    if kind == "SentencePieceTokenizer" and not os.path.isdir(model):
        name = os.path.basename(os.path.dirname(os.path.abspath(model))) + "/" + name
    for threads in [int(t) for t in args.threads.split(",")]:
        best = own = 1e30
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = subprocess.run([args.mlc, "preprocess", "--input", corpus, "--output-prefix",
                                os.path.join(work, "out"), "--workers", str(threads),
                                "--tokenizer-type", kind, "--tokenizer-model",
                                model], check=True, capture_output=True, text=True)
            best = min(best, time.perf_counter() - t)
            own = min(own, float(re.search(r" MB in ([0-9.]+) s", r.stdout).group(1)))
        env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
        lib, call = ("tokenizers", "encode_batch") if kind == "HuggingFaceTokenizer" else \
            ("sentencepiece", "encode")
        out = subprocess.run([args.python, "-c", HF if lib == "tokenizers" else SPM, model,
                              corpus, str(args.repeat), str(threads)], env=env,
                             check=True, capture_output=True, text=True).stdout.split()
        version, theirs = out[0], float(out[1])
        print(f"{name}, {threads} thread(s): mlc preprocess {size / 1e6 / best:.2f} MB/s "
              f"(process), {size / 1e6 / max(own, 1e-9):.2f} MB/s (loaded); {lib} {version} "
              f"{call} {size / 1e6 / theirs:.2f} MB/s; ratio mlc/{lib} {theirs / best:.2f} "
              f"(process), {theirs / max(own, 1e-9):.2f} (loaded)")
shutil.rmtree(work)
