"""Starts `mlc train ...`, sends it SIGTERM once it has logged two steps, and
reports how it ended.

    interrupt.py MLC ARGS...

Prints the exit status, then the run's own "mlc:" lines.
"""
import signal
import subprocess
import sys
import threading

proc = subprocess.Popen(sys.argv[1:], stderr=subprocess.PIPE, text=True)
# A run that neither stops nor prints is killed after 120 s, whatever it does.
timer = threading.Timer(120, proc.kill)
timer.start()
after = []
steps = 0
for line in proc.stderr:
    if line.startswith("mlc:"):
        after.append(line.rstrip())
    elif line.startswith("step "):
        steps += 1
        if steps == 2:
            proc.send_signal(signal.SIGTERM)
rc = proc.wait()
timer.cancel()
if rc == -signal.SIGKILL:
    sys.exit(f"timed out after 120 s; its mlc lines: {after}")
print(f"exit {rc}")
for line in after:
    print(line)
