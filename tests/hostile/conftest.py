"""Hostile inputs: every test runs the real CLI in a subprocess bounded in time and memory."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.conftest import ncclx_exe

MEMORY_LIMIT = 3 << 30  # address space per ncclx process: a regression fails instead of eating the box
TIME_LIMIT = 120


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def signals_at_default(*signals: int, limit: bool = True) -> Callable[[], None]:
    """A ``preexec_fn``: ``_limit()`` (unless ``limit`` is False: a command that imports torch
    needs more address space), and ``signals`` back at their default disposition in the child.  A test started in the background (``scripts/test.sh &``, nohup, many CI runners)
    inherits SIGINT as ignored, and so would the command it starts: Python then installs no
    KeyboardInterrupt handler and the signal the test sends never arrives."""

    def preexec() -> None:
        if limit:
            _limit()
        for sig in signals:
            signal.signal(sig, signal.SIG_DFL)

    return preexec


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL", "NCCLX_"))}
    out["NO_COLOR"] = "1"
    out.update(extra)
    return out


def run_bounded(*args: str, cwd: str | os.PathLike[str] | None = None, prefix: Sequence[str] = (),
                extra_env: dict[str, str] | None = None, timeout: float = TIME_LIMIT,
                ) -> subprocess.CompletedProcess[str]:
    """``ncclx ARGS`` with an address-space limit and a timeout (a hang fails the test)."""
    return subprocess.run([*prefix, ncclx_exe(), *args], capture_output=True, text=True, cwd=cwd,
                          env=env(**(extra_env or {})), timeout=timeout, preexec_fn=_limit)


def without_root_file_access() -> list[str] | None:
    """A command prefix under which root obeys file modes (no CAP_DAC_*), or None.

    The tests run as root, whom ``chmod 000`` does not stop: drop the two capabilities
    that let root past file modes for the command, as an unprivileged user would be."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


def children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (from /proc)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(p) for p in task.read_text().split()]
        except OSError:
            pass
    return out


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def run_python_bounded(script: str, *args: str, cwd: str | os.PathLike[str] | None = None
                       ) -> subprocess.CompletedProcess[str]:
    """``python -c SCRIPT ARGS`` under the same limits as :func:`run_bounded` (for a run of
    the library whose timing the test has to control from inside)."""
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=cwd,
                          env=env(), timeout=TIME_LIMIT, preexec_fn=_limit)
