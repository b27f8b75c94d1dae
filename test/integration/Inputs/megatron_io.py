"""An independent reader and writer of Megatron's .bin/.idx layout, for tests."""

import struct

import numpy as np


def read_dataset(prefix):
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    assert idx[:9] == b"MMIDIDX\x00\x00", "magic"
    version, code, seqs, docs = struct.unpack_from("<QBQQ", idx, 9)
    assert version == 1
    dtype = {8: np.uint16, 4: np.int32}[code]
    off = 34
    lengths = np.frombuffer(idx, np.int32, seqs, off)
    pointers = np.frombuffer(idx, np.int64, seqs, off + 4 * seqs)
    doc_index = np.frombuffer(idx, np.int64, docs, off + 12 * seqs)
    data = np.fromfile(prefix + ".bin", dtype=np.uint8)
    size = np.dtype(dtype).itemsize
    out = []
    for d in range(docs - 1):
        tokens = []
        for s in range(doc_index[d], doc_index[d + 1]):
            raw = data[pointers[s]: pointers[s] + lengths[s] * size]
            tokens.extend(np.frombuffer(raw.tobytes(), dtype).tolist())
        out.append(tokens)
    return code, out


def write_dataset(prefix, docs, code, split_every=None):
    """Megatron's writer: documents may hold several sequences."""
    dtype = {8: np.uint16, 4: np.int32}[code]
    seqs, doc_index = [], [0]
    for doc in docs:
        # An empty document is a boundary without a sequence.
        parts = ([doc] if doc else []) if not split_every else \
            [doc[i:i + split_every] for i in range(0, len(doc), split_every)]
        seqs.extend(parts)
        doc_index.append(len(seqs))
    with open(prefix + ".bin", "wb") as f:
        for s in seqs:
            f.write(np.array(s, dtype).tobytes())
    size = np.dtype(dtype).itemsize
    pointers = np.concatenate([[0], np.cumsum([len(s) * size for s in seqs])[:-1]])
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, code, len(seqs), len(doc_index)))
        f.write(np.array([len(s) for s in seqs], np.int32).tobytes())
        f.write(np.array(pointers, np.int64).tobytes())
        f.write(np.array(doc_index, np.int64).tobytes())
