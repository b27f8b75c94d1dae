"""Writes damaged SentencePiece models into a directory, each from a good
fixture (test/integration/Inputs/spm_tokenizers) changed in one way, through
the library's own ModelProto class or by cutting its bytes:

  cut-mid.model        the first 20000 bytes (the file ends inside a piece)
  cut-pieces.model     the first 100 pieces alone (a well-formed protobuf
                       that lacks trainer_spec and normalizer_spec)
  empty.model          no bytes
  json.model           a tokenizer.json under the name of a model
  word.model           trainer_spec.model_type WORD
  no-unk.model         <unk> typed NORMAL
  twice.model          a piece defined twice
  no-byte.model        byte_fallback without the <0x41> piece
  bad-type.model       a piece of type 9
  charsmap.model       a precompiled_charsmap whose trie overruns the map
  no-bos.model         <s> typed NORMAL (Llama2Tokenizer needs it as BOS)
"""

import os
import sys

from sentencepiece import sentencepiece_model_pb2 as pb

fixtures, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
bpe = open(os.path.join(fixtures, "bpe", "tokenizer.model"), "rb").read()
unigram = open(os.path.join(fixtures, "unigram", "tokenizer.model"), "rb").read()


def model(data):
    m = pb.ModelProto()
    m.ParseFromString(data)
    return m


def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.SerializeToString())


write("cut-mid.model", bpe[:20000])
m = pb.ModelProto()
m.pieces.extend(model(bpe).pieces[:100])
write("cut-pieces.model", m)
write("empty.model", b"")
write("json.model", b'{"version": "1.0", "model": {"type": "BPE", "vocab": {}}}\n')
m = model(bpe)
m.trainer_spec.model_type = pb.TrainerSpec.WORD
write("word.model", m)
m = model(bpe)
m.pieces[0].type = pb.ModelProto.SentencePiece.NORMAL
write("no-unk.model", m)
m = model(bpe)
m.pieces[1000].piece = m.pieces[999].piece
write("twice.model", m)
m = model(bpe)
i = next(k for k, p in enumerate(m.pieces) if p.piece == "<0x41>")
m.pieces[i].piece = "<0x41"
m.pieces[i].type = pb.ModelProto.SentencePiece.NORMAL
write("no-byte.model", m)
# Piece 500's type made UNUSED (5) by the library's class, then 9 in the
# bytes: the class keeps only the values its enum names.
m = model(bpe)
m.pieces[500].type = pb.ModelProto.SentencePiece.UNUSED
data = m.SerializeToString()
k = data.index(b"\x18\x05", data.index(m.pieces[500].piece.encode()))
write("bad-type.model", data[:k + 1] + b"\x09" + data[k + 2:])
m = model(unigram)
cm = bytearray(m.normalizer_spec.precompiled_charsmap)
cm[0:4] = (len(cm) + 400).to_bytes(4, "little")
m.normalizer_spec.precompiled_charsmap = bytes(cm)
write("charsmap.model", m)
m = model(bpe)
m.pieces[1].type = pb.ModelProto.SentencePiece.NORMAL
write("no-bos.model", m)
print("written", len(os.listdir(out)))
