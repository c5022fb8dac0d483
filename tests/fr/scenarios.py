"""Run a real multi-process gloo scenario (tests/fr/worker.py) and collect its dumps."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

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
    port = free_port()
    procs = [
        subprocess.Popen(
            [python or sys.executable, str(WORKER), str(r), str(world), str(port), scenario, str(culprit), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for r in range(world)
    ]
    outputs, codes = [], []
    start = time.monotonic()
    for p in procs:
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += "\n<killed after 120 s>"
        outputs.append(out + f"\n<exit {p.returncode} after {time.monotonic() - start:.1f} s>")
        codes.append(p.returncode)
    return Run(folder, outputs, codes)
