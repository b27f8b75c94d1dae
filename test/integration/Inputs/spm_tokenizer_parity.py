"""mlc's SentencePieceTokenizer against the `sentencepiece` library itself.

The tokenizer.model fixtures (spm_tokenizers/, made by make_fixtures.py with
the library's trainer: BPE with byte fallback as Llama-2's, Unigram with
nmt_nfkc and user-defined symbols as T5's, BPE with user-defined symbols,
collapsed whitespace and U+2581 as a suffix) are read by both. On > 1 MB of
mixed text (hf_corpus.py: prose, code, CJK, Cyrillic, Arabic, Devanagari,
emoji, whitespace runs, control characters, special tokens inside the text,
and documents with invalid UTF-8 bytes), mlc tokenizes through `mlc
preprocess` and the ids must equal the library's `encode`; Llama2Tokenizer's
must be the same with <s> first. `mlc tokenizer decode` must give the
library's `decode` of the same ids, and of random id sequences (byte pieces
that form no character, <unk>, <s> and </s> among them).
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

import sentencepiece as spm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--corpus", required=True)
ap.add_argument("--fixtures", required=True)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)

# Special tokens in the text: the Unigram model's user-defined symbols, and
# control pieces, which the library encodes as plain text.
docs = hf_corpus.documents(args.corpus, specials=["<sep>", "<|tool|>", "<s>", "</s>", "<unk>"])
raw = hf_corpus.raw_documents()
texts = docs + [r.decode("utf-8", errors="replace") for r in raw]
jsonl = os.path.join(args.work, "mixed.jsonl")
with open(jsonl, "wb") as f:
    for i, d in enumerate(docs):
        f.write(json.dumps({"text": d}, ensure_ascii=i % 2 == 0).encode("utf-8") + b"\n")
    for r in raw:  # invalid UTF-8 as it comes, not escaped
        f.write(b'{"text": "' + r + b'"}\n')
size = os.path.getsize(jsonl)


def run(*argv):
    r = subprocess.run(list(argv), capture_output=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{r.stderr.decode(errors='replace')}")
    return r


def first_difference(a, b):
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


ok = size >= 1_000_000
if not ok:
    print(f"the mixed corpus is only {size} bytes")
CASES = [("bpe", "SentencePieceTokenizer"), ("unigram", "SentencePieceTokenizer"),
         ("suffix", "SentencePieceTokenizer"), ("bpe", "Llama2Tokenizer")]
for name, kind in CASES:
    label = f"{name} {kind}"
    model = os.path.join(args.fixtures, name, "tokenizer.model")
    sp = spm.SentencePieceProcessor(model_file=model)
    theirs = sp.encode(texts, add_bos=kind == "Llama2Tokenizer")
    prefix = os.path.join(args.work, f"{name}-{kind}")
    run(args.mlc, "preprocess", "--input", jsonl, "--output-prefix", prefix, "--workers", "2",
        "--tokenizer-type", kind, "--tokenizer-model", model)
    ours = read_dataset(prefix + "_text_document")[1]
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if list(a) != list(b)]
    tokens = sum(len(x) for x in theirs)
    print(f"{label}: {len(texts)} documents, {size / 1e6:.2f} MB, {tokens} tokens, "
          f"{len(bad)} differ")
    for i in bad[:3]:
        a, b = list(ours[i]), list(theirs[i])
        k = first_difference(a, b)
        print(f"  document {i} from token {k}: {texts[i][:80]!r}\n"
              f"    mlc {a[max(0, k - 3):k + 8]}\n    spm {b[max(0, k - 3):k + 8]}\n"
              f"    spm pieces {[sp.id_to_piece(t) for t in b[max(0, k - 3):k + 8]]}")
    ok &= not bad
    if kind != "SentencePieceTokenizer":
        continue

    # Decoding: the documents' ids, then random ids (stray bytes included).
    rng = random.Random(5)
    vocab = sp.get_piece_size()
    seqs = [list(x) for x in theirs] + [[rng.randrange(vocab) for _ in range(rng.randint(1, 30))]
                                        for _ in range(3000)]
    ids_file = os.path.join(args.work, name + ".ids")
    with open(ids_file, "w") as f:
        for s in seqs:
            f.write(" ".join(map(str, s)) + "\n")
    out = run(args.mlc, "tokenizer", "decode", "--input", ids_file, "--tokenizer-type", kind,
              "--tokenizer-model", model).stdout.decode("utf-8")
    ours = [json.loads(line) for line in out.split("\n")[:-1]]
    theirs = sp.decode(seqs)
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    print(f"{label} decode: {len(seqs)} id sequences, {len(bad)} differ")
    for i in bad[:3]:
        k = first_difference(ours[i], theirs[i])
        print(f"  ids {seqs[i][:12]}: from character {k}\n    mlc {ours[i][max(0, k - 10):k + 20]!r}"
              f"\n    spm {theirs[i][max(0, k - 10):k + 20]!r}")
    ok &= not bad

print("TOKENIZERS MATCH" if ok else "TOKENIZERS DIFFER")
sys.exit(0 if ok else 1)
