"""mlc's datasets against an independent implementation of Megatron's layout.

Reads what `mlc preprocess` wrote with a reader written here from the format
description, has mlc read datasets written here (uint16 and int32 tokens,
several sequences per document), checks that corrupt files are refused with
an error naming the file, and that length balancing holds on a real corpus.
"""

import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from megatron_io import read_dataset, write_dataset  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--corpus", required=True)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def mlc(*argv, ok=True):
    r = subprocess.run([args.mlc] + list(argv), capture_output=True, text=True)
    if ok and r.returncode != 0:
        sys.exit(f"mlc {' '.join(argv)} failed:\n{r.stderr}")
    return r


# 1. mlc preprocess -> independent reader.
texts = ["Hello, world!", "Unicode: héllo — 世界 🚀", "", "a" * 1000, "line\nbreak\ttab"]
jsonl = os.path.join(args.work, "corpus.jsonl")
with open(jsonl, "w") as f:
    for t in texts[:3]:
        f.write(json.dumps({"text": t}) + "\n")
    f.write("{not json\n")
    f.write(json.dumps({"title": "no text field"}) + "\n")
    for t in texts[3:]:
        f.write(json.dumps({"text": t}) + "\n")
prefix = os.path.join(args.work, "out")
r = mlc("preprocess", "--input", jsonl, "--output-prefix", prefix, "--append-eod",
        "--workers", "2")
check(":4: document: invalid JSON" in r.stderr, "malformed line 4 not reported: " + r.stderr)
check(":5: no string field 'text'" in r.stderr, "line 5 without text not reported")
code, docs = read_dataset(prefix + "_text_document")
# As Megatron: the EOD ends a document with tokens; an empty document has no
# sequence at all (a boundary with nothing in it).
expected = [list(t.encode("utf-8")) + [0] if t else [] for t in texts]
check(code == 8, f"dtype code {code}, expected 8 (uint16) for 256 ids")
check(docs == expected, "preprocessed documents differ from the UTF-8 bytes + EOD")
# Megatron's name for the same byte-level ids writes the same files.
mlc("preprocess", "--input", jsonl, "--output-prefix", prefix + "mega", "--append-eod",
    "--tokenizer-type", "ByteLevelTokenizer")
for ext in (".bin", ".idx"):
    with open(prefix + "_text_document" + ext, "rb") as a, \
            open(prefix + "mega_text_document" + ext, "rb") as b:
        check(a.read() == b.read(), f"ByteLevelTokenizer {ext} differs from ByteTokenizer's")
print(f"preprocess: {len(docs)} documents read back identically")
r = mlc("preprocess", "--input", jsonl, "--output-prefix", prefix + "strict", "--strict",
        ok=False)
check(r.returncode != 0 and ":4:" in r.stderr, "--strict did not stop at line 4")
check(not os.path.exists(prefix + "strict_text_document.idx"), "--strict left a dataset")

# 2. Datasets written here -> mlc.
rng = np.random.default_rng(1)
docs = [rng.integers(0, 60000, size=rng.integers(1, 40)).tolist() for _ in range(25)]
for code, split in ((8, None), (4, 7)):
    p = os.path.join(args.work, f"ours{code}")
    write_dataset(p, docs, code, split)
    dump = mlc("data", "dump", p, "--count", "1000").stdout.split("\n")
    # dump prints one line per sequence; rebuild documents from our own split
    lines = [[int(x) for x in line.split()] for line in dump if line.strip()]
    flat = [t for line in lines for t in line]
    check(flat == [t for d in docs for t in d], f"mlc data dump differs (dtype {code})")
    stats = json.loads(mlc("data", "stats", p, "--seq-len", "64", "--ranks", "2",
                           "--tokens-per-rank", "128", "--json").stdout)
    check(stats["presort"]["tokens"] == sum(min(len(d), 64) for d in docs),
          f"stats token count wrong (dtype {code})")
print("mlc reads datasets written here (uint16, int32 with several sequences per document)")

# 3. Corrupt inputs are refused with the file named.
good = os.path.join(args.work, "ours8")


def corrupt(name, idx=None, bin_bytes=None):
    p = os.path.join(args.work, name)
    with open(good + ".idx", "rb") as f:
        i = bytearray(f.read())
    with open(good + ".bin", "rb") as f:
        b = f.read()
    if idx:
        idx(i)
    with open(p + ".idx", "wb") as f:
        f.write(i)
    with open(p + ".bin", "wb") as f:
        f.write(b if bin_bytes is None else bin_bytes(b))
    r = mlc("data", "dump", p, ok=False)
    return r.returncode, r.stderr


def set_bytes(offset, data):
    def f(i):
        i[offset:offset + len(data)] = data
    return f


cases = {
    "badmagic": (set_bytes(0, b"NOTMAGIC!"), None, "bad magic"),
    "baddtype": (set_bytes(17, b"\x09"), None, "unknown dtype code 9"),
    "floatdtype": (set_bytes(17, b"\x07"), None, "holds floats"),
    "truncbin": (None, lambda b: b[: len(b) // 2], "lies past the end of the file"),
    "pastend": (set_bytes(34 + 4 * 25, struct.pack("<q", 10 ** 9)), None,
                "lies past the end of the file"),
    "truncidx": (lambda i: i.__delitem__(slice(60, None)), None, "truncated"),
}
for name, (idx, binf, message) in cases.items():
    rc, err = corrupt(name, idx, binf)
    check(rc != 0 and message in err and name in err, f"{name}: {err.strip()}")
print(f"corrupt datasets refused: {', '.join(cases)}")

# 4. Length balancing on a real corpus: paragraphs of the bundled docs.
big = os.path.join(args.work, "docs.jsonl")
with open(big, "w") as f:
    for para in open(args.corpus, encoding="utf-8").read().split("\n\n"):
        if para.strip():
            f.write(json.dumps({"text": para}) + "\n")
mlc("preprocess", "--input", big, "--output-prefix", os.path.join(args.work, "docs"),
    "--append-eod", "--workers", "2")
stats = json.loads(mlc("data", "stats", os.path.join(args.work, "docs_text_document"),
                       "--seq-len", "512", "--ranks", "8", "--tokens-per-rank", "4096",
                       "--json").stdout)
print(f"balance at 8 ranks: presort {stats['presort']['imbalance']:.4f}, "
      f"zigzag {stats['zigzag']['imbalance']:.4f}, random {stats['random']['imbalance']:.4f}; "
      f"padding to seq-len {stats['random']['padding_to_seq_len']:.3f}, packed 0")
check(stats["presort"]["imbalance"] <= 1.02, "presort imbalance above 1.02")
check(stats["random"]["imbalance"] > stats["presort"]["imbalance"], "random not worse")

if failures:
    print("DATASET CHECKS FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("DATASET CHECKS OK")
