"""A real one-node Slurm for the `slurm` tests: scripts/slurm-local.sh starts munged, slurmctld and
slurmd once per test session (across pytest-xdist workers) and the last worker to finish stops
them.  Needs root and Debian's slurm-wlm and munge (scripts/bootstrap.sh installs both as root);
where either is missing the tests skip with the reason (in CI, ``CI=true``, a root run without
the tools fails instead: scripts/bootstrap.sh installs them there).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "slurm-local.sh"
TOOLS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "sinfo")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"slurm tests must run in CI: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Slurm:
    """The running scheduler: ``env()`` is what srun/sbatch need (SLURM_CONF, this venv's
    `ncclx` first on PATH, a fresh MASTER_PORT) without the caller's TORCH_/NCCL variables."""

    def __init__(self, conf: Path) -> None:
        self.conf = conf

    def env(self, **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("TORCH_", "NCCL", "NCCLX_", "SLURM_", "MASTER_", "RANK", "WORLD_SIZE"))}
        base.update(SLURM_CONF=str(self.conf), NO_COLOR="1", COLUMNS="100", MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(free_port()),
                    PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        base.update(extra)
        return base

    def run(self, *args: str, timeout: float = 180, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), capture_output=True, text=True, env=self.env(**extra),
                              timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    if os.geteuid() != 0:
        pytest.skip("needs root: slurmd starts the job steps as their user (run the tests as root)")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        _unavailable(f"{', '.join(missing)} not installed (as root: apt-get install slurm-wlm munge; "
                     "scripts/bootstrap.sh does)")
    base = tmp_path_factory.getbasetemp()
    base = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = base / "slurm"
    folder.mkdir(exist_ok=True)
    env = {**os.environ, "NCCLX_SLURM_DIR": str(folder)}
    # users: a shared lock each worker holds while its tests run; start: held briefly to start the
    # daemons or to stop them, so that no worker joins while the last one is stopping them.
    with open(base / "slurm.users", "w") as users, open(base / "slurm.start", "w") as start:
        fcntl.flock(start, fcntl.LOCK_EX)
        fcntl.flock(users, fcntl.LOCK_SH)
        started = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, env=env, timeout=120)
        fcntl.flock(start, fcntl.LOCK_UN)
        if started.returncode != 0:
            pytest.fail(f"scripts/slurm-local.sh start failed: {started.stderr.strip()}")
        try:
            yield Slurm(folder / "slurm.conf")
        finally:
            fcntl.flock(start, fcntl.LOCK_EX)
            try:  # the last worker using the daemons stops them
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass
            else:
                subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, env=env, timeout=120)


def script(path: Path, text: str) -> Path:
    """An executable shell script at ``path`` (the per-task wrappers srun --multi-prog runs)."""
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path
