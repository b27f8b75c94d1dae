"""Runs a command and records its peak resident set size.

  peak_rss.py PREFIX COMMAND...
      runs COMMAND, waits for it, and writes its peak resident set in bytes
      (the kernel's ru_maxrss of the child, which also covers any process the
      child waited for, such as a host compiler it started) to PREFIX.RANK,
      RANK being Open MPI's OMPI_COMM_WORLD_RANK (0 outside mpirun). Exits
      with the command's status.

Under `mpirun -np N peak_rss.py PREFIX mlc train ...` each rank is measured
on its own. The peak resident set is what the process really touched: its
code, the MPI and OpenMP runtimes, the kernels' shared library and every
buffer the backend allocated. Virtual size (`ulimit -v`) is not measured:
the OpenMP threads' stacks, glibc's per-thread heaps and Open MPI's mappings
reserve far more address space than they use.
"""

import os
import subprocess
import sys

prefix, command = sys.argv[1], sys.argv[2:]
child = subprocess.Popen(command)
_, status, usage = os.wait4(child.pid, 0)
child.returncode = os.waitstatus_to_exitcode(status)
rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
with open(f"{prefix}.{rank}", "w") as f:
    f.write(f"{usage.ru_maxrss * 1024}\n")
sys.exit(child.returncode if child.returncode >= 0 else 128 - child.returncode)
