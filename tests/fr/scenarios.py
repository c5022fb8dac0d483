"""Run a real multi-process gloo scenario (tests/fr/worker.py) and collect its dumps."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from ..forked import run_forked

WORKER = Path(__file__).with_name("worker.py")
PREFIX = "fr_trace_"


@dataclass
class Run:
    folder: Path
    outputs: list[str]
    returncodes: list[int]

    def files(self) -> list[str]:
        return sorted(p.name for p in self.folder.iterdir()) if self.folder.exists() else []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_scenario(
    tmp: Path,
    scenario: str,
    *,
    world: int = 3,
    culprit: int = 1,
    mode: str = "manual",
    python: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> Run:
    folder = tmp / "dumps"
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCLX_"))}
    env.update(
        TORCH_FR_DUMP_TEMP_FILE=str(folder / PREFIX),
        XDG_CACHE_HOME=str(tmp / "xdg"),
        PYTHONUNBUFFERED="1",
        **(extra_env or {}),
    )
    # The ranks are forks of one interpreter that imported torch (tests/forked.py).
    port = str(free_port())
    ranks = run_forked(WORKER, [[str(r), str(world), port, scenario, str(culprit), mode] for r in range(world)],
                       tmp / "rank", env=env, merge=True, python=python)
    outputs = [r.stdout + r.stderr + f"\n<exit {r.returncode} after {r.seconds:.1f} s>" for r in ranks]
    return Run(folder, outputs, [r.returncode for r in ranks])
