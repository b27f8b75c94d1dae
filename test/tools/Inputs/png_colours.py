"""Reads an 8-bit RGB PNG (no interlace) and prints its size and how many
pixels have each of the given colours.

    png_colours.py FILE [--box X0,Y0,X1,Y1] R,G,B ...

With --box, only the pixels with X0 <= x < X1 and Y0 <= y < Y1 count.
"""
import struct
import sys
import zlib

args = sys.argv[1:]
box = None
if len(args) > 2 and args[1] == "--box":
    box = [int(v) for v in args[2].split(",")]
    del args[1:3]
data = open(args[0], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
i, idat = 8, b""
while i < len(data):
    n = struct.unpack(">I", data[i:i + 4])[0]
    kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
    assert zlib.crc32(kind + body) == struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0], kind
    if kind == b"IHDR":
        w, h, depth, colour = struct.unpack(">IIBB", body[:10])
        assert (depth, colour) == (8, 2), "not 8-bit RGB"
    elif kind == b"IDAT":
        idat += body
    i += 12 + n
raw = zlib.decompress(idat)
assert len(raw) == h * (1 + 3 * w)
counts = {}
for y in range(h):
    row = raw[y * (1 + 3 * w):(y + 1) * (1 + 3 * w)]
    assert row[0] == 0, "filtered rows are not read here"
    if box and not box[1] <= y < box[3]:
        continue
    for x in range(box[0] if box else 0, min(box[2], w) if box else w):
        counts[row[1 + 3 * x:4 + 3 * x]] = counts.get(row[1 + 3 * x:4 + 3 * x], 0) + 1
print(f"png {w}x{h}")
for spec in args[1:]:
    colour = bytes(int(c) for c in spec.split(","))
    print(f"{spec}: {counts.get(colour, 0)} pixels")
