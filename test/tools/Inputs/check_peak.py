"""Checks the peak a CPU run printed against this machine's own description.

    check_peak.py STDERR LOG.jsonl

The peak is cores x FMA units x vector lanes x 2 FLOPs x clock, worked out
here from /proc/cpuinfo independently of mlc: the physical cores among those
this process may use (at most OMP_NUM_THREADS), the widest vector ISA in the
flags (f32 lanes), the clock from the model name's "@ x.xxGHz", else cpufreq's
maximum, else cpuinfo's MHz. Every logged `mfu` must lie in (0, 1].
"""
import json
import os
import re
import sys

blocks = [dict((k.strip(), v.strip()) for k, _, v in (l.partition(":") for l in b.splitlines()))
          for b in open("/proc/cpuinfo").read().split("\n\n") if b.strip()]
allowed = os.sched_getaffinity(0)
mine = [c for c in blocks if "processor" in c and int(c["processor"]) in allowed]
cores = {(c.get("physical id", c["processor"]), c.get("core id", c["processor"])) for c in mine}
threads = int(os.environ.get("OMP_NUM_THREADS", "0").split(",")[0] or 0) or len(allowed)
used = min(len(cores), threads)

flags = set((mine[0].get("flags") or mine[0].get("Features", "")).split())
if "avx512f" in flags:
    lanes, units, unit = 16, 2, "FMA units"
elif {"avx2", "fma"} <= flags:
    lanes, units, unit = 8, 2, "FMA units"
elif "avx" in flags:
    lanes, units, unit = 8, 1, "mul+add units"
elif "asimd" in flags:
    lanes, units, unit = 4, 2, "FMA units"
else:
    lanes, units, unit = 4, 1, "mul+add units"

at = re.search(r"@\s*([0-9.]+)\s*GHz", mine[0].get("model name", ""))
freq = f"/sys/devices/system/cpu/cpu{mine[0]['processor']}/cpufreq/cpuinfo_max_freq"
if at:
    ghz = float(at.group(1))
elif os.path.exists(freq):
    ghz = int(open(freq).read()) / 1e6
else:
    ghz = float(mine[0]["cpu MHz"]) / 1e3

peak = used * units * lanes * 2 * ghz * 1e9
basis = f"{used} cores x {units} {unit} x {lanes} f32 lanes x 2 FLOPs x {ghz:.3g} GHz"
printed = re.search(r"^mlc: MFU against a peak of ([0-9.e+-]+) TFLOP/s \((.*); --peak-tflops to "
                    r"override\)$", open(sys.argv[1]).read(), re.M)
assert printed, "no peak printed"
assert printed.group(2) == basis, (printed.group(2), basis)
assert abs(float(printed.group(1)) * 1e12 / peak - 1) < 1e-3, (printed.group(1), peak)
rows = [json.loads(l) for l in open(sys.argv[2])]
mfus = [r["mfu"] for r in rows if "mfu" in r]
assert mfus and all(0 < m <= 1 for m in mfus), mfus
print(f"PEAK OK {peak / 1e12:.4g} TFLOP/s ({basis}), MFU {min(mfus):.3f}..{max(mfus):.3f}")
