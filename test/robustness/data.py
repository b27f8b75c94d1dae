"""Robustness of datasets, tokenizers and ONNX attributes.

    data.py --mlc MLC --runtime MLC_RUNTIME --work DIR --data CORPUS

Families (one boundary each):
  vocab       vocab.json ids that are not unique non-negative int32 integers,
              merges.txt lines that are not two tokens of the vocabulary, a
              vocab.txt that repeats a token
  preprocess  a directory as input, all lines invalid, an empty file, partly
              invalid input (counted and summarized), an output that is an
              input, two writers of one prefix, a full disk
  bin-size    a .bin one byte short or long, or from another dataset, read by
              mlc train, mlc-runtime train and mlc data
  data-flags  mlc data's numeric flags out of range
  onnx-attrs  ONNX attributes whose type is not the operator's
Each case must fail cleanly naming the file or flag and leave nothing behind,
or hold the property that its `check` states.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import arguments, check, report, run, sh

args = arguments()
W = args.work
MLC = args.mlc


def path(name):
    return os.path.join(W, name)


def jsonl(name, texts):
    with open(path(name), "w") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts)
    return path(name)


def preprocess(corpus, prefix, *extra):
    return [MLC, "preprocess", "--input", corpus, "--output-prefix", prefix, *extra]


def left_behind():
    return glob.glob(path("*.tmp*")) + glob.glob(path("*.lock"))


def read(p):
    with open(p, "rb") as f:
        return f.read()


corpus = jsonl("c.jsonl", ["hello world", "the quick brown fox", "jumps over the lazy dog"] * 20)
sh(MLC, "preprocess", "--input", corpus, "--output-prefix", path("good"))
good = path("good_text_document")

# 1. Vocabularies and merges.
tok = path("tok")
sh(MLC, "tokenizer", "train", "--input", corpus, "--vocab-size", "300", "--output-dir", tok)
vocab = json.load(open(os.path.join(tok, "vocab.json")))
merges = read(os.path.join(tok, "merges.txt")).decode().splitlines()
victim, other = list(vocab)[40], list(vocab)[41]


def bpe(vocab_file, merge_file, prefix="bpe"):
    return preprocess(corpus, path(prefix), "--tokenizer-type", "GPT2BPETokenizer",
                      "--vocab-file", vocab_file, "--merge-file", merge_file)


def vocab_with(name, text):
    p = os.path.join(tok, f"vocab-{name}.json")
    open(p, "w").write(text)
    return p


merge_file = os.path.join(tok, "merges.txt")
plain = json.dumps(vocab)
entry = f"{json.dumps(victim)}: {vocab[victim]}"
for name, value in [("string", '"7"'), ("null", "null"), ("negative", "-5"),
                    ("huge", str(2 ** 31 + 3)), ("int32-max", str(2 ** 31 - 1)),
                    ("fraction", "2.5"), ("bool", "true"), ("array", "[1]")]:
    p = vocab_with(name, plain.replace(entry, f"{json.dumps(victim)}: {value}"))
    run("vocab", bpe(p, merge_file), p, [W])
dup = dict(vocab, **{other: vocab[victim]})
p = vocab_with("duplicate-id", json.dumps(dup))
run("vocab", bpe(p, merge_file), p, [W])
p = vocab_with("duplicate-token", plain[:-1] + f", {json.dumps(victim)}: 5000}}")
run("vocab", bpe(p, merge_file), p, [W])
p = vocab_with("not-object", "[1, 2, 3]")
run("vocab", bpe(p, merge_file), p, [W])
left, right = merges[1].split(" ")
for name, line in [("one-token", left), ("three-tokens", f"{left} {right} {left}"),
                   ("unknown-left", f"\u4e00\u4e01 {right}"), ("unknown-right", f"{left} \u4e00"),
                   ("leading-space", f" {left}"), ("two-spaces", f"{left}  {right}"),
                   ("merged-unknown", "z q")]:
    p = os.path.join(tok, f"merges-{name}.txt")
    open(p, "w", encoding="utf-8").write("\n".join(merges[:3] + [line] + merges[3:]) + "\n")
    run("vocab", bpe(os.path.join(tok, "vocab.json"), p), f"{p}:4:", [W])
r = subprocess.run(bpe(os.path.join(tok, "vocab.json"), merge_file), capture_output=True, text=True)
check("vocab", r.returncode == 0, f"the learned vocabulary is refused: {r.stderr[-300:]}")
words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]
for name, lines in [("vocab.txt", words), ("dup.txt", words + ["hello"])]:
    open(path(name), "w").write("\n".join(lines) + "\n")
r = subprocess.run(preprocess(corpus, path("wp"), "--tokenizer-type", "BertWordPieceLowerCase",
                              "--vocab-file", path("vocab.txt")), capture_output=True, text=True)
check("vocab", r.returncode == 0, f"a WordPiece vocabulary is refused: {r.stderr[-300:]}")
run("vocab", preprocess(corpus, path("wp"), "--tokenizer-type", "BertWordPieceLowerCase",
                        "--vocab-file", path("dup.txt")), path("dup.txt") + ":8:", [W])

# 2. Preprocess inputs.
os.makedirs(path("dir"), exist_ok=True)
run("preprocess", preprocess(path("dir"), path("fromdir")), path("dir"), [W])
check("preprocess", not glob.glob(path("fromdir*")), "a directory input wrote a dataset")
invalid = path("invalid.jsonl")
open(invalid, "w").write("not json\n{\"title\": 1}\n{\"text\": 5}\n")
run("preprocess", preprocess(invalid, path("none")), invalid, [W])
check("preprocess", not glob.glob(path("none*")), "a run without documents wrote a dataset")
open(path("empty.jsonl"), "w").write("\n  \n")
run("preprocess", preprocess(path("empty.jsonl"), path("none")), path("empty.jsonl"), [W])
check("preprocess", not glob.glob(path("none*")), "an empty corpus wrote a dataset")
run("preprocess", preprocess(corpus, path("twice"), "--json-keys", "text,text"), "--json-keys", [W])
check("preprocess", not glob.glob(path("twice*")), "a key given twice wrote a dataset")
# A run without documents leaves the dataset it would have replaced as it was.
before = read(good + ".bin"), read(good + ".idx")
run("preprocess", preprocess(invalid, path("good")), invalid, [W])
check("preprocess", (read(good + ".bin"), read(good + ".idx")) == before,
      "a run without documents replaced the dataset")

# Partly invalid: the first ten bad lines in full, then a count and where.
lines = [json.dumps({"text": f"doc {i}"}) if i % 2 else "bad" for i in range(30)]
partly = path("partly.jsonl")
open(partly, "w").write("\n".join(lines) + "\n")
r = subprocess.run(preprocess(partly, path("partly")), capture_output=True, text=True)
first = ", ".join(str(k) for k in range(1, 21, 2))
check("preprocess", r.returncode == 0, f"partly invalid input: exit {r.returncode}")
check("preprocess", f"15 of 30 lines skipped (first at lines {first})" in r.stderr,
      f"partly invalid input: no summary: {r.stderr[-500:]}")
check("preprocess", r.stderr.count("partly.jsonl:") == 11 and "partly.jsonl:19:" in r.stderr and
      "partly.jsonl:21:" not in r.stderr, f"partly invalid input: not ten lines: {r.stderr}")

# An output that is an input: through the same name, a link, or another flag.
same_bin, same_idx = read(good + ".bin"), read(good + ".idx")
os.symlink(good + ".bin", path("link.bin"))
for argv, named in [
        (preprocess(good + ".bin", path("good")), good + ".bin"),
        (preprocess(good + ".idx", path("good")), good + ".idx"),
        (preprocess(path("link.bin"), path("good")), path("link.bin")),
        (preprocess(corpus, path("good"), "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file",
                    good + ".idx", "--merge-file", merge_file), good + ".idx"),
        ([MLC, "tokenizer", "train", "--input", os.path.join(tok, "vocab.json"),
          "--vocab-size", "300", "--output-dir", tok], os.path.join(tok, "vocab.json"))]:
    run("preprocess", argv, named, [W])
check("preprocess", (read(good + ".bin"), read(good + ".idx")) == (same_bin, same_idx),
      "an input was overwritten by its own output")

# Two writers of one prefix: the first is held on a FIFO until the second has
# been refused, then finishes; the dataset is the first's, whole.
fifo = path("slow.fifo")
os.mkfifo(fifo)
two = path("two")
first_run = subprocess.Popen(preprocess(fifo, two), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)

def open_fifo():
    """The FIFO's writing end, once the first writer has opened it to read."""
    deadline = time.time() + 20
    while first_run.poll() is None and time.time() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)
        return os.fdopen(fd, "w")
    sys.exit(f"the first writer never read its input: {first_run.communicate()[1][-300:]}")


with open_fifo() as f:
    f.write(json.dumps({"text": "the first writer"}) + "\n")
    f.flush()
    deadline = time.time() + 20
    while not os.path.exists(two + "_text_document.lock") and time.time() < deadline:
        time.sleep(0.05)
    r = run("preprocess", preprocess(corpus, two), two)
    f.writelines(json.dumps({"text": f"first {i}"}) + "\n" for i in range(99))
_, err = first_run.communicate(timeout=60)
check("preprocess", first_run.returncode == 0, f"the first writer failed: {err[-300:]}")
r = subprocess.run([MLC, "data", "dump", two + "_text_document", "--count", "1"],
                   capture_output=True, text=True)
check("preprocess", r.returncode == 0 and "100 documents" in
      sh(MLC, "data", "stats", two + "_text_document").stdout and
      r.stdout.split() == [str(b) for b in b"the first writer"],
      f"two writers left a mixed dataset: {r.stdout[:100]} {r.stderr[-300:]}")
check("preprocess", not left_behind(), f"two writers left {left_behind()}")

# A full disk, while the .bin or (many one-token documents) the .idx is written:
# one error naming the file, no temporaries, the previous dataset intact.
jsonl("big.jsonl", ["a long document of many tokens " * 20] * 400)
jsonl("many.jsonl", ["x"] * 5000)
for name, suffix in [("big.jsonl", ".bin"), ("many.jsonl", ".idx")]:
    argv = ["bash", "-c", 'trap "" XFSZ; ulimit -f 64; exec "$@"', "bash"] + \
        preprocess(path(name), path("good"))
    run("preprocess", argv, good + suffix, [W])
    check("preprocess", (read(good + ".bin"), read(good + ".idx")) == before,
          f"a full disk while writing the {suffix} changed the previous dataset")
check("preprocess", not left_behind(), f"left {left_behind()}")

# 3. A .bin whose size is not the one its .idx describes.
pkg = path("pkg")
sh(MLC, "compile", "gpt2", "--config", "tiny,n_layer=1", "--micro-batch", "2", "--seq-len", "8",
   "-o", pkg)
jsonl("other.jsonl", ["something else entirely"] * 7)
sh(MLC, "preprocess", "--input", path("other.jsonl"), "--output-prefix", path("other"))
cases = {"short": same_bin[:-1], "long": same_bin + b"\0", "long-pair": same_bin + b"\0\0",
         "other": read(path("other_text_document.bin"))}
for name, data in cases.items():
    prefix = path(f"size-{name}")
    open(prefix + ".idx", "wb").write(same_idx)
    open(prefix + ".bin", "wb").write(data)
    for argv in ([MLC, "train", pkg, "--data", prefix, "--steps", "1"],
                 [args.runtime, "train", pkg, "--data", prefix, "--steps", "1"],
                 [MLC, "data", "stats", prefix], [MLC, "data", "dump", prefix]):
        r = run("bin-size", argv, prefix + ".bin")
        check("bin-size", r is not None and prefix + ".idx" in r.stderr and
              f"holds {len(data)} bytes" in r.stderr and f"describes {len(same_bin)}" in r.stderr,
              f"{name}: the message names not both files and sizes: {r and r.stderr[-300:]}")

# 4. mlc data's numeric flags.
for sub in ("stats", "dump", "loader"):
    for flag, values in [("--seq-len", ["0", "-4", "16777217", "abc"]),
                         ("--ranks", ["0", "-1", "70000", "99999999999"]),
                         ("--tokens-per-rank", ["0", "-1"]),
                         ("--count", ["0", "-1", "1e3"])]:
        for value in values:
            run("data-flags", [MLC, "data", sub, good, flag, value], flag)
jsonl("blank.jsonl", [""] * 5)
sh(MLC, "preprocess", "--input", path("blank.jsonl"), "--output-prefix", path("blank"))
r = sh(MLC, "data", "stats", path("blank_text_document"))
check("data-flags", "nan" not in r.stdout and "imbalance (max/mean tokens per rank) 1.0000"
      in r.stdout, f"empty documents: {r.stdout}")

# 5. ONNX attributes of the wrong type.
onnx_dir = path("onnx")
generator = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx", "Inputs",
                         "make_attr_models.py")
sh(sys.executable, generator, onnx_dir)
for model, named in [("softmax-float-axis", "'axis' has type FLOAT; Softmax expects INT"),
                     ("softmax-ints-axis", "'axis' has type INTS; Softmax expects INT"),
                     ("transpose-int-perm", "'perm' has type INT; Transpose expects INTS"),
                     ("layernorm-string-epsilon", "'epsilon' has type STRING"),
                     ("cast-float-to", "'to' has type FLOAT; Cast expects INT")]:
    run("onnx-attrs", [MLC, "import", os.path.join(onnx_dir, model + ".onnx")], named)
r = subprocess.run([MLC, "import", os.path.join(onnx_dir, "softmax-int-axis.onnx")],
                   capture_output=True, text=True)
check("onnx-attrs", r.returncode == 0 and "axis = 1" in r.stdout,
      f"an INT axis is refused: {r.stderr[-300:]}")

report()
