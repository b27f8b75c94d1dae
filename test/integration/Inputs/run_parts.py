"""Runs one script's parts in one Python process, so that PyTorch and
transformers are imported once instead of once per part.

    run_parts.py SCRIPT PREFIX PART... -- ARG...

For each PART, runs SCRIPT (runpy, as `python SCRIPT ARG...` would, each {}
in an ARG replaced by PART) with its stdout in PREFIX.PART.out and its
stderr in PREFIX.PART.err (the descriptors themselves: the subprocesses it
starts write there too). Every part runs; the exit status is 1 when any part
exited with a status other than 0 (each such part is named on stderr, with
the end of its stderr). A PART written NAME:MORE runs as NAME with the
words of MORE after the ARGs (`long:--seq 100 --steps 4`).
"""
import os
import runpy
import sys

script, prefix = sys.argv[1], sys.argv[2]
sep = sys.argv.index("--")
parts, template = sys.argv[3:sep], sys.argv[sep + 1:]
saved = os.dup(1), os.dup(2)
failed = []
for spec in parts:
    part, _, more = spec.partition(":")
    out, err = f"{prefix}.{part}.out", f"{prefix}.{part}.err"
    sys.stdout.flush()
    sys.stderr.flush()
    with open(out, "w") as o, open(err, "w") as e:
        os.dup2(o.fileno(), 1)
        os.dup2(e.fileno(), 2)
        sys.argv = [script] + [a.replace("{}", part) for a in template] + more.split()
        status = 0
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as x:
            status = x.code if isinstance(x.code, int) else (0 if x.code is None else 1)
            if not isinstance(x.code, (int, type(None))):
                print(x.code, file=sys.stderr)
        except Exception:  # reported as the interpreter would, then the next part
            import traceback
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
    if status != 0:
        failed.append(part)
        with open(err) as e:
            sys.stderr.write(f"{os.path.basename(script)} part {part}: exit {status}\n"
                             + e.read()[-3000:])
sys.exit(1 if failed else 0)
