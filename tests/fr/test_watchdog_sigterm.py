"""SIGTERM with the hang watchdog on, before any process group (no torch process): the process
still ends as SIGTERM ends it, or the program's own handler runs (issue 36; the dump itself is
tested under a real Slurm's time limit, tests/slurm/test_compare_fr_srun.py)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

_SCRIPT = """
import os, signal, sys, time
if sys.argv[1] == "own":
    def own(signum, frame):
        print("own handler ran", flush=True)
        sys.exit(7)
    signal.signal(signal.SIGTERM, own)
import ncclx_migrate
ncclx_migrate.enable_hang_dump(60)
print("ready", flush=True)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(30)
print("not ended", flush=True)
"""


@pytest.mark.parametrize(("mode", "rc", "said"), [
    ("default", -signal.SIGTERM, "ready\n"),  # killed by the signal, as without the watchdog
    ("own", 7, "ready\nown handler ran\n"),
])
def test_sigterm_ends_the_process_as_before(mode: str, rc: int, said: str) -> None:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (rc, said), proc.stderr
    assert "Traceback" not in proc.stderr
