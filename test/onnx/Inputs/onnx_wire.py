"""Protobuf wire-format helpers for the fixture scripts that edit ONNX files
below the onnx library (fields the Debian onnx 1.12 proto does not know:
metadata_props of graphs and nodes)."""


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def enc_varint(v):
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def fields(b):
    """(number, wire type, raw bytes of the whole field, payload) per field."""
    i = 0
    while i < len(b):
        start = i
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        payload = None
        if wt == 0:
            _, i = varint(b, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            n, i = varint(b, i)
            payload = b[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, b[start:i], payload


def ld(num, payload):
    return enc_varint(num << 3 | 2) + enc_varint(len(payload)) + payload
