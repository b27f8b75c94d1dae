"""mlc's HuggingFaceTokenizer against Hugging Face `tokenizers` itself.

The tokenizer.json fixtures (hf_tokenizers/, made by make_fixtures.py with
the library's trainers) are read by both. On > 1 MB of mixed text
(hf_corpus.py: prose, code, CJK, Cyrillic, Arabic, Devanagari, emoji,
whitespace runs, control characters, special tokens inside the text, and
documents with invalid UTF-8 bytes), mlc tokenizes through `mlc preprocess`
(the real pipeline) and the ids must equal the library's `encode` (special
tokens added, as transformers' tokenizer(text) does); `mlc tokenizer decode`
must give the library's `decode` of the same ids, and of random id sequences
(bytes that do not form characters included). A fixture with a
tokenizer_config.json is compared with transformers' AutoTokenizer, whose
add_bos_token/add_eos_token decide the special tokens.
"""

import argparse
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import hf_corpus  # noqa: E402
from megatron_io import read_dataset  # noqa: E402

from tokenizers import Tokenizer  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--corpus", required=True)
ap.add_argument("--fixtures", required=True)
ap.add_argument("--only", default="", help="comma-separated fixture names")
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)

FIXTURES = ["llama3", "gpt2", "llama2", "metaspace", "bert", "misc", "misc2"]
if args.only:
    FIXTURES = args.only.split(",")
specials = sorted({t["content"] for name in FIXTURES for t in json.load(
    open(os.path.join(args.fixtures, name, "tokenizer.json")))["added_tokens"]})

docs = hf_corpus.documents(args.corpus, specials=specials)
raw = hf_corpus.raw_documents()
texts = docs + [r.decode("utf-8", errors="replace") for r in raw]
jsonl = os.path.join(args.work, "mixed.jsonl")
with open(jsonl, "wb") as f:
    for i, d in enumerate(docs):
        f.write(json.dumps({"text": d}, ensure_ascii=i % 2 == 0).encode("utf-8") + b"\n")
    for r in raw:  # invalid UTF-8 as it comes, not escaped
        f.write(b'{"text": "' + r + b'"}\n')
size = os.path.getsize(jsonl)


def run(*argv, **kw):
    r = subprocess.run(list(argv), capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{r.stderr.decode(errors='replace')}")
    return r


def first_difference(a, b):
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


ok = size >= 1_000_000
if not ok:
    print(f"the mixed corpus is only {size} bytes")
for name in FIXTURES:
    model = os.path.join(args.fixtures, name)
    hf = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    if os.path.exists(os.path.join(model, "tokenizer_config.json")):
        from transformers import AutoTokenizer
        auto = AutoTokenizer.from_pretrained(model)
        theirs = auto(texts)["input_ids"]
    else:
        theirs = [e.ids for e in hf.encode_batch(texts)]
    prefix = os.path.join(args.work, name)
    run(args.mlc, "preprocess", "--input", jsonl, "--output-prefix", prefix, "--workers", "2",
        "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", model)
    ours = read_dataset(prefix + "_text_document")[1]
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if list(a) != list(b)]
    tokens = sum(len(x) for x in theirs)
    print(f"{name}: {len(texts)} documents, {size / 1e6:.2f} MB, {tokens} tokens, "
          f"{len(bad)} differ")
    for i in bad[:3]:
        a, b = list(ours[i]), list(theirs[i])
        k = first_difference(a, b)
        print(f"  document {i} from token {k}: {texts[i][:80]!r}\n"
              f"    mlc {a[max(0, k - 3):k + 8]}\n    hf  {b[max(0, k - 3):k + 8]}\n"
              f"    hf tokens {[hf.id_to_token(t) for t in b[max(0, k - 3):k + 8]]}")
    ok &= not bad

    # Decoding: the documents' ids, then random ids (stray bytes included).
    rng = random.Random(5)
    vocab = hf.get_vocab_size(with_added_tokens=True)
    seqs = [list(x) for x in theirs] + [[rng.randrange(vocab) for _ in range(rng.randint(1, 30))]
                                        for _ in range(3000)]
    ids_file = os.path.join(args.work, name + ".ids")
    with open(ids_file, "w") as f:
        for s in seqs:
            f.write(" ".join(map(str, s)) + "\n")
    out = run(args.mlc, "tokenizer", "decode", "--input", ids_file, "--tokenizer-type",
              "HuggingFaceTokenizer", "--tokenizer-model", model).stdout.decode("utf-8")
    ours = [json.loads(line) for line in out.split("\n")[:-1]]
    theirs = hf.decode_batch(seqs)
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    print(f"{name} decode: {len(seqs)} id sequences, {len(bad)} differ")
    for i in bad[:3]:
        k = first_difference(ours[i], theirs[i])
        print(f"  ids {seqs[i][:12]}: from character {k}\n    mlc {ours[i][max(0, k - 10):k + 20]!r}"
              f"\n    hf  {theirs[i][max(0, k - 10):k + 20]!r}")
    ok &= not bad

print("TOKENIZERS MATCH" if ok else "TOKENIZERS DIFFER")
sys.exit(0 if ok else 1)
