"""Sets one element of an mlc checkpoint's optimizer.safetensors (f32) to a
huge finite value, in place: the last element of the exp_avg tensor stored
last. mlc writes the moments in the package's parameter order, so that
element is the last of the flat parameter buffer: the last element of its
gradient bucket, which --use-distributed-optimizer gives to the last rank.
The manifest's content hash is rewritten to match (what is tested is the
run, not the hash check).

Usage: poison_moment.py CHECKPOINT_DIR VALUE"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'tools', 'Inputs'))
from edit_state import content_hash  # noqa: E402

ckpt, value = sys.argv[1], float(sys.argv[2])
path = os.path.join(ckpt, 'optimizer.safetensors')
data = bytearray(open(path, 'rb').read())
size = struct.unpack('<Q', data[:8])[0]
header = json.loads(data[8:8 + size])
name, info = max(((k, v) for k, v in header.items() if k.startswith('exp_avg.')),
                 key=lambda kv: kv[1]['data_offsets'][1])
if info['dtype'] != 'F32':
    sys.exit(f'{path}: {name} is {info["dtype"]}, not F32')
end = 8 + size + info['data_offsets'][1]
data[end - 4:end] = struct.pack('<f', value)
open(path, 'wb').write(data)
manifest_path = os.path.join(ckpt, 'checkpoint.json')
manifest = json.load(open(manifest_path))
manifest['files']['optimizer.safetensors'] = content_hash(bytes(data))
open(manifest_path, 'w').write(json.dumps(manifest, indent=2) + '\n')
print(f'{name}[-1] = {value}')
