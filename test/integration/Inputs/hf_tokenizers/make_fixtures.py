"""Makes the tokenizer.json fixtures with Hugging Face `tokenizers`, as a user
would: tiny tokenizers of each kind that models ship, trained on the bundled
corpus plus mixed-script text (hf_corpus.py), saved beside this script.

    python make_fixtures.py   # tokenizers 0.15 (transformers 4.38's)

(The library's trainers break some ties differently from run to run, so a
rerun may learn slightly different files; any of them must match.)

  llama3/           byte-level BPE, Llama-3's split regex (Split, then
                    ByteLevel without its own regex), <|begin_of_text|> added
                    by a TemplateProcessing post-processor; plus a
                    non-special added token with lstrip/rstrip and a
                    single_word one.
  gpt2/             byte-level BPE with ByteLevel's own (GPT-2) regex.
  llama2/           BPE with byte_fallback (<0xNN> tokens) and the
                    Prepend + Replace normalizer, decoders Replace,
                    ByteFallback, Fuse, Strip (as transformers converts
                    Llama-2/Mistral); tokenizer_config.json as
                    LlamaTokenizerFast with add_eos_token.
  metaspace/        the same model behind a Metaspace pre-tokenizer
                    (prepend_scheme first) and decoder.
  bert/             WordPiece, BertNormalizer (lowercase, strip accents),
                    BertPreTokenizer, [CLS] $A [SEP].
  misc/             BPE with [UNK] behind the other normalizers (NFKD,
                    StripAccents, Lowercase, a Replace regex, Strip) and
                    pre-tokenizers (WhitespaceSplit, Punctuation, Digits).
  misc2/            the same model behind NFC, Whitespace and a Split on a
                    string (merged with the previous piece), BertProcessing.
"""

import json
import os
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import hf_corpus  # noqa: E402

CORPUS = os.path.join(HERE, "..", "..", "..", "..", "data", "corpus", "python-docs.txt")
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Training text: a slice of the corpus mixed with other scripts (a different
# seed from the tests' held-out text).
TEXTS = hf_corpus.documents(CORPUS, target_bytes=400_000, seed=7)
# Runs of every kind of whitespace, often enough to be merged: a split regex
# that drew their borders elsewhere would then give other ids.
TEXTS += ["x" + w * k + "y" for w in hf_corpus.SPACES for k in (1, 2, 3)] * 40


def save(tok, name, config=None):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"), pretty=False)
    if config:
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(config, f, indent=1)
    print(name, tok.get_vocab_size(), os.path.getsize(os.path.join(d, "tokenizer.json")))


def byte_level(split_regex):
    tok = Tokenizer(models.BPE())
    if split_regex:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    trainer = trainers.BpeTrainer(vocab_size=1800, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TEXTS, trainer)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    tok.add_tokens([AddedToken("<tool>", lstrip=True, rstrip=True, normalized=False),
                    AddedToken("calc", single_word=True, normalized=False)])
    return tok


save(byte_level(LLAMA3), "llama3")
save(byte_level(None), "gpt2")

# Llama-2 / Mistral: SentencePiece-like BPE with byte fallback. Trained with a
# Metaspace pre-tokenizer (words), then run as transformers' converter writes
# it: no pre-tokenizer, the whole text prepended with "▁" and spaces replaced.
sp = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
sp.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", add_prefix_space=True)
trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>", "<s>", "</s>"],
                              limit_alphabet=300, show_progress=False)
sp.train_from_iterator(TEXTS, trainer)
model = json.loads(sp.to_str())
vocab = model["model"]["vocab"]
for b in range(256):  # SentencePiece's byte pieces, ids after the learned ones
    vocab.setdefault("<0x%02X>" % b, len(vocab))
spm_json = json.dumps(model)

llama2 = Tokenizer.from_str(json.dumps(dict(model, pre_tokenizer=None)))
llama2.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                          normalizers.Replace(" ", "▁")])
llama2.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                    decoders.Fuse(), decoders.Strip(" ", 1, 0)])
llama2.post_processor = processors.TemplateProcessing(
    single="<s> $A", special_tokens=[("<s>", llama2.token_to_id("<s>"))])
save(llama2, "llama2", {"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True,
                        "add_eos_token": True, "bos_token": "<s>", "eos_token": "</s>",
                        "unk_token": "<unk>", "legacy": True})

meta = Tokenizer.from_str(spm_json)
meta.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", add_prefix_space=True,
                                              prepend_scheme="first")
meta.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", add_prefix_space=True),
                                  decoders.ByteFallback(), decoders.Fuse()])
meta.post_processor = processors.TemplateProcessing(
    single="<s> $A </s>", special_tokens=[("<s>", meta.token_to_id("<s>")),
                                          ("</s>", meta.token_to_id("</s>"))])
save(meta, "metaspace")

bert = Tokenizer(models.WordPiece(unk_token="[UNK]"))
bert.normalizer = normalizers.BertNormalizer(lowercase=True)
bert.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
bert.decoder = decoders.WordPiece()
trainer = trainers.WordPieceTrainer(vocab_size=1500, limit_alphabet=400, show_progress=False,
                                    special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
bert.train_from_iterator(TEXTS, trainer)
bert.post_processor = processors.TemplateProcessing(
    single="[CLS] $A [SEP]", special_tokens=[("[CLS]", bert.token_to_id("[CLS]")),
                                             ("[SEP]", bert.token_to_id("[SEP]"))])
save(bert, "bert")

misc = Tokenizer(models.BPE(unk_token="[UNK]"))
misc.normalizer = normalizers.Sequence([
    normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase(),
    normalizers.Replace(Regex(r"[0-9]{5,}"), "#"), normalizers.Strip()])
misc.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="contiguous"),
    pre_tokenizers.Digits(individual_digits=True)])
trainer = trainers.BpeTrainer(vocab_size=1200, limit_alphabet=200, show_progress=False,
                              special_tokens=["[UNK]", "[CLS]", "[SEP]"])
misc.train_from_iterator(TEXTS, trainer)
save(misc, "misc")
misc2 = Tokenizer.from_str(misc.to_str())
misc2.normalizer = normalizers.NFC()
misc2.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Whitespace(),
    pre_tokenizers.Split("-", behavior="merged_with_previous"),
    pre_tokenizers.Digits(individual_digits=False)])
misc2.post_processor = processors.BertProcessing(("[SEP]", misc2.token_to_id("[SEP]")),
                                                 ("[CLS]", misc2.token_to_id("[CLS]")))
save(misc2, "misc2")
