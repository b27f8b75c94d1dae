"""Reads a --tensorboard-dir back with TensorBoard's own reader.

    read_tensorboard.py DIR LOG.jsonl

DIR must hold one event file, named as TensorBoard names them
(events.out.tfevents.<time>.<host>...), whose first event is the file
version and whose records pass TensorBoard's CRC checks; its scalars must be
the numbers of the JSON log, tag for key and step for step, as float32: the
same float, or its neighbour where the log's 10 significant digits round to
the other side of a float32 halfway point.
"""
import glob
import json
import os
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator, event_file_loader

tb_dir, log = sys.argv[1], sys.argv[2]
files = glob.glob(os.path.join(tb_dir, "*"))
assert len(files) == 1 and os.path.basename(files[0]).startswith("events.out.tfevents."), files
stamp = os.path.basename(files[0]).split(".")[3]
assert stamp.isdigit() and len(stamp) == 10, files
events = list(event_file_loader.EventFileLoader(files[0]).Load())
assert events[0].file_version == "brain.Event:2", events[0]

acc = event_accumulator.EventAccumulator(tb_dir)
acc.Reload()
got = {(tag, e.step): e.value for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)}
want = {}
for row in map(json.loads, open(log)):
    for key, value in row.items():
        if key not in ("step", "skipped") and value is not None:
            want[(key, row["step"])] = float(np.float32(value))
assert got.keys() == want.keys(), sorted(set(got) ^ set(want))[:10]
far = [(k, got[k], want[k]) for k in want
       if abs(np.float32(got[k]) - np.float32(want[k])) > np.spacing(np.float32(want[k]))]
assert not far, far[:10]
tags = sorted({tag for tag, _ in got})
print(f"TENSORBOARD OK {len(events)} events, {len(got)} scalars: {' '.join(tags)}")
