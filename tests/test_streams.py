"""ncclx's output under PYTHONUNBUFFERED=1 reaches a terminal whole (_streams.whole_writes).

A real pseudo-terminal that nobody reads for a second, a child blocked writing a long text to
it, and a signal with a handler in that second: the system cuts the write short, and an
unbuffered sys.stdout dropped the rest (the doctor's cluster report ended mid-line in a loaded
test run). The control shows the loss is real on this machine, not assumed.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

CHILD = """\
import signal, sys
if sys.argv[1] == "whole":
    from ncclx_migrate._streams import whole_writes
    whole_writes()
signal.signal(signal.SIGUSR1, lambda *a: None)
sys.stdout.write("x" * 200000 + "END\\n")
sys.stdout.flush()
"""


def _terminal_gets(mode: str) -> bytes:
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdout=follower,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        time.sleep(1.0)  # the child has filled the terminal and waits in write()
        proc.send_signal(signal.SIGUSR1)
        got = b""
        while True:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                got += os.read(leader, 65536)
            elif proc.poll() is not None:
                return got
    finally:
        os.close(follower)
        os.close(leader)


@pytest.mark.slow
def test_a_signal_during_a_blocked_write_loses_nothing() -> None:
    assert b"END" not in _terminal_gets("plain")  # Python's unbuffered stdout drops the rest
    got = _terminal_gets("whole")
    assert got.count(b"x") == 200000 and got.endswith(b"END\r\n")
