"""Starts `mlc train ...`, sends it SIGTERM once it has logged two steps, and
reports how it ended.

    interrupt.py MLC ARGS...

Prints the exit status, then the run's own "mlc:" lines.
"""
import signal
import subprocess
import sys
import time

proc = subprocess.Popen(sys.argv[1:], stderr=subprocess.PIPE, text=True)
after = []
steps = 0
deadline = time.time() + 120
for line in proc.stderr:
    if line.startswith("mlc:"):
        after.append(line.rstrip())
    elif line.startswith("step "):
        steps += 1
        if steps == 2:
            proc.send_signal(signal.SIGTERM)
    if time.time() > deadline:
        proc.kill()
        sys.exit("timed out")
rc = proc.wait()
print(f"exit {rc}")
for line in after:
    print(line)
