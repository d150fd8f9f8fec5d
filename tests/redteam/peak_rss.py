"""Run ``ragdesk`` in a child process and read its own peak resident memory.

The child reads ``VmHWM`` from ``/proc/self/status``: it belongs to the process's own memory
map, which exec starts afresh. ``getrusage(RUSAGE_SELF).ru_maxrss`` survives exec, so a child
forked from a pytest process of 1.3 GB reports at least 1.3 GB whatever it did itself.
"""

from __future__ import annotations

SCRIPT = """
import resource, sys
from ragdesk.cli.main import main
code = main(sys.argv[1:])
try:
    with open("/proc/self/status") as fh:
        peak_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
except OSError:
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"PEAK_KB={peak_kb}", file=sys.stderr)
sys.exit(code)
"""


def peak_kb(stderr: str) -> int:
    return int(stderr.rsplit("PEAK_KB=", 1)[1].split()[0])
