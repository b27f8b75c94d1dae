"""Checks a plan that fits a memory limit only with --recompute full and
the distributed optimizer, against the plans and what the ranks measured.

  memory_limit.py plans UNFLAGGED.json FLAGGED.json LIMIT
      the per-rank totals of `mlc compile --report-json` (the CUDA backend's,
      which --device-memory checks) without the flags (A) and with them (B):
      B < LIMIT < A, each with at least 10% of LIMIT to spare.
  memory_limit.py run FLAGGED.json MEMORY.json RSS_PREFIX RANKS LIMIT OVERHEAD
      a run with the flags: rank 0's allocations (mlc train --memory-report)
      equal the plan's CPU items and are within LIMIT; every rank's peak
      resident set (RSS_PREFIX.RANK, from peak_rss.py) is within LIMIT; and
      what the process holds beyond the plan (its code, MPI, OpenMP, the
      kernels' library, the data loader) is below OVERHEAD.
  memory_limit.py over UNFLAGGED.json RSS_PREFIX LIMIT
      a run without the flags: its peak resident set exceeds LIMIT.

Sizes are bytes or a number with KiB, MiB or GiB. Prints the numbers
measured; exits non-zero with every failed check listed.
"""

import json
import sys

UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def size(text):
    for unit, scale in UNITS.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * scale)
    return int(text)


def mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def memory(path):
    return json.load(open(path))["memory"]


def rss(prefix, rank):
    return int(open(f"{prefix}.{rank}").read())


def finish(problems, line):
    for p in problems:
        print("FAILED:", p)
    if problems:
        sys.exit(1)
    print(line)


def plans(args):
    a, b = memory(args[0])["cuda"]["total"], memory(args[1])["cuda"]["total"]
    limit = size(args[2])
    problems = []
    if not b + limit // 10 <= limit:
        problems.append(f"with the flags the plan needs {mib(b)}, not 10% below the limit {mib(limit)}")
    if not limit + limit // 10 <= a:
        problems.append(f"without them the plan needs {mib(a)}, not 10% above the limit {mib(limit)}")
    finish(problems, f"OK plans: without the flags {mib(a)} ({a}), limit {mib(limit)}, "
                     f"with them {mib(b)} ({b})")


def run(args):
    plan, allocated = memory(args[0])["cpu"], json.load(open(args[1]))
    prefix, ranks, limit, overhead = args[2], int(args[3]), size(args[4]), size(args[5])
    problems = [f"{k}: plan {plan.get(k)}, rank 0 allocated {allocated.get(k)}"
                for k in sorted(set(plan) | set(allocated) - {"device"})
                if plan.get(k) != allocated.get(k)]
    if allocated["total"] > limit:
        problems.append(f"rank 0 allocated {mib(allocated['total'])}, over the limit {mib(limit)}")
    peaks = [rss(prefix, r) for r in range(ranks)]
    for r, peak in enumerate(peaks):
        if peak > limit:
            problems.append(f"rank {r}'s peak resident set {mib(peak)} is over the limit {mib(limit)}")
        if peak - plan["total"] >= overhead:
            problems.append(f"rank {r} holds {mib(peak - plan['total'])} beyond the plan's "
                            f"{mib(plan['total'])}, not below {mib(overhead)}")
    finish(problems, f"OK run: allocated {mib(allocated['total'])} ({allocated['total']}) as planned; "
                     "peak resident set " + ", ".join(
                         f"rank {r} {mib(p)} ({p}, {mib(p - plan['total'])} beyond the plan)"
                         for r, p in enumerate(peaks)) + f"; limit {mib(limit)}")


def over(args):
    plan, peak, limit = memory(args[0])["cpu"], rss(args[1], 0), size(args[2])
    problems = [] if peak > limit else [
        f"without the flags the peak resident set {mib(peak)} is within the limit {mib(limit)}"]
    finish(problems, f"OK over: without the flags peak resident set {mib(peak)} ({peak}; the plan's "
                     f"CPU items {mib(plan['total'])}), over the limit {mib(limit)}")


{"plans": plans, "run": run, "over": over}[sys.argv[1]](sys.argv[2:])
