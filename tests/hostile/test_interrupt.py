"""Ctrl-C ends every command with 130 (128 + SIGINT), as shells expect, not 1 ("findings
left"), and without a traceback (issue 18)."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ncclx_exe

from .conftest import env, signals_at_default

_READ = {"x86_64": 0, "aarch64": 63}.get(platform.machine())  # the read(2) syscall number


def _interrupt(proc: subprocess.Popen[bytes], ready: object) -> tuple[int, str]:
    """Send SIGINT once ``ready()`` says the command waits on its input; its status and stderr."""
    deadline = time.monotonic() + 60
    while not ready() and proc.poll() is None and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.02)
    assert proc.poll() is None, "the command ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err.decode()


def _start(*args: str, cwd: Path, stdin: int | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([ncclx_exe(), *args], cwd=cwd, env=env(), stdin=stdin,
                            preexec_fn=signals_at_default(signal.SIGINT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.skipif(_READ is None, reason="needs /proc/PID/syscall numbers for this machine")
def test_migrate_reading_stdin(tmp_path: Path) -> None:
    proc = _start("migrate", "-", cwd=tmp_path, stdin=subprocess.PIPE)

    def reading_stdin() -> bool:  # blocked in read(0, ...): Python is up, its handler is set
        try:
            return Path(f"/proc/{proc.pid}/syscall").read_text().split()[:2] == [str(_READ), "0x0"]
        except OSError:
            return False

    try:
        code, err = _interrupt(proc, reading_stdin)
    finally:
        proc.kill()
        assert proc.stdin is not None
        proc.stdin.close()
    assert code == 130, err
    assert "Traceback" not in err and "Aborted" not in err, err
    assert "interrupted" in err


@pytest.mark.skipif(_READ is None, reason="needs /proc/PID/syscall numbers for this machine")
def test_doctor_merge_reading_a_fifo(tmp_path: Path) -> None:
    # A FIFO blocks the reader until a writer comes; the test is that writer, and opening it
    # without blocking succeeds only once the command holds the other end.  (`ncclx fr` never
    # waits on input: it reads only regular files; all commands share the one entry point.)
    # The signal goes once the command sits in read(2), as a user's Ctrl-C at a stalled read
    # would: one sent as it is about to enter the call is seen by Python's handler only when the
    # call returns (CPython's signal check precedes the blocking call), and this writer never
    # writes, so the test would wait out its timeout (seen on a loaded machine, 1 run in 4).
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = _start("doctor", "merge", "fifo", cwd=tmp_path)
    writer: list[int] = []

    def reading() -> bool:
        if not writer:
            try:
                writer.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                return False
        try:
            return Path(f"/proc/{proc.pid}/syscall").read_text().split()[0] == str(_READ)
        except (OSError, IndexError):
            return False

    try:
        code, err = _interrupt(proc, reading)
    finally:
        proc.kill()
        for fd in writer:
            os.close(fd)
    assert code == 130, err
    assert "Traceback" not in err, err
