"""mlc's tokenizers against HuggingFace `tokenizers` on the same files.

A byte-level BPE learned by `mlc tokenizer train` on part of the bundled
corpus, loaded by both; WordPiece vocabularies learned by `tokenizers` and
read by both (lower-cased and cased). mlc tokenizes through `mlc preprocess`
(the real pipeline); the ids must be identical on the held-out text.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from megatron_io import read_dataset  # noqa: E402

from tokenizers import BertWordPieceTokenizer, ByteLevelBPETokenizer  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--corpus", required=True)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)

paras = [p for p in open(args.corpus, encoding="utf-8").read().split("\n\n") if p.strip()]
cut = len(paras) // 3
train, held = paras[:cut], paras[cut:]
# Text that exercises the corners: accents, CJK, emoji, contractions, runs of
# whitespace, control characters, numbers glued to letters.
held += ["Héllo wörld, naïve café — it's they're we'll I'd",
         "中文字符 and 日本語 mixed with English", "emoji 🚀🔥 and symbols ©®™",
         "   leading spaces\n\n\ttabs and  double  spaces  ", "x\u0000y\u200bz\ufffd",
         "abc123def 3.14159 1,000,000", "ÀÉÎÕÜ ÅÇÑ ß ǅ Ⅻ"]


def write_jsonl(path, texts):
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")


train_path = os.path.join(args.work, "train.jsonl")
held_path = os.path.join(args.work, "held.jsonl")
write_jsonl(train_path, train)
write_jsonl(held_path, held)
held_bytes = sum(len(t.encode("utf-8")) for t in held)


def run(*argv):
    r = subprocess.run(list(argv), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{r.stderr}")
    return r


def mlc_ids(kind, vocab, merges=None):
    prefix = os.path.join(args.work, kind)
    argv = [args.mlc, "preprocess", "--input", held_path, "--output-prefix", prefix,
            "--tokenizer-type", kind, "--vocab-file", vocab, "--workers", "2"]
    if merges:
        argv += ["--merge-file", merges]
    run(*argv)
    return read_dataset(prefix + "_text_document")[1]


def compare(name, ours, theirs):
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    tokens = sum(len(x) for x in theirs)
    print(f"{name}: {len(theirs)} documents, {held_bytes / 1e6:.2f} MB, {tokens} tokens, "
          f"{len(bad)} differ")
    for i in bad[:3]:
        print(f"  document {i}: {held[i][:60]!r}\n    mlc  {ours[i][:20]}\n    hf   {theirs[i][:20]}")
    return not bad


ok = held_bytes >= 1_000_000
if not ok:
    print(f"held-out text is only {held_bytes} bytes")

# Byte-level BPE learned by mlc.
bpe_dir = os.path.join(args.work, "bpe")
run(args.mlc, "tokenizer", "train", "--input", train_path, "--vocab-size", "8192",
    "--output-dir", bpe_dir)
hf = ByteLevelBPETokenizer(os.path.join(bpe_dir, "vocab.json"),
                           os.path.join(bpe_dir, "merges.txt"))
theirs = [e.ids for e in hf.encode_batch(held)]
ours = mlc_ids("GPT2BPETokenizer", os.path.join(bpe_dir, "vocab.json"),
               os.path.join(bpe_dir, "merges.txt"))
ok &= compare("GPT2BPETokenizer (vocabulary learned by mlc)", ours, theirs)

# WordPiece, lower-cased and cased, vocabularies learned by tokenizers.
for lower, kind in ((True, "BertWordPieceLowerCase"), (False, "BertWordPieceCase")):
    trainer = BertWordPieceTokenizer(lowercase=lower, strip_accents=lower)
    trainer.train([train_path], vocab_size=6000)
    wp_dir = os.path.join(args.work, kind)
    os.makedirs(wp_dir, exist_ok=True)
    trainer.save_model(wp_dir)
    vocab = os.path.join(wp_dir, "vocab.txt")
    hf = BertWordPieceTokenizer(vocab, lowercase=lower, strip_accents=lower)
    theirs = [e.ids for e in hf.encode_batch(held, add_special_tokens=False)]
    ok &= compare(kind, mlc_ids(kind, vocab), theirs)

print("TOKENIZERS MATCH" if ok else "TOKENIZERS DIFFER")
sys.exit(0 if ok else 1)
