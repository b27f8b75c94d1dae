"""Writes DIR/tokenizer.json: a 41-entry BPE with the metaspace scheme, made
by the tokenizers library, small enough for a model of 256 ids."""
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

tok = Tokenizer(models.BPE(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Metaspace()
tok.decoder = decoders.Metaspace()
trainer = trainers.BpeTrainer(vocab_size=100, special_tokens=["[UNK]", "</s>"],
                              show_progress=False)
tok.train_from_iterator(["the cat sat on the mat with a hat", "a bat and a rat"] * 10,
                        trainer=trainer)
tok.save(os.path.join(sys.argv[1], "tokenizer.json"))
print(" ".join(map(str, tok.encode("the cat").ids)))
