"""Run the arms one after the other, each bounded by what is left of ``--timeout``.

Each arm is one ``_worker`` launcher (a fresh interpreter with the arm's environment) that
forks the ranks; they meet on a TCPStore on 127.0.0.1 that rank 0 hosts.  Waiting and
killing are the doctor's probe's (``wait_or_kill``): a rank that hangs is killed at the
deadline and named with what its stage file says it was doing.  With the flight recorder
on, every rank runs ncclx's hang watchdog, and the dumps of a hung arm are read with
``ncclx fr analyze``'s analysis.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._doctor._probe import free_port, wait_or_kill
from .._envvars import FR_BUFFER_NAMES
from ._spec import Arm

__all__ = ["ArmRun", "RankOut", "Settings", "run_arm"]

_STOP_WORDS = ("timed out", "timeout", "connection closed", "reset by peer", "broken pipe")


@dataclass(frozen=True)
class Settings:
    world: int
    device: str  # "cpu" or "cuda"
    sizes: list[int]
    dtypes: list[str]
    collectives: list[str]
    warmup: int
    iters: int
    timeout: float  # for everything, both arms


@dataclass
class RankOut:
    head: dict[str, Any] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    stage: str = "starting"


@dataclass
class ArmRun:
    arm: Arm
    ranks: dict[int, RankOut]
    seconds: float
    killed: bool  # the deadline passed with ranks still running
    log: list[str]  # the launcher's last lines
    fr: dict[str, Any] | None = None  # the flight-recorder analysis of a hung arm

    @property
    def impl(self) -> str | None:
        return next((str(r.head["impl"]) for r in self.ranks.values() if "impl" in r.head), None)

    @property
    def init_errors(self) -> dict[int, str]:
        return {r: str(o.head["error"]) for r, o in sorted(self.ranks.items()) if "error" in o.head}

    @property
    def hung(self) -> dict[int, str]:
        """rank -> what it was doing when it stopped without finishing (none when all finished)."""
        return {r: o.stage for r, o in sorted(self.ranks.items()) if not o.done and "error" not in o.head}


def _fr_on(env: dict[str, str]) -> bool:
    for name in FR_BUFFER_NAMES:
        if name in env:
            return env[name].strip() not in ("0", "")
    return True


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _read(out: Path, world: int) -> dict[int, RankOut]:
    ranks: dict[int, RankOut] = {}
    for rank in range(world):
        got = RankOut()
        path = out / f"rank{rank}.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        for n, line in enumerate(lines):
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut short when the rank was killed
            if n == 0 and "rank" in rec:
                got.head = rec
            elif rec.get("done"):
                got.done = True
            else:
                got.cases.append(rec)
        try:
            got.stage = (out / f"rank{rank}.stage").read_text(encoding="utf-8") or got.stage
        except OSError:
            pass
        ranks[rank] = got
    return ranks


def run_arm(arm: Arm, s: Settings, deadline: float, workdir: Path, base_env: dict[str, str],
            progress: Callable[[str], None] = lambda text: None) -> ArmRun:
    out = workdir / arm.label
    out.mkdir(parents=True, exist_ok=True)
    env = arm.environ(base_env)
    env.pop("NCCLX_HANG_DUMP", None)  # the watchdog is ours to start, with our limit
    # The worker must be this very ncclx_migrate, after whatever the arm puts first.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), _package_root()) if p)
    budget = max(1.0, deadline - time.monotonic())
    fr_seconds = None
    if _fr_on(env):
        (out / "fr").mkdir(exist_ok=True)
        env["TORCH_FR_DUMP_TEMP_FILE"] = str(out / "fr" / "rank_")
        fr_seconds = max(1.0, min(60.0, budget / 4))
    plan = {
        "backend": arm.backend, "world": s.world, "ranks": list(range(s.world)), "addr": "127.0.0.1",
        "port": free_port(), "host_store": True, "prefix": f"ncclx-compare/{arm.label}", "device": s.device,
        "sizes": s.sizes, "dtypes": s.dtypes, "collectives": s.collectives, "warmup": s.warmup,
        "iters": s.iters, "pg_timeout": max(1.0, budget * 0.6), "out": str(out), "fr_seconds": fr_seconds,
        "stop_words": list(_STOP_WORDS),
    }
    (out / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    start = time.monotonic()
    with open(out / "launcher.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ncclx_migrate._compare._worker", str(out / "plan.json")],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def poll() -> None:
            try:
                stage = (out / "rank0.stage").read_text(encoding="utf-8") or "starting"
            except OSError:
                stage = "starting"
            progress(f"arm {arm.label} ({arm.backend}): {stage}...")

        killed = bool(wait_or_kill({0: proc}, deadline, poll))
    tail = (out / "launcher.log").read_bytes().decode(errors="replace").strip().splitlines()[-5:]
    run = ArmRun(arm, _read(out, s.world), round(time.monotonic() - start, 2), killed, tail)
    if run.hung and fr_seconds is not None:
        run.fr = _analyze_dumps(out / "fr")
    return run


def _analyze_dumps(folder: Path) -> dict[str, Any]:
    """``ncclx fr analyze FOLDER``'s diagnosis, or why there is none."""
    from .._fr._analyze import analyze
    from .._fr._load import DumpError, load_dir, show
    from .._fr._render import render_human, to_json

    if not any(folder.iterdir()):
        return {"folder": str(folder), "note": "no rank wrote a flight-recorder dump"}
    try:
        diag = analyze(load_dir(folder, None))
    except DumpError as exc:
        return {"folder": str(folder), "note": f"the dumps could not be read: {show(exc)}"}
    return {"folder": str(folder), "text": render_human(diag), "problem": diag.problem,
            "analysis": to_json(diag)}
